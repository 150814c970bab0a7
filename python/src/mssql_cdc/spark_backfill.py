"""``CdcStream.backfill()`` on Spark: the newest open chunked snapshot of a
stream read in paced waves next to the running stream, every table written
by delta-spark, with the rows and transaction ids ``mssql-cdc backfill``
writes (src/pipeline/mcdc_backfill.c; reference §2.4.2, ADR 0028):

  plan   once per snapshot S: every chunk (the library's snapshot planner,
         chunks of at most about chunk_rows rows) as a 'snapshot_plan' row
         of the plans table (<target>_snapshot_plans), then its facts row
         without the bounds; both txn <app_id>#snapplan.<S>, version 0
  wave   n: its chunks as 'snapshot_chunk' plans rows (txn
         <app_id>#snapchunks.<S>, version n); max_lsn L recorded; the chunks
         read through format("mssql_cdc_snapshot"), one task a chunk,
         stamped L; one bronze append (txn <app_id>#snap.<S>, version n,
         userMetadata the reference's WaveMetadata); then one
         'snapshot_chunk' facts row per chunk, the same txn as the plans
         rows: the wave's commit record
  done   after the last chunk, the 'bootstrap' (or 'resnapshot') row

A wave takes whole rounds of numPartitions chunks: one round at first, then
as many as target_wave_seconds holds at the last wave's pace (an earlier
call's from its facts rows), no more than the rest of max_seconds.

Each chunk's task measures its read (seconds from its first batch to its
last, Spark's consumption included, and the Arrow bytes handed to Spark)
into a file of the wave's metrics directory, which the wave's facts rows
and commit metadata take as ``read_seconds`` and ``read_mb``: the stream's
``metricsPath`` (``<metricsPath>/<app_id>/backfill-<S>``), else a
temporary directory when the session's master is local (the executors
share the driver's disk); elsewhere the two stay NULL.

A run killed between a wave's plans rows and its facts rows is finished by
the next call: it reads the chunks those rows hold (whatever numPartitions
and the pace say), and when bronze already holds the wave (killed after the
append) it appends nothing and takes the wave's counts and stamp from
bronze's rows. So a chunk is in bronze once, and the facts say so.

The open (``to_delta(snapshot="chunked")``) records the key columns and
their extent in its plans row, read through the library after S as the
CLI's open reads them (mcdc_snapshot_plan_from_extent); the plan is cut on
that extent, up to just above its MAX, as the CLI cuts it. The plan keeps
each chunk's token of the library's planner next to its bounds: the waves
read those tokens, which name the columns the plan was cut for; a capture
instance whose columns changed since needs a new snapshot (as the
reference: a type change mid-backfill breaks it).

The tables and transaction ids are `mssql-cdc backfill`'s, so either goes
on from the other's last wave, and either plans a snapshot the other (or
the reference) opened. A plan the CLI (or the reference) recorded holds
bounds only: its chunks' tokens come from the library
(mcdc_snapshot_plan_chunks), which checks the plan's key columns. A keyset
plan's last chunk, open above, ends at the first key after the extent's MAX
sought again when its wave is planned (a token made for that end), as the
CLI seeks it, whoever cut the plan."""
from __future__ import annotations

import json
import logging
import math
import shutil
import tempfile
import time
import uuid
from datetime import datetime
from typing import TYPE_CHECKING, Any

from . import _spark_metrics as metrics
from . import spark_recovery as recovery
from . import spark_tables as tables
from .types import BackfillStatus

if TYPE_CHECKING:
    from .spark_stream import CdcStream

log = logging.getLogger("mssql_cdc")

DEFAULT_CHUNK_ROWS = 1_000_000
DEFAULT_WAVE_SECONDS = 300.0


def _status(lsn: str | None, done: int, total: int | None, state: str,
            reason: str | None = None) -> BackfillStatus:
    return {"snapshot": lsn, "chunks_done": done, "chunks_total": total,
            "done": state == "done", "paused": state.startswith("waiting"), "state": state,
            "reason": reason}


def _isolation(isolation: str | None) -> dict[str, str]:
    """backfill(isolation=...) as the isolationLevel option (any case)."""
    if isolation is None:
        return {}
    given = str(isolation).strip().lower()
    if given not in ("snapshot", "readcommitted"):
        raise ValueError(f"isolation must be 'snapshot' or 'readCommitted' (any case), not "
                         f"{isolation!r}")
    return {"isolationLevel": "snapshot" if given == "snapshot" else "readCommitted"}


def _positive(name: str, value: float | None, integer: bool = False) -> None:
    if value is None:
        return
    ok = (type(value) is int if integer else isinstance(value, (int, float))) \
        and not isinstance(value, bool) and math.isfinite(value) and value >= 0
    if not ok or (integer and value < 1):
        raise ValueError(f"{name} must be a {'positive integer' if integer else 'number >= 0'} "
                         f"or None, not {value!r}")


def _same_keys(a: Any, b: Any) -> bool:
    """Key column lists equal but for case (SQL Server resolves names so)."""
    return isinstance(a, list) and isinstance(b, list) and len(a) == len(b) and all(
        isinstance(x, str) and isinstance(y, str) and x.lower() == y.lower()
        for x, y in zip(a, b))


def _metrics_dir(cdc: CdcStream, app_id: str, s: str) -> tuple[str | None, bool]:
    """Where the wave's chunk tasks leave their figures, and whether it is a
    temporary directory of this call's (removed at its end)."""
    from .spark import _opt
    given = _opt(cdc.options, "metricsPath")
    if given:
        return metrics.join(metrics.join(str(given), app_id), f"backfill-{s}"), False
    if type(cdc.spark).__module__.startswith("pyspark.sql.connect"):
        return None, False  # the client's disk may not be the executors'
    try:
        local = str(cdc.spark.sparkContext.master).startswith("local")
    except Exception:  # noqa: BLE001 - no SparkContext: not known to be one machine
        local = False
    if not local:
        return None, False
    return tempfile.mkdtemp(prefix="mssql_cdc_backfill-"), True


def _plan_detail(token: str) -> tuple[Any, Any, Any]:
    """A chunk token's key columns and bounds (its JSON fields)."""
    t = json.loads(token)
    return t["keys"], t["lo"], t["hi"]


class _Run:
    """One backfill() call on the snapshot ``top`` (spark_recovery's open row)."""

    def __init__(self, cdc: CdcStream, target: str, app_id: str, facts_table: str,
                 top: dict[str, Any], source: CdcStream, extra: dict[str, str]):
        self.cdc, self.spark = cdc, cdc.spark
        self.target, self.app_id, self.facts_table = target, app_id, facts_table
        self.s: str = top["min_lsn"]
        self.sink: str = top["app_id"]
        self.info: dict[str, Any] = top["info"]
        self.top = top
        self.source, self.extra = source, extra
        self.plans = f"{target.rstrip('/')}_snapshot_plans"
        self.ledger = f"{app_id}#snap.{self.s}"
        self.chunks_id = f"{app_id}#snapchunks.{self.s}"
        from .spark import _num_partitions, _session_cores
        self.k = _num_partitions(source.options, _session_cores(self.spark))
        self.metrics_dir: str | None = None  # backfill() sets it (_metrics_dir)
        self.open_keys: list[str] | None = None  # the key its plans row's open names
        self.open_extent: dict[str, Any] | None = None  # and the extent, the CLI's open's
        self.plan: dict[str, Any] | None = None
        self.plan_recorded = False  # its facts row is in
        self.done: list[dict[str, Any]] = []   # the chunks the facts hold as read
        self.planned: dict[int, list[dict[str, Any]]] = {}  # plans rows by wave

    # ---- what the tables hold -------------------------------------------
    def _plans_rows(self) -> list[tuple[str, dict[str, Any]]]:
        if not tables.exists(self.spark, self.plans):
            return []
        from pyspark.sql import functions as F
        rows = (tables.read(self.spark, self.plans).where(F.col("snapshot") == self.s)
                .select("event", "detail").collect())
        out = []
        for event, detail in rows:
            try:
                d = json.loads(detail)
            except (TypeError, ValueError):
                d = None
            if not isinstance(d, dict):
                raise ValueError(f"{self.plans}: a row of snapshot {self.s} holds a detail that "
                                 "is not a JSON object: the plans table is damaged")
            out.append((event, d))
        return out

    def load(self) -> None:
        """The standing plan, the waves planned and the chunks recorded."""
        self.planned = {}
        for event, d in self._plans_rows():
            if event == "snapshot_plan":
                chunks = d.get("chunks")
                if not (isinstance(chunks, list) and chunks and isinstance(d.get("keys"), list)
                        and all(isinstance(c, list) and len(c) == 2 for c in chunks)) or (
                        "tokens" in d and not (isinstance(d["tokens"], list)
                                               and len(d["tokens"]) == len(chunks))):
                    raise ValueError(f"{self.plans}: the plan of snapshot {self.s} has no "
                                     "chunks [lo, hi] and keys (or tokens not one a chunk): "
                                     "the plans table is damaged")
                self.plan = d  # ours keeps tokens; mssql-cdc backfill's has bounds only
            elif event == "snapshot_chunk":
                self.planned.setdefault(int(d["wave"]), []).append(d)
            elif event == "snapshot_open":
                if isinstance(d.get("keys"), list):
                    self.open_keys = d["keys"]
                if isinstance(d.get("plan"), dict):  # the key extent the CLI's open read
                    self.open_extent = d["plan"]
        from pyspark.sql import functions as F
        rows = (tables.read(self.spark, self.facts_table)
                .where((F.col("app_id") == self.sink)
                       & F.col("event").isin("snapshot_chunk", "snapshot_plan"))
                .select("event", "rows", "min_lsn", "duration_ms", "detail").collect())
        self.done, self.plan_recorded = [], False
        for event, rows_, lsn, ms, detail in rows:
            try:
                d = json.loads(detail or "{}")
            except ValueError:
                d = {}
            if not isinstance(d, dict) or d.get("snapshot") != self.s:
                continue
            if event == "snapshot_plan":
                self.plan_recorded = True
            elif not isinstance(d.get("chunk"), int) or not isinstance(d.get("wave"), int):
                raise ValueError(f"a snapshot_chunk facts row of snapshot {self.s} has no chunk "
                                 f"or wave number: {self.facts_table} is damaged")
            else:
                self.done.append({"chunk": d["chunk"], "wave": d["wave"], "rows": rows_ or 0,
                                  "lsn": lsn or "", "duration_ms": ms or 0,
                                  "last": bool(d.get("last"))})
        self.done.sort(key=lambda c: c["chunk"])

    def total(self) -> int | None:
        return None if self.plan is None else len(self.plan["chunks"])

    def all_done(self) -> bool:
        return bool(self.done) and self.done[-1]["last"]

    def committed_wave(self) -> int:
        return max((c["wave"] for c in self.done), default=-1)

    # ---- the pause --------------------------------------------------------
    def throttle(self, min_headroom_hours: float | None) -> tuple[str, str] | None:
        """Why the backfill waits now (state, reason), or None."""
        if min_headroom_hours is None:
            return None
        from pyspark.sql import functions as F
        row = (tables.read(self.spark, self.facts_table)
               .where((F.col("app_id") == self.sink) & F.col("batch_id").isNotNull()
                      & F.col("event").isNull())
               .orderBy(F.col("written_at").desc())
               .select("retention_headroom_hours", "written_at").first())
        if row is None or row[0] is None:
            return ("waiting_metrics", f"the stream {self.sink} has written no facts row with "
                    "retention_headroom_hours: is it running?")
        age = (tables.utc_now() - row[1]).total_seconds() / 3600
        left = row[0] - age
        if left >= min_headroom_hours:
            return None
        return ("waiting_headroom", f"retention headroom {left:.2f} h (the stream's newest facts "
                f"row, {age:.2f} h old) is below min_headroom_hours {min_headroom_hours:g}")

    # ---- the plan ---------------------------------------------------------
    def make_plan(self, chunk_rows: int | None) -> None:
        """Every chunk, once: the plans row, then its facts row (a plan an
        earlier run recorded stands: Delta skips ours). Nothing when both
        are in."""
        if self.plan is not None and self.plan_recorded:
            if chunk_rows and self.plan.get("chunk_rows") != chunk_rows:
                log.warning("mssql_cdc: chunk_rows %d ignored: snapshot %s of %s was planned "
                            "with %s rows a chunk, and its chunks do not change while it is "
                            "open", chunk_rows, self.s, self.target, self.plan.get("chunk_rows"))
            return
        started, t0 = tables.utc_now(), time.monotonic()
        if self.plan is None:
            from .spark import plan_from_extent
            rows = chunk_rows or DEFAULT_CHUNK_ROWS
            options = {**self.source.source_options(), **self.extra}
            if self.open_keys is not None and self.open_extent is not None:
                # on the extent the open recorded after S (ours, the CLI's, the
                # reference's), as `mssql-cdc backfill` cuts its plan: keys inserted
                # above its MAX since are the stream's
                keys, extent, tokens = plan_from_extent(options, self.open_keys,
                                                        self.open_extent, rows)
            else:  # an open that recorded no extent (an earlier release's): read now
                keys, extent, tokens = plan_from_extent(options, None, None, rows)
            parts = [_plan_detail(t) for t in tokens]
            if self.open_keys is not None and not _same_keys(keys, self.open_keys):
                raise ValueError(
                    f"snapshot {self.s} cuts its chunks on {json.dumps(self.open_keys)}, "
                    f"but this backfill would cut them on {json.dumps(keys)} (its snapshotKeys "
                    "option, else the capture instance's unique index): a plan stays on the "
                    "columns it opened with. Set snapshotKeys as when it opened, or take a new "
                    "snapshot. Nothing was written")
            plan = {"snapshot": self.s, "kind": extent["kind"], "keys": keys, "chunk_rows": rows,
                    "chunks": [[lo, hi] for _, lo, hi in parts], "chunk_count": len(tokens),
                    "tokens": tokens, "extent": extent}
            tables.ensure(self.spark, self.plans, "plans", tables.PLANS_DDL)
            tables.write(self.spark.createDataFrame(
                [(self.s, "snapshot_plan", json.dumps(plan, separators=(",", ":")))],
                tables.PLANS_DDL), self.plans, f"{self.app_id}#snapplan.{self.s}", 0)
            self.load()  # the plan that stands
            if self.plan is None:
                raise ValueError(f"{self.plans}: the plan of snapshot {self.s} just written is "
                                 "not there")
        public = {k: v for k, v in self.plan.items() if k not in ("chunks", "tokens", "extent")}
        row = recovery.event_row(self.sink, "snapshot_plan", self.cdc._offset(self.s),
                                 self.target, detail=json.dumps(public, separators=(",", ":")))
        row.update(started_at=started, duration_ms=round((time.monotonic() - t0) * 1000))
        tables.write_facts(self.spark, self.facts_table, [row],
                           f"{self.app_id}#snapplan.{self.s}", 0)
        self.plan_recorded = True
        log.info("mssql_cdc: backfill of %s (snapshot %s): %d chunks of at most about %s rows "
                 "planned", self.target, self.s, self.total(), self.plan.get("chunk_rows"))

    # ---- a wave -----------------------------------------------------------
    def width(self, pace: float, target_wave_seconds: float | None, left: float | None) -> int:
        """Whole rounds of k chunks: as many as the wave's seconds hold at
        ``pace`` (seconds a round), no more than ``left`` seconds; one at least."""
        if pace <= 0:
            return self.k
        rounds = (DEFAULT_WAVE_SECONDS if target_wave_seconds is None
                  else target_wave_seconds) / pace
        if left is not None:
            rounds = min(rounds, left / pace)
        rounds = min(rounds, float(self.total() or 1))
        return self.k * max(1, int(rounds))

    def _max_bound(self) -> Any:
        """The largest key a keyset plan was cut below (the open records it,
        ours as the CLI's), past which its last chunk's end is sought again;
        else None. A plan of ours names the extent it was cut on; one of an
        earlier release's (tokens, no extent) was cut on the extent its first
        call read, not on the open's: its last chunk is read as planned."""
        plan = self.plan or {}
        if "tokens" in plan and "extent" not in plan:
            return None
        e = plan.get("extent") or self.open_extent or {}
        return e.get("max") if e.get("kind") == "keyset" else None

    def tokens(self, chunks: dict[int, list[Any]], max_bound: Any = None) -> dict[int, str]:
        """Tokens of these chunks ({chunk: [lo, hi]}): the plan's own when it
        keeps them (ours) for these very bounds, else made by the library
        from the plan's bounds with these in place (a plan of mssql-cdc
        backfill's, or a last chunk whose end was sought again)."""
        assert self.plan is not None
        own = self.plan.get("tokens")
        if own is not None and max_bound is None and all(
                list(self.plan["chunks"][i]) == list(c) for i, c in chunks.items()):
            return {i: own[i] for i in chunks}
        from .spark import plan_chunks
        bounds = [list(c) for c in self.plan["chunks"]]
        for i, c in chunks.items():
            bounds[i] = list(c)
        made = plan_chunks({**self.source.source_options(), **self.extra}, self.plan["keys"],
                           bounds, max_bound)
        return {i: made[i] for i in chunks}

    def plan_wave(self, n: int, first: int, width: int) -> list[dict[str, Any]]:
        """Wave n's chunks as plans rows (what another run planned first stands).
        A keyset plan's last chunk, open above, ends at the first key after
        the plan's MAX now, as `mssql-cdc backfill` seeks it (when the open
        recorded MAX)."""
        assert self.plan is not None
        total = len(self.plan["chunks"])
        ids = range(first, min(total, first + width))
        bounds = {i: list(self.plan["chunks"][i]) for i in ids}
        if total - 1 in bounds and bounds[total - 1][1] is None and \
                self._max_bound() is not None:
            token = self.tokens({total - 1: bounds[total - 1]}, self._max_bound())[total - 1]
            bounds[total - 1][1] = json.loads(token)["hi"]
        rows = [{"snapshot": self.s, "chunk": i, "wave": n, "lo": bounds[i][0],
                 "hi": bounds[i][1], "last": i == total - 1} for i in ids]
        df = self.spark.createDataFrame(
            [(self.s, "snapshot_chunk", json.dumps(r, separators=(",", ":"))) for r in rows],
            tables.PLANS_DDL)
        tables.write(df, self.plans, self.chunks_id, n)
        self.load()
        return self.planned[n]

    def held(self, chunks: list[int]) -> tuple[dict[int, int], str] | None:
        """The rows bronze holds of these chunks of S (a wave appended by a
        run killed before its facts rows), and their stamp; None: none."""
        if not tables.exists(self.spark, self.target):
            return None
        from pyspark.sql import functions as F
        df = tables.read(self.spark, self.target)
        if "_chunk" not in df.columns:
            return None
        rows = (df.where((F.col("_snapshot") == self.s) & F.col("_chunk").isin(chunks)
                         & (F.col("_operation") == 0))
                .groupBy("_chunk").agg(F.count(F.lit(1)), F.min("_start_lsn")).collect())
        if not rows:
            return None
        return {int(c): int(n) for c, n, _ in rows}, min(lsn for _, _, lsn in rows)

    def run_wave(self, n: int, wave: list[dict[str, Any]], resumed: bool) -> float:
        """Reads and records wave n; its seconds."""
        from pyspark.sql import functions as F

        from .spark import CHUNK_METRICS, CHUNK_TOKENS
        from .spark_stream import _write_bronze, bronze_rows
        assert self.plan is not None
        started, t0 = tables.utc_now(), time.monotonic()
        wave = sorted(wave, key=lambda c: c["chunk"])
        ids = [c["chunk"] for c in wave]
        read: dict[int, tuple[float, float]] = {}  # chunk: (read_seconds, read_mb)
        phases: dict[str, float] = {}
        got = self.held(ids) if resumed else None
        if got is not None:
            counts, stamp = got
            high = stamp
            log.info("mssql_cdc: backfill of %s: wave %d is in bronze already (a run stopped "
                     "before its facts rows): recording it", self.target, n)
        else:
            stamp = self.cdc._max_lsn()  # before the read: every commit up to it is in it
            if stamp < self.s:
                raise ValueError(f"sys.fn_cdc_get_max_lsn() is {stamp}, below the snapshot's LSN "
                                 f"{self.s}: is this the database the snapshot was opened on "
                                 "(not a readable secondary, not a restored copy)? Nothing was "
                                 "written")
            tokens = self.tokens({c["chunk"]: [c["lo"], c["hi"]] for c in wave})
            chunk_tokens = json.dumps([[i, tokens[i]] for i in ids])
            own = {CHUNK_TOKENS: chunk_tokens}
            if self.metrics_dir:
                metrics.chunk_figures(self.metrics_dir, [])  # a killed run's files: gone
                own[CHUNK_METRICS] = self.metrics_dir
            df = self.source._snapshot_source(stamp, **self.extra, **own)
            out = bronze_rows(df, None, self.s, F.col("_chunk")).persist()
            try:
                counts = {int(c): int(k) for c, k in out.groupBy("_chunk").count().collect()}
                phases["read"] = time.monotonic() - t0
                high = self.cdc._max_lsn()  # how far capture got after the read
                if self.metrics_dir:  # the tasks have run: every chunk's file is in
                    read = metrics.chunk_figures(self.metrics_dir, ids)
                if sum(counts.values()):
                    meta = {"backfill": self.ledger, "wave": n, "lsn": stamp,
                            "attempt": str(uuid.uuid4()),
                            "chunks": [{"chunk": c["chunk"], "lo": c["lo"], "hi": c["hi"],
                                        "last": c["last"], "rows": counts.get(c["chunk"], 0),
                                        "high_lsn": high,
                                        "read_seconds": read.get(c["chunk"], (None, None))[0],
                                        "read_mb": read.get(c["chunk"], (None, None))[1]}
                                       for c in wave]}
                    t1 = time.monotonic()
                    _write_bronze(out, self.target, self.ledger, n,
                                  json.dumps(meta, separators=(",", ":")))
                    phases["bronze"] = time.monotonic() - t1
            finally:
                out.unpersist()
        seconds = time.monotonic() - t0
        at = self.cdc._offset(stamp)["commit_ts"]
        top = self.cdc._offset(high)["commit_ts"] if high != stamp else at
        facts = [{
            "app_id": self.sink, "rows": counts.get(c["chunk"], 0), "min_lsn": stamp,
            "max_lsn": high, "min_commit_ts": datetime.fromisoformat(at) if at else None,
            "max_commit_ts": datetime.fromisoformat(top) if top else None, "deletes": 0,
            "inserts": 0, "updates": 0, "started_at": started,
            "duration_ms": round(seconds * 1000), "event": "snapshot_chunk",
            "target": self.target, "read_seconds": read.get(c["chunk"], (None, None))[0],
            "read_mb": read.get(c["chunk"], (None, None))[1],
            "detail": json.dumps({"snapshot": self.s, "wave": n, "chunk": c["chunk"],
                                  "last": c["last"]}, separators=(",", ":"))} for c in wave]
        t1 = time.monotonic()
        tables.write_facts(self.spark, self.facts_table, facts, self.chunks_id, n)
        phases["facts"] = time.monotonic() - t1
        self.done = sorted(self.done + [{"chunk": c["chunk"], "wave": n,
                                         "rows": counts.get(c["chunk"], 0), "lsn": stamp,
                                         "duration_ms": round(seconds * 1000),
                                         "last": c["last"]} for c in wave],
                           key=lambda c: c["chunk"])
        log.info("mssql_cdc: backfill of %s (snapshot %s): wave %d in, chunks %d to %d of %d, "
                 "%d rows in %.1f s (%s)", self.target, self.s, n, ids[0], ids[-1], self.total(),
                 sum(counts.values()), seconds,
                 ", ".join(f"{k} {v:.2f} s" for k, v in phases.items()) or "recorded")
        return seconds

    def complete(self) -> None:
        """The snapshot's 'bootstrap' (or 'resnapshot') row, once by its txn."""
        generation = int(self.info.get("generation") or 0)
        kind = self.info.get("kind") or ("resnapshot" if generation else "bootstrap")
        txn = ((f"{self.app_id}#snapdone.{self.s}", 0) if "switch_batch_id" in self.info
               else (f"{self.app_id}#events", generation))
        rows = sum(c["rows"] for c in self.done)
        last = max((c["lsn"] for c in self.done), default="")
        self.cdc._event(self.facts_table, self.app_id, kind, self.s, self.target, *txn, rows,
                        detail={"snapshot": self.s, "chunks": len(self.done), "rows": rows,
                                "last_lsn": last},
                        sink=self.sink, lost_from=recovery.iso_ms(self.top["lost_from_ts"]),
                        lost_to=recovery.iso_ms(self.top["lost_to_ts"]))


def backfill(cdc: CdcStream, target: str, *, app_id: str, facts_table: str,
             chunk_rows: int | None = None, max_waves: int | None = None,
             max_seconds: float | None = None, target_wave_seconds: float | None = None,
             min_headroom_hours: float | None = None,
             isolation: str | None = None) -> BackfillStatus:
    """CdcStream.backfill (see there and the module's doc)."""
    _positive("chunk_rows", chunk_rows, integer=True)
    _positive("max_waves", max_waves, integer=True)
    _positive("max_seconds", max_seconds)
    _positive("target_wave_seconds", target_wave_seconds)
    _positive("min_headroom_hours", min_headroom_hours)
    extra = _isolation(isolation)
    t0 = time.monotonic()
    rows = recovery.stream_rows(cdc.spark, facts_table, app_id)
    top = recovery.open_chunked(rows)
    if top is None:
        return _status(None, 0, None, "no_snapshot",
                       f"{target} has no chunked snapshot opened by {app_id}'s stream (in "
                       f"{facts_table}): not yet, or another app_id, target or facts_table than "
                       "the stream's")
    recovery.mode_lock(cdc, target, app_id, facts_table, "chunked")
    # the newest open (of any generation, or a switch's): read as the newest instance
    run = _Run(cdc, target, app_id, facts_table, top, cdc.reading_newest(rows), extra)
    run.load()
    run.metrics_dir, temporary = (None, False) if run.all_done() else \
        _metrics_dir(cdc, app_id, run.s)
    try:
        return _waves(run, t0, chunk_rows, max_waves, max_seconds, target_wave_seconds,
                      min_headroom_hours)
    finally:
        if temporary and run.metrics_dir:
            shutil.rmtree(run.metrics_dir, ignore_errors=True)


def _waves(run: _Run, t0: float, chunk_rows: int | None, max_waves: int | None,
           max_seconds: float | None, target_wave_seconds: float | None,
           min_headroom_hours: float | None) -> BackfillStatus:
    """backfill()'s waves on the run's snapshot, then its completion."""
    if not run.all_done():
        waiting = run.throttle(min_headroom_hours) if run.plan is None else None
        if waiting:
            return _status(run.s, 0, None, *waiting)
        run.make_plan(chunk_rows)
        # the pace of the last wave an earlier call read, from its facts rows
        pace = 0.0
        if run.done:
            last = run.committed_wave()
            wave = [c for c in run.done if c["wave"] == last]
            pace = wave[-1]["duration_ms"] / 1000 / max(1, math.ceil(len(wave) / run.k))
        waves = 0
        total = run.total() or 0
        while not run.all_done() and (max_waves is None or waves < max_waves):
            left = None if max_seconds is None else max_seconds - (time.monotonic() - t0)
            if left is not None and left <= 0:
                break
            waiting = run.throttle(min_headroom_hours)
            if waiting:
                return _status(run.s, len(run.done), total, *waiting)
            n = run.committed_wave() + 1
            planned = run.planned.get(n)
            resumed = planned is not None
            if planned is None:
                first = run.done[-1]["chunk"] + 1 if run.done else 0
                planned = run.plan_wave(n, first, run.width(pace, target_wave_seconds, left))
            seconds = run.run_wave(n, planned, resumed)
            if not resumed:
                pace = seconds / max(1, math.ceil(len(planned) / run.k))
            waves += 1
        if not run.all_done():
            return _status(run.s, len(run.done), total, "running",
                           "stopped by max_waves or max_seconds: call again")
    run.complete()
    return _status(run.s, len(run.done), len(run.done), "done")
