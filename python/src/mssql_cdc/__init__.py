"""SQL Server CDC into Delta Lake from Python, on libmssqlcdc (the engine of
the ``mssql-cdc`` CLI), with the API of the reference library
(mssql-cdc-pyspark): its option names, typed results and errors.

Plain Python, no Spark needed: ``read_changes`` and ``read_snapshot`` give
a ``pyarrow.RecordBatchReader``; ``stream``, ``snapshot``, ``seed``,
``backfill``, ``apply_changes``, ``reconcile`` and ``repair`` run the
library's jobs in this process; ``finalization`` reads and moves verdicts.
On Spark, ``register(spark)`` adds the data sources ``mssql_cdc`` (the
change stream) and ``mssql_cdc_snapshot`` (mssql_cdc.spark).

Importing the package loads nothing: the library is loaded on first use
(``load_library(path)`` chooses it beforehand).
"""
from __future__ import annotations

from . import finalization
from .arrow import read_changes, read_snapshot
from .jobs import apply_changes, backfill, reconcile, repair, seed, snapshot, stream
from ._native import library_path, load_library, version as library_version
from .errors import (CdcPermissionError, CdcRuntimeError, CdcValueError, DataLossError,
                     MssqlCdcError, SchemaChangedError, is_data_loss, is_schema_changed)
from .types import (ApplyResult, BackfillState, BackfillStatus, BatchReport, Freshness,
                    Granularity, Isolation, Offset, OnDataLoss, Progress, ReconcileResult,
                    RepairResult, SnapshotMode, StreamResult)

__version__ = "0.1.0"


def register(spark) -> None:
    """Registers ``format("mssql_cdc")`` and ``format("mssql_cdc_snapshot")``
    on a SparkSession (PySpark 4.0+; see mssql_cdc.spark)."""
    from .spark import register as register_sources
    register_sources(spark)


__all__ = [
    "ApplyResult", "BackfillState", "BackfillStatus", "BatchReport", "CdcPermissionError",
    "CdcRuntimeError", "CdcValueError", "DataLossError", "Freshness", "Granularity",
    "Isolation", "MssqlCdcError", "Offset", "OnDataLoss", "Progress", "ReconcileResult",
    "RepairResult", "SchemaChangedError", "SnapshotMode", "StreamResult", "apply_changes",
    "backfill", "finalization", "is_data_loss", "is_schema_changed", "library_path",
    "library_version", "load_library", "read_changes", "read_snapshot", "reconcile", "register",
    "repair",
    "seed", "snapshot", "stream",
]

