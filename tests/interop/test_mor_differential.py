"""Merge-on-read against copy-on-write over many passes.

One bronze, two silvers: one created with --deletion-vectors (merged on
read), one copy-on-write. Twelve change sets (updates as CDC writes them, a
before and an after image; inserts; deletes; keys deleted and inserted
again; updates of keys that are gone) are applied to both, pass by pass, with
small files so that files gain deletion vectors, merge-on-read files pile
up, the fold policy sends some passes copy-on-write, and the log passes a
checkpoint (version 10). After every pass the two silvers hold the same
rows (read by mssql-cdc), and at the end DuckDB and delta-rs read the same
rows from both. The two paths share the ranking and silver_decide; what this
checks is everything after: the join, the deletion vectors, the fold and
the checkpoint of re-added files.
"""
import json
import os
import random
import subprocess

import pyarrow as pa
from deltalake import write_deltalake

from conftest import CLI, duckdb_with_delta
from workload import delta_rows

CI = "dbo_orders"
S = 1000  # the snapshot's LSN; changes come after it
ROWS = 40000
CHANGES = 4000
ROUNDS = 12
FILE_ROWS = 8000


def lsn(n):
    return "0x%020X" % n


def bronze(rows):
    """rows: (key, op, lsn, seqval or None, name) tuples, in commit order."""
    n = len(rows)
    snap = [r[3] is None for r in rows]
    return pa.table({
        "_capture_instance": pa.array([CI] * n),
        "_start_lsn": pa.array([lsn(r[2]) for r in rows]),
        "_seqval": pa.array([None if r[3] is None else lsn(r[3]) for r in rows], pa.string()),
        "_operation": pa.array([r[1] for r in rows], pa.int32()),
        "_command_id": pa.array([None if s else 1 for s in snap], pa.int32()),
        "_commit_ts": pa.array([1_700_000_000_000_000 + r[2] * 1000 for r in rows],
                               pa.timestamp("us")),
        "id": pa.array([r[0] for r in rows], pa.int64()),
        "name": pa.array([r[4] for r in rows], pa.string()),
        "qty": pa.array([r[0] % 1000 for r in rows], pa.int32()),
        "_batch_id": pa.array([None if s else 0 for s in snap], pa.int32()),
        "_snapshot": pa.array([lsn(S) if s else None for s in snap], pa.string()),
        "_chunk": pa.nulls(n, pa.int32()),
    })


def change_set(rng, first_lsn, round_):
    """CHANGES changes, four a commit: 60% updates (a 3 then a 4 of one
    seqval), 20% inserts, 20% deletes, over keys 0 .. 2 * ROWS (some gone,
    some never there): silver_decide's every case."""
    out = []
    inserted = set()  # keys this set inserted and has not deleted since
    for i in range(CHANGES):
        k = rng.randrange(2 * ROWS)
        commit, seq = first_lsn + i // 4, first_lsn * 10 + i
        r = rng.random()
        name = f"r{round_}-{i}"
        if r < 0.6:
            out.append((k, 3, commit, seq, "before"))
            out.append((k, 4, commit, seq, name))
        elif r < 0.8:
            # a unique key is deleted before it is inserted again (apply refuses two
            # inserts with nothing between: exit 21)
            if k in inserted:
                out.append((k, 1, commit, seq, "deleted"))
            out.append((k, 2, commit, seq, name))
            inserted.add(k)
        else:
            out.append((k, 1, commit, seq, "deleted"))
            inserted.discard(k)
    return out


def apply(d, mor):
    target = "silver_mor" if mor else "silver"
    p = subprocess.run([CLI, "apply", "--bronze", f"{d}/bronze", "--target", f"{d}/{target}",
                        "--control-table", f"{d}/control_{target}", "--capture-instance", CI,
                        "--keys", "id", "--file-rows", str(FILE_ROWS), "--verbose",
                        *(["--deletion-vectors"] if mor else [])],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout), p.stderr


def ours(path):
    p = subprocess.run([CLI, "table-rows", path], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    return sorted(p.stdout.splitlines())


def dv_files(path):
    """The live adds that carry a deletion vector."""
    live = {}
    log = os.path.join(path, "_delta_log")
    for name in sorted(os.listdir(log)):
        if not name.endswith(".json"):
            continue
        acts = [json.loads(line) for line in open(os.path.join(log, name))]
        # a re-added file is removed and added in one commit: removes first
        for a in acts:
            if "remove" in a:
                live.pop(a["remove"]["path"], None)
        for a in acts:
            if "add" in a:
                live[a["add"]["path"]] = a["add"].get("deletionVector")
    return sum(1 for dv in live.values() if dv)


def test_merge_on_read_equals_copy_on_write_pass_by_pass(workdir):
    d = str(workdir)
    rng = random.Random(20261201)
    write_deltalake(f"{d}/bronze", bronze([(2 * k, 0, S, None, f"s{k}") for k in range(ROWS)]))
    for mor in (False, True):
        res, _ = apply(d, mor)
        assert res["rebuilt"] is True
    on_read = folded = 0
    most_dvs = 0
    for r in range(ROUNDS):
        write_deltalake(f"{d}/bronze", bronze(change_set(rng, S + 1 + r * CHANGES, r)),
                        mode="append")
        cow, _ = apply(d, False)
        mor, log = apply(d, True)
        on_read += "merged on read" in log
        folded += "merging copy-on-write" in log
        for key in ("inserted", "updated", "deleted", "applied_lsn"):
            assert mor[key] == cow[key], (r, key, mor, cow)
        assert ours(f"{d}/silver_mor") == ours(f"{d}/silver"), f"pass {r}"
        most_dvs = max(most_dvs, dv_files(f"{d}/silver_mor"))
    # the passes took both paths, deletion vectors were live, the log was checkpointed
    assert on_read >= 1 and folded >= 1, (on_read, folded)
    assert most_dvs >= 2
    assert os.path.exists(f"{d}/silver_mor/_delta_log/00000000000000000010.checkpoint.parquet")
    cols = ["id", "name", "qty", "_start_lsn"]
    con = duckdb_with_delta()
    q = "SELECT id, name, qty, _start_lsn FROM delta_scan('{}') ORDER BY id"
    want = con.execute(q.format(f"{d}/silver")).fetchall()
    assert con.execute(q.format(f"{d}/silver_mor")).fetchall() == want
    assert sorted(tuple(x[c] for c in cols) for x in delta_rows(f"{d}/silver_mor", cols)) == want
