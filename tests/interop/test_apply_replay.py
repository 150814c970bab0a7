"""A rebuild whose bronze is already in key order (a snapshot's files, their
key ranges one after another) is not sorted: pass 2 reads the key and
bronze's own columns, the sorter checks the order and holds nothing, and the
merge reads bronze again. Files whose statistics say so but whose rows are
not in order are sorted after all; files whose key ranges overlap are
sorted from the start. Each gives the silver of the rows, the latest per
key, the same as the other ways."""
import random

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

from conftest import run_cli

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
