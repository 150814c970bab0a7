"""Silver benchmark (make bench-silver): mssql-cdc apply next to deltalake's merge.

1. rebuild: a bronze of BENCH_SILVER_ROWS snapshot rows (default 10,000,000,
   operation 0, one snapshot LSN) applied into a new silver: the full
   rebuild, ranked by key, written as key-ordered files.
2. apply: BENCH_SILVER_CHANGES change rows appended to bronze (default
   1,000,000 changes spread over the key space: 60% updates, as CDC writes
   them, a before image (3) and an after image (4) each; 20% inserts of new
   keys between the existing ones; 20% deletes), then one apply pass into
   the copy-on-write silver (apply_cow_*) and one into a silver of the same
   rebuild created with --deletion-vectors, merged on read (apply_*); then
   two more such change sets applied merge-on-read: apply_mor_steady_seconds
   is the mean of the three, any compaction they trigger included. The
   goal's figure is the whole apply process against deltalake's merge call
   alone (deltalake is handed the changes ranked), the best of two runs of
   each on the same tables (the runs listed too); apply_merge_step_* is
   our merge step alone (its --verbose line), the like-for-like part;
   apply_sort_* what its sorter did (runs spilled, merges of runs, the
   most memory it held, from the same line).
3. deltalake: the same 10M-row silver written by deltalake, and the same
   changes, ranked to their latest row per key beforehand (not timed),
   merged with DeltaTable.merge (when_matched_delete for deletes,
   when_matched_update_all, when_not_matched_insert_all).
4. flat memory: the apply of step 2 repeated on a table a tenth the size.
5. reconcile: a table of BENCH_SILVER_ROWS rows in the simulator (its bulk
   load, ten columns of the usual types), snapshotted into a bronze and
   applied into a silver of as many rows (reconcile needs the source that
   silver is of), then `mssql-cdc reconcile` twice: --sample 0 (Tier 1: one
   GROUP BY scan on each side) and --sample 1 (every bucket also compared
   row by row). reconcile_tier1_seconds is the first run;
   reconcile_tier2_rows_per_s the rows of one side over the seconds the
   second run took beyond the first (goal >= 1,000,000). BENCH_SILVER_ONLY=
   reconcile runs this step alone; BENCH_SILVER_ONLY=rebuild step 1 alone,
   BENCH_SILVER_REBUILDS times on one bronze (each line with the load).

The bronze and the changes are generated with pyarrow and written with
deltalake (the stream's bronze has the same columns). Every process is its
own, so peak RSS is each one's (os.wait4). Prints `name: value` lines and the
figures against the goals: apply_rows_per_s, apply_vs_deltalake_ratio (>= 3,
merge-on-read; apply_cow_vs_deltalake_ratio the copy-on-write figure),
apply_peak_rss_mb (<= 512, flat), rebuild_rows_per_s (>= 1,000,000),
reconcile_tier1_seconds, reconcile_tier2_rows_per_s (>= 1,000,000),
reconcile_tier2_cpu_us_per_row (this process's CPU a row a side: the figure
that load on a shared machine moves least).
"""
import json
import re
import os
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.environ.get("MCDC_BUILD", os.path.join(ROOT, "build"))
CLI = os.path.join(BUILD, "mssql-cdc")
CI = "dbo_orders"
S = 1000  # the snapshot's LSN (as a number); changes come after it


def lsn(n):
    return "0x%020X" % n


def rand_ints(pa, pc, n, hi):
    """n integers in [0, hi)."""
    return pc.cast(pc.floor(pc.multiply(pc.random(n), hi)), pa.int64())


def bronze_table(pa, pc, keys, ops, lsns, seqs, snapshot):
    """Bronze rows: the reader's columns, the captured ones, bronze's own.
    keys, ops, lsns, seqs: arrow arrays; snapshot: every row a snapshot row
    at S (operation 0)."""
    n = len(keys)
    text = pa.string()
    name = pc.binary_join_element_wise(
        "customer-", pc.cast(pc.bit_wise_and(keys, 65535), text), "#",
        pc.cast(rand_ints(pa, pc, n, 1000), text), "")
    amount = pc.cast(pc.cast(pc.subtract(rand_ints(pa, pc, n, 2 * 10**9), 10**9),
                             pa.decimal128(19, 0)), pa.decimal128(18, 4), safe=False)
    at = pc.cast(pc.add(rand_ints(pa, pc, n, 10**13), 1_700_000_000_000_000), pa.timestamp("us"))
    note = pc.if_else(pc.less(pc.random(n), 0.2), pa.scalar("note"), pa.scalar(None, text))
    commit = pc.cast(pc.add(pc.multiply(lsns, 1000), 1_700_000_000_000_000), pa.timestamp("us"))
    if snapshot:
        start = pa.repeat(pa.scalar(lsn(S)), n)
        seqval = pa.nulls(n, text)
        command = pa.nulls(n, pa.int32())
        batch = pa.nulls(n, pa.int32())
        snap = start
    else:
        start = pa.array([lsn(x) for x in lsns.to_pylist()])
        seqval = pa.array([lsn(x) for x in seqs.to_pylist()])
        command = pa.repeat(pa.scalar(1, pa.int32()), n)
        batch = pa.repeat(pa.scalar(0, pa.int32()), n)
        snap = pa.nulls(n, text)
    return pa.table({
        "_capture_instance": pa.repeat(pa.scalar(CI), n),
        "_start_lsn": start,
        "_seqval": seqval,
        "_operation": pc.cast(ops, pa.int32()),
        "_command_id": command,
        "_commit_ts": commit,
        "id": keys,
        "name": name,
        "amount": amount,
        "qty": pc.cast(rand_ints(pa, pc, n, 1000), pa.int32()),
        "at": at,
        "note": note,
        "_batch_id": batch,
        "_snapshot": snap,
        "_chunk": pa.nulls(n, pa.int32()),
    })


def write(path, table, mode="append"):
    from deltalake import write_deltalake
    write_deltalake(path, table, mode=mode)


def changes(pa, pc, rows, n_changes, rng, first_commit=S + 1):
    """n_changes changes over the keys 0, 2, 4, ... 2*(rows-1): updates (a 3
    and a 4, one seqval), inserts of odd keys next to existing ones,
    deletes; four changes a commit from first_commit on. (keys, ops, lsns,
    seqvals), in commit order."""
    existing = sorted(rng.sample(range(rows), n_changes))
    rng.shuffle(existing)
    parts = {3: [], 4: [], 2: [], 1: []}
    for i, k in enumerate(existing):
        r = rng.random()
        commit = first_commit + i // 4
        if r < 0.6:
            parts[3].append((2 * k, commit, 2 * i + 1))
            parts[4].append((2 * k, commit, 2 * i + 1))
        elif r < 0.8:
            parts[2].append((2 * k + 1, commit, 2 * i + 1))
        else:
            parts[1].append((2 * k, commit, 2 * i + 1))
    rows_ = sorted(((lsn_, seq, op, key) for op, v in parts.items() for key, lsn_, seq in v))
    keys = pa.array([r[3] for r in rows_], pa.int64())
    ops = pa.array([r[2] for r in rows_], pa.int32())
    lsns = pa.array([r[0] for r in rows_], pa.int64())
    seqs = pa.array([r[1] for r in rows_], pa.int64())
    return keys, ops, lsns, seqs


# Runs argv and reports its wall seconds and peak RSS. From a process of its
# own: a child's ru_maxrss starts at the RSS of the process that forked it
# (exec keeps the old mm's high-water mark), and this one holds the tables.
LAUNCH = """
import os, sys, time
t0 = time.monotonic()
import subprocess
p = subprocess.Popen(sys.argv[1:], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
_, status, ru = os.wait4(p.pid, 0)
secs = time.monotonic() - t0
sys.stdout.write(p.stdout.read().decode())
sys.stderr.write(p.stderr.read().decode())
print(f"@@ {os.waitstatus_to_exitcode(status)} {secs:.6f} {ru.ru_maxrss} "
      f"{ru.ru_utime + ru.ru_stime:.6f}", file=sys.stderr)
"""


def timed(argv, cpu=False):
    """Runs argv; its wall seconds, peak RSS (MB) and stdout (cpu: and its
    CPU seconds, user + system, after them; also in LAST_CPU[0], the steadier
    figure on a shared machine). The files written before it are flushed
    first, so that their writeback does not share the cores with the run."""
    os.sync()
    p = subprocess.run([sys.executable, "-c", LAUNCH, *argv], capture_output=True, text=True)
    tail = p.stderr.strip().splitlines()[-1].split()
    assert tail[0] == "@@", p.stderr
    rc, secs, rss_kb, cpu_s = int(tail[1]), float(tail[2]), int(tail[3]), float(tail[4])
    LAST_CPU[0] = cpu_s
    LAST_ERR[0] = p.stderr
    if rc != 0:
        sys.exit(f"{argv[0]} exited {rc}:\n{p.stdout}\n{p.stderr}")
    if cpu:
        return secs, rss_kb / 1024.0, p.stdout, cpu_s
    return secs, rss_kb / 1024.0, p.stdout


LAST_CPU = [0.0]
LAST_ERR = [""]


def apply_cmd(d, mor=False):
    """The apply of bronze into silver (copy-on-write), or (mor) into
    silver_mor, created merged on read (--deletion-vectors)."""
    t = "silver_mor" if mor else "silver"
    return [CLI, "apply", "--bronze", f"{d}/bronze", "--target", f"{d}/{t}",
            "--control-table", f"{d}/control_{t}", "--capture-instance", CI, "--keys", "id",
            *(["--deletion-vectors", "--verbose"] if mor else [])]


def child_deltalake(d):
    """In its own process: deltalake's merge of the ranked changes."""
    import pyarrow.parquet as pq
    from deltalake import DeltaTable
    src = pq.read_table(f"{d}/ranked.parquet")
    t0 = time.monotonic()
    (DeltaTable(f"{d}/dl_silver_run").merge(src, predicate="t.id = s.id", source_alias="s",
                                        target_alias="t")
     .when_matched_delete(predicate="s._operation = 1")
     .when_matched_update_all(predicate="s._operation <> 1", except_cols=["_operation"])
     .when_not_matched_insert_all(predicate="s._operation <> 1", except_cols=["_operation"])
     .execute())
    print(f"{time.monotonic() - t0:.3f}")


def run_rebuild(pa, pc, rows, d):
    """Step 1 alone (BENCH_SILVER_ONLY=rebuild), BENCH_SILVER_REBUILDS times
    (default 1) on the same bronze, each into a new silver."""
    keys = pc.multiply(pa.array(range(rows), pa.int64()), 2)
    snap = bronze_table(pa, pc, keys, pa.repeat(pa.scalar(0, pa.int32()), rows),
                        pa.repeat(pa.scalar(S, pa.int64()), rows), None, True)
    write(f"{d}/bronze", snap, mode="overwrite")
    del snap
    print(f"bronze_snapshot_rows: {rows}", flush=True)
    for _ in range(int(os.environ.get("BENCH_SILVER_REBUILDS", 1))):
        for t in ("silver", "control_silver"):
            shutil.rmtree(f"{d}/{t}", ignore_errors=True)
        load = os.getloadavg()[0]
        secs, rss, _ = timed(apply_cmd(d))
        print(f"rebuild_seconds: {secs:.3f}   rebuild_rows_per_s: {rows / secs:.0f}   "
              f"rebuild_cpu_seconds: {LAST_CPU[0]:.2f}   rebuild_peak_rss_mb: {rss:.1f}   "
              f"load_1m: {load:.2f}", flush=True)


def run_size(pa, pc, rows, n_changes, d, with_deltalake, prefix=""):
    import random
    rng = random.Random(42)
    keys = pc.multiply(pa.array(range(rows), pa.int64()), 2)
    snap = bronze_table(pa, pc, keys, pa.repeat(pa.scalar(0, pa.int32()), rows),
                        pa.repeat(pa.scalar(S, pa.int64()), rows), None, True)
    write(f"{d}/bronze", snap, mode="overwrite")
    print(f"{prefix}bronze_snapshot_rows: {rows}", flush=True)
    secs, rss, _ = timed(apply_cmd(d))
    print(f"{prefix}rebuild_seconds: {secs:.3f}")
    print(f"{prefix}rebuild_rows_per_s: {rows / secs:.0f}")
    print(f"{prefix}rebuild_peak_rss_mb: {rss:.1f}")
    print(f"{prefix}rebuild_cpu_seconds: {LAST_CPU[0]:.2f}", flush=True)
    if with_deltalake:  # the same rebuild into a silver merged on read
        msecs, _, _ = timed(apply_cmd(d, mor=True))
        print(f"{prefix}rebuild_mor_seconds: {msecs:.3f}", flush=True)
    k, o, l, q = changes(pa, pc, rows, n_changes, rng)
    ch = bronze_table(pa, pc, k, o, l, q, False)
    write(f"{d}/bronze", ch)
    print(f"{prefix}change_rows: {ch.num_rows}  ({n_changes} changes)", flush=True)
    secs, rss, out = timed(apply_cmd(d))
    name = "apply_cow" if with_deltalake else "apply"
    print(f"{prefix}{name}_seconds: {secs:.3f}")
    print(f"{prefix}{name}_rows_per_s: {n_changes / secs:.0f}")
    print(f"{prefix}{name}_peak_rss_mb: {rss:.1f}")
    print(f"{prefix}{name}_cpu_seconds: {LAST_CPU[0]:.2f}")
    print(f"{prefix}{name}_result: {out.strip()}", flush=True)
    mor = None
    if with_deltalake:
        # merge-on-read: the same changes, then two more sets (steady state)
        mor_secs = []
        for rnd in range(3):
            if rnd > 0:
                k2, o2, l2, q2 = changes(pa, pc, rows, n_changes, rng,
                                         first_commit=S + 1 + rnd * n_changes)
                write(f"{d}/bronze", bronze_table(pa, pc, k2, o2, l2, q2, False))
            if rnd == 0:
                # the goal's figure: the best of two runs of the same apply
                # (silver and its control row put back between them), as
                # deltalake's below
                keep = {t: f"{d}/{t}.before" for t in ("silver_mor", "control_silver_mor")}
                for t, b in keep.items():
                    shutil.copytree(f"{d}/{t}", b)
                first, _, _ = timed(apply_cmd(d, mor=True))
                for t, b in keep.items():
                    shutil.rmtree(f"{d}/{t}")
                    os.rename(b, f"{d}/{t}")
            msecs, mrss, mout = timed(apply_cmd(d, mor=True))
            mor_secs.append(msecs)
            if rnd == 0:
                print(f"apply_runs_seconds: {first:.3f}, {msecs:.3f}")
                msecs = min(first, msecs)
                # the merge step alone (its --verbose line): the input deltalake
                # is given, the changes ranked, minus the ranking of bronze
                # the sorter: runs spilled, merges of runs, the most it held
                r = re.search(r"\((\d+) runs spilled, (\d+) merges of runs; ([0-9.]+) of (\d+) MB "
                              r"held at most\)", LAST_ERR[0])
                if r:
                    print(f"apply_sort_runs_spilled: {r.group(1)}")
                    print(f"apply_sort_merges: {r.group(2)}")
                    print(f"apply_sort_held_mb: {r.group(3)}   (of --memory-mb {r.group(4)})")
                m = re.search(r"merged on read in ([0-9.]+) s", LAST_ERR[0])
                mor = (msecs, mrss, float(m.group(1)) if m else None)
                if m:
                    print(f"apply_merge_step_seconds: {mor[2]:.3f}   (merge-on-read, changes "
                          f"ranked; the rest of apply_seconds ranks bronze)")
                print(f"apply_seconds: {msecs:.3f}")
                print(f"apply_rows_per_s: {n_changes / msecs:.0f}")
                print(f"apply_peak_rss_mb: {mrss:.1f}")
                print(f"apply_cpu_seconds: {LAST_CPU[0]:.2f}")
                print(f"apply_result: {mout.strip()}", flush=True)
        print(f"apply_mor_steady_seconds: {sum(mor_secs) / len(mor_secs):.3f}   "
              f"(3 applies: {', '.join(f'{x:.3f}' for x in mor_secs)})", flush=True)
    if not with_deltalake:
        return secs, rss, None, None
    # deltalake: the same silver, the same changes ranked beforehand
    import pyarrow.parquet as pq
    silver_cols = ["id", "name", "amount", "qty", "at", "note", "_start_lsn", "_commit_ts"]
    write(f"{d}/dl_silver", snap.select(silver_cols), mode="overwrite")
    del snap
    t = ch.select([*silver_cols, "_operation"])
    # latest per key: rows are in commit order, a 4 after its 3: the last of each key
    t = t.append_column("_i", pa.array(range(t.num_rows), pa.int64()))
    last = t.group_by("id").aggregate([("_i", "max")])
    ranked = t.take(last["_i_max"]).drop_columns(["_i"])
    pq.write_table(ranked, f"{d}/ranked.parquet")
    runs = []
    for _ in range(2):  # the best of two, each on a fresh copy of the same silver
        shutil.copytree(f"{d}/dl_silver", f"{d}/dl_silver_run")
        dsecs, drss, out = timed([sys.executable, __file__, "--deltalake", d])
        runs.append(float(out.strip().splitlines()[-1]))
        shutil.rmtree(f"{d}/dl_silver_run")
    merge_secs = min(runs)
    print(f"deltalake_merge_runs_seconds: {runs[0]:.3f}, {runs[1]:.3f}")
    print(f"deltalake_merge_seconds: {merge_secs:.3f}")
    print(f"deltalake_merge_process_seconds: {dsecs:.3f}")
    print(f"deltalake_rows_per_s: {n_changes / merge_secs:.0f}")
    print(f"deltalake_peak_rss_mb: {drss:.1f}", flush=True)
    return secs, rss, merge_secs, mor


RECONCILE_COLUMNS = """(
    id INT NOT NULL PRIMARY KEY, big BIGINT NULL, amount DECIMAL(18,4) NULL,
    name NVARCHAR(50) NULL, at DATETIME2(7) NULL, flag BIT NULL, raw VARBINARY(16) NULL,
    guid UNIQUEIDENTIFIER NULL, note VARCHAR(200) NULL, d DATE NULL)"""


def run_reconcile(rows, base):
    """Step 5: a source of rows rows, its silver, and reconcile of the two."""
    sys.path.insert(0, os.path.join(ROOT, "tests", "interop"))
    from conftest import Sim
    d = os.path.join(base, "reconcile")
    os.makedirs(os.path.join(d, "sim"))
    sim = Sim(os.path.join(d, "sim"), ["--capture-poll-ms", "20", "--capture-latency-ms", "0"])
    try:
        sim.run("CREATE DATABASE bench;")
        sim.run("EXEC sys.sp_cdc_enable_db;", database="bench")
        sim.run(f"CREATE TABLE dbo.orders {RECONCILE_COLUMNS};"
                "EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'orders', "
                "@role_name = NULL;", database="bench")
        sim.run(f"EXEC sim.bulk_load_table @table = N'dbo.orders', @rows = {rows}, @seed = 7;",
                database="bench")
        src = ["--captureInstance", "dbo_orders", "--connectionString",
               sim.connection_string("bench")]
        timed([CLI, "snapshot", *src, "--numPartitions", "2", "--target", f"{d}/bronze"])
        timed([CLI, "apply", *src, "--bronze", f"{d}/bronze", "--target", f"{d}/silver",
               "--control-table", f"{d}/control"])
        rec = [CLI, "reconcile", *src, "--silver", f"{d}/silver", "--bronze", f"{d}/bronze",
               "--control-table", f"{d}/control", "--sample-seed", "1"]
        t1, rss1, out1, cpu1 = timed([*rec, "--sample", "0"], cpu=True)
        r1 = json.loads(out1.strip().splitlines()[-1])
        assert r1["match"] == r1["buckets"] and r1["source_rows"] == rows, r1
        print(f"reconcile_rows: {rows}  ({r1['buckets']} buckets)")
        print(f"reconcile_tier1_seconds: {t1:.3f}")
        print(f"reconcile_tier1_peak_rss_mb: {rss1:.1f}")
        print(f"reconcile_tier1_cpu_seconds: {cpu1:.3f}   (this process; the simulator's apart)",
              flush=True)
        t2, rss2, out2, cpu2 = timed([*rec, "--sample", "1"], cpu=True)
        r2 = json.loads(out2.strip().splitlines()[-1])
        assert r2["failures"] == {} and r2["source_rows_hashed"] == rows, r2
        print(f"reconcile_sample1_seconds: {t2:.3f}")
        print(f"reconcile_tier2_rows_per_s: {rows / max(t2 - t1, 1e-3):.0f}   (goal >= 1000000 "
              "a side)")
        print(f"reconcile_tier2_cpu_us_per_row: {(cpu2 - cpu1) * 1e6 / rows / 2:.3f}   (a side; "
              "this process's CPU, the shared machine's load aside)")
        print(f"reconcile_tier2_peak_rss_mb: {rss2:.1f}", flush=True)
    finally:
        sim.stop()


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--deltalake":
        child_deltalake(sys.argv[2])
        return
    import pyarrow as pa
    import pyarrow.compute as pc
    rows = int(os.environ.get("BENCH_SILVER_ROWS", 10_000_000))
    n_changes = int(os.environ.get("BENCH_SILVER_CHANGES", 1_000_000))
    subprocess.run(["make", "--no-print-directory", "-s", CLI], cwd=ROOT, check=True)
    base = tempfile.mkdtemp(prefix="mcdc-bench-silver-")
    try:
        # the cores are shared: how busy they were frames every figure below
        print(f"load_average_1m_at_start: {os.getloadavg()[0]:.2f}")
        print(f"rows: {rows}\nchanges: {n_changes}", flush=True)
        if os.environ.get("BENCH_SILVER_ONLY") == "reconcile":
            run_reconcile(rows, base)
            return
        if os.environ.get("BENCH_SILVER_ONLY") == "rebuild":
            run_rebuild(pa, pc, rows, os.path.join(base, "big"))
            return
        d = os.path.join(base, "big")
        secs, rss, merge_secs, mor = run_size(pa, pc, rows, n_changes, d, True)
        shutil.rmtree(d, ignore_errors=True)
        small = os.path.join(base, "small")
        _, rss_small, _, _ = run_size(pa, pc, rows // 10, n_changes // 10, small, False,
                                      prefix="small_")
        print(f"apply_vs_deltalake_ratio: {merge_secs / mor[0]:.2f}   (goal >= 3; merge-on-read)")
        print(f"apply_cow_vs_deltalake_ratio: {merge_secs / secs:.2f}   (copy-on-write)")
        if mor[2]:
            print(f"apply_merge_step_vs_deltalake_ratio: {merge_secs / mor[2]:.2f}   (the merge "
                  f"step alone, both given ranked changes; not the goal's figure)")
        print(f"apply_peak_rss_mb: {mor[1]:.1f}   (goal <= 512; copy-on-write {rss:.1f}, a "
              f"tenth the table: {rss_small:.1f})")
        shutil.rmtree(small, ignore_errors=True)
        run_reconcile(rows, base)
        print(f"load_average_1m_at_end: {os.getloadavg()[0]:.2f}")
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
