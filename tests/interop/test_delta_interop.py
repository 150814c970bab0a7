"""Delta tables written by our log writer, read by deltalake (delta-rs) and DuckDB;
tables written by deltalake, read by our log replay.

Data files are written with pyarrow here (our Parquet writer is a separate module);
the Delta log (create, add actions with our stats, txn) is written by libmssqlcdc
through tests/tools/delta_tool.c.

Run: .venv/bin/python -m pytest tests/interop/test_delta_interop.py
"""
import datetime as dt
import decimal
import json
import os
import subprocess
import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

deltalake = pytest.importorskip("deltalake")
from conftest import CC, link_libs

ROOT = Path(__file__).resolve().parents[2]
TOOL = ROOT / "build" / "delta_tool"


@pytest.fixture(scope="session")
def tool():
    subprocess.run(["make", "-s", "build/libmssqlcdc.a"], cwd=ROOT, check=True)
    subprocess.run(
        [*CC, "-Iinclude",
         "-Isrc/util", "-Isrc/storage", "-Isrc/batch", "-Isrc/delta", "tests/tools/delta_tool.c",
         "build/libmssqlcdc.a", *link_libs(), "-o", str(TOOL)],
        cwd=ROOT, check=True)

    def run(*args, ok=True):
        argv = [str(TOOL)] + [a if isinstance(a, str) else json.dumps(a) for a in args]
        p = subprocess.run(argv, capture_output=True, text=True)
        out = json.loads(p.stdout) if p.stdout.strip() else {}
        if ok:
            assert p.returncode == 0, (argv, p.stdout, p.stderr)
        return out
    return run


SCHEMA = {"type": "struct", "fields": [
    {"name": "id", "type": "long", "nullable": False, "metadata": {"comment": "key"}},
    {"name": "name", "type": "string", "nullable": True, "metadata": {}},
    {"name": "ts", "type": "timestamp", "nullable": True, "metadata": {}},
    {"name": "amount", "type": "decimal(19,4)", "nullable": True, "metadata": {}},
    {"name": "day", "type": "date", "nullable": True, "metadata": {}},
]}

ARROW = pa.schema([
    pa.field("id", pa.int64(), nullable=False),
    pa.field("name", pa.string()),
    pa.field("ts", pa.timestamp("us", tz="UTC")),
    pa.field("amount", pa.decimal128(19, 4)),
    pa.field("day", pa.date32()),
])

EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)


def _us(t):
    return (t - EPOCH) // dt.timedelta(microseconds=1)


def write_batch(table_dir, tool, first_id, n, long_names=False):
    """Writes one Parquet file with pyarrow; returns the add action (with our stats)."""
    ids = list(range(first_id, first_id + n))
    names = [("x" * 40 + str(i)) if long_names else f"name-{i}" for i in ids]
    names[0] = None  # one null
    base = dt.datetime(2024, 5, 1, 12, 0, 0, 123456, tzinfo=dt.timezone.utc)
    ts = [base + dt.timedelta(seconds=i, microseconds=i) for i in ids]
    amounts = [decimal.Decimal(i) / 100 for i in ids]
    days = [dt.date(2024, 1, 1) + dt.timedelta(days=i) for i in ids]
    t = pa.table([ids, names, ts, amounts, days], schema=ARROW)
    name = f"part-{first_id:05d}-{uuid.uuid4()}.c000.snappy.parquet"
    path = Path(table_dir) / name
    pq.write_table(t, path)
    present = [x for x in names if x is not None]
    stats = tool("stats", {
        "schema": SCHEMA, "num_records": n,
        "cols": [
            {"min": min(ids), "max": max(ids), "nulls": 0},
            {"min": min(present), "max": max(present), "nulls": 1},
            {"min": _us(min(ts)), "max": _us(max(ts)), "nulls": 0},
            {"min": str(int(min(amounts) * 10000)), "max": str(int(max(amounts) * 10000)),
             "nulls": 0},
            {"min": (min(days) - dt.date(1970, 1, 1)).days,
             "max": (max(days) - dt.date(1970, 1, 1)).days, "nulls": 0},
        ]})
    st = path.stat()
    return {"path": name, "size": st.st_size, "modificationTime": int(st.st_mtime * 1000),
            "stats": json.dumps(stats)}, t


def test_our_log_read_by_deltalake(tmp_path, tool):
    tdir = tmp_path / "orders"
    r = tool("create", str(tdir), {"schema": SCHEMA,
                                   "configuration": {"mssql_cdc.schema_version": "1"}})
    assert r == {"version": 0, "skipped": False}
    expected = []
    for batch in (1, 2, 3):
        add, t = write_batch(tdir, tool, batch * 100, 10, long_names=(batch == 3))
        r = tool("append", str(tdir), {"adds": [add], "app_id": "stream-a", "txn": batch,
                                       "user_metadata": json.dumps({"batch": batch})})
        assert r["version"] == batch and not r["skipped"]
        expected.append(t)
    # replaying batch 2 (a restart after a crash) writes nothing
    add, _ = write_batch(tdir, tool, 200, 10)
    r = tool("append", str(tdir), {"adds": [add], "app_id": "stream-a", "txn": 2})
    assert r["skipped"] and r["version"] == 3

    table = deltalake.DeltaTable(str(tdir))
    assert table.version() == 3
    assert table.transaction_version("stream-a") == 3
    got = table.to_pyarrow_table().sort_by("id")
    want = pa.concat_tables(expected).sort_by("id")
    assert got.num_rows == 30  # the skipped replay added no rows
    assert got.column("id").to_pylist() == want.column("id").to_pylist()
    assert got.column("name").to_pylist() == want.column("name").to_pylist()
    assert got.column("ts").to_pylist() == want.column("ts").to_pylist()
    assert got.column("amount").to_pylist() == want.column("amount").to_pylist()
    assert got.column("day").to_pylist() == want.column("day").to_pylist()
    md = table.metadata()
    assert md.configuration["mssql_cdc.schema_version"] == "1"
    assert table.schema().fields[0].metadata.get("comment") == "key"
    hist = table.history()
    assert len(hist) == 4
    by_version = {h["version"]: h for h in hist}
    assert by_version[2]["operation"] == "WRITE"
    assert json.loads(by_version[2]["userMetadata"]) == {"batch": 2}
    # Stats drive file skipping: filters at the edges must still find the rows
    # (a too-low max, e.g. a truncated string or a ms-truncated timestamp, would
    # silently skip a file).
    ds = table.to_pyarrow_dataset()
    import pyarrow.compute as pc
    last_long = "x" * 40 + "309"
    assert ds.to_table(filter=pc.field("name") == last_long).num_rows == 1
    ts_max = want.column("ts").to_pylist()[-1]
    assert ds.to_table(filter=pc.field("ts") == ts_max).num_rows == 1
    assert ds.to_table(filter=pc.field("id") == 309).num_rows == 1
    adds = pa.table(table.get_add_actions(flatten=True)).to_pydict()
    assert max(adds["max.id"]) == 309 and min(adds["min.id"]) == 100
    assert min(adds["null_count.name"]) == 1
    assert sorted(adds["num_records"]) == [10, 10, 10]
    # our replay agrees
    snap = tool("snapshot", str(tdir), "-1", "stream-a")
    assert snap["version"] == 3 and snap["txn"] == 3 and snap["records"] == 30
    assert sorted(f["path"] for f in snap["files"]) == sorted(
        os.path.basename(u) for u in table.file_uris())
    assert snap["verify"] == "ok"
    ci = tool("commitinfo", str(tdir), "2", "stream-a")
    assert json.loads(ci["userMetadata"]) == {"batch": 2} and ci["txn"] == 2
    # as of version 1
    assert deltalake.DeltaTable(str(tdir), version=1).to_pyarrow_table().num_rows == 10
    assert len(tool("snapshot", str(tdir), "1")["files"]) == 1


def test_schema_evolution_and_remove_read_by_deltalake(tmp_path, tool):
    tdir = tmp_path / "evolve"
    tool("create", str(tdir), {"schema": SCHEMA})
    add1, t1 = write_batch(tdir, tool, 1, 5)
    tool("append", str(tdir), {"adds": [add1]})
    evolved = json.loads(json.dumps(SCHEMA))
    evolved["fields"].append({"name": "note", "type": "string", "nullable": True,
                              "metadata": {}})
    t2 = pa.table({"id": pa.array([100], pa.int64()), "name": ["n"],
                   "ts": pa.array([None], pa.timestamp("us", tz="UTC")),
                   "amount": pa.array([None], pa.decimal128(19, 4)),
                   "day": pa.array([None], pa.date32()), "note": ["hello"]},
                  schema=ARROW.append(pa.field("note", pa.string())))
    pq.write_table(t2, tdir / "evolved.parquet")
    st = (tdir / "evolved.parquet").stat()
    r = tool("append", str(tdir), {"adds": [{"path": "evolved.parquet", "size": st.st_size,
                                             "modificationTime": int(st.st_mtime * 1000)}],
                                   "schema": evolved})
    assert r["version"] == 2
    got = deltalake.DeltaTable(str(tdir)).to_pyarrow_table().sort_by("id")
    assert got.column_names[-1] == "note"
    assert got.column("note").to_pylist() == [None] * 5 + ["hello"]
    # a rewrite: remove the first file
    r = tool("append", str(tdir), {"removes": [{"path": add1["path"], "size": add1["size"]}],
                                   "operation": "DELETE"})
    table = deltalake.DeltaTable(str(tdir))
    assert table.to_pyarrow_table().column("id").to_pylist() == [100]
    assert tool("snapshot", str(tdir))["tombstones"] == 1


def test_ntz_table_read_by_deltalake(tmp_path, tool):
    tdir = tmp_path / "ntz"
    schema = {"type": "struct", "fields": [
        {"name": "id", "type": "integer", "nullable": True, "metadata": {}},
        {"name": "local", "type": "timestamp_ntz", "nullable": True, "metadata": {}}]}
    tool("create", str(tdir), {"schema": schema})
    t = pa.table({"id": pa.array([1, 2], pa.int32()),
                  "local": pa.array([dt.datetime(2024, 1, 1, 8, 0, 0, 1),
                                     dt.datetime(2024, 1, 2, 9, 30)], pa.timestamp("us"))})
    pq.write_table(t, tdir / "a.parquet")
    stats = tool("stats", {"schema": schema, "num_records": 2, "cols": [
        {"min": 1, "max": 2, "nulls": 0},
        {"min": _us(dt.datetime(2024, 1, 1, 8, 0, 0, 1, tzinfo=dt.timezone.utc)),
         "max": _us(dt.datetime(2024, 1, 2, 9, 30, tzinfo=dt.timezone.utc)), "nulls": 0}]})
    assert stats["minValues"]["local"] == "2024-01-01T08:00:00.000"
    st = (tdir / "a.parquet").stat()
    tool("append", str(tdir), {"adds": [{"path": "a.parquet", "size": st.st_size,
                                         "modificationTime": int(st.st_mtime * 1000),
                                         "stats": json.dumps(stats)}]})
    table = deltalake.DeltaTable(str(tdir))
    proto = table.protocol()
    assert (proto.min_reader_version, proto.min_writer_version) == (3, 7)
    assert "timestampNtz" in proto.reader_features
    got = table.to_pyarrow_table().sort_by("id")
    assert got.column("local").to_pylist() == t.column("local").to_pylist()


def test_deltalake_tables_read_by_our_replay(tmp_path, tool):
    tdir = tmp_path / "theirs"
    data = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "s": ["a", "b", None],
                     "d": pa.array([decimal.Decimal("1.50"), None, decimal.Decimal("-2.25")],
                                   pa.decimal128(10, 2)),
                     "ts": pa.array([0, 1, 2], pa.timestamp("us", tz="UTC"))})
    deltalake.write_deltalake(str(tdir), data, configuration={"delta.appendOnly": "true"})
    for _ in range(4):
        deltalake.write_deltalake(str(tdir), data, mode="append")
    table = deltalake.DeltaTable(str(tdir))
    table.create_checkpoint()
    deltalake.write_deltalake(str(tdir), data, mode="append")
    table = deltalake.DeltaTable(str(tdir))
    snap = tool("snapshot", str(tdir))
    assert snap["version"] == table.version() == 5
    assert sorted(f["path"] for f in snap["files"]) == sorted(
        os.path.relpath(u.replace("file://", ""), str(tdir)) for u in table.file_uris())
    assert json.loads(snap["schema"]) == json.loads(table.schema().to_json())
    assert snap["id"] == table.metadata().id
    assert snap["records"] == 18
    assert snap["schema_ok"] and snap["verify"] == "ok"
    # our append onto their table, read back by them
    add = {"path": "ours.parquet"}
    pq.write_table(data, tdir / "ours.parquet")
    st = (tdir / "ours.parquet").stat()
    add.update(size=st.st_size, modificationTime=int(st.st_mtime * 1000))
    r = tool("append", str(tdir), {"adds": [add], "app_id": "mcdc", "txn": 1})
    assert r["version"] == 6
    assert deltalake.DeltaTable(str(tdir)).to_pyarrow_table().num_rows == 21
    # after the old commits are gone only the checkpoint holds the state
    before = tool("snapshot", str(tdir), "-1", "mcdc")
    for v in range(0, 4):
        (tdir / "_delta_log" / f"{v:020d}.json").unlink()
    after = tool("snapshot", str(tdir), "-1", "mcdc")
    assert after == before
    assert after["txn"] == 1 and len(after["files"]) == 7
    # as of a version before the checkpoint: its commits are gone
    bad = tool("snapshot", str(tdir), "2", ok=False)
    assert bad["error"] == "corrupt" and "version 0" in bad["message"]


def test_deltalake_overwrite_and_delete_replayed(tmp_path, tool):
    tdir = tmp_path / "rewrites"
    data = pa.table({"id": pa.array(range(10), pa.int64())})
    deltalake.write_deltalake(str(tdir), data)
    deltalake.write_deltalake(str(tdir), data, mode="append")
    deltalake.write_deltalake(str(tdir), data, mode="overwrite")
    table = deltalake.DeltaTable(str(tdir))
    table.delete("id < 3")
    table = deltalake.DeltaTable(str(tdir))
    snap = tool("snapshot", str(tdir))
    assert snap["version"] == table.version()
    assert sorted(f["path"] for f in snap["files"]) == sorted(
        os.path.relpath(u.replace("file://", ""), str(tdir)) for u in table.file_uris())
    assert snap["records"] == table.to_pyarrow_table().num_rows == 7


def test_our_checkpoint_read_by_deltalake(tmp_path, tool):
    tdir = tmp_path / "ckpt"
    tool("create", str(tdir), {"schema": SCHEMA, "configuration": {"delta.checkpointInterval": "5"}})
    tables = []
    for batch in range(1, 13):
        add, t = write_batch(tdir, tool, batch * 100, 3)
        tool("append", str(tdir), {"adds": [add], "app_id": "ck", "txn": batch})
        tables.append(t)
    log = tdir / "_delta_log"
    assert (log / f"{10:020d}.checkpoint.parquet").exists()
    assert json.loads((log / "_last_checkpoint").read_text())["version"] == 10
    # pyarrow reads our nested checkpoint file as Delta's schema
    cp = pq.read_table(log / f"{10:020d}.checkpoint.parquet")
    assert set(cp.column_names) >= {"txn", "add", "remove", "metaData", "protocol"}
    rows = cp.to_pylist()
    assert sum(1 for r in rows if r["add"]) == 10
    assert [r["txn"] for r in rows if r["txn"]][0]["version"] == 10
    # drop the commits the checkpoint replaces: readers must use the checkpoint
    for v in range(0, 10):
        (log / f"{v:020d}.json").unlink()
    table = deltalake.DeltaTable(str(tdir))
    assert table.version() == 12
    assert table.transaction_version("ck") == 12
    got = table.to_pyarrow_table().sort_by("id")
    assert got.column("id").to_pylist() == pa.concat_tables(tables).sort_by("id").column("id").to_pylist()
    adds = pa.table(table.get_add_actions(flatten=True)).to_pydict()
    assert sorted(adds["num_records"]) == [3] * 12  # stats survived the checkpoint
    snap = tool("snapshot", str(tdir), "-1", "ck")
    assert snap["version"] == 12 and snap["txn"] == 12 and snap["records"] == 36


def test_our_log_read_by_duckdb(tmp_path, tool):
    from conftest import duckdb_with_delta
    con = duckdb_with_delta()
    tdir = tmp_path / "duck"
    tool("create", str(tdir), {"schema": SCHEMA})
    add, t = write_batch(tdir, tool, 1, 10)
    tool("append", str(tdir), {"adds": [add], "app_id": "a", "txn": 1})
    rows = con.execute(f"SELECT count(*), max(id) FROM delta_scan('{tdir}')").fetchone()
    assert rows == (10, 10)
