"""Around the Spark streams: ``get_spark()``; ``start_many``, ``await_all``
and ``stop_all`` over many capture instances; and the completeness verdict
on a control table kept through Spark (``advance``, ``finalized_until``,
``is_final``, ``freshness``, ``track``), with the reference's signatures
(the session first). ``mssql_cdc.finalization``'s functions come here when
their first argument is a SparkSession."""
from __future__ import annotations

import json
import logging
import math
import os
import threading
import time
from collections.abc import Iterable, Mapping
from contextlib import suppress
from datetime import datetime, timezone
from typing import Any

from . import spark_tables as tables
from .types import Freshness

log = logging.getLogger("mssql_cdc")

_GRANULARITIES = ("minute", "hour", "day")


def get_spark(app_name: str = "mssql-cdc", master: str = "local[*]", *, delta: bool = True):
    """The active SparkSession (Databricks, EMR, Fabric...), else a local
    one in UTC with Delta when delta-spark is installed; with SPARK_REMOTE
    set, a Spark Connect session on that server (``master`` and ``delta``
    are then the server's business)."""
    from pyspark.sql import SparkSession
    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    if "SPARK_REMOTE" in os.environ:
        return SparkSession.builder.appName(app_name).getOrCreate()
    builder = (SparkSession.builder.appName(app_name).master(master)
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.sql.shuffle.partitions", "4"))
    if delta:
        try:
            from delta import configure_spark_with_delta_pip
        except ImportError:
            delta = False
    if delta:
        builder = configure_spark_with_delta_pip(
            builder.config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
            .config("spark.sql.catalog.spark_catalog",
                    "org.apache.spark.sql.delta.catalog.DeltaCatalog"))
    return builder.getOrCreate()


# ---- many streams ----------------------------------------------------------

def start_many(spark, options: Mapping[str, Any],
               capture_instances: Iterable[str] | Mapping[str, Mapping[str, Any]], *,
               target: str, app_id: str, checkpoint: str, facts_table: str | None = None,
               **to_delta_kwargs: Any) -> dict[str, Any]:
    """One ``to_delta`` stream per capture instance; the queries by capture
    instance, in the order given. ``target``, ``app_id`` and ``checkpoint``
    are templates with ``{ci}``; a mapping of capture instances gives each
    its own options over ``options``. A stream that fails to start stops
    the ones already started, and the error is raised."""
    from .spark_stream import stream
    for name, template in (("target", target), ("app_id", app_id), ("checkpoint", checkpoint)):
        if "{ci}" not in template:
            raise ValueError(f"{name} must contain {{ci}} (each stream needs its own), not "
                             f"{template!r}")
    items = (list(capture_instances.items()) if isinstance(capture_instances, Mapping)
             else [(ci, {}) for ci in capture_instances])
    names = [ci for ci, _ in items]
    if len(set(names)) != len(names):
        raise ValueError(f"a capture instance is named twice in {names}")
    if facts_table:  # shared by every stream: created once, before they race to
        tables.ensure(spark, facts_table, "facts", tables.FACTS_DDL)
    queries: dict[str, Any] = {}
    try:
        for ci, own in items:
            opts = {**dict(options), **dict(own or {}), "captureInstance": ci}
            queries[ci] = stream(spark, opts).to_delta(
                target.format(ci=ci), app_id.format(ci=ci), checkpoint.format(ci=ci),
                facts_table, **to_delta_kwargs)
    except BaseException:
        stop_all(queries)
        raise
    return queries


def await_all(queries: Mapping[str, Any], *, timeout: float | None = None) -> dict[str, Exception]:
    """Waits until every query stopped (or ``timeout`` seconds in all) and
    returns the error of each that stopped with one, by capture instance."""
    from pyspark.errors import StreamingQueryException
    deadline = None if timeout is None else time.monotonic() + timeout
    for query in queries.values():
        with suppress(StreamingQueryException):
            if deadline is None:
                query.awaitTermination()
            elif (left := deadline - time.monotonic()) > 0:
                query.awaitTermination(math.ceil(left))
    return {ci: e for ci, q in queries.items() if (e := q.exception()) is not None}


def stop_all(queries: Mapping[str, Any]) -> None:
    """Stops every query still running; each resumes from its checkpoint."""
    for query in queries.values():
        with suppress(Exception):
            query.stop()


# ---- the verdict on Spark --------------------------------------------------

def _truncate(ts: datetime, granularity: str) -> datetime:
    if granularity not in _GRANULARITIES:
        raise ValueError(f"granularity must be one of {_GRANULARITIES}, not {granularity!r}")
    ts = ts.replace(second=0, microsecond=0)
    if granularity in ("hour", "day"):
        ts = ts.replace(minute=0)
    if granularity == "day":
        ts = ts.replace(hour=0)
    return ts


def _candidate(end_offset: Mapping[str, Any] | None, granularity: str) -> datetime | None:
    if granularity not in _GRANULARITIES:
        raise ValueError(f"granularity must be one of {_GRANULARITIES}, not {granularity!r}")
    if not end_offset or not end_offset.get("commit_ts"):
        return None
    return _truncate(datetime.fromisoformat(str(end_offset["commit_ts"]).rstrip("Z")),
                     granularity)


def _literal(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _ts(value: datetime) -> str:
    return f"TIMESTAMP_NTZ '{value.isoformat(sep=' ', timespec='microseconds')}'"


def ensure_control_table(spark, control_table: str) -> None:
    tables.ensure(spark, control_table, "control", tables.CONTROL_DDL)


def advance(spark, control_table: str, table_name: str, end_offset: Mapping[str, Any] | None,
            *, granularity: str = "hour") -> datetime | None:
    """Moves ``table_name``'s ``finalized_until`` to ``end_offset``'s commit
    time truncated to ``granularity`` when later (never backwards); call it
    only after the batch ending there is committed. A MERGE that loses to
    a concurrent commit is retried for up to a minute."""
    ensure_control_table(spark, control_table)
    _merge_verdict(spark, control_table, table_name, end_offset, granularity)
    return finalized_until(spark, control_table, table_name)


def _merge_verdict(spark, control_table: str, table_name: str,
                   end_offset: Mapping[str, Any] | None, granularity: str) -> None:
    """advance's MERGE alone, on a control table known to exist."""
    cand = _candidate(end_offset, granularity)
    if cand is not None:
        assert end_offset is not None
        commit = datetime.fromisoformat(str(end_offset["commit_ts"]).rstrip("Z"))
        now = datetime.now(timezone.utc).replace(tzinfo=None)
        sql = (f"MERGE INTO {tables.ident(control_table)} t USING (SELECT "
               f"{_literal(table_name)} AS table_name, {_ts(cand)} AS cand, "
               f"{_literal(str(end_offset['lsn']))} AS end_lsn, {_ts(commit)} AS end_ts, "
               f"{_ts(now)} AS now) s ON t.table_name = s.table_name "
               "WHEN MATCHED AND (t.finalized_until IS NULL OR s.cand > t.finalized_until) THEN "
               "UPDATE SET finalized_until = s.cand, end_lsn = s.end_lsn, "
               "end_commit_ts = s.end_ts, updated_at = s.now "
               "WHEN NOT MATCHED THEN INSERT (table_name, finalized_until, end_lsn, "
               "end_commit_ts, updated_at) VALUES (s.table_name, s.cand, s.end_lsn, s.end_ts, "
               "s.now)")
        deadline = time.monotonic() + 60
        while True:
            try:
                spark.sql(sql).collect()
                break
            except Exception as exc:  # noqa: BLE001 - only Delta's conflicts are retried
                if "Concurrent" not in type(exc).__name__ + str(exc)[:300] or \
                        time.monotonic() > deadline:
                    raise
                time.sleep(0.5)


def _control_row(spark, control_table: str, table_name: str):
    from pyspark.sql import functions as F
    if not tables.exists(spark, control_table):
        return None
    return (tables.read(spark, control_table).where(F.col("table_name") == table_name)
            .select("finalized_until", "updated_at", "open_snapshot_lsn").first())


def finalized_until(spark, control_table: str, table_name: str) -> datetime | None:
    row = _control_row(spark, control_table, table_name)
    return row[0] if row else None


def is_final(spark, control_table: str, table_name: str, period_end: datetime) -> bool:
    """Whether the period ending at ``period_end`` (exclusive; an aware time
    is taken in UTC) is complete."""
    if period_end.tzinfo:
        period_end = period_end.astimezone(timezone.utc).replace(tzinfo=None)
    until = finalized_until(spark, control_table, table_name)
    return until is not None and period_end <= until


def freshness(spark, control_table: str, table_name: str) -> Freshness:
    row = _control_row(spark, control_table, table_name)
    until, moved, held = row if row else (None, None, None)
    now = datetime.now(timezone.utc).replace(tzinfo=None)
    return {"table_name": table_name, "finalized_until": until, "updated_at": moved,
            "age_seconds": None if until is None else (now - until).total_seconds(),
            "seconds_since_update": None if moved is None else (now - moved).total_seconds(),
            "open_snapshot_lsn": held}


def _end_offset(progress) -> dict[str, Any] | None:
    if progress is None:
        return None
    data = json.loads(progress.json) if hasattr(progress, "json") else progress
    sources = data.get("sources") or []
    end = sources[0].get("endOffset") if sources else None
    return json.loads(end) if isinstance(end, str) else end


def _listener_base():
    from pyspark.sql.streaming import StreamingQueryListener
    return StreamingQueryListener


class FinalizationTracker:
    """Advances ``finalized_until`` after the batches of one query run (see
    ``track``). The listener's callbacks only hand the newest progress to a
    worker thread, which advances; ``join()`` waits for the last verdict
    after the query stopped; ``last_error`` / ``failures`` tell of verdicts
    that failed (each logged, the next progress tries again)."""

    def __init__(self, spark, run_id: str, control_table: str, table_name: str,
                 granularity: str):
        if granularity not in _GRANULARITIES:
            raise ValueError(f"granularity must be one of {_GRANULARITIES}, not {granularity!r}")
        self._spark, self._run_id = spark, str(run_id)
        self._control, self._table, self._granularity = control_table, table_name, granularity
        self._cond = threading.Condition()
        self._progress: Any = None
        self._stopped = False
        self.last_error: Exception | None = None
        self.failures = 0
        self._worker = threading.Thread(target=self._run, daemon=True,
                                        name=f"mssql-cdc-finalization {table_name}")
        tracker = self

        class Listener(_listener_base()):  # type: ignore[misc]
            def onQueryStarted(self, event):
                pass

            def onQueryProgress(self, event):
                if str(event.progress.runId) == tracker._run_id:
                    tracker._offer(event.progress)

            def onQueryIdle(self, event):
                pass

            def onQueryTerminated(self, event):
                if str(event.runId) == tracker._run_id:
                    tracker._stop()
        self.listener = Listener()

    def _offer(self, progress) -> None:
        if progress is not None:
            with self._cond:
                self._progress = progress
                self._cond.notify()

    def _stop(self) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify()

    def _run(self) -> None:
        last = None
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._progress is not None or self._stopped)
                progress, self._progress = self._progress, None
            if progress is None:
                break
            try:
                end = _end_offset(progress)
                cand = _candidate(end, self._granularity)
                if cand is not None and (last is None or cand > last):
                    # track() created the control table: the MERGE alone, nothing read back
                    _merge_verdict(self._spark, self._control, self._table, end,
                                   self._granularity)
                    last = cand
                    self.last_error, self.failures = None, 0
            except Exception as exc:  # noqa: BLE001 - the worker outlives a failed verdict
                self.failures += 1
                self.last_error = exc
                log.error("finalized_until of %s not advanced: %s", self._table, exc)
        if not type(self._spark).__module__.startswith("pyspark.sql.connect"):
            with suppress(Exception):
                self._spark.streams.removeListener(self.listener)

    def join(self, *, timeout: float | None = None) -> bool:
        self._worker.join(timeout)
        return not self._worker.is_alive()


def track(spark, query, control_table: str, table_name: str, *,
          granularity: str = "hour") -> FinalizationTracker:
    """Advances ``finalized_until`` of ``table_name`` after every batch of
    ``query`` (started, writing that table) until it terminates; returns
    the tracker (``join()`` waits for its last verdict). The control table
    is created here, so a wrong name fails now."""
    tracker = FinalizationTracker(spark, query.runId, control_table, table_name, granularity)
    ensure_control_table(spark, control_table)
    spark.streams.addListener(tracker.listener)
    tracker._offer(query.lastProgress)  # progress before the listener: the newest implies it
    if not query.isActive:
        tracker._stop()
    tracker._worker.start()
    return tracker
