"""The types of the public API, as the reference (mssql-cdc-pyspark) has
them: the values a mode parameter takes, and what the calls return. Results
are TypedDicts: plain dicts at run time. Keys may be added; the reference's
keys keep their names and meaning. Keys after the reference's are this
package's own (marked "ours")."""
from __future__ import annotations

from datetime import datetime
from typing import Any, Literal, TypedDict

SnapshotMode = Literal["full", "chunked"]
"""How a stream takes a snapshot: the whole table before the stream goes
on, or opened and read in chunks by ``backfill`` next to it."""

OnDataLoss = Literal["fail", "resnapshot"]
"""What a stream does when CDC cleanup purged changes not read yet."""

Isolation = Literal["snapshot", "readCommitted"]
"""The isolation level ``backfill(isolation=...)`` reads under (any case)."""

Granularity = Literal["minute", "hour", "day"]
"""The period ``finalized_until`` is truncated to."""

BackfillState = Literal["done", "running", "waiting_headroom", "waiting_metrics", "no_snapshot"]
"""Why ``backfill()`` returned."""

Trigger = Literal["default", "availableNow", "once"]
"""A stream's trigger as a word; ``"processingTime=<interval>"`` and the
reference's dicts (``{"availableNow": True}``, ``{"processingTime": "1
minute"}``) are taken too."""


class Offset(TypedDict):
    """A position in the change log: what ``snapshot()`` and ``seed()``
    return, for a stream's ``startingLsn``."""

    lsn: str
    """The LSN, ``0x`` and 20 uppercase hex digits."""
    commit_ts: str
    """Its commit time, UTC ISO-8601 to the millisecond; ``""`` when unknown."""


class BackfillStatus(TypedDict):
    """What ``backfill()`` returns: how far the chunked snapshot got."""

    snapshot: str | None
    chunks_done: int
    chunks_total: int | None
    done: bool
    paused: bool
    state: BackfillState
    reason: str | None


class ApplyResult(TypedDict, total=False):
    """What ``apply_changes()`` returns."""

    rebuilt: bool
    applied_lsn: str | None
    finalized_until: datetime | None
    """Silver's verdict after the call, naive UTC."""
    bronze_found: bool
    # ours
    passes: int
    inserted: int
    updated: int
    deleted: int
    silver_version: int
    open_snapshot_lsn: str | None
    snapshot_wave: int | None


class RepairResult(TypedDict):
    """What ``repair()`` returns (ours: the reference has no repair call)."""

    run_id: str
    lsn: str | None
    commit_ts: str | None
    keys: int
    images: int
    deletes: int
    bronze_version: int
    already: bool


class ReconcileResult(TypedDict, total=False):
    """What ``reconcile()`` returns: a summary of the run, and its report."""

    run_id: str
    silver_version: int
    silver_lsn: str | None
    source_lsn: str
    buckets: int
    match: int
    in_flight: int
    mismatch: int
    hashed: int
    failures: dict[str, int]
    """Report rows by failure_type (types with none left out)."""
    report: list[dict[str, Any]] | None
    """The run's report rows as ``report_table`` got them (dicts; the
    reference's is a Spark DataFrame); None without a ``report_table``."""
    # ours
    source_rows: int
    silver_rows: int
    source_rows_hashed: int
    silver_rows_hashed: int
    report_rows: int
    differs: bool
    verified: bool
    rechecks: int
    repair: RepairResult


class Freshness(TypedDict):
    """What ``finalization.freshness()`` returns."""

    table_name: str
    finalized_until: datetime | None
    updated_at: datetime | None
    age_seconds: float | None
    seconds_since_update: float | None
    open_snapshot_lsn: str | None


class StreamResult(TypedDict):
    """What ``stream()`` returns when it stops (ours: the reference returns
    Spark's StreamingQuery)."""

    batches: int
    """Batches committed by this call."""
    rows: int
    """Change rows they held."""
    end_offset: Offset | None
    """The last batch's end, as a stream's offsets hold it; None without one."""
    stopped: bool
    """Stopped by a KeyboardInterrupt (``request_stop``), not by its trigger."""


class BatchReport(TypedDict):
    """What ``stream(on_batch=...)`` gets after each committed batch."""

    batch_id: int
    rows: int
    inserts: int
    updates: int
    deletes: int
    start_lsn: str
    end_lsn: str
    end_commit_ts: str
    replayed: bool
    bronze_skipped: bool
    duration_ms: float
    rows_per_s: float
    ingestion_lag_seconds: float | None
    finalized_until: datetime | None


class Progress(TypedDict):
    """What a job's ``progress`` callable gets (include/mssqlcdc.h's
    mcdc_progress)."""

    job: str
    phase: str
    phase_number: int
    rows_done: int
    rows_total: int | None
    rows_estimated: bool
    parts_name: str | None
    parts_done: int
    parts_total: int | None
    job_parts_name: str | None
    job_parts_done: int
    job_parts_total: int | None
    bytes_done: int
    phase_ms: int
    elapsed_ms: int
    done: bool


JobState = Literal["starting", "snapshotting", "running", "done", "stopped", "failed"]
"""A job's state in its runtime's registry (mcdc_job_state_name)."""


class JobProgress(TypedDict):
    """A job's last progress report, as its runtime's registry keeps it."""

    job: str
    phase: str
    active: bool
    """A report came and the job has not reported done."""
    rows_done: int
    rows_total: int | None
    parts_done: int
    """The job's parts when it counts them across phases (a backfill's
    chunks), else the phase's."""
    parts_total: int | None


class JobMetrics(TypedDict):
    """One job's figures in ``Runtime.metrics()`` (ours: what ``mssql-cdc
    serve``'s /metrics shows per table, include/mssqlcdc.h's
    mcdc_job_metrics)."""

    id: int
    """The runtime's number for the job: 1, 2, ... in the order they began."""
    job: str
    """"stream", "snapshot", "seed", "backfill", "apply", "reconcile" or "repair"."""
    name: str
    """A stream's query name (else its app id); the others' target."""
    state: JobState
    runs: int
    rows: int
    """A stream's change rows committed, over its batches."""
    batches: int
    last_batch_seconds: float | None
    end_lsn: str | None
    """The last batch's end LSN."""
    end_commit_ts: str | None
    """Its commit time, UTC ISO-8601 to the millisecond."""
    ingestion_lag_seconds: float | None
    retention_headroom_hours: float | None
    finalized_until: datetime | None
    verdict_moved_at: datetime | None
    """When the job last saw the verdict move, naive UTC."""
    errors: dict[str, int]
    """Runs that ended with an error, by status name ("data loss", "cancelled"...)."""
    last_status: str | None
    """The last run's status name when it was not ok."""
    last_error: str | None
    progress: JobProgress | None


class RuntimeStats(TypedDict):
    """What ``Runtime.stats()`` returns: the runtime's allocator accounting
    and its probes' queries."""

    alloc_calls: int
    live_bytes: int
    peak_bytes: int
    probe_rounds: int
    probe_queries: int
