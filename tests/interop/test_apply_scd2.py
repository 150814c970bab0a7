"""mssql-cdc apply --scd-type 2: silver as a history of versions, kept from
bronze while a workload of inserts, updates, deletes and key updates runs.

The expected history is computed here from the change table the simulator
holds (cdc.dbo_items_CT), apart from apply: the rows of the snapshot the
stream began with, then the changes after it in commit order, per key; a
transaction's changes of a key count as its last; an upsert opens a version
(closing the open one) unless its image equals the open one's (then the open
version takes it in place, or nothing for a snapshot row), a delete closes
it. Silver, read by delta-rs and by DuckDB, holds exactly those versions,
with __START_AT / __END_AT the commit times of the LSNs they began and ended
at (bronze's _commit_ts of them), versions of a key one after the other, one
open version per live key (the source's row) and none for a deleted key.
Killed (SIGKILL) inside the merge and between the merge and applied_lsn, the
next run gives the same table.
"""
import os
import sys

import pytest

from apply_jobs import apply, control_row, silver_commits, silver_of, spawn_apply, wait_killed
from conftest import duckdb_with_delta, run_cli
from snapshot_jobs import lose_changes, new_job
from workload import DB, Items, delta_rows, settle, source_rows

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
try:
    from test_reference_peer import spark  # noqa: F401 - the module-scoped session
except pytest.skip.Exception:  # pyspark, delta or the reference not installed
    spark = None

META = ["_start_lsn", "_commit_ts", "__START_AT", "__END_AT", "_end_lsn"]


def _norm(v):
    return bytes(v) if isinstance(v, (bytearray, memoryview)) else v


def _rank(lsn, cmd, seq, op):
    return (lsn, -1 if cmd is None else cmd, seq or "", op)


def expected_history(job, tracked=None, prior=None, after=None):
    """{key: [version: captured columns + META]} from the change table;
    tracked: the columns whose change opens a version (None: all). prior: the
    history before a rebuild from bronze's newest snapshot S, applied up to
    LSN after (its open versions go on; the changes bronze holds after it
    are versions too, before S; a key S lacks is closed at S)."""
    cols = job.spec.column_names
    bronze = delta_rows(job.bronze, ["_start_lsn", "_commit_ts", "_operation", "_snapshot", *cols])
    ts = {r["_start_lsn"]: r["_commit_ts"] for r in bronze if r["_operation"] != 0}
    snap = [r for r in bronze if r["_operation"] == 0]
    s = max((r["_snapshot"] or r["_start_lsn"]) for r in snap) if snap else None
    snap = [r for r in snap if (r["_snapshot"] or r["_start_lsn"]) == s]
    # the snapshot's commit time (its rows carry none): a row's, else the
    # newest applied change's at or before it, else the oldest's after it
    est = None
    if s is not None:
        own = [r["_commit_ts"] for r in snap if r["_commit_ts"] is not None]
        le = [t for lsn, t in ts.items() if after and after < lsn <= s and t is not None]
        gt = [t for lsn, t in ts.items() if lsn > s and t is not None]
        est = own[0] if own else max(le) if le else min(gt) if gt else None
    rows = [(r["id"], s, r) for r in snap]  # every snapshot row ranks at S

    def skip(lsn):  # before the snapshot (or lost: bronze never had it)
        return s is not None and lsn <= s and (after is None or lsn <= after or lsn not in ts)
    point = (lambda key: (s, est)) if prior is not None else (lambda key: None)
    return _history(job, tracked, rows, ts, skip, {s: est}, point, prior)


def _history(job, tracked, snap, ts, skip, stamp_ts, point, prior=None):
    """The versions per key (see expected_history): snap, the snapshot rows
    as (key, their LSN, row); the changes of the change table but those skip
    says; stamp_ts: the commit time of a snapshot row's LSN; point(key): the
    (LSN, commit time) a key the snapshot lacks is closed at, or None."""
    spec = job.spec
    cols = spec.column_names
    n = len(cols)
    idx = [cols.index(c) for c in (tracked or cols)]
    snap_keys = {k for k, _, _ in snap}
    rows = []  # (key, rank, op, image, its own commit time)
    for key, lsn, r in snap:
        rows.append((key, _rank(lsn, None, None, 0), 0, tuple(_norm(r[c]) for c in cols),
                     r["_commit_ts"]))
    ct = job.sim.run("SELECT CONVERT(varchar(22), __$start_lsn, 1), __$command_id, "
                     "CONVERT(varchar(22), __$seqval, 1), __$operation, " + ", ".join(cols)
                     + f" FROM cdc.{spec.capture_instance}_CT", database=DB)
    for lsn, cmd, seq, op, *image in ct:
        if skip(lsn):
            continue
        assert lsn in ts, f"change {lsn} is not in bronze"
        rows.append((image[0], _rank(lsn, cmd, seq, op), op, tuple(_norm(v) for v in image), ts[lsn]))
    rows.sort(key=lambda r: (r[0], r[1]))
    by_key = {k: [] for k in (prior or {})}
    for key, rank, op, image, own_ts in rows:
        lasts = by_key.setdefault(key, [])
        if lasts and lasts[-1][0] == rank[0]:
            lasts[-1] = (rank[0], op, image, own_ts)  # the transaction's last change of the key
        else:
            lasts.append((rank[0], op, image, own_ts))

    def stamp(lsn, own_ts):
        return own_ts if own_ts is not None else stamp_ts.get(lsn)

    history = {}
    for key in sorted(set(by_key) | {k for k in (prior or {})}):
        lasts = by_key.get(key, [])
        versions, cur = list((prior or {}).get(key, [])), None  # cur: image, lsn, commit, start
        if versions and versions[-1][n + 4] is None:
            v = versions.pop()
            cur = (v[:n], v[n], v[n + 1], v[n + 2])

        def close(lsn, t):
            versions.append((*cur[0], *cur[1:], t if t is not None else cur[2], lsn))

        pt = None if key in snap_keys else point(key)
        for lsn, op, image, own_ts in [*lasts, (None, None, None, None)]:
            if pt is not None and (lsn is None or lsn > pt[0]):
                if cur:
                    close(*pt)  # the snapshot lacks the key
                cur, pt = None, None
            if lsn is None:
                break
            if op in (1, 3):
                if cur:
                    close(lsn, stamp(lsn, own_ts))
                cur = None
                continue
            if cur and op == 0 and image == cur[0]:
                continue  # a snapshot row as the open version is
            if cur and all(image[i] == cur[0][i] for i in idx):
                cur = (image, lsn, own_ts, cur[3])  # in place: the image and its LSN move
                continue
            if cur:
                close(lsn, stamp(lsn, own_ts))
            cur = (image, lsn, own_ts, stamp(lsn, own_ts))
        if cur:
            versions.append((*cur[0], *cur[1:], None, None))
        if versions:
            history[key] = versions
    return history


def expected_chunked_history(job, tracked=None, streamed=False, prior=None, after=None):
    """The history of a chunked bootstrap at S applied wave by wave: each
    chunk's rows at its stamp L (the commit time L maps to), the changes
    after S; a key of a chunk's range [lo, hi) the chunk lacks is closed at
    L. (Every pass applied a wave with the changes after its stamp: none of
    them was applied before the wave.) streamed: only the changes up to
    bronze's newest (the workload runs on). prior, after: a re-snapshot's,
    as expected_history takes them."""
    import json
    cols = job.spec.column_names
    bronze = delta_rows(job.bronze, ["_start_lsn", "_commit_ts", "_operation", "_snapshot",
                                     "_chunk", *cols])
    ts = {r["_start_lsn"]: r["_commit_ts"] for r in bronze if r["_operation"] != 0}
    (opened,) = [r for r in job.facts_rows() if r["event"] == "snapshot_open"]
    s = opened["max_lsn"]
    bounds = {}
    for r in delta_rows(job.plans, ["snapshot", "event", "detail"]):
        d = json.loads(r["detail"])
        if r["event"] == "snapshot_chunk" and r["snapshot"] == s:
            bounds[d["chunk"]] = (d["lo"], d["hi"])
    chunks = {}  # chunk: (lo, hi, stamp, its commit time)
    for r in job.facts_rows():
        if r["event"] == "snapshot_chunk" and json.loads(r["detail"])["snapshot"] == s:
            c = json.loads(r["detail"])["chunk"]
            chunks[c] = (*bounds[c], r["min_lsn"], r["min_commit_ts"])
    assert chunks and set(chunks) <= set(bounds), (sorted(chunks), sorted(bounds))
    snap = [(r["id"], chunks[r["_chunk"]][2], r) for r in bronze if r["_operation"] == 0]
    assert all(r["_snapshot"] == s and r["_start_lsn"] == lsn for _, lsn, r in snap)

    def point(key):
        for lo, hi, lsn, t in chunks.values():
            if (lo is None or lo <= key) and (hi is None or key < hi):
                return lsn, t
        return None
    top = max(ts) if streamed and ts else None

    def skip(lsn):  # before S (applied, or lost), or not streamed yet
        return ((lsn <= s and (after is None or lsn <= after or lsn not in ts))
                or (top is not None and lsn > top))
    return _history(job, tracked, snap, ts, skip, {lsn: t for _, _, lsn, t in chunks.values()},
                    point, prior)


def silver_history(job, reader, spark=None):
    cols = [*job.spec.column_names, *META]
    silver = silver_of(job)
    if reader == "delta-rs":
        rows = [tuple(_norm(r[c]) for c in cols) for r in delta_rows(silver, cols)]
    elif reader == "spark":
        rows = [tuple(_norm(v) for v in r) for r in
                spark.read.format("delta").load(silver).select(*cols).collect()]
    else:
        q = ", ".join('"' + c + '"' for c in cols)
        rows = [tuple(_norm(v) for v in r) for r in
                duckdb_with_delta().execute(f"SELECT {q} FROM delta_scan('{silver}')").fetchall()]
    out = {}
    for r in rows:
        out.setdefault(r[0], []).append(r)
    for v in out.values():
        v.sort(key=lambda r: r[len(job.spec.column_names)])  # _start_lsn: one version's are apart
    return out


def assert_history(job, tracked=None, want=None, spark=None, current=True):
    """silver equals the expected history (by default expected_history's) for
    delta-rs and DuckDB (and Spark if given); versions of a key follow one
    another; the open versions are the source table (current)."""
    want = want if want is not None else expected_history(job, tracked)
    n = len(job.spec.column_names)
    for reader in ("delta-rs", "duckdb", *(("spark",) if spark is not None else ())):
        got = silver_history(job, reader, spark)
        missing = sorted(set(want) - set(got))[:5]
        extra = sorted(set(got) - set(want))[:5]
        differ = [k for k in want if k in got and want[k] != got[k]][:3]
        assert not missing and not extra and not differ, (
            f"{reader}: keys missing {missing}, extra {extra}, differ "
            + "; ".join(f"{k}: want {want[k]} got {got[k]}" for k in differ))
        for key, versions in got.items():
            for a, b in zip(versions, versions[1:]):
                assert a[n + 4] is not None and a[n + 3] is not None, (key, a)  # closed
                assert a[n + 4] <= b[n], (key, a, b)  # ends at or before the next's image LSN
                assert b[n + 2] is not None and a[n + 3] <= b[n + 2], (key, a, b)  # no overlap
            # a NULL start: a snapshot's version whose stamp has no commit time
            assert all(None in (v[n + 2], v[n + 3]) or v[n + 2] <= v[n + 3] for v in versions), key
            assert sum(v[n + 4] is None for v in versions) <= 1, (key, versions)  # one open
    if not current:
        return sum(len(v) for v in want.values())
    open_rows = sorted(v[-1][:n] for v in want.values() if v[-1][n + 4] is None)
    assert open_rows == [tuple(_norm(x) for x in r) for r in source_rows(job.sim, job.spec)]
    return sum(len(v) for v in want.values())


def test_history_holds_every_version_of_every_key(sim, workdir):
    job, w = new_job(sim, workdir, Items(key_space=600), preload=0, seed=23)
    w.preload(150)
    with w:
        for _ in range(3):
            w.wait_for(40)
            job.stream()
            r = apply(job, "--scd-type", "2", "--file-rows", "200")
            assert r["bronze_found"]
    job.stream()
    r = apply(job, "--scd-type", "2", "--file-rows", "200")
    versions = assert_history(job)
    assert versions > 300 and w.ops["update"] and w.ops["delete"] and w.ops["key_update"]
    assert control_row(job, silver_of(job))["applied_lsn"] == r["applied_lsn"]
    # reapplied: nothing new, nothing committed; from behind (the position
    # lost): no version twice
    before = silver_commits(silver_of(job))
    assert apply(job, "--scd-type", "2")["passes"] == 0
    assert silver_commits(silver_of(job)) == before
    delete_control_row(job)
    apply(job, "--scd-type", "2")
    assert assert_history(job) == versions
    # the table keeps its type: type 1 is refused, exit 7, nothing written
    p = apply(job, check=False)
    assert p.returncode == 7 and "--scd-type 2" in p.stderr, p.stderr
    assert len(silver_commits(silver_of(job))) == len(before) + 1
    # reconcile compares a current state: a history is refused before it reads
    report = os.path.join(job.dir, "reconcile_report")
    p = run_cli("reconcile", "--captureInstance", job.spec.capture_instance,
                "--connectionString", job.sim.connection_string(DB), "--silver", silver_of(job),
                "--bronze", job.bronze, "--control-table", job.control,
                "--report-table", report, check=False)
    assert p.returncode == 7 and "is a history" in p.stderr, p.stderr
    assert not os.path.exists(report)


def delete_control_row(job):
    from deltalake import DeltaTable
    DeltaTable(job.control).delete(f"table_name = '{silver_of(job)}'")


def test_history_with_tracked_columns_updates_in_place(sim, workdir):
    """--track-history-columns name: a change of the other columns only
    updates the open version in place (its image and _start_lsn move, its
    __START_AT does not)."""
    job, w = new_job(sim, workdir, Items(key_space=300), preload=0, seed=5)
    w.preload(100)
    with w:
        w.wait_for(60)
    job.stream()
    apply(job, "--scd-type", "2", "--track-history-columns", "name")
    assert_history(job, tracked=["name"])
    n = len(job.spec.column_names)
    got = silver_history(job, "delta-rs")
    assert any(v[n + 1] != v[n + 2] for vs in got.values() for v in vs)  # some in place
    assert len(got) < sum(len(vs) for vs in got.values())  # and some keys have versions


def test_a_resnapshot_closes_the_versions_of_keys_it_lacks(sim, workdir):
    """Changes lost to cleanup and a re-snapshot: the rebuild closes the open
    versions of keys the snapshot lacks at its LSN, opens one where its row
    differs, leaves the others as they are."""
    job, w = new_job(sim, workdir, Items(key_space=400), preload=0, seed=41)
    w.preload(150)
    job.stream()
    apply(job, "--scd-type", "2")
    with w:
        w.wait_for(30)
        job.stream()
        apply(job, "--scd-type", "2")
        prior = silver_history(job, "delta-rs")  # the history the rebuild goes on from
        after = control_row(job, silver_of(job))["applied_lsn"]
        lose_changes(job, w)
    job.stream("--on-data-loss", "resnapshot")
    r = apply(job, "--scd-type", "2")
    assert r["rebuilt"]
    want = expected_history(job, prior=prior, after=after)
    assert silver_history(job, "delta-rs") == want
    assert silver_history(job, "duckdb") == want
    n = len(job.spec.column_names)
    closed_at_snapshot = [k for k, v in want.items() if v[-1][n + 4] and k not in
                          {r[0] for r in source_rows(job.sim, job.spec)} and v[-1][n + 4] not in
                          {x[n] for vs in prior.values() for x in vs}]
    assert closed_at_snapshot, "no key was closed by the re-snapshot"
    open_rows = sorted(v[-1][:n] for v in want.values() if v[-1][n + 4] is None)
    assert open_rows == [tuple(_norm(x) for x in r) for r in source_rows(job.sim, job.spec)]


def test_kills_inside_the_merge_and_before_the_position_replay_to_the_same_history(sim, workdir):
    job, w = new_job(sim, workdir, Items(key_space=500), preload=0, seed=31)
    w.preload(200)
    job.stream()
    apply(job, "--scd-type", "2", "--file-rows", "100")
    with w:
        w.wait_for(40)
    job.stream()
    for point in ("during_merge", "after_bronze"):
        before = silver_commits(silver_of(job))
        position = control_row(job, silver_of(job))["applied_lsn"]
        p = spawn_apply(job, "--scd-type", "2", "--file-rows", "100", env={"MCDC_CRASH_AT": point})
        wait_killed(p)
        killed = silver_commits(silver_of(job))
        assert len(killed) == len(before) + (point == "after_bronze")
        assert control_row(job, silver_of(job))["applied_lsn"] == position
        r = apply(job, "--scd-type", "2", "--file-rows", "100")
        assert r["applied_lsn"] == control_row(job, silver_of(job))["applied_lsn"] != position
        if point == "after_bronze":  # the merge was committed: no second one
            assert silver_commits(silver_of(job)) == killed
        assert_history(job)
        with w:
            w.wait_for(15)
        job.stream()
    apply(job, "--scd-type", "2", "--file-rows", "100")
    assert_history(job)
    spill = os.path.join(silver_of(job), "_mssql_cdc_spill")
    assert not os.path.exists(spill) or not os.listdir(spill)


H = ("--scd-type", "2", "--file-rows", "150")
WAVE = ("--chunk-rows", "40", "--max-waves", "1", "--target-wave-seconds", "0")


def assert_wave_pass(job, r, s, wave, fin=None):
    """A pass on an open chunked snapshot: its waves up to `wave` applied,
    the position in the control row, the verdict held (at fin, silver's
    before the snapshot opened)."""
    row = control_row(job, silver_of(job))
    assert r["open_snapshot_lsn"] == row["open_snapshot_lsn"] == s, (r, row)
    assert r["snapshot_wave"] == row["snapshot_wave"] == wave, (r, row)
    assert row["finalized_until"] == fin, (r, row)
    assert not r["rebuilt"] or wave == 0, r


def chunk_stamps(job):
    return {r["min_lsn"] for r in job.facts_rows() if r["event"] == "snapshot_chunk"}


def spark_if_any(request):
    """test_reference_peer's module-scoped Spark session, or None without
    Spark, Delta, the reference or java."""
    if spark is None:
        return None
    try:
        return request.getfixturevalue("spark")
    except pytest.skip.Exception:  # no java
        return None


def test_a_chunked_bootstrap_is_applied_wave_by_wave(sim, workdir, request):
    """stream --snapshot chunked and backfill, one wave at a time, a workload
    running, apply --scd-type 2 after each: each wave's chunk rows open
    versions at its stamp, ranked with the changes after it; the verdict is
    held until the completion. The history is the model's, every version of
    every key, at every pass and at the end (Spark too, if installed)."""
    from snapshot_jobs import CHUNKED
    job, w = new_job(sim, workdir, Items(key_space=700), preload=400, seed=73)
    job.stream(*CHUNKED)
    s = job.events("snapshot_open")[0]["max_lsn"]
    st, waves = {"done": False}, []
    while not st["done"]:
        with w:
            w.wait_for(15)
            _, st = job.backfill(*WAVE)
            job.stream(*CHUNKED)
            r = apply(job, *H)
        if st["done"]:
            break
        waves.append(r["snapshot_wave"])
        assert_wave_pass(job, r, s, waves[-1])
        assert_history(job, want=expected_chunked_history(job, streamed=True), current=False)
        # the snapshot's versions begin at their chunk's stamp, not at S
        n = len(job.spec.column_names)
        starts = {v[n] for vs in silver_history(job, "delta-rs").values() for v in vs}
        assert starts & chunk_stamps(job), "no version began at a chunk's stamp"
    assert len(waves) >= 3 and waves == sorted(set(waves)), waves
    assert r["rebuilt"] and r["open_snapshot_lsn"] is None, r  # the completion
    settle(job.sim)
    job.stream(*CHUNKED)
    r = apply(job, *H)
    assert not r["rebuilt"] and r["finalized_until"] is not None, r
    row = control_row(job, silver_of(job))
    assert row["open_snapshot_lsn"] is None and row["snapshot_wave"] is None, row
    assert row["snapshot_lsn"] == s, row
    versions = assert_history(job, want=expected_chunked_history(job), spark=spark_if_any(request))
    assert versions > 350 and w.ops["update"] and w.ops["delete"] and w.ops["key_update"], w.ops


def test_a_chunked_resnapshot_closes_the_keys_each_wave_lacks_at_its_stamp(sim, workdir):
    """Changes lost to cleanup, a chunked re-snapshot backfilled wave by wave
    with the workload running: each wave closes the open versions of the
    keys of its ranges it lacks at its stamp, opens one where its row
    differs, leaves the others as they are; the completion adds nothing."""
    job, w = new_job(sim, workdir, Items(key_space=500), preload=0, seed=43)
    w.preload(200)
    job.stream()
    apply(job, *H)
    with w:
        w.wait_for(30)
        job.stream()
        apply(job, *H)
        prior = silver_history(job, "delta-rs")  # the history the waves go on from
        after = control_row(job, silver_of(job))["applied_lsn"]
        lose_changes(job, w)
    fin = control_row(job, silver_of(job))["finalized_until"]
    loss = ("--on-data-loss", "resnapshot", "--snapshot", "chunked")
    job.stream(*loss)
    (opened,) = job.events("snapshot_open")
    s, st, n = opened["max_lsn"], {"done": False}, len(job.spec.column_names)
    while not st["done"]:
        with w:
            w.wait_for(10)
            _, st = job.backfill(*WAVE)
            job.stream(*loss)
            r = apply(job, *H)
        if not st["done"]:
            assert_wave_pass(job, r, s, r["snapshot_wave"], fin)
            assert_history(job, want=expected_chunked_history(job, streamed=True, prior=prior,
                                                              after=after), current=False)
    settle(job.sim)
    job.stream(*loss)
    r = apply(job, *H)
    row = control_row(job, silver_of(job))
    assert not r["rebuilt"] and row["snapshot_lsn"] == s and row["finalized_until"] >= fin, (r, row)
    want = expected_chunked_history(job, prior=prior, after=after)
    assert_history(job, want=want)
    stamps = chunk_stamps(job)
    live = {x[0] for x in source_rows(job.sim, job.spec)}
    closed_at_stamp = [k for k, v in want.items() if k not in live and v[-1][n + 4] in stamps]
    assert closed_at_stamp, "no key was closed at a chunk's stamp"


def test_kills_in_a_wave_replay_to_the_same_history(sim, workdir):
    """SIGKILL inside a wave's merge and between its merge commit and the
    control row: the rerun gives the model's history, the control row's
    open_snapshot_lsn and snapshot_wave move once, no merge is committed
    twice."""
    from snapshot_jobs import CHUNKED
    job, w = new_job(sim, workdir, Items(key_space=600), preload=400, seed=79)
    job.stream(*CHUNKED)
    s = job.events("snapshot_open")[0]["max_lsn"]
    job.backfill(*WAVE)
    job.stream(*CHUNKED)
    apply(job, *H)  # the first wave: a new silver
    for point in ("during_merge", "after_bronze"):
        with w:
            w.wait_for(15)
            _, st = job.backfill(*WAVE)
        assert not st["done"], st
        job.stream(*CHUNKED)
        before = silver_commits(silver_of(job))
        row = control_row(job, silver_of(job))
        p = spawn_apply(job, *H, env={"MCDC_CRASH_AT": point})
        wait_killed(p)
        killed = silver_commits(silver_of(job))
        assert len(killed) == len(before) + (point == "after_bronze")
        assert control_row(job, silver_of(job)) == row  # nothing of the pass's position
        r = apply(job, *H)
        if point == "after_bronze":  # the merge was committed: no second one
            assert silver_commits(silver_of(job)) == killed
        assert r["snapshot_wave"] is not None and r["snapshot_wave"] > (row["snapshot_wave"] or -1), r
        assert_wave_pass(job, r, s, r["snapshot_wave"])
        assert_history(job, want=expected_chunked_history(job, streamed=True), current=False)
    job.backfill_until_done(*WAVE)
    settle(job.sim)
    job.stream(*CHUNKED)
    r = apply(job, *H)
    assert r["rebuilt"] and r["open_snapshot_lsn"] is None, r
    assert_history(job, want=expected_chunked_history(job))
