"""The reference's streaming API on Spark: ``stream(spark, options)`` gives a
``CdcStream`` whose ``to_delta(target, app_id, checkpoint, facts_table,
...)`` starts ``readStream.format("mssql_cdc")`` into bronze through
``delta_sink``, a ``foreachBatch`` function; ``snapshot``, ``seed`` and
``backfill`` write snapshots next to it. Every table is written by Spark's
Delta writer (delta-spark); the library only reads the source, on the
executors (mssql_cdc.spark).

The sink appends a batch with ``txnAppId`` = app_id and ``txnVersion`` =
the batch id, so a replayed batch is skipped by Delta; its facts row goes in
one commit under ``<app_id>#facts`` and the same version. The read metrics
come from the executors through ``metricsPath`` (mssql_cdc._spark_metrics):
one directory per stream, emptied before each batch is read; the events the
driver's planner met (DDL, a capture instance switch, a skipped gap) come
the same way and are written as the CLI's facts rows in the batch's commit.

``on_data_loss="resnapshot"`` (generations) and ``snapshot_on_switch`` are
mssql_cdc.spark_recovery's, as `mssql-cdc stream` does them; ``backfill``,
an open chunked snapshot read in paced waves, mssql_cdc.spark_backfill's."""
from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta, timezone
from typing import Any

from . import _spark_metrics as metrics
from . import spark_recovery as recovery
from . import spark_tables as tables
from .types import BackfillStatus, Offset

log = logging.getLogger("mssql_cdc")

_NO_ROWS: dict[str, Any] = {"rows": 0, "min_lsn": None, "max_lsn": None, "min_commit_ts": None,
                            "max_commit_ts": None, "deletes": 0, "inserts": 0, "updates": 0}


def _opt(options: Mapping[str, Any], name: str, default: Any = None) -> Any:
    return {str(k).lower(): v for k, v in options.items()}.get(name.lower(), default)


def _without(options: Mapping[str, Any], *names: str) -> dict[str, Any]:
    drop = {n.lower() for n in names}
    return {k: v for k, v in options.items() if str(k).lower() not in drop}


def bronze_rows(df, batch_id: int | None, snapshot: str | None = None, chunk=None):
    """``df`` with the columns every bronze writer adds last: ``_batch_id``,
    ``_snapshot`` and ``_chunk`` (a Column, or NULL; a backfill's wave
    reads its ``_chunk`` with the rows)."""
    from pyspark.sql import functions as F
    return df.select(
        *(F.col("`" + c.replace("`", "``") + "`") for c in df.columns
          if c not in ("_batch_id", "_snapshot", "_chunk")),
        F.lit(batch_id).cast("int").alias("_batch_id"),
        F.lit(snapshot).cast("string").alias("_snapshot"),
        (F.lit(None) if chunk is None else chunk).cast("int").alias("_chunk"))


def batch_facts(df) -> dict[str, Any]:
    from pyspark.sql import functions as F
    op = F.col("_operation")
    row = df.agg(F.count(F.lit(1)).alias("rows"), F.min("_start_lsn").alias("min_lsn"),
                 F.max("_start_lsn").alias("max_lsn"), F.min("_commit_ts").alias("min_commit_ts"),
                 F.max("_commit_ts").alias("max_commit_ts"),
                 F.count(F.when(op == 1, 1)).alias("deletes"),
                 F.count(F.when(op == 2, 1)).alias("inserts"),
                 F.count(F.when(op == 4, 1)).alias("updates")).first()
    return row.asDict()


def _hours(later: datetime | None, earlier: datetime | None) -> float | None:
    if later is None or earlier is None:
        return None
    return round((later - earlier).total_seconds() / 3600, 2)


def _seconds(later: datetime | None, earlier: datetime | None) -> float | None:
    if later is None or earlier is None:
        return None
    return round((later - earlier).total_seconds(), 3)


def _last_batch(spark, facts_table: str, app_id: str) -> int | None:
    from pyspark.sql import functions as F
    row = (tables.read(spark, facts_table)
           .where((F.col("app_id") == app_id) & F.col("event").isNull())
           .agg(F.max("batch_id")).first())
    return None if row is None else row[0]


def _write_bronze(df, target: str, app_id: str | None, version: int | None,
                  meta: str | None = None, checked: set[str] | None = None) -> None:
    """Appends to bronze; ``checked``: the tables this run has checked (or
    created) already, which are not checked again."""
    if checked is None or target not in checked:
        tables.ensure(df.sparkSession, target, "bronze", tables.ddl_of(df.schema))
        if checked is not None:
            checked.add(target)
    tables.write(df, target, app_id, version, meta, merge_schema=True)


def delta_sink(target: str, app_id: str, facts_table: str | None = None, *,
               metrics_path: str | None = None) -> Callable[[Any, int], None]:
    """A ``foreachBatch`` function appending each batch to ``target`` (bronze)
    and, with ``facts_table``, its facts row; ``metrics_path`` is the
    stream's own metrics directory (the reader's ``metricsPath``), emptied
    before each batch and folded into its facts. ``app_id`` must stay the
    same for the checkpoint's life: a checkpoint older than what app_id
    wrote in the facts table (deleted or rewound) raises ValueError."""
    return _sink(target, app_id, facts_table, metrics_path, set())


def _sink(target: str, app_id: str, facts_table: str | None, metrics_path: str | None,
          checked: set[str],
          on_switch: Callable[[Any], None] | None = None) -> Callable[[Any, int], None]:
    """delta_sink's function; ``checked``: the tables checked (or created)
    already for this query run (to_delta's, just before it starts), which
    are not looked at again. ``on_switch(spark)``: called once the facts of
    a batch that first read a newer capture instance are committed (the
    snapshot on switch)."""
    state = {"resumed": False}

    def write_batch(df, batch_id: int) -> None:
        started_at, t0 = tables.utc_now(), time.monotonic()
        spark = df.sparkSession
        if facts_table and not state["resumed"]:
            if facts_table not in checked:
                tables.ensure(spark, facts_table, "facts", tables.FACTS_DDL)
                checked.add(facts_table)
            last = _last_batch(spark, facts_table, app_id)
            if last is not None and batch_id < last:
                raise ValueError(
                    f"{facts_table} holds batch {last} of app_id {app_id!r}, but this run's "
                    f"checkpoint starts at batch {batch_id}: the checkpoint was deleted or "
                    "rewound while app_id stayed the same, so Delta would skip every write up "
                    f"to batch {last} as done. Use a new app_id, or restore the checkpoint.")
            state["resumed"] = True
        if metrics_path:  # nothing is read yet: any file there is a dead attempt's
            metrics.remove(metrics_path, metrics.list_files(metrics_path))
        kept = df.persist()
        try:
            facts = {**batch_facts(kept), "batch_id": batch_id, "app_id": app_id}
            if facts["rows"]:  # a batch without rows writes facts only
                _write_bronze(bronze_rows(kept, batch_id), target, app_id, batch_id,
                              tables.metadata(facts), checked)
            duration_ms = round((time.monotonic() - t0) * 1000)
            folded, files = metrics.fold(metrics_path) if metrics_path else ({}, [])
            events, event_files = (metrics.fold_events(metrics_path, folded.get("end_lsn"))
                                   if metrics_path else ([], []))
            if facts_table:
                position = folded.get("end_commit_ts") or facts["max_commit_ts"]
                facts.update(folded, started_at=started_at, duration_ms=duration_ms,
                             retention_headroom_hours=_hours(
                                 position, folded.get("retention_watermark_ts")),
                             ingestion_lag_seconds=_seconds(
                                 folded.get("source_max_commit_ts"), position),
                             target=target)
                # the DDL, switch and skipped gaps its planning met, in the same commit
                events = [{**e, "app_id": app_id, "batch_id": batch_id, "target": target}
                          for e in events]
                tables.write_facts(spark, facts_table, [facts, *events], f"{app_id}#facts",
                                   batch_id, checked)
            if metrics_path:
                metrics.remove(metrics_path, files + event_files)
            if on_switch is not None and any(e["event"] == "capture_instance_switched"
                                             for e in events):
                on_switch(spark)  # its facts row is committed: a crash from here owes it
        finally:
            kept.unpersist()

    return write_batch


class CdcStream:
    """What ``stream(spark, options)`` returns."""

    def __init__(self, spark, options: Mapping[str, Any]):
        from . import register
        self.spark = spark
        self.options: dict[str, Any] = dict(options)
        if not _opt(self.options, "captureInstance"):
            raise ValueError("option 'captureInstance' is required (e.g. 'dbo_orders')")
        register(spark)

    # ---- positions, on the caller's side --------------------------------
    def _offset(self, lsn: str) -> Offset:
        from ._positions import Positions
        p = Positions(_without(self.options, "metricsPath"))
        try:
            return {"lsn": lsn, "commit_ts": p.commit_ts(lsn)}  # type: ignore[return-value]
        finally:
            p.close()

    def _max_lsn(self) -> str:
        from ._positions import Positions
        p = Positions(_without(self.options, "metricsPath"))
        try:
            return p.max_lsn()
        finally:
            p.close()

    def _ci(self) -> str:
        return str(_opt(self.options, "captureInstance"))

    def _snapshot_source(self, lsn: str, **extra: str):
        opts = {**_without(self.options, "metricsPath", "startingLsn", "snapshotLsn"),
                "snapshotLsn": lsn, **extra}
        return self.spark.read.format("mssql_cdc_snapshot").options(**opts).load()

    def _held_snapshot(self, target: str) -> str | None:
        """The newest snapshot LSN ``target`` holds (any capture instance of
        the table writes the same _snapshot), or None."""
        if not tables.exists(self.spark, target):
            return None
        df = tables.read(self.spark, target)
        if "_snapshot" not in df.columns:
            return None
        from pyspark.sql import functions as F
        return df.agg(F.max("_snapshot")).first()[0]

    def _event(self, facts_table: str | None, app_id: str | None, event: str, lsn: str,
               target: str, txn: str | None, version: int, rows: int | None = 0,
               detail: Mapping[str, Any] | str | None = None,
               checked: set[str] | None = None, *, sink: str | None = None,
               lost_from: str | None = None, lost_to: str | None = None) -> None:
        """A snapshot event's facts row of the stream (``sink``: the
        generation's app id, else ``app_id``) under ``txn`` (None: none)."""
        if not facts_table or not app_id:
            return
        import json
        text = json.dumps(dict(detail), separators=(",", ":")) \
            if isinstance(detail, Mapping) else detail
        row = recovery.event_row(sink or app_id, event, self._offset(lsn), target, rows=rows,
                                 detail=text or None, lost_from=lost_from, lost_to=lost_to)
        tables.write_facts(self.spark, facts_table, [row], txn, version, checked)

    def source_options(self) -> dict[str, Any]:
        """The options for the driver's own positions (no metricsPath)."""
        return _without(self.options, "metricsPath")

    def _read_full(self, target: str, lsn: str, app_id: str | None,
                   checked: set[str] | None) -> int:
        """The table's rows now, stamped with ``lsn`` (recorded before),
        appended to ``target`` in one commit; the rows appended."""
        df = bronze_rows(self._snapshot_source(lsn), None, lsn).persist()  # read once
        try:
            rows = df.count()
            _write_bronze(df, target, f"{app_id or self._ci()}#snapshot.{lsn}", 0,
                          checked=checked)
        finally:
            df.unpersist()
        return rows

    def reading_newest(self, rows: list[dict[str, Any]]) -> CdcStream:
        """The stream to read the table's snapshot through: after a capture
        instance switch (``rows``: the stream's facts rows,
        spark_recovery.stream_rows), the newer instance's, whose columns the
        snapshot source reads; else this one."""
        newer = recovery.newest_instance(rows)
        if newer is None or newer.lower() == self._ci().lower():
            return self
        return CdcStream(self.spark, {**_without(self.options, "captureInstance"),
                                      "captureInstance": newer})

    def _bronze_holds(self, target: str, lsn: str) -> bool:
        """Whether ``target`` holds snapshot rows stamped ``lsn``."""
        if not tables.exists(self.spark, target):
            return False
        df = tables.read(self.spark, target)
        if "_snapshot" not in df.columns:
            return False
        from pyspark.sql import functions as F
        return df.where(F.col("_snapshot") == lsn).limit(1).count() > 0

    # ---- snapshots -------------------------------------------------------
    def snapshot(self, target: str, *, resnapshot: bool = False, app_id: str | None = None,
                 facts_table: str | None = None) -> Offset:
        """Appends the table's current rows to ``target`` (operation 0,
        stamped with an LSN recorded before the read) and returns that
        offset. A target that holds a snapshot already returns its offset
        and reads nothing, unless ``resnapshot``."""
        return self._snapshot(target, resnapshot, app_id, facts_table, None)

    def _snapshot(self, target: str, resnapshot: bool, app_id: str | None,
                  facts_table: str | None, checked: set[str] | None) -> Offset:
        """snapshot(); ``checked``: tables to_delta checked already."""
        held = None if resnapshot else self._held_snapshot(target)
        if held:
            return self._offset(held)
        lsn = self._max_lsn()
        kind = "resnapshot" if resnapshot else "bootstrap"
        self._event(facts_table, app_id, "snapshot_open", lsn, target, f"{app_id}#open.{lsn}", 0,
                    detail=recovery.open_detail("full", kind, 0), checked=checked)
        rows = self._read_full(target, lsn, app_id, checked)
        self._event(facts_table, app_id, kind, lsn, target, f"{app_id}#events", 0, rows,
                    checked=checked)
        return self._offset(lsn)

    def seed(self, target: str, df, as_of: str | datetime, *, app_id: str | None = None,
             facts_table: str | None = None, allow_missing_columns: bool = False,
             reseed: bool = False) -> Offset:
        """Appends ``df``, a copy of the table read after ``as_of``, to
        ``target`` as its snapshot; returns its offset. ``as_of``: when the
        copy started being read, a UTC datetime (an aware one is converted)
        or ISO 8601 text of one ("2026-12-01T10:00:00Z"), mapped to the last
        commit at or before it, to the second, on the server's clock (as
        ``mssql-cdc seed --as-of``); or an LSN ("0x...") recorded before
        the copy. No commit at or before the time held, or the changes
        after it purged: DataLossError; a time after the server's clock or
        an LSN past max_lsn: ValueError."""
        from pyspark.sql import functions as F

        from .spark import _spark_schema
        held = None if reseed else self._held_snapshot(target)
        if held:
            return self._offset(held)
        lsn = self._as_of_lsn(as_of)
        offset = self._offset(lsn)
        schema = _spark_schema(_without(self.options, "metricsPath"))
        given = {c.lower(): c for c in df.columns}
        cols = []
        stamp = datetime.fromisoformat(offset["commit_ts"]) if offset["commit_ts"] else None
        fixed = {"_capture_instance": F.lit(self._ci()), "_start_lsn": F.lit(lsn),
                 "_seqval": F.lit(None), "_operation": F.lit(0), "_command_id": F.lit(None),
                 "_commit_ts": F.lit(stamp)}
        for f in schema.fields:
            if f.name in fixed:
                cols.append(fixed[f.name].cast(f.dataType).alias(f.name))
            elif f.name.lower() in given:
                cols.append(F.col("`" + given[f.name.lower()] + "`").cast(f.dataType)
                            .alias(f.name))
            elif allow_missing_columns:
                cols.append(F.lit(None).cast(f.dataType).alias(f.name))
            else:
                raise ValueError(f"the seed has no column {f.name!r} of the capture instance "
                                 f"{self._ci()}; pass allow_missing_columns=True to write NULL")
        self._event(facts_table, app_id, "snapshot_open", lsn, target, f"{app_id}#open.{lsn}", 0,
                    detail=recovery.open_detail("full", "bootstrap", 0))
        out = bronze_rows(df.select(*cols), None, lsn)
        _write_bronze(out, target, f"{app_id or self._ci()}#snapshot.{lsn}", 0)
        rows = out.count() if facts_table else 0
        self._event(facts_table, app_id, "bootstrap", lsn, target, f"{app_id}#events", 0, rows)
        return offset

    def _as_of_lsn(self, as_of: str | datetime) -> str:
        """seed()'s as_of as the LSN its copy is stamped with, proved: a
        time mapped on the server, an LSN parsed; not past max_lsn, the
        changes after it not purged."""
        from ._positions import Positions, lsn_text, lsn_value
        from .errors import DataLossError
        given = as_of.strip() if isinstance(as_of, str) else as_of
        at = None
        if isinstance(given, datetime):
            at = given
        elif not isinstance(given, str) or not given:
            raise ValueError(f"as_of must be a datetime, a UTC time or an LSN ('0x...'), not "
                             f"{as_of!r}")
        elif given[:2].lower() != "0x":
            try:
                at = datetime.fromisoformat(given[:-1] + "+00:00" if given[-1:] in "zZ"
                                            else given)
            except ValueError:
                raise ValueError(f"as_of {as_of!r} is neither an LSN (0x + 20 hex digits) nor a "
                                 "UTC time (YYYY-MM-DDTHH:MM:SS[Z|+hh:mm])") from None
        p = Positions(self.source_options())
        try:
            if at is None:
                lsn = lsn_text(lsn_value(given))
            else:
                if at.tzinfo is not None:
                    at = at.astimezone(timezone.utc).replace(tzinfo=None)
                us = (at - datetime(1970, 1, 1)) // timedelta(microseconds=1)
                found = p.commit_at(us)
                if found is None:
                    raise DataLossError(
                        f"as_of {as_of}: no commit of the database at or before it is in "
                        "cdc.lsn_time_mapping (CDC cleanup passed it, or CDC was enabled "
                        "later): the changes since the copy are gone; take a snapshot instead")
                lsn = found
            top = p.max_lsn()
            if lsn > top:
                raise ValueError(f"as_of {as_of} is beyond the server's max_lsn {top}: a copy "
                                 "cannot be newer than the changes captured so far")
            if recovery._purged_after(p, lsn):
                raise DataLossError(f"as_of {as_of} ({lsn}): CDC cleanup purged changes after "
                                    "it, so the stream cannot go on from the copy; take a "
                                    "snapshot instead")
        finally:
            p.close()
        return lsn

    def _open_chunked(self, target: str, app_id: str, facts_table: str, *,
                      sink: str | None = None, generation: int = 0, kind: str = "bootstrap",
                      lost_from: str | None = None, lost_to: str | None = None,
                      at: dict[str, str] | None = None,
                      switch_batch_id: int | None = None) -> dict[str, str]:
        """Opens a chunked snapshot of generation ``generation`` (sink app
        id ``sink``) at S = max_lsn now (a plans row, then its
        'snapshot_open' row), or returns the one of that generation still
        open; a switch's (``at``, ``switch_batch_id``) opens at the newer
        instance's start, once per S."""
        import json
        sink = sink or app_id
        if at is None:
            top = recovery.open_chunked(recovery.stream_rows(self.spark, facts_table, app_id))
            if top is not None and top["app_id"] == sink:
                return self._offset(top["min_lsn"])
            offset = self._offset(self._max_lsn())
        else:
            offset = dict(at)
        lsn = offset["lsn"]
        detail = recovery.open_detail("chunked", kind, generation, lost_from, lost_to,
                                      switch_batch_id)
        # the plans row also names the key the chunks are cut on and its extent, read
        # through the library after S as the CLI's open reads them (the facts row leaves
        # both out): the plan either backfill cuts tiles up to just above that MAX
        from .spark import plan_from_extent
        keys, extent, _ = plan_from_extent(self.source_options(), None, None, 0)
        whole = json.dumps({**json.loads(detail), "keys": keys, "plan": extent},
                           separators=(",", ":"))
        plans = f"{target}_snapshot_plans"
        tables.ensure(self.spark, plans, "plans", tables.PLANS_DDL)
        tables.write(self.spark.createDataFrame([(lsn, "snapshot_open", whole)],
                                                tables.PLANS_DDL),
                     plans, f"{app_id}#snapopen.{lsn}", 0)
        txn, version = ((f"{app_id}#snapopen.{lsn}", 0) if at is not None
                        else (f"{app_id}#snapshots", generation))
        tables.write_facts(self.spark, facts_table, [recovery.event_row(
            sink, "snapshot_open", offset, target, detail=detail, lost_from=lost_from,
            lost_to=lost_to)], txn, version)
        if at is not None:
            return offset
        # the open that stands: a rerun's row was skipped, the first one's S is the generation's
        top = recovery.open_chunked(recovery.stream_rows(self.spark, facts_table, app_id))
        if top is None or top["app_id"] != sink:
            raise ValueError(f"{target}: another run opened a snapshot for {sink} first; run "
                             "again")
        return self._offset(top["min_lsn"]) if top["min_lsn"] != lsn else offset

    def backfill(self, target: str, *, app_id: str, facts_table: str,
                 chunk_rows: int | None = None, max_waves: int | None = None,
                 max_seconds: float | None = None, target_wave_seconds: float | None = None,
                 min_headroom_hours: float | None = None,
                 isolation: str | None = None) -> BackfillStatus:
        """Reads the newest open chunked snapshot of ``app_id``'s stream
        (``to_delta(..., snapshot="chunked")`` opens one) in waves of
        chunks of at most about ``chunk_rows`` rows (1,000,000), whole
        rounds of ``numPartitions`` chunks a wave, as ``mssql-cdc
        backfill`` does (mssql_cdc.spark_backfill): the first call plans
        every chunk; each wave is stamped with max_lsn before its read,
        appended in one commit and recorded as 'snapshot_chunk' rows; after
        the last chunk, the 'bootstrap' (or 'resnapshot') row. ``max_waves``
        and ``max_seconds`` bound one call (state "running": call again);
        ``target_wave_seconds`` (300; 0: one round) paces the waves;
        ``min_headroom_hours`` pauses while the stream's retention headroom
        is below it; ``isolation``: "snapshot" or "readCommitted" (the
        stream's isolationLevel when None)."""
        from .spark_backfill import backfill
        return backfill(self, target, app_id=app_id, facts_table=facts_table,
                        chunk_rows=chunk_rows, max_waves=max_waves, max_seconds=max_seconds,
                        target_wave_seconds=target_wave_seconds,
                        min_headroom_hours=min_headroom_hours, isolation=isolation)

    # ---- the stream ------------------------------------------------------
    def to_delta(self, target: str, app_id: str, checkpoint: str,
                 facts_table: str | None = None, *, trigger: dict[str, Any] | None = None,
                 query_name: str | None = None, bootstrap: bool = False,
                 on_data_loss: str = "fail", resnapshot_interval_days: float = 7.0,
                 snapshot_on_switch: bool = False, snapshot: str = "full"):
        """Starts the stream into ``target`` through ``delta_sink`` and
        returns the StreamingQuery (named ``query_name``, else ``app_id``,
        or generation n's ``<app_id>.g<n>``). ``trigger``: keyword
        arguments of ``DataStreamWriter.trigger``, e.g. ``{"availableNow":
        True}``. ``bootstrap``: snapshot the table first (``snapshot="full"``
        reads it now; ``"chunked"`` opens one at S and starts the stream
        there, ``backfill()`` reads it). ``on_data_loss="resnapshot"``:
        before the query starts, changes CDC cleanup purged after the
        checkpoint's position make a re-snapshot into a new generation (a
        local checkpoint and a facts table needed; at most one per
        ``resnapshot_interval_days``). ``snapshot_on_switch``: the table is
        snapshotted in the ``snapshot`` mode after the batch that first
        reads a newer capture instance (a facts table needed). Metrics
        default to ``<checkpoint>/_mssql_cdc_metrics`` (a local or FUSE
        checkpoint; a generation's in its own checkpoint); an explicit
        ``metricsPath`` gets ``/<app_id>``."""
        if on_data_loss not in ("fail", "resnapshot"):
            raise ValueError(f"on_data_loss must be 'fail' or 'resnapshot', not {on_data_loss!r}")
        if snapshot not in ("full", "chunked"):
            raise ValueError(f"snapshot must be 'full' or 'chunked', not {snapshot!r}")
        if snapshot == "chunked" and not facts_table:
            raise ValueError("snapshot='chunked' needs a facts_table: its event rows record "
                             "the snapshot and its chunks")
        if bootstrap and _opt(self.options, "startingLsn"):
            raise ValueError("bootstrap=True sets startingLsn itself; pass one or the other")
        uri = bool(metrics.URI.match(checkpoint)) or checkpoint.startswith("dbfs:")
        resnapshot = on_data_loss == "resnapshot"
        if resnapshot and not facts_table:
            raise ValueError("on_data_loss='resnapshot' needs a facts_table: the re-snapshot's "
                             "rows live there")
        if resnapshot and str(_opt(self.options, "failOnDataLoss", "true")).strip().lower() \
                == "false":
            raise ValueError("on_data_loss='resnapshot' with failOnDataLoss=false: the stream "
                             "would skip the gap instead of re-snapshotting; drop one of them")
        if resnapshot and (uri or checkpoint.startswith("/dbfs/")):
            raise ValueError(f"on_data_loss='resnapshot' needs a local or FUSE (/Volumes/...) "
                             f"checkpoint, where its generation state file is kept, not "
                             f"{checkpoint!r}")
        if not 0 <= float(resnapshot_interval_days) <= 3650:
            raise ValueError(f"resnapshot_interval_days must be between 0 and 3650, not "
                             f"{resnapshot_interval_days!r}")
        if snapshot_on_switch and not facts_table:
            raise ValueError("snapshot_on_switch=True needs a facts_table: its "
                             "capture_instance_switched rows say which switch is owed a "
                             "snapshot (also after a crash)")
        given = _opt(self.options, "metricsPath")
        if snapshot_on_switch and uri and not given:
            raise ValueError("snapshot_on_switch=True with a URI checkpoint needs the "
                             "metricsPath option: the switch reaches the sink through it")
        options = dict(self.options)
        checked: set[str] = set()  # the tables looked at here, not again by the sink
        if facts_table:  # a wrong table is refused now, before the query starts
            tables.ensure(self.spark, facts_table, "facts", tables.FACTS_DDL)
            checked.add(facts_table)
        if facts_table and (bootstrap or resnapshot or snapshot_on_switch):
            recovery.mode_lock(self, target, app_id, facts_table, snapshot)
        # the live generation (the state file is read whatever on_data_loss says), after a
        # re-snapshot when CDC purged changes it has not read
        state = {"generation": 0} if uri else recovery.read_state(checkpoint)
        if resnapshot:
            assert facts_table is not None
            state = recovery.recover(self, target, app_id, checkpoint, facts_table, state,
                                     chunked=snapshot == "chunked", bootstrap=bootstrap,
                                     interval_days=float(resnapshot_interval_days),
                                     checked=checked)
        n = int(state["generation"])
        gen_checkpoint, sink = recovery.names(checkpoint, app_id, n)
        if n > 0:  # a later generation starts at its snapshot, whatever startingLsn says
            options = {**_without(options, "startingLsn"), "startingLsn": state["snapshot_lsn"]}
            log.info("mssql_cdc: %s streams generation %d (app id %s) from %s", target, n, sink,
                     state["snapshot_lsn"])
        elif bootstrap and not _has_offsets(checkpoint):
            if snapshot == "chunked":
                assert facts_table is not None
                start = self._open_chunked(target, app_id, facts_table)["lsn"]
            else:
                start = self._snapshot(target, False, app_id, facts_table, checked)["lsn"]
            options["startingLsn"] = start
            log.info("mssql_cdc: %s starts at its snapshot %s", app_id, start)
        on_switch = None
        if snapshot_on_switch:
            assert facts_table is not None
            # a run killed after a switch batch and before its snapshot owes it
            recovery.snapshot_on_switch(self, target, app_id, sink, n, facts_table,
                                        snapshot == "chunked", checked)
            on_switch = recovery.switch_hook(self.options, target, app_id, sink, n, facts_table,
                                             snapshot == "chunked")
        path = metrics.join(str(given), sink) if given else (
            os.path.join(gen_checkpoint, "_mssql_cdc_metrics")
            if (facts_table or snapshot_on_switch) and not uri else None)
        if path:
            options = {**_without(options, "metricsPath"), "metricsPath": path}
        writer = (self.spark.readStream.format("mssql_cdc").options(**options).load()
                  .writeStream.foreachBatch(_sink(target, sink, facts_table, path, checked,
                                                  on_switch))
                  .option("checkpointLocation", gen_checkpoint))
        if trigger:
            writer = writer.trigger(**trigger)
        query_name = query_name or sink
        for attempt in range(1, _RUNNER_STARTS + 1):
            try:  # Spark Connect starts foreachBatch's Python runner in start()
                query = writer.queryName(query_name).start()
            except Exception as exc:  # noqa: BLE001 - only that miss is tried again
                if attempt == _RUNNER_STARTS or _RUNNER_MISS not in str(exc):
                    raise
            else:
                _await_sources(query)
                if attempt == _RUNNER_STARTS or not _runner_missed(query):
                    return query
            # nothing was planned (the source never started): the same start again
            log.warning("mssql_cdc: %s: Spark's Python source runner did not connect back "
                        "in its 10 s (a busy driver); starting the query again (%d of %d)",
                        app_id, attempt + 1, _RUNNER_STARTS)
        raise AssertionError("unreachable")


_RUNNER_STARTS = 3  # tries of a query whose source runner missed Spark's start deadline
_RUNNER_MISS = "Python worker failed to connect back"


def _runner_missed(query) -> bool:
    """Whether ``query`` stopped before its source existed because Spark's
    Python source runner did not connect back in time (Spark waits a fixed
    10 s for that process: on a loaded driver its Python start can take
    longer)."""
    if query.isActive:
        return False
    try:
        err = query.exception()
    except Exception:  # noqa: BLE001 - a client that cannot tell: not retried
        return False
    return err is not None and _RUNNER_MISS in str(err)


def _await_sources(query, timeout: float = 600.0) -> None:
    """Returns once ``query`` created its source (or stopped). Spark gives the
    source's Python runner a fixed 10 s to connect back; on a busy driver
    (other streams starting, a Delta commit next to it) it missed that, so
    the caller's next work (track's control table, start_many's next stream)
    waits until the runner is up (to_delta starts a query that missed it
    again)."""
    deadline = time.monotonic() + timeout
    while query.isActive and time.monotonic() < deadline:
        if not str((query.status or {}).get("message", "")).startswith("Initializing"):
            return
        time.sleep(0.05)


def _has_offsets(checkpoint: str) -> bool:
    """Whether a local checkpoint has planned a batch (a URI one: unknown,
    taken as new, so bootstrap's own check on the target decides)."""
    if metrics.URI.match(checkpoint):
        return False
    d = os.path.join(checkpoint, "offsets")
    return os.path.isdir(d) and any(n.isdigit() for n in os.listdir(d))


def stream(spark, options: Mapping[str, Any]) -> CdcStream:
    """The CDC stream the data source ``options`` describe."""
    return CdcStream(spark, options)

