"""reconcile's IN_FLIGHT across a capture instance switch: the changes the
stream has not read yet may sit in the older instance (before the newer
one's start S) or in the newer one (from S), and reconcile reads both past
bronze's position as the stream will, whichever of the two it is given.

A workload runs across the switch; the stream stops before S, and keys
changed on either side of S are IN_FLIGHT (not RECORD_DIFF), given the
older or the newer instance's name. Once the stream (which follows the
newer instance) and apply catch up: only MATCH. Then the older instance is
purged by CDC cleanup and dropped, with keys changed after: reconcile does
not fail on it, the new keys are IN_FLIGHT, and after another stream and
apply only MATCH again.
"""
import json
import os

from deltalake import DeltaTable

from apply_jobs import apply, apply_args, assert_silver_equals_source, silver_of
from conftest import run_cli
from snapshot_jobs import Job, new_job
from test_reconcile import EXIT_DIFFERS, ONLY_IN_FLIGHT, reconcile_args, report_rows, result_of
from test_repair import repair_args
from test_schema_changes import enable_v2 as enable_v2_of
from workload import (CAPTURE, DB, Items, Workload, delta_rows, make_db, purge_all, set_sql,
                      settle, where)

V2 = "dbo_items_v2"


def enable_v2(sim):
    """The newer instance of dbo.items, once capture has taken it up: its S."""
    return enable_v2_of(sim, "items", V2)


def reconcile_as(job, ci, want=0, follows=False):
    """reconcile given capture instance ci: its result, its key rows {id:
    failure type} and its buckets [(lo, hi, status)] (None: open).
    follows: the changes in flight were read from every instance the stream
    would read (not the configured one alone, its fallback)."""
    args = reconcile_args(job, "--bucket-rows", "40", "--sample", "1")
    args[args.index("--captureInstance") + 1] = ci
    p = run_cli(*args, check=False, timeout=180)
    r = result_of(p, want)
    assert not follows or "read from capture instance" not in p.stderr, p.stderr
    rows = report_rows(job, r["run_id"])
    keys = {json.loads(x["key"])["id"]: x["failure_type"] for x in rows if x["key"] is not None}
    bound = lambda v: None if v is None else json.loads(v)  # noqa: E731
    buckets = [(bound(x["bucket_lo"]), bound(x["bucket_hi"]), x["status"]) for x in rows
               if x["status"] is not None]
    return r, keys, buckets


def touch(job, ids, tag):
    """An update of each key, one commit each, captured."""
    for k in ids:
        job.sim.run(f"UPDATE dbo.items SET {set_sql({'name': f'{tag} {k}'})} "
                    f"WHERE {where(job.spec, (k,))};", database=DB)
    settle(job.sim)


def assert_in_flight(got, changed, listed=False):
    """Only MATCH and IN_FLIGHT, and each changed key in flight: named so, or
    in an IN_FLIGHT bucket (which Tier 2 does not read). listed: named."""
    r, keys, buckets = got
    assert r["mismatch"] == 0 and set(r["failures"]) <= {"IN_FLIGHT"}, r
    assert r["match"] + r["in_flight"] == r["buckets"] == len(buckets), r
    assert set(keys.values()) <= {"IN_FLIGHT"}, keys
    for k in changed:
        (status,) = [st for lo, hi, st in buckets
                     if (lo is None or lo <= k) and (hi is None or k < hi)]
        assert keys.get(k) == "IN_FLIGHT" or (status == "IN_FLIGHT" and not listed), \
            (k, status, keys, r)


def assert_match(job, *cis):
    for ci in cis:
        r, keys, _ = reconcile_as(job, ci)
        assert r["match"] == r["buckets"] and r["failures"] == {} and keys == {}, (ci, r)


def source_ids(sim):
    return sorted(r[0] for r in sim.run("SELECT id FROM dbo.items", database=DB))


def test_in_flight_in_either_instance_after_a_switch(sim, workdir):
    spec = Items(key_space=1500)
    job, w = new_job(sim, workdir, spec, preload=0, seed=41)
    w.preload(300)
    with w:  # a workload writes before the stream, past it, then across the switch
        w.wait_for(20)
        job.stream()
        apply(job)
        w.wait_for(10)
    ids = source_ids(sim)
    before, after = ids[3:6], ids[-6:-3]
    touch(job, before, "before S")  # only the older instance holds these
    s = enable_v2(sim)
    with w:
        w.wait_for(10)
    touch(job, after, "after S")  # both hold these, the newer one from S
    bronze = delta_rows(job.bronze)
    assert max(x["_start_lsn"] for x in bronze) < s, "the stream read past S"
    # the stream stopped before S: a change on either side of S is in
    # flight, given either instance (the newer one holds nothing before S)
    for ci in ("dbo_items", V2):
        got = reconcile_as(job, ci, want=ONLY_IN_FLIGHT)
        assert_in_flight(got, before + after)
        assert got[0]["in_flight"] + got[0]["failures"].get("IN_FLIGHT", 0) > 0, got
    # the stream follows the newer instance from S; apply takes it all
    job.stream()
    assert {x["_capture_instance"] for x in delta_rows(job.bronze)
            if x["_operation"] != 0 and x["_start_lsn"] >= s} == {V2}
    apply(job)
    assert_silver_equals_source(job)
    assert_match(job, "dbo_items", V2)
    # changes past bronze's position, then the older instance purged by
    # cleanup past that position: the stream reads the newer one from there,
    # and so does reconcile (no data loss, the changes in flight)
    late = source_ids(sim)[10:13]
    touch(job, late, "late")
    purge_all(sim, spec)
    assert_in_flight(reconcile_as(job, "dbo_items", want=ONLY_IN_FLIGHT), late, listed=True)
    # then dropped: the older name follows the newer instance
    sim.run("EXEC sys.sp_cdc_disable_table @source_schema = N'dbo', @source_name = N'items', "
            "@capture_instance = N'dbo_items';", database=DB)
    later = source_ids(sim)[20:23]
    touch(job, later, "later")
    for ci in ("dbo_items", V2):
        assert_in_flight(reconcile_as(job, ci, want=ONLY_IN_FLIGHT), late + later, listed=True)
    job.stream()
    apply(job)
    assert_silver_equals_source(job)
    assert_match(job, "dbo_items", V2)


def test_a_difference_is_still_found_after_a_switch(sim, workdir):
    """Reading both instances makes no difference in flight that is none: a
    row changed in silver by another writer is a RECORD_DIFF."""
    job, w = new_job(sim, workdir, Items(key_space=800), preload=0, seed=42)
    w.preload(200)
    enable_v2(sim)
    with w:
        w.wait_for(10)
    job.stream()
    apply(job)
    ids = sorted(x["id"] for x in delta_rows(silver_of(job), ["id"]))
    DeltaTable(silver_of(job)).update(predicate=f"id = {ids[7]}", updates={"name": "'by hand'"})
    for ci in ("dbo_items", V2):
        r, keys, _ = reconcile_as(job, ci, want=EXIT_DIFFERS)
        assert keys == {ids[7]: "RECORD_DIFF"}, (ci, r, keys)


# ---- a configured instance not named after its table, dropped -----------------------

A, B = "items_cfg_a", "items_cfg_b"  # neither is dbo_items, the table's default name
EXIT_SCHEMA = 4


class NamedItems(Items):
    """dbo.items captured under a name that is not <schema>_<table>."""

    @property
    def capture_instance(self):
        return A


def named_job(sim, workdir, seed):
    spec = NamedItems(key_space=1500)
    make_db(sim, spec)
    sim.run("EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'items', "
            f"@role_name = NULL, @capture_instance = N'{A}'; {CAPTURE}", database=DB)
    return Job(sim, spec, workdir), Workload(sim, spec, seed=seed)


def disable(sim, ci):
    sim.run("EXEC sys.sp_cdc_disable_table @source_schema = N'dbo', @source_name = N'items', "
            f"@capture_instance = N'{ci}';", database=DB)


def listed(sim):
    return {r[0] for r in sim.run("SELECT capture_instance FROM cdc.change_tables", database=DB)}


def test_a_dropped_instance_not_named_after_its_table(sim, workdir):
    job, w = named_job(sim, workdir, seed=43)
    w.preload(300)
    with w:
        w.wait_for(20)
        job.stream()
        apply(job)
        w.wait_for(10)
    s = enable_v2_of(sim, "items", B)
    with w:  # the switch: the stream reads the newer instance from S
        w.wait_for(15)
        job.stream()
        w.wait_for(5)
    assert {x["_capture_instance"] for x in delta_rows(job.bronze, ["_capture_instance"])} == {A, B}
    assert min(x["_start_lsn"] for x in delta_rows(job.bronze) if x["_capture_instance"] == B) >= s
    disable(sim, A)  # the DBA procedure's last step: the configured name is gone
    assert listed(sim) == {B}
    # the workload running: the stream, apply and reconcile given the gone
    # name follow the table's instance that is left
    with w:
        seen = []
        for _ in range(2):
            w.wait_for(15)
            job.stream()
            apply(job)
            w.wait_for(10)
            got = reconcile_as(job, A, want=ONLY_IN_FLIGHT, follows=True)
            assert_in_flight(got, [])
            seen.append(got[0])
        assert any(r["in_flight"] or r["failures"] for r in seen), seen
    settle(sim)
    job.stream()
    apply(job)
    assert_silver_equals_source(job)
    assert_match(job, A, B)
    # --repair with the gone name: a row changed in silver by another writer
    ids = sorted(x["id"] for x in delta_rows(silver_of(job), ["id"]))
    DeltaTable(silver_of(job)).update(predicate=f"id = {ids[5]}", updates={"name": "'by hand'"})
    args = reconcile_args(job, "--bucket-rows", "40", "--sample", "1", "--repair")
    args[args.index("--captureInstance") + 1] = A
    p = run_cli(*args, check=False, timeout=180)
    assert p.returncode == EXIT_DIFFERS, f"reconcile --repair exited {p.returncode}:\n{p.stderr}"
    r = json.loads(p.stdout.splitlines()[-1])
    assert r["repair"]["keys"] == 1 and r["repair"]["images"] == 1, r
    assert {x["_capture_instance"] for x in delta_rows(job.bronze, ["_capture_instance", "_seqval",
                                                                    "_operation"])
            if x["_seqval"] is None and x["_operation"] != 0} == {B}, "repair rows' instance"
    apply(job)
    assert_silver_equals_source(job)
    assert_match(job, A)
    # repair of a key by hand, given the gone name, reads it from the table
    keys = os.path.join(workdir, "keys.jsonl")
    with open(keys, "w") as fh:
        fh.write(json.dumps({"id": ids[6]}) + "\n")
    p = run_cli(*repair_args(job, "--keys-file", keys), check=False)
    assert p.returncode == 0, f"repair exited {p.returncode}:\n{p.stdout}\n{p.stderr}"
    assert json.loads(p.stdout.splitlines()[-1])["images"] == 1, p.stdout
    # no instance of the table left: reconcile, repair, apply and the stream
    # (its checkpoint read both) say so, exit 4
    disable(sim, B)
    assert listed(sim) == set()
    for what, cmd in (("stream", job.stream_args()), ("reconcile", reconcile_args(job)),
                      ("repair", repair_args(job, "--keys-file", keys)),
                      ("apply", apply_args(job))):
        p = run_cli(*cmd, check=False, timeout=180)
        assert p.returncode == EXIT_SCHEMA, f"{what} exited {p.returncode}:\n{p.stderr}"
        assert f"'{A}'" in p.stderr and f"'{B}'" in p.stderr, (what, p.stderr)
        assert "no capture instance" in p.stderr and "sp_cdc_enable_table" in p.stderr, \
            (what, p.stderr)
