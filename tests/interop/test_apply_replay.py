"""A rebuild whose bronze is already in key order (a snapshot's files, their
key ranges one after another) is not sorted: pass 2 reads the key and
bronze's own columns, the sorter checks the order and holds nothing, and the
merge reads bronze again. Files whose statistics say so but whose rows are
not in order are sorted after all; files whose key ranges overlap are
sorted from the start. Files whose key ranges stand apart are read in the
order of their ranges, whatever their order in the log: a snapshot on two
connections writes each reader's rows into files of their own. Each gives
the silver of the rows, the latest per key, the same as the other ways."""
import glob
import os
import random

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

import pyarrow.parquet as pq

from conftest import run_cli, start_sim

CI = "dbo_orders"
SNAP = "0x%020X" % 1000


def snapshot_rows(ids):
    """Snapshot rows of the ids, in the order given (bronze's columns)."""
    n = len(ids)
    return pa.table({
        "_capture_instance": pa.array([CI] * n),
        "_start_lsn": pa.array([SNAP] * n),
        "_seqval": pa.nulls(n, pa.string()),
        "_operation": pa.array([0] * n, pa.int32()),
        "_command_id": pa.nulls(n, pa.int32()),
        "_commit_ts": pa.array([1_700_000_000_000_000] * n, pa.timestamp("us")),
        "id": pa.array(ids, pa.int64()),
        "name": pa.array([f"name-{i}" * (1 + i % 3) for i in ids]),
        "qty": pa.array([i % 1000 for i in ids], pa.int32()),
        "_batch_id": pa.nulls(n, pa.int32()),
        "_snapshot": pa.array([SNAP] * n),
        "_chunk": pa.nulls(n, pa.int32()),
    })


def rebuild(d, *files):
    """bronze of the files (one write each), applied into a new silver with
    a 1 MB budget; the apply's stderr."""
    for i, ids in enumerate(files):
        write_deltalake(f"{d}/bronze", snapshot_rows(ids), mode="append" if i else "overwrite")
    p = run_cli("apply", "--bronze", f"{d}/bronze", "--target", f"{d}/silver", "--control-table",
                f"{d}/control", "--capture-instance", CI, "--keys", "id", "--memory-mb", "1",
                "--verbose")
    got = DeltaTable(f"{d}/silver").to_pyarrow_table().sort_by("id")
    want = sorted(i for ids in files for i in ids)
    assert got.column("id").to_pylist() == want
    assert got.column("name").to_pylist() == [f"name-{i}" * (1 + i % 3) for i in want]
    assert got.column("qty").to_pylist() == [i % 1000 for i in want]
    return p.stderr


def ranked(err):
    """The rebuild's line of what pass 2 ranked (later passes rank nothing)."""
    lines = [x for x in err.splitlines() if " rows to rank in " in x and " 0 rows to rank" not in x]
    assert len(lines) == 1, err
    return lines[0]


def test_a_bronze_in_key_order_is_read_again_not_spilled(workdir):
    err = rebuild(workdir, list(range(0, 120_000, 2)))
    line = ranked(err)
    assert "60000 rows to rank" in line and "(0 runs spilled" in line, line
    assert "0.0 of 1 MB held at most" in line, line
    assert "out of key order" not in err, err


def test_rows_out_of_order_in_files_whose_ranges_ascend_are_sorted(workdir):
    ids = list(range(0, 120_000, 2))
    random.Random(5).shuffle(ids)
    err = rebuild(workdir, ids)
    assert "rows out of key order though the files' key ranges ascend" in err, err
    assert "(0 runs spilled" not in ranked(err), err


def test_files_whose_key_ranges_overlap_are_sorted(workdir):
    err = rebuild(workdir, list(range(0, 60_000, 2)), list(range(1, 60_000, 2)))
    assert "out of key order" not in err and "(0 runs spilled" not in ranked(err), err


def test_files_apart_in_another_order_than_their_ranges_are_read_in_key_order(workdir):
    err = rebuild(workdir, list(range(40_000, 80_000, 2)), list(range(0, 40_000, 2)),
                  list(range(80_000, 120_000, 2)))
    line = ranked(err)
    assert "60000 rows to rank" in line and "(0 runs spilled" in line, line
    assert "out of key order" not in err, err


def test_files_apart_whose_rows_are_not_in_order_are_sorted(workdir):
    ids = list(range(0, 40_000, 2))
    random.Random(7).shuffle(ids)
    err = rebuild(workdir, list(range(40_000, 80_000, 2)), ids)
    assert "rows out of key order though the files' key ranges ascend" in err, err
    assert "(0 runs spilled" not in ranked(err), err


def test_a_snapshot_on_two_connections_is_rebuilt_without_sorting(workdir):
    """Each reader's rows go to files of their own, so the files' key
    ranges stand apart and each file is in key order; the rebuild reads
    them in key order and sorts nothing."""
    sim = start_sim(workdir)
    try:
        sim.run("CREATE DATABASE shop;")
        sim.run("CREATE TABLE dbo.t (id INT NOT NULL PRIMARY KEY, a INT NULL, b NVARCHAR(40) NULL);",
                database="shop")
        sim.run("EXEC sim.bulk_load_table @table = N'dbo.t', @rows = 200000, @seed = 3;",
                database="shop")
        sim.run("EXEC sys.sp_cdc_enable_db; EXEC sys.sp_cdc_enable_table @source_schema = N'dbo',"
                " @source_name = N't', @role_name = NULL;", database="shop")
        bronze = os.path.join(workdir, "bronze")
        p = run_cli("snapshot", "--captureInstance", "dbo_t", "--connectionString",
                    sim.connection_string("shop"), "--target", bronze, "--numPartitions", "2",
                    "--verbose")
        assert "on 2 connections" in p.stderr, p.stderr
    finally:
        sim.stop()
    spans = []
    for f in glob.glob(os.path.join(bronze, "*.parquet")):
        ids = pq.read_table(f, columns=["id"]).column("id").to_pylist()
        assert ids == sorted(ids), f
        spans.append((ids[0], ids[-1]))
    spans.sort()
    assert len(spans) >= 2 and all(a[1] < b[0] for a, b in zip(spans, spans[1:])), spans
    p = run_cli("apply", "--bronze", bronze, "--target", f"{workdir}/silver", "--control-table",
                f"{workdir}/control", "--capture-instance", "dbo_t", "--keys", "id",
                "--memory-mb", "1", "--verbose")
    line = ranked(p.stderr)
    assert "200000 rows to rank" in line and "(0 runs spilled" in line, line
    assert "out of key order" not in p.stderr, p.stderr
    got = DeltaTable(f"{workdir}/silver").to_pyarrow_table().sort_by("id")
    want = pa.concat_tables([pq.read_table(f, columns=["id", "a", "b"])
                             for f in glob.glob(os.path.join(bronze, "*.parquet"))]).sort_by("id")
    assert got.select(["id", "a", "b"]).equals(want)
