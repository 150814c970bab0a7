"""mssql-cdc reconcile: silver, built by apply, proven equal to the source
table, or the keys that differ named with their failure type.

After stream + apply: only MATCH. With the workload still running: only
MATCH and IN_FLIGHT. Faults planted by another writer (delta-rs deletes,
updates and appends to silver) and a bronze change row dropped before apply
are found exactly: those keys, with the right failure type. The report
table has the reference's columns and types (delta-rs, DuckDB); a kill -9
inside reconcile and a rerun never write a run's report rows twice.
"""
import datetime
import json
import os
import subprocess

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from apply_jobs import apply, silver_of, wait_killed
from conftest import CLI, Sim, duckdb_with_delta, run_cli
from snapshot_jobs import new_job
from workload import DB, Items, Regional, delta_rows, insert_sql, set_sql, settle, where

EXIT_DIFFERS = 19
EXIT_UNVERIFIED = 20
# the exit codes of a run that found only MATCH and IN_FLIGHT: 0, or 20 when
# every bucket and key it compared was in flight (nothing verified)
ONLY_IN_FLIGHT = (0, EXIT_UNVERIFIED)


def reconcile_args(job, *extra, report=True):
    a = ["reconcile", "--captureInstance", job.spec.capture_instance,
         "--connectionString", job.sim.connection_string(DB),
         "--silver", silver_of(job), "--bronze", job.bronze,
         "--control-table", job.control, "--facts-table", job.facts, *extra]
    if report:
        a += ["--report-table", report_of(job)]
    return a


def report_of(job):
    return os.path.join(job.dir, "reconcile_report")


def result_of(p, want):
    """A reconcile run's JSON, its exit code checked: want, or one of a
    tuple of them (20 exactly when the run says it verified nothing)."""
    wanted = want if isinstance(want, tuple) else (want,)
    assert p.returncode in wanted, f"reconcile exited {p.returncode}:\n{p.stdout}\n{p.stderr}"
    res = json.loads(p.stdout.splitlines()[-1])
    assert set(res) >= {"run_id", "silver_version", "silver_lsn", "source_lsn", "buckets", "match",
                        "in_flight", "mismatch", "hashed", "failures"}, res
    if p.returncode in (0, EXIT_UNVERIFIED):
        assert (p.returncode == EXIT_UNVERIFIED) == (not res["verified"]), (p.returncode, res)
    return res


def reconcile(job, *extra, want=0, env=None, report=True):
    p = run_cli(*reconcile_args(job, *extra, report=report), env=env, check=False, timeout=180)
    return result_of(p, want)


def report_rows(job, run_id=None):
    rows = delta_rows(report_of(job))
    return [r for r in rows if run_id is None or r["run_id"] == run_id]


def key_rows(job, run_id):
    return {(json.loads(r["key"])["id"], r["failure_type"]) for r in report_rows(job, run_id)
            if r["key"] is not None}


@pytest.fixture
def built(sim, workdir):
    """A stream and apply of a small table, the workload stopped: silver equals the source."""
    spec = Items(key_space=1500)
    job, w = new_job(sim, workdir, spec, preload=0, seed=21)
    w.preload(300)
    with w:
        w.wait_for(40)
    job.stream()
    apply(job)
    return job, w


def test_silver_built_by_apply_matches_the_source(built):
    job, _ = built
    r = reconcile(job, "--bucket-rows", "40", "--sample", "1")
    assert r["buckets"] > 3 and r["match"] == r["buckets"] and r["mismatch"] == 0, r
    assert r["in_flight"] == 0 and r["failures"] == {} and r["hashed"] == r["buckets"], r
    assert r["source_rows"] == r["silver_rows"] == r["source_rows_hashed"] == r["silver_rows_hashed"]
    rows = report_rows(job, r["run_id"])
    assert len(rows) == r["buckets"] and all(x["status"] == "MATCH" for x in rows)
    assert sum(x["source_rows"] for x in rows) == r["source_rows"]
    assert all(x["source_key_sum"] == x["silver_key_sum"] for x in rows)



def test_planted_faults_in_silver_are_found_exactly(built):
    """Another writer deletes, changes and adds rows of silver (delta-rs):
    the next reconcile names exactly those keys, each with its failure type,
    and exits 19."""
    job, _ = built
    silver = silver_of(job)
    ids = sorted(r["id"] for r in delta_rows(silver, ["id"]))
    gone, changed, added = ids[5], ids[len(ids) // 2], ids[-1] + 1000
    DeltaTable(silver).delete(f"id = {gone}")
    DeltaTable(silver).update(predicate=f"id = {changed}", updates={"name": "'by hand'"})
    row = DeltaTable(silver).to_pyarrow_table(filters=[("id", "=", ids[0])])
    row = row.set_column(row.schema.get_field_index("id"), "id", pa.array([added], pa.int32()))
    write_deltalake(silver, row, mode="append")
    r = reconcile(job, "--bucket-rows", "50", "--sample", "1", want=EXIT_DIFFERS)
    assert r["failures"] == {"MISSING_TARGET": 1, "MISSING_SOURCE": 1, "RECORD_DIFF": 1}, r
    assert r["mismatch"] >= 1 and r["in_flight"] == 0, r
    assert key_rows(job, r["run_id"]) == {(gone, "MISSING_TARGET"), (added, "MISSING_SOURCE"),
                                          (changed, "RECORD_DIFF")}
    details = {json.loads(x["key"])["id"]: json.loads(x["detail"])
               for x in report_rows(job, r["run_id"]) if x["key"]}
    assert details[changed]["columns"] == "name", details
    assert details[added]["silver_start_lsn"].startswith("0x") and "columns" not in details[added]
    assert details[gone] == {}
    # Tier 1 alone (no sample) still sees the rows gone and added, not the change
    r0 = reconcile(job, "--bucket-rows", "50", "--sample", "0", want=EXIT_DIFFERS)
    assert r0["failures"] == {"MISSING_TARGET": 1, "MISSING_SOURCE": 1}, r0
    assert r0["hashed"] == r0["mismatch"] >= 1


def test_faults_in_many_buckets_are_named_by_their_columns(built):
    """Rows changed in several columns of several types (a decimal, a
    datetime2, a varbinary set to NULL, a string) and rows deleted, spread
    over the first, middle and last of many small buckets: Tier 2 keeps no
    source row, so each key is named by a second read of its bucket, while
    the next bucket is being read. Each change names exactly its columns."""
    job, _ = built
    silver = silver_of(job)
    rows = {r["id"]: r for r in delta_rows(silver)}
    ids = sorted(rows)
    q = len(ids) // 4
    changes = {
        ids[1]: {"amount": "coalesce(amount, 0) + 1"},
        ids[q]: {"at": "CAST('2001-02-03 04:05:06' AS TIMESTAMP)", "name": "'both'"},
        ids[2 * q]: {"blob": "NULL"} if rows[ids[2 * q]]["blob"] is not None else {"blob": "X'00'"},
        ids[-2]: {"name": "concat(name, 'x')", "amount": "coalesce(amount, 0) * 2 + 1"},
    }
    for k, upd in changes.items():
        DeltaTable(silver).update(predicate=f"id = {k}", updates=upd)
    gone = [ids[0], ids[q + 1], ids[-1]]
    DeltaTable(silver).delete(f"id IN ({', '.join(map(str, gone))})")
    r = reconcile(job, "--bucket-rows", "25", "--sample", "1", want=EXIT_DIFFERS)
    assert r["buckets"] > 8 and r["hashed"] == r["buckets"], r
    assert r["failures"] == {"MISSING_TARGET": 3, "RECORD_DIFF": 4}, r
    got = {json.loads(x["key"])["id"]: (x["failure_type"], json.loads(x["detail"]))
           for x in report_rows(job, r["run_id"]) if x["key"]}
    assert {k: v[0] for k, v in got.items()} == {**{k: "RECORD_DIFF" for k in changes},
                                                 **{k: "MISSING_TARGET" for k in gone}}, got
    for k, upd in changes.items():
        cols = [c for c in ("name", "amount", "at", "note", "blob") if c in upd]
        assert got[k][1]["columns"] == ", ".join(cols), (k, got[k])
        assert got[k][1]["silver_start_lsn"].startswith("0x"), got[k]
    assert all(got[k][1] == {} for k in gone), got


def test_a_bronze_change_dropped_before_apply_is_found(built):
    """An insert, an update and a delete reach bronze, then their rows are
    deleted from bronze before apply: silver misses them for good (a later
    change holds bronze's position past them), so they are no IN_FLIGHT."""
    job, w = built
    sim, spec = job.sim, job.spec
    src = {r["id"]: r for r in delta_rows(silver_of(job))}
    ids = sorted(src)
    new, upd, dele, later = ids[-1] + 7, ids[3], ids[10], ids[20]
    row = spec.new_row(w.rng, (new,))
    sim.run(insert_sql(spec, [row]), database=DB)
    sim.run(f"UPDATE dbo.{spec.name} SET {set_sql({'name': 'updated'})} WHERE {where(spec, (upd,))};",
            database=DB)
    sim.run(f"DELETE FROM dbo.{spec.name} WHERE {where(spec, (dele,))};", database=DB)
    sim.run(f"UPDATE dbo.{spec.name} SET {set_sql({'name': 'later'})} WHERE {where(spec, (later,))};",
            database=DB)
    settle(sim)
    job.stream()
    DeltaTable(job.bronze).delete(f"id IN ({new}, {upd}, {dele}) AND _operation <> 0")
    apply(job)
    r = reconcile(job, "--bucket-rows", "60", "--sample", "1", want=EXIT_DIFFERS)
    assert key_rows(job, r["run_id"]) == {(new, "MISSING_TARGET"), (dele, "MISSING_SOURCE"),
                                          (upd, "RECORD_DIFF")}, r


@pytest.fixture
def quick_sim(workdir):
    """A simulator whose capture harvests every millisecond: a commit the
    source read saw is in the change table by the time reconcile reads it."""
    data = os.path.join(workdir, "sim")
    os.makedirs(data)
    s = Sim(data, ["--capture-poll-ms", "1", "--capture-latency-ms", "0"])
    yield s
    s.stop()


def test_with_the_workload_running_only_match_and_in_flight(quick_sim, workdir):
    spec = Items(key_space=600)
    job, w = new_job(quick_sim, workdir, spec, preload=0, seed=3)
    w.preload(200)
    with w:
        w.wait_for(30)
        job.stream()
        apply(job)
        w.wait_for(w.transactions + 20)  # changes after what apply applied
        runs = [reconcile(job, "--bucket-rows", "30", "--sample", "1", want=ONLY_IN_FLIGHT)
                for _ in range(2)]
    for r in runs:
        assert r["mismatch"] == 0 and set(r["failures"]) <= {"IN_FLIGHT"}, r
        assert r["match"] + r["in_flight"] == r["buckets"], r
    assert any(r["in_flight"] or r["failures"] for r in runs), runs
    # once the workload stops and both sides catch up: only MATCH
    settle(quick_sim)
    job.stream()
    apply(job)
    r = reconcile(job, "--bucket-rows", "30", "--sample", "1")
    assert r["match"] == r["buckets"] and r["failures"] == {}, r


def test_report_table_has_the_reference_columns(built):
    job, _ = built
    DeltaTable(silver_of(job)).delete("id % 50 = 0")
    r = reconcile(job, "--bucket-rows", "100", "--sample", "0", want=EXIT_DIFFERS)
    want = [("run_id", "string"), ("run_at", "timestamp_ntz"), ("silver", "string"),
            ("silver_version", "long"), ("silver_lsn", "string"), ("source_lsn", "string"),
            ("bucket_lo", "string"), ("bucket_hi", "string"), ("source_rows", "long"),
            ("source_key_sum", "decimal(38,0)"), ("silver_rows", "long"),
            ("silver_key_sum", "decimal(38,0)"), ("status", "string"), ("hashed", "boolean"),
            ("key", "string"), ("failure_type", "string"), ("detail", "string")]
    got = [(f.name, f.type.type) for f in DeltaTable(report_of(job)).schema().fields]
    assert got == want
    rows = report_rows(job, r["run_id"])
    buckets = [x for x in rows if x["status"] is not None]
    keys = [x for x in rows if x["key"] is not None]
    assert len(buckets) == r["buckets"] and len(keys) == r["failures"]["MISSING_TARGET"]
    assert all(x["failure_type"] is None and x["key"] is None for x in buckets)
    assert all(x["status"] is None and x["hashed"] is None and x["source_rows"] is None for x in keys)
    # DuckDB reads the same rows and types
    con = duckdb_with_delta()
    desc = {c[0]: c[1] for c in con.execute(
        f"DESCRIBE SELECT * FROM delta_scan('{report_of(job)}')").fetchall()}
    assert desc["run_at"] == "TIMESTAMP" and desc["source_key_sum"] == "DECIMAL(38,0)", desc
    assert desc["hashed"] == "BOOLEAN" and desc["silver_version"] == "BIGINT", desc
    n = con.execute(f"SELECT count(*), sum(source_key_sum) FROM delta_scan('{report_of(job)}') "
                    f"WHERE run_id = '{r['run_id']}' AND status IS NOT NULL").fetchone()
    assert n[0] == r["buckets"] and n[1] == sum(x["source_key_sum"] for x in buckets)
    # the table says what it is
    assert DeltaTable(report_of(job)).metadata().configuration.get("mssql_cdc.kind") == "reconcile"


@pytest.mark.parametrize("point", ["before_report_commit", "after_report"])
def test_kill_inside_reconcile_then_rerun_writes_no_report_row_twice(built, point):
    job, _ = built
    first = reconcile(job, "--bucket-rows", "60")
    p = subprocess.Popen([CLI, *reconcile_args(job, "--bucket-rows", "60")],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env={**os.environ, "MCDC_CRASH_AT": point})
    wait_killed(p)
    again = reconcile(job, "--bucket-rows", "60")
    rows = report_rows(job)
    runs = {}
    for x in rows:
        runs.setdefault(x["run_id"], []).append((x["bucket_lo"], x["key"]))
    for run_id, got in runs.items():
        assert len(got) == len(set(got)), f"run {run_id} has a report row twice"
    assert len(runs[first["run_id"]]) == first["buckets"]
    assert len(runs[again["run_id"]]) == again["buckets"]
    # the killed run left either nothing or its whole report
    assert len(runs) == (2 if point == "before_report_commit" else 3), runs.keys()


def test_bad_arguments_are_refused_before_anything_is_read(built):
    job, _ = built
    for extra, what in ((["--sample", "2"], "--sample"), (["--bucket-rows", "0"], "--bucket-rows"),
                        (["--sample", "x"], "--sample"), (["--keys", "[bad"], "--keys")):
        p = run_cli(*reconcile_args(job, *extra), check=False)
        assert p.returncode == 2 and what in p.stderr, p.stderr
    p = run_cli(*reconcile_args(job, "--silver", job.bronze), check=False)
    assert p.returncode == 7, p.stderr
    # silver named otherwise than apply's --target: its control row is not
    # found, and without silver's position nothing tells in flight from
    # differing: refused (it read the change table from LSN 0 before)
    other = os.path.relpath(silver_of(job))
    assert other != silver_of(job)
    p = run_cli(*reconcile_args(job, "--silver", other), check=False)
    assert p.returncode == 2 and "has no applied_lsn in control table" in p.stderr, p.stderr
    assert not os.path.exists(report_of(job))


def test_a_composite_key_gets_a_whole_count_and_sampled_ranges(sim, workdir):
    """(region, id): one count of the whole table (rows differ: MISMATCH),
    ranges SQL Server cuts compared row by row with silver joined from the
    source's rows: a row missing and a row changed are found; a row silver
    has and the source lacks only shows in the count."""
    spec = Regional(ids_per_region=80)
    job, w = new_job(sim, workdir, spec, preload=0, seed=8)
    w.preload(250)
    job.stream()
    apply(job)
    r = reconcile(job, "--bucket-rows", "60", "--sample", "1")
    assert r["buckets"] == 1 and r["match"] == 1 and r["hashed"] >= 4 and r["failures"] == {}, r
    silver = silver_of(job)
    rows = sorted((x["region"], x["id"]) for x in delta_rows(silver, ["region", "id"]))
    (ga, gi), (ca, ci) = rows[3], rows[-2]
    DeltaTable(silver).delete(f"region = '{ga}' AND id = {gi}")
    DeltaTable(silver).update(predicate=f"region = '{ca}' AND id = {ci}", updates={"qty": "-777"})
    r = reconcile(job, "--bucket-rows", "60", "--sample", "1", want=EXIT_DIFFERS)
    assert r["mismatch"] == 1 and r["failures"] == {"MISSING_TARGET": 1, "RECORD_DIFF": 1}, r
    got = {(tuple(json.loads(x["key"]).values()), x["failure_type"])
           for x in report_rows(job, r["run_id"]) if x["key"]}
    assert got == {((ga, gi), "MISSING_TARGET"), ((ca, ci), "RECORD_DIFF")}
    details = [json.loads(x["detail"]) for x in report_rows(job, r["run_id"])
               if x["failure_type"] == "RECORD_DIFF"]
    assert len(details) == 1 and details[0]["columns"] == "qty", details
    bucket = [x for x in report_rows(job, r["run_id"]) if x["status"]][0]
    assert bucket["bucket_lo"] is None and bucket["bucket_hi"] is None
    assert bucket["source_key_sum"] is None and bucket["silver_rows"] == bucket["source_rows"] - 1


class Dated(Items):
    """A date primary key: Tier 1 counts its day numbers."""
    name = "dated"
    columns = (("d", "DATE NOT NULL", pa.date32()), ("v", "INT NULL", pa.int32()),
               ("note", "NVARCHAR(20) NULL", pa.string()))
    keys = primary_key = ("d",)

    def random_key(self, rng):
        return (datetime.date(1960, 1, 1) + datetime.timedelta(days=rng.randint(0, 30000)),)

    def new_row(self, rng, key):
        return {"d": key[0], "v": rng.randint(-9, 9999), "note": None if rng.random() < 0.5 else "n"}

    def changes(self, rng):
        return {"v": rng.randint(0, 99)}

    def move(self, rng, key, present):
        k = self.fresh_key(rng, present)
        return {"d": k[0]}, k


def test_a_date_key_is_counted_by_its_day_number(sim, workdir):
    spec = Dated()
    job, w = new_job(sim, workdir, spec, preload=0, seed=4)
    w.preload(300)
    job.stream()
    apply(job)
    r = reconcile(job, "--bucket-rows", "50", "--sample", "1")
    assert r["buckets"] >= 5 and r["match"] == r["buckets"] and r["failures"] == {}, r
    buckets = [x for x in report_rows(job, r["run_id"]) if x["status"]]
    days = [(x["d"] - datetime.date(1970, 1, 1)).days for x in delta_rows(silver_of(job), ["d"])]
    assert sum(x["source_key_sum"] for x in buckets) == sum(days)
    # every bound a date, the first bucket's lo and the last's hi too (the reference's)
    assert all(datetime.date.fromisoformat(json.loads(x[b]))
               for x in buckets for b in ("bucket_lo", "bucket_hi"))
    one = sorted(delta_rows(silver_of(job), ["d"]), key=lambda x: x["d"])[7]["d"]
    DeltaTable(silver_of(job)).delete(f"d = '{one.isoformat()}'")
    r = reconcile(job, "--bucket-rows", "50", "--sample", "0", want=EXIT_DIFFERS)
    assert r["mismatch"] == 1 and key_rows_of(job, r["run_id"], "d") == {(one.isoformat(), "MISSING_TARGET")}


def key_rows_of(job, run_id, col):
    return {(json.loads(r["key"])[col], r["failure_type"]) for r in report_rows(job, run_id)
            if r["key"] is not None}


def test_chunk_checks_of_a_chunked_snapshot(sim, workdir):
    """A chunked bootstrap, backfilled and applied: no chunk failure; bronze
    rows of a chunk deleted behind the stream's back: CHUNK_ROWS for it."""
    spec = Items(key_space=900)
    job, w = new_job(sim, workdir, spec, preload=400, seed=6)
    job.stream("--bootstrap", "--snapshot", "chunked")
    job.backfill_until_done("--chunk-rows", "100")
    job.stream()
    apply(job)
    r = reconcile(job, "--bucket-rows", "100", "--sample", "1")
    assert r["match"] == r["buckets"] and r["failures"] == {}, r
    DeltaTable(job.bronze).delete("_chunk = 1 AND id % 3 = 0")
    r = reconcile(job, "--bucket-rows", "100", want=EXIT_DIFFERS)
    assert r["failures"] == {"CHUNK_ROWS": 1} and r["mismatch"] == 0, r
    row = [x for x in report_rows(job, r["run_id"]) if x["failure_type"]][0]
    d = json.loads(row["detail"])
    assert d["chunk"] == 1 and d["facts_rows"] > d["bronze_rows"] > 0 and d["snapshot"].startswith("0x")
    assert row["bucket_lo"] is not None and row["key"] is None and row["source_lsn"] is None
