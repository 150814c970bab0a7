"""`mssql-cdc apply` runs for the silver tests, and the check that silver
equals the source table, read through delta-rs, DuckDB and (given a session)
Spark.

Silver holds one row per key: the captured columns, _start_lsn and
_commit_ts. It equals the source read through pymssql row for row, every
column, once the stream has read every change and apply has applied it.
"""
import json
import os
import signal
import subprocess

from conftest import CLI, duckdb_with_delta, run_cli
from workload import DB, _order, delta_rows, source_rows


def silver_of(job):
    return os.path.join(job.dir, "silver")


def apply_args(job, *extra, silver=None, keys=None):
    a = ["apply", "--captureInstance", job.spec.capture_instance,
         "--connectionString", job.sim.connection_string(DB),
         "--bronze", job.bronze, "--target", silver or silver_of(job),
         "--control-table", job.control, "--facts-table", job.facts,
         "--granularity", "minute", *extra]
    if keys:
        a += ["--keys", json.dumps(list(keys))]
    return a


def apply(job, *extra, env=None, silver=None, keys=None, check=True, timeout=180):
    """One apply run: its ApplyResult (the last JSON line of stdout)."""
    p = run_cli(*apply_args(job, *extra, silver=silver, keys=keys), env=env, check=False,
                timeout=timeout)
    if not check:
        return p
    assert p.returncode == 0, f"apply exited {p.returncode}:\n{p.stdout}\n{p.stderr}"
    lines = [ln for ln in p.stdout.splitlines() if ln.strip()]
    res = json.loads(lines[-1])
    assert set(res) >= {"rebuilt", "applied_lsn", "finalized_until", "bronze_found"}, res
    return res


def spawn_apply(job, *extra, env=None, silver=None):
    e = dict(os.environ)
    if env:
        e.update(env)
    return subprocess.Popen([CLI, *apply_args(job, *extra, silver=silver)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=e)


def wait_killed(proc, timeout=120):
    out, err = proc.communicate(timeout=timeout)
    assert proc.returncode == -signal.SIGKILL, (proc.returncode, err[-2000:])
    return err


def _norm(v):
    return bytes(v) if isinstance(v, (bytearray, memoryview)) else v


def _sorted(spec, rows):
    idx = [spec.column_names.index(k) for k in spec.keys]
    return sorted((tuple(_norm(v) for v in r) for r in rows),
                  key=lambda r: _order(spec.fold(tuple(r[i] for i in idx))))


def silver_rows(spec, silver, reader="delta-rs", spark=None):
    """silver's captured columns, row tuples in key order, read by reader."""
    cols = spec.column_names
    if not os.path.exists(os.path.join(silver, "_delta_log")):
        return []
    if reader == "delta-rs":
        rows = [tuple(r[c] for c in cols) for r in delta_rows(silver, cols)]
    elif reader == "duckdb":
        q = ", ".join('"' + c + '"' for c in cols)
        rows = duckdb_with_delta().execute(f"SELECT {q} FROM delta_scan('{silver}')").fetchall()
    elif reader == "spark":
        rows = [tuple(r) for r in spark.read.format("delta").load(silver).select(*cols).collect()]
    else:
        raise ValueError(reader)
    return _sorted(spec, rows)


def _diff(spec, want, got, label):
    idx = [spec.column_names.index(k) for k in spec.keys]
    w = {tuple(r[i] for i in idx): r for r in want}
    g = {}
    doubled = []
    for r in got:
        k = tuple(r[i] for i in idx)
        if k in g:
            doubled.append(k)
        g[k] = r
    missing = sorted(set(w) - set(g), key=_order)[:5]
    extra = sorted(set(g) - set(w), key=_order)[:5]
    differ = [k for k in w if k in g and w[k] != g[k]][:5]
    return (f"{label}: source {len(want)} rows, silver {len(got)}; doubled {doubled[:5]}, "
            f"missing {missing}, extra {extra}, differ "
            + "; ".join(f"{k}: {w[k]} != {g[k]}" for k in differ))


def assert_silver_equals_source(job, silver=None, spark=None, readers=("delta-rs", "duckdb")):
    """silver, read by each reader, equals the source table row for row, with
    no key twice. Returns the row count."""
    silver = silver or silver_of(job)
    want = source_rows(job.sim, job.spec)
    for reader in (*readers, *(("spark",) if spark is not None else ())):
        got = silver_rows(job.spec, silver, reader, spark)
        assert got == want, _diff(job.spec, want, got, reader)
    return len(want)


def assert_merged_over(job, spec, since_lsn, deleted, marked):
    """After another writer deleted the keys `deleted` of silver and set
    note = 'by hand' on the keys `marked`, and apply ran over changes after
    since_lsn: a key changed since is the source's again, one not changed
    keeps what the other writer did."""
    changed = {b["id"] for b in delta_rows(job.bronze, ["id", "_start_lsn", "_operation"])
               if b["_operation"] != 0 and b["_start_lsn"] > since_lsn}
    src = {row[0]: row for row in source_rows(job.sim, spec)}
    got = {}
    for row in delta_rows(silver_of(job), spec.column_names):
        assert row["id"] not in got, f"key {row['id']} twice in silver"
        got[row["id"]] = tuple(row[c] for c in spec.column_names)
    assert changed & (deleted | marked), "the workload touched none of the other writer's rows"
    note = spec.column_names.index("note")
    for k in set(src) | set(got):
        if k in changed or (k not in deleted and k not in marked):
            assert got.get(k) == src.get(k), (k, got.get(k), src.get(k))
        elif k in deleted:
            assert k not in got, k
        else:
            assert got[k][note] == "by hand" and got[k][:note] == src[k][:note], k
    return got


def control_row(job, table):
    rows = [r for r in delta_rows(job.control) if r["table_name"] == table]
    assert len(rows) <= 1, rows
    return rows[0] if rows else None


def silver_commits(silver):
    """silver's commits by apply: (version, operation, txn version)."""
    out = []
    log = os.path.join(silver, "_delta_log")
    for name in sorted(os.listdir(log)):
        if not name.endswith(".json"):
            continue
        txn = op = None
        with open(os.path.join(log, name)) as f:
            for line in f:
                a = json.loads(line)
                if "txn" in a and a["txn"]["appId"] == "mssql-cdc.apply":
                    txn = a["txn"]["version"]
                if "commitInfo" in a:
                    op = a["commitInfo"].get("operation")
        out.append((int(name[:20]), op, txn))
    return out


def merge_commits(silver):
    """silver's MERGE commits: (commitInfo, the paths added, the paths removed)."""
    out = []
    log = os.path.join(silver, "_delta_log")
    for name in sorted(os.listdir(log)):
        if not name.endswith(".json"):
            continue
        with open(os.path.join(log, name)) as f:
            actions = [json.loads(line) for line in f if line.strip()]
        ci = next((a["commitInfo"] for a in actions if "commitInfo" in a), {})
        if ci.get("operation") == "MERGE":
            out.append((ci, [a["add"] for a in actions if "add" in a],
                        [a["remove"] for a in actions if "remove" in a]))
    return out
