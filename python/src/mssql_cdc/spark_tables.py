"""The tables the Spark side writes (bronze, facts, control, plans), created
and appended through Spark's own Delta writer (delta-spark), so they work
wherever Spark's catalog owns the storage. Their columns, types and
``mssql_cdc.kind`` / ``mssql_cdc.schema_version`` properties are those
``mssql-cdc`` writes (docs/tables.md) and the reference stamps, so either
reads what the other wrote.

Only SQL and DataFrame calls: the same code runs on a classic session and
on Spark Connect."""
from __future__ import annotations

import json
import re
from datetime import datetime, timezone
from typing import Any

FACTS_DDL = (
    "app_id STRING, batch_id BIGINT, rows BIGINT, min_lsn STRING, max_lsn STRING, "
    "min_commit_ts TIMESTAMP_NTZ, max_commit_ts TIMESTAMP_NTZ, deletes BIGINT, inserts BIGINT, "
    "updates BIGINT, started_at TIMESTAMP_NTZ, duration_ms BIGINT, source_rtt_ms DOUBLE, "
    "read_seconds DOUBLE, read_mb DOUBLE, network_wait_ms BIGINT, "
    "retention_watermark_ts TIMESTAMP_NTZ, retention_headroom_hours DOUBLE, event STRING, "
    "lost_from_ts TIMESTAMP_NTZ, lost_to_ts TIMESTAMP_NTZ, source_max_commit_ts TIMESTAMP_NTZ, "
    "capture_lag_seconds DOUBLE, ingestion_lag_seconds DOUBLE, end_lsn STRING, "
    "end_commit_ts TIMESTAMP_NTZ, detail STRING, target STRING, written_at TIMESTAMP_NTZ")
CONTROL_DDL = (
    "table_name STRING, finalized_until TIMESTAMP_NTZ, end_lsn STRING, "
    "end_commit_ts TIMESTAMP_NTZ, updated_at TIMESTAMP_NTZ, applied_lsn STRING, "
    "snapshot_lsn STRING, open_snapshot_lsn STRING, snapshot_wave INT")
PLANS_DDL = "snapshot STRING, event STRING, detail STRING"
FACT_FIELDS = [c.split()[0] for c in FACTS_DDL.split(", ")]

# the reference 0.8.0's migration count per kind: it finds such a table current
SCHEMA_VERSION = {"bronze": 2, "facts": 14, "control": 4, "plans": 1}

_URI = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]+:/")


def is_path(table: str) -> bool:
    """A path or URI (written as delta.`<path>`), else a catalog name."""
    return table.startswith("/") or bool(_URI.match(table))


def ident(table: str) -> str:
    if is_path(table):
        return "delta.`" + table.replace("`", "``") + "`"
    return table


def utc_now() -> datetime:
    return datetime.now(timezone.utc).replace(tzinfo=None)


def _properties(spark, table: str) -> dict[str, str] | None:
    """The table's properties, or None when it is no table (yet)."""
    if not is_path(table) and not spark.catalog.tableExists(table):
        return None
    try:
        row = spark.sql(f"DESCRIBE DETAIL {ident(table)}").select("properties").first()
    except Exception:  # noqa: BLE001 - not a Delta table (yet): no directory, or no log
        if is_path(table):
            return None
        raise
    return dict((row[0] or {}) if row else {})


def exists(spark, table: str) -> bool:
    if is_path(table):
        return _properties(spark, table) is not None
    return bool(spark.catalog.tableExists(table))


def ensure(spark, table: str, kind: str, ddl: str) -> None:
    """Creates ``table`` with ``ddl``'s columns and the kind's properties
    unless it exists; an existing table of another kind is refused before
    anything is written to it. One look at the table when it exists."""
    props = _properties(spark, table)
    if props is None:
        create = (f"'mssql_cdc.kind' = '{kind}', "
                  f"'mssql_cdc.schema_version' = '{SCHEMA_VERSION[kind]}'")
        try:
            spark.sql(f"CREATE TABLE IF NOT EXISTS {ident(table)} ({ddl}) USING delta "
                      f"TBLPROPERTIES ({create})")
            return
        except Exception:
            # streams sharing a table (start_many's facts) may create it at once: the
            # loser's commit conflicts; the table the winner created is checked below
            props = _properties(spark, table)
            if props is None:
                raise
    found = props.get("mssql_cdc.kind")
    if found is not None and found != kind:
        raise ValueError(f"{table} is a {found} table (its mssql_cdc.kind property), not a {kind} "
                         f"table: give the {kind} role a table of its own")


def ddl_of(schema) -> str:
    """A Spark schema as column definitions for CREATE TABLE."""
    return ", ".join("`" + f.name.replace("`", "``") + "` " + f.dataType.simpleString()
                     for f in schema.fields)


def write(df, table: str, app_id: str | None = None, version: int | None = None,
          metadata: str | None = None, merge_schema: bool = False) -> None:
    """Appends ``df``; with ``app_id``/``version`` Delta skips a replay
    (txnAppId/txnVersion)."""
    writer = df.write.format("delta").mode("append")
    if app_id is not None:
        writer = writer.option("txnAppId", app_id).option("txnVersion", int(version or 0))
    if metadata is not None:
        writer = writer.option("userMetadata", metadata)
    if merge_schema:
        writer = writer.option("mergeSchema", "true")
    if is_path(table):
        writer.save(table)
    else:
        writer.saveAsTable(table)


def read(spark, table: str):
    return spark.read.format("delta").load(table) if is_path(table) else spark.table(table)


def facts_rows(rows: list[dict[str, Any]]) -> list[tuple]:
    unknown = sorted({k for r in rows for k in r} - set(FACT_FIELDS))
    if unknown:
        raise ValueError(f"unknown facts columns: {unknown}")
    return [tuple(r.get(k) for k in FACT_FIELDS) for r in rows]


def write_facts(spark, facts_table: str, rows: list[dict[str, Any]], app_id: str | None,
                version: int, checked: set[str] | None = None) -> None:
    """``rows`` (column -> value, the rest NULL; ``written_at`` now) in one
    commit, skipped by Delta when ``app_id`` wrote ``version`` already.
    ``checked``: tables already checked in this run (not checked again)."""
    now = utc_now()
    if checked is None or facts_table not in checked:
        ensure(spark, facts_table, "facts", FACTS_DDL)
        if checked is not None:
            checked.add(facts_table)
    df = spark.createDataFrame(facts_rows([{"written_at": now, **r} for r in rows]), FACTS_DDL)
    write(df, facts_table, app_id, version)


def metadata(facts: dict[str, Any]) -> str:
    """Facts as a commit's userMetadata (times to the millisecond)."""
    return json.dumps(facts, separators=(",", ":"),
                      default=lambda v: v.isoformat(timespec="milliseconds"))
