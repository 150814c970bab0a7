"""SQL Server CDC into Delta Lake from Python, on libmssqlcdc (the engine of
the ``mssql-cdc`` CLI), with the API of the reference library
(mssql-cdc-pyspark): its option names, typed results and errors.

Plain Python, no Spark needed: ``read_changes`` and ``read_snapshot`` give
a ``pyarrow.RecordBatchReader``; ``stream``, ``snapshot``, ``seed``,
``backfill``, ``apply_changes``, ``reconcile`` and ``repair`` run the
library's jobs in this process, each in a ``Runtime`` when given one
(``runtime=``: jobs sharing one budget, probe, storage options and metrics
registry, as ``mssql-cdc serve`` runs them); ``finalization`` reads and
moves verdicts.
On Spark, ``register(spark)`` adds the data sources ``mssql_cdc`` (the
change stream) and ``mssql_cdc_snapshot`` (mssql_cdc.spark).

Importing the package loads nothing: the library is loaded on first use
(``load_library(path)`` chooses it beforehand).
"""
from __future__ import annotations

from collections.abc import Mapping

from . import finalization
from .arrow import read_changes, read_snapshot

from .jobs import apply_changes, backfill, reconcile, repair, seed, snapshot
from .jobs import stream as _jobs_stream
from ._core import Runtime
from ._native import library_path, load_library, version as library_version
from .errors import (CdcPermissionError, CdcRuntimeError, CdcValueError, DataLossError,
                     MssqlCdcError, SchemaChangedError, is_data_loss, is_schema_changed)
from .types import (ApplyResult, BackfillState, BackfillStatus, BatchReport, Freshness,
                    Granularity, Isolation, JobMetrics, JobProgress, JobState, Offset,
                    OnDataLoss, Progress, ReconcileResult, RepairResult, RuntimeStats,
                    SnapshotMode, StreamResult)

__version__ = "0.1.0"


def stream(*args, **kwargs):
    """``stream(spark, options)``, the reference's: a ``CdcStream`` whose
    ``to_delta`` starts the stream on Spark (mssql_cdc.spark_stream);
    ``stream(options, target, app_id, checkpoint, ...)`` runs the library's
    stream job in this process (mssql_cdc.jobs.stream)."""
    first = args[0] if args else kwargs.get("spark", kwargs.get("options"))
    if isinstance(first, Mapping):
        return _jobs_stream(*args, **kwargs)
    from .spark_stream import stream as spark_stream
    return spark_stream(*args, **kwargs)


def delta_sink(target: str, app_id: str, facts_table: str | None = None, *,
               metrics_path: str | None = None):
    """A ``foreachBatch`` function writing bronze and facts through Spark
    (mssql_cdc.spark_stream.delta_sink)."""
    from .spark_stream import delta_sink as sink
    return sink(target, app_id, facts_table, metrics_path=metrics_path)


def get_spark(app_name: str = "mssql-cdc", master: str = "local[*]", *, delta: bool = True):
    """The active SparkSession, else a local one with Delta (spark_jobs)."""
    from .spark_jobs import get_spark as get
    return get(app_name, master, delta=delta)


def start_many(spark, options, capture_instances, **kwargs):
    """One ``to_delta`` stream per capture instance (spark_jobs.start_many)."""
    from .spark_jobs import start_many as start
    return start(spark, options, capture_instances, **kwargs)


def await_all(queries, *, timeout: float | None = None):
    """Waits for every query; their errors by capture instance (spark_jobs)."""
    from .spark_jobs import await_all as wait
    return wait(queries, timeout=timeout)


def stop_all(queries) -> None:
    """Stops every query still running (spark_jobs.stop_all)."""
    from .spark_jobs import stop_all as stop
    stop(queries)


def register(spark) -> None:
    """Registers ``format("mssql_cdc")`` and ``format("mssql_cdc_snapshot")``
    on a SparkSession (PySpark 4.0+; see mssql_cdc.spark)."""
    from .spark import register as register_sources
    register_sources(spark)


__all__ = [
    "ApplyResult", "BackfillState", "BackfillStatus", "BatchReport", "CdcPermissionError",
    "CdcRuntimeError", "CdcValueError", "DataLossError", "Freshness", "Granularity",
    "Isolation", "JobMetrics", "JobProgress", "JobState", "MssqlCdcError", "Offset",
    "OnDataLoss", "Progress", "ReconcileResult", "RepairResult", "Runtime", "RuntimeStats",
    "SchemaChangedError", "SnapshotMode", "StreamResult", "apply_changes",
    "backfill", "finalization", "is_data_loss", "is_schema_changed", "library_path",
    "library_version", "load_library", "read_changes", "read_snapshot", "reconcile", "register",
    "repair",
    "seed", "snapshot", "stream",
    "await_all", "delta_sink", "get_spark", "start_many", "stop_all",
]

