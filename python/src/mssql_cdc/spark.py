"""The Spark data sources, on Spark's Python Data Source API (PySpark 4.0+):
``format("mssql_cdc")``, the change stream, and ``format("mssql_cdc_snapshot")``,
the tracked table's current rows, with the reference's names, options and
offsets. ``mssql_cdc.register(spark)`` registers both.

What runs where:
- the driver (one long-lived Python worker per streaming query) asks the
  library for positions (max_lsn, the n-th commit, commit times) on one
  connection it keeps, and plans each batch with the library's range planner
  (commit-aligned ranges balanced by rows) into tokens: short JSON text,
  which is what a partition carries;
- each executor task loads the library (lazily, after Spark's fork), reads
  its token's range as an Arrow C stream and yields pyarrow RecordBatches in
  the source's Spark schema: no per-row Python.

Offsets are the reference's ``{"lsn", "commit_ts"}``, the last LSN a batch
read and its commit time, so a checkpoint written by either package is
read by the other."""
from __future__ import annotations

import ctypes
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import logging

from pyspark.sql.datasource import (DataSource, DataSourceReader, DataSourceStreamReader,
                                    InputPartition)

try:  # Spark 4.2+: admission control and Trigger.AvailableNow for Python sources
    from pyspark.sql.streaming.datasource import (ReadAllAvailable, ReadMaxRows,
                                                  SupportsTriggerAvailableNow)
    HAS_ADMISSION_CONTROL = True
except ImportError:  # Spark 4.0/4.1
    HAS_ADMISSION_CONTROL = False

    class SupportsTriggerAvailableNow:  # type: ignore[no-redef]
        pass

_log = logging.getLogger("mssql_cdc")

# the library plans at most this many ranges per batch (MCDC_PARTITIONS_MAX)
PARTITIONS_MAX = 64
_NO_LSN = "0x" + "0" * 20
_LAST_LSN = "0x" + "F" * 20


def _opt(options: Mapping[str, Any], name: str, default: Any = None) -> Any:
    lowered = {str(k).lower(): v for k, v in options.items()}
    return lowered.get(name.lower(), default)


# The snapshot source's option that backfill() (spark_backfill.py) passes: a
# wave's planned chunks as JSON [[chunk, token], ...], each a token of the
# library's snapshot planner; the rows get the chunk's number as ``_chunk``.
# The package's own, never handed to the library.
CHUNK_TOKENS = "mssqlCdcChunkTokens"
# And with it, where each chunk's task leaves its read's figures (rows,
# bytes, seconds) as chunk-<n>.json, for the wave's facts rows
# (read_seconds, read_mb); unset: none are written.
CHUNK_METRICS = "mssqlCdcChunkMetrics"
_OWN = ("path", CHUNK_TOKENS.lower(), CHUNK_METRICS.lower())


def _source_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """The options Spark passed, without the ones Spark adds itself and the
    package's own (CHUNK_TOKENS, CHUNK_METRICS)."""
    return {k: v for k, v in options.items() if str(k).lower() not in _OWN}


def _chunk_tokens(options: Mapping[str, Any]) -> list[tuple[int, str]] | None:
    """CHUNK_TOKENS' value checked: [(chunk, token), ...], or None unset."""
    import json
    given = _opt(options, CHUNK_TOKENS)
    if given in (None, ""):
        return None
    try:
        value = json.loads(str(given))
    except ValueError:
        value = None
    if not (isinstance(value, list) and value and all(
            isinstance(c, list) and len(c) == 2 and type(c[0]) is int and c[0] >= 0
            and isinstance(c[1], str) for c in value)):
        raise ValueError(f"option {CHUNK_TOKENS} must be a JSON list of [chunk, token] pairs "
                         "(backfill() sets it)")
    if not _opt(options, "snapshotLsn"):
        raise ValueError(f"option {CHUNK_TOKENS} needs snapshotLsn: the LSN its rows are "
                         "stamped with, recorded before the read")
    return [(c, t) for c, t in value]


def _num_partitions(options: Mapping[str, Any], default: int | None) -> int:
    """numPartitions as a number of ranges: 'auto' (or unset) takes the
    session's cores that register() recorded, else this node's CPUs."""
    given = str(_opt(options, "numPartitions", "auto")).strip().lower()
    if given == "auto":
        n = default or os.cpu_count() or 1
    else:
        try:
            n = int(given)
        except ValueError:
            raise ValueError(f"numPartitions must be 'auto' or a positive integer, not "
                             f"{given!r}") from None
        if n < 1:
            raise ValueError(f"numPartitions must be 'auto' or a positive integer, not {n}")
    return max(1, min(PARTITIONS_MAX, n))


def _spark_schema(options: Mapping[str, Any]):
    """The source's Spark schema: the one the library's streams have
    (columns, includeCommandId and the table's capture instances decide it:
    the union of their columns, as the stream reads them)."""
    from pyspark.sql.pandas.types import from_arrow_schema

    from ._positions import Positions

    positions = Positions(options)
    try:
        schema = positions.schema()
    finally:
        positions.close()
    return from_arrow_schema(schema, prefer_timestamp_ntz=True)


def _instance_schema(options: Mapping[str, Any]):
    """The snapshot source's Spark schema: the capture instance's own
    columns (a snapshot reads the table as that instance captures it),
    read from a plan of no range."""
    import pyarrow as pa
    from pyspark.sql.pandas.types import from_arrow_schema

    from . import _cfg, _native
    from ._cfg import Error
    from ._core import Options, check
    from ._positions import lsn_value

    lib = _native.lib()
    opts = Options(options)
    plan = ctypes.c_void_p()
    try:
        err = Error()
        check(lib.mcdc_range_plan_create(ctypes.byref(plan), opts.handle, lsn_value(_LAST_LSN),
                                         lsn_value(_NO_LSN), 1, ctypes.byref(err)), err)
        c_schema = _cfg.ArrowSchema()
        err = Error()
        check(lib.mcdc_range_plan_schema(ctypes.byref(c_schema), plan, ctypes.byref(err)), err)
        schema = pa.Schema._import_from_c(ctypes.addressof(c_schema))
    finally:
        lib.mcdc_range_plan_free(plan)
        opts.free()
    return from_arrow_schema(schema, prefer_timestamp_ntz=True)


def _arrow_target(schema):
    from pyspark.sql.pandas.types import to_arrow_schema
    try:  # Spark 4.1+: the zone is named
        return to_arrow_schema(schema, timezone="UTC")
    except TypeError:  # Spark 4.0: a flag for UTC instead
        return to_arrow_schema(schema, timestamp_utc=True)


def _batches(target, batches) -> Iterator:
    """The batches in Spark's Arrow types: passed through when the library's
    types are already Spark's (the usual case), cast otherwise."""
    import pyarrow as pa
    same = None
    for batch in batches:
        if same is None:
            same = batch.schema.equals(target)
        if same:
            yield batch
        else:
            yield from pa.Table.from_batches([batch]).cast(target).to_batches()


def _read_tokens(options: Mapping[str, Any], tokens: list[str], open_stream) -> Iterator:
    """Reads tokens' streams (the package's chain of Arrow C streams)."""
    from . import _native
    from ._core import Options
    from .arrow import _chain

    lib = _native.lib()
    opts = Options(options)
    return _chain(None, opts, [t.encode() for t in tokens],
                  lambda out, token, err: open_stream(lib, out, opts.handle, token, err))


@dataclass
class ChangeRange(InputPartition):
    """One planned range of a batch: the library's token (no secret in it)."""
    token: str


@dataclass
class SnapshotChunk(InputPartition):
    """One key range of the table and the LSN every row of the snapshot is
    stamped with (recorded before the read); ``chunk``: its number in a
    backfill's plan (the rows' ``_chunk``), None for a whole snapshot."""
    token: str
    lsn: str
    chunk: int | None = None


class MssqlCdcDataSource(DataSource):
    """``spark.readStream.format("mssql_cdc")``: the changes of
    ``captureInstance`` as a stream, in the reference's schema."""

    default_num_partitions: int | None = None  # register() sets it from the session's cores

    @classmethod
    def name(cls) -> str:
        return "mssql_cdc"

    def schema(self):
        return _spark_schema(_source_options(self.options))

    def streamReader(self, schema) -> DataSourceStreamReader:
        cls = MssqlCdcStreamReader if HAS_ADMISSION_CONTROL else MssqlCdcLegacyStreamReader
        return cls(_source_options(self.options), schema, self.default_num_partitions)


class MssqlCdcSnapshotDataSource(MssqlCdcDataSource):
    """``spark.read.format("mssql_cdc_snapshot")``: the tracked table's
    current rows as snapshot rows (``_operation`` 0) stamped with the LSN
    recorded before the read (``snapshotLsn`` when given), read in key ranges
    (``snapshotKeys``, else the capture instance's unique index) by
    ``numPartitions`` tasks."""

    @classmethod
    def name(cls) -> str:
        return "mssql_cdc_snapshot"

    def schema(self):
        schema = _instance_schema(_source_options(self.options))
        if _chunk_tokens(self.options) is not None:  # a backfill's wave: + _chunk
            from pyspark.sql.types import IntegerType
            schema = schema.add("_chunk", IntegerType())
        return schema

    def reader(self, schema) -> DataSourceReader:
        reader = MssqlCdcSnapshotReader(_source_options(self.options), schema,
                                        self.default_num_partitions)
        reader.chunks = _chunk_tokens(self.options)
        reader.chunk_metrics = _opt(self.options, CHUNK_METRICS) or None
        return reader


class _Reader:
    """What both readers share: the options, the schema, the partitions'
    count, and a connection for positions that never travels to executors."""

    def __init__(self, options: dict[str, Any], schema, default_num_partitions: int | None):
        if not _opt(options, "captureInstance"):
            raise ValueError("option 'captureInstance' is required (e.g. 'dbo_orders')")
        self.options = options
        self.schema = schema
        self.num_partitions = _num_partitions(options, default_num_partitions)
        self._positions = None
        self._schema_checked = False

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_positions"] = None  # a live connection is never pickled
        return state

    @property
    def positions(self):
        if self._positions is None:
            from ._positions import Positions
            self._positions = Positions(self.options)
        return self._positions

    def stop(self) -> None:
        if self._positions is not None:
            self._positions.close()
            self._positions = None


class _StreamReader(_Reader, DataSourceStreamReader):

    def initialOffset(self) -> dict[str, str]:
        starting = str(_opt(self.options, "startingLsn", "earliest") or "earliest").strip()
        return self.positions.offset(self.positions.initial_lsn(starting))

    def partitions(self, start: dict, end: dict) -> list[ChangeRange]:
        """(start, end]: the changes after the last LSN read up to the
        batch's end, planned by the library as the stream plans a batch,
        before any read: the DDL inside it classified (SchemaChangedError),
        a newer capture instance checked against the schema
        (SchemaChangedError), the retention guard (DataLossError, or with
        failOnDataLoss=false a skip logged as a warning), then
        commit-aligned ranges per instance."""
        if end["lsn"] <= start["lsn"]:
            return []
        self._check_schema()
        tokens, events = self.positions.plan_batch(start["lsn"], end["lsn"], self.num_partitions)
        for e in events:  # as the reference: each one a warning of the driver's
            _log.warning("mssql_cdc: %s on %s at %s: %s", e["event"], e["capture_instance"],
                         e["lsn"], e.get("detail") or "")
        metrics = _opt(self.options, "metricsPath")
        if events and metrics:  # and a facts row each, written by the sink (spark_stream.py)
            from ._spark_metrics import write_events
            write_events(str(metrics), start, end, events)
        return [ChangeRange(t) for t in tokens]

    def _check_schema(self) -> None:
        """The query's schema (load() inferred it) against the stream's
        now: a capture instance added meanwhile with columns the query
        lacks would make every range another shape. Once per run."""
        if self._schema_checked:
            return
        from .errors import SchemaChangedError
        now = [f.name for f in self.positions.schema()]
        have = list(self.schema.fieldNames())
        if now != have:
            raise SchemaChangedError(
                f"{_opt(self.options, 'captureInstance')}: the table's capture instances now "
                f"capture columns {', '.join(c for c in now if c not in have) or '(fewer)'} "
                f"that the query's schema (inferred at load()) does not have: restart the query "
                f"to infer the schema again; it resumes where it stopped")
        self._schema_checked = True

    def read(self, partition: ChangeRange) -> Iterator:
        def open_stream(lib, out, opts, token, err):
            return lib.mcdc_range_read(out, opts, token, err)
        batches = _batches(_arrow_target(self.schema),
                           _read_tokens(self.options, [partition.token], open_stream))
        metrics = _opt(self.options, "metricsPath")
        if not metrics:
            return batches
        from ._spark_metrics import measured  # the sink's side channel (spark_stream.py)
        return measured(str(metrics), self.options, partition.token, batches)

    def commit(self, end: dict) -> None:
        pass  # CDC retention is time-based: nothing to acknowledge


class MssqlCdcStreamReader(_StreamReader, SupportsTriggerAvailableNow):
    """Spark 4.2+: ``maxCommitsPerBatch`` as admission control (Spark's
    ReadMaxRows(n) meaning n commits, as the reference: a batch ends on a
    commit) and Trigger.AvailableNow (up to the max_lsn seen when it
    started)."""

    def __init__(self, options: dict[str, Any], schema, default_num_partitions: int | None):
        super().__init__(options, schema, default_num_partitions)
        self._target: str | None = None
        # Spark asks latestOffset then reportLatestOffset back to back, every
        # few ms on an idle stream: the max_lsn just read, the offset reported
        self._seen_max: str | None = None
        self._reported: dict[str, str] | None = None
        given = _opt(options, "maxCommitsPerBatch")
        self._max_commits: int | None = None
        if given not in (None, ""):
            try:
                n = int(str(given).strip())
            except ValueError:
                n = 0
            if n < 1:
                raise ValueError(f"maxCommitsPerBatch must be a positive integer, not {given!r}; "
                                 "omit it to read up to max_lsn")
            self._max_commits = n

    def getDefaultReadLimit(self):
        return ReadMaxRows(self._max_commits) if self._max_commits else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = self.positions.max_lsn()

    def latestOffset(self, start: dict, limit) -> dict[str, str]:
        if self._target is not None:
            upper = self._target
        else:
            upper = self._seen_max = self.positions.max_lsn()
        if upper <= start["lsn"]:
            return start
        if isinstance(limit, ReadMaxRows):
            nth = self.positions.nth_commit_after(start["lsn"], limit.max_rows)
            if nth is not None and nth < upper:
                upper = nth
        # a newer capture instance the schema cannot read: this batch ends
        # before its start, the next one fails there (SchemaChangedError)
        upper = self.positions.batch_end(start["lsn"], upper)
        if upper <= start["lsn"]:
            return start
        return self.positions.offset(upper)

    def reportLatestOffset(self) -> dict[str, str]:
        lsn = self._seen_max or self.positions.max_lsn()
        if self._reported is None or self._reported["lsn"] != lsn:
            self._reported = self.positions.offset(lsn)
        return self._reported


class MssqlCdcLegacyStreamReader(_StreamReader):
    """Spark 4.0/4.1, without admission control: each batch reads up to
    max_lsn (maxCommitsPerBatch has no effect there). latestOffset is not
    told the batch's start there, so a batch is not cut before a newer
    capture instance: the batch that reaches one the schema cannot read
    fails whole in partitions() (SchemaChangedError), as the reference's."""

    _last: dict[str, str] | None = None

    def latestOffset(self) -> dict[str, str]:  # type: ignore[override]
        lsn = self.positions.max_lsn()
        if self._last is None or self._last["lsn"] != lsn:
            self._last = self.positions.offset(lsn)
        return self._last


class MssqlCdcSnapshotReader(_Reader, DataSourceReader):

    chunks: list[tuple[int, str]] | None = None  # a backfill's wave (CHUNK_TOKENS)
    chunk_metrics: str | None = None  # and where its chunks' figures go (CHUNK_METRICS)

    def partitions(self) -> list[SnapshotChunk]:
        if self.chunks is not None:  # planned by backfill(): one task a chunk
            lsn = str(_opt(self.options, "snapshotLsn"))
            return [SnapshotChunk(token, lsn, chunk) for chunk, token in self.chunks]
        options = {k: v for k, v in self.options.items() if str(k).lower() != "numpartitions"}
        options["numPartitions"] = str(self.num_partitions)
        lsn, tokens = plan_snapshot(options, 0)
        return [SnapshotChunk(token, lsn) for token in tokens]

    def read(self, partition: SnapshotChunk) -> Iterator:
        lsn = partition.lsn.encode()

        def open_stream(lib, out, opts, token, err):
            return lib.mcdc_snapshot_read(out, opts, token, lsn, err)
        batches = _read_tokens(self.options, [partition.token], open_stream)
        if partition.chunk is None:
            return _batches(_arrow_target(self.schema), batches)
        batches = _batches(_arrow_target(self.schema), _with_chunk(batches, partition.chunk))
        if self.chunk_metrics:
            from ._spark_metrics import measured_chunk
            return measured_chunk(self.chunk_metrics, partition.chunk, batches)
        return batches


def _with_chunk(batches, chunk: int) -> Iterator:
    """Each batch with ``_chunk`` = chunk appended (one Arrow column, no row
    through Python)."""
    import pyarrow as pa
    for batch in batches:
        yield batch.append_column(pa.field("_chunk", pa.int32()),
                                  pa.repeat(pa.scalar(chunk, pa.int32()), batch.num_rows))


def plan_snapshot(options: Mapping[str, Any], chunk_rows: int) -> tuple[str, list[str]]:
    """The library's snapshot plan of the table (mcdc_snapshot_plan_create):
    the LSN it recorded first and the chunks' tokens in key order; chunk_rows
    0 cuts numPartitions ranges for one whole read, more cuts chunks of at
    most about that many rows on the extent read now (a backfill cuts its
    plan on the open's: plan_from_extent)."""
    from . import _native
    from ._cfg import Error
    from ._core import Options, check

    lib = _native.lib()
    opts = Options(options)
    plan = ctypes.c_void_p()
    try:
        err = Error()
        check(lib.mcdc_snapshot_plan_create(ctypes.byref(plan), opts.handle, int(chunk_rows),
                                            ctypes.byref(err)), err)
        return (lib.mcdc_snapshot_plan_lsn(plan).decode(),
                [lib.mcdc_snapshot_plan_token(plan, i).decode()
                 for i in range(lib.mcdc_snapshot_plan_count(plan))])
    finally:
        lib.mcdc_snapshot_plan_free(plan)
        opts.free()


def plan_chunks(options: Mapping[str, Any], keys: list[str], chunks: list[list[Any]],
                max_bound: Any = None) -> list[str]:
    """Tokens for a plan recorded before (mcdc_snapshot_plan_chunks): its
    ``chunks`` ([lo, hi] each) cut on ``keys``, which must be the snapshot's
    key for ``options``; ``max_bound`` (a keyset plan's largest key when it
    was planned): a last chunk open above ends again at the first key after
    it now."""
    import json

    from . import _native
    from ._cfg import Error
    from ._core import Options, check

    lib = _native.lib()
    opts = Options(options)
    plan = ctypes.c_void_p()
    try:
        err = Error()
        check(lib.mcdc_snapshot_plan_chunks(
            ctypes.byref(plan), opts.handle, json.dumps(keys).encode(),
            json.dumps(chunks).encode(),
            None if max_bound is None else json.dumps(max_bound).encode(), ctypes.byref(err)), err)
        return [lib.mcdc_snapshot_plan_token(plan, i).decode()
                for i in range(lib.mcdc_snapshot_plan_count(plan))]
    finally:
        lib.mcdc_snapshot_plan_free(plan)
        opts.free()


def plan_from_extent(options: Mapping[str, Any], keys: list[str] | None, extent: Any,
                     chunk_rows: int) -> tuple[list[str], Any, list[str]]:
    """A chunked snapshot's plan as the CLI opens and plans one
    (mcdc_snapshot_plan_from_extent): on ``extent`` (the one an open
    recorded, cut on ``keys``, which must be the snapshot's key for
    ``options``), or, both None, on the extent read now; chunk_rows > 0 cuts
    chunks of at most about that many rows, 0 none (an open's: the extent
    only). The key columns, the extent and the chunks' tokens."""
    import json

    from . import _native
    from ._cfg import Error
    from ._core import Options, check

    lib = _native.lib()
    opts = Options(options)
    plan = ctypes.c_void_p()
    try:
        err = Error()
        given = keys is not None
        check(lib.mcdc_snapshot_plan_from_extent(
            ctypes.byref(plan), opts.handle, json.dumps(keys).encode() if given else None,
            json.dumps(extent).encode() if given else None, int(chunk_rows),
            ctypes.byref(err)), err)
        tokens = [lib.mcdc_snapshot_plan_token(plan, i).decode()
                  for i in range(lib.mcdc_snapshot_plan_count(plan))]
        return (list(json.loads(tokens[0])["keys"]),
                json.loads(lib.mcdc_snapshot_plan_extent(plan).decode()), tokens)
    finally:
        lib.mcdc_snapshot_plan_free(plan)
        opts.free()


def _session_cores(spark) -> int | None:
    try:
        return int(spark.sparkContext.defaultParallelism)
    except Exception:  # noqa: BLE001 - Spark Connect has no SparkContext: the option decides
        return None


def register(spark) -> None:
    """Registers ``format("mssql_cdc")`` and ``format("mssql_cdc_snapshot")``
    on a SparkSession. ``numPartitions`` 'auto' means this session's cores,
    taken here (the driver-side worker that plans has no session) and
    carried by a registered subclass (pickled by value; its base by
    reference, so the package must be installed on every node)."""
    cores = _session_cores(spark)
    for base in (MssqlCdcDataSource, MssqlCdcSnapshotDataSource):
        spark.dataSource.register(type(base.__name__, (base,), {"default_num_partitions": cores}))
