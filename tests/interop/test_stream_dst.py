"""Commit times across a daylight-saving fall-back, end to end.

The simulator runs as SQL Server 2022 in 'AUS Eastern Standard Time', whose clock
falls back at 2027-04-04 03:00 AEDT (16:00 UTC) to 02:00 AEST: the server-clock
times 02:00-03:00 happen twice. Its clock stands still at each chosen instant
(sim.set_clock @frozen = 1), so every commit's true UTC time is known. Every table
that carries a commit time must hold the true one: bronze's _commit_ts, the facts'
commit-time columns, the checkpoint's offsets and the control table's verdict; and a
seed's --as-of time maps to an LSN no later than the last commit at or before it."""
import datetime as dt
import glob
import json
import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable

from conftest import run_cli, start_sim

ZONE = "AUS Eastern Standard Time"
# UTC instants of the commits: before the fall-back (AEDT, +11), in the hour it repeats
# both times, and after
COMMITS = ["2027-04-03 14:30:00",  # 01:30:00 AEDT
           "2027-04-03 15:10:05",  # 02:10:05 AEDT, first pass
           "2027-04-03 15:50:30",  # 02:50:30 AEDT, first pass
           "2027-04-03 16:20:17",  # 02:20:17 AEST, second pass
           "2027-04-03 16:45:00",  # 02:45:00 AEST, second pass
           "2027-04-03 17:30:00"]  # 03:30:00 AEST
FIRST_RUN = 4  # commits streamed by the first run: it ends in the repeated hour


@pytest.fixture
def dst_sim(workdir):
    # capture only when told, right after each commit: no idle mapping entries
    s = start_sim(workdir, capture_poll_ms=0)
    yield s
    s.stop()


def utc(text):
    return dt.datetime.fromisoformat(text)


def commit_at(sim, when, i):
    sim.run(f"EXEC sim.set_clock @utc = '{when}', @frozen = 1;")
    sim.run(f"INSERT INTO dbo.t (id, v) VALUES ({i}, N'v{i}'); "
            "EXEC sim.run_capture @ignore_latency = 1;", database="shop")


def truth(sim, n):
    """{commit LSN: its true UTC time} of the first n commits."""
    rows = sim.run("SELECT CONVERT(varchar(22), start_lsn, 1), "
                   "CONVERT(varchar(23), tran_end_time, 126) FROM cdc.lsn_time_mapping "
                   "ORDER BY start_lsn", database="shop")
    assert len(rows) == n, rows
    # the server clock's own readings: the second pass reads before the first
    local = [utc(t) for _, t in rows]
    assert n < 4 or local[3] < local[2]
    return {lsn: utc(c) for (lsn, _), c in zip(rows, COMMITS)}


def stream(sim, d, *extra):
    return run_cli("stream", "--captureInstance", "dbo_t",
                   "--connectionString", sim.connection_string("shop"),
                   "--target", os.path.join(d, "bronze"), "--app-id", "t-v1",
                   "--checkpoint", os.path.join(d, "ckpt"),
                   "--facts-table", os.path.join(d, "facts"),
                   "--control-table", os.path.join(d, "control"),
                   "--maxCommitsPerBatch", "1", "--trigger", "availableNow", "--json", *extra)


def check_tables(d, when, newest, run_from, watermark):
    """Every commit time in bronze, the facts, the offsets and the verdict is the true
    one; `newest` is the LSN of the newest commit the source had when the run that
    wrote batches `run_from`... read it, and `watermark` the commit time its retention
    watermark is (None: min_lsn was no commit, as before the first cleanup)."""
    bronze = DeltaTable(os.path.join(d, "bronze")).to_pyarrow_table().to_pylist()
    assert bronze and all(r["_commit_ts"] == when[r["_start_lsn"]] for r in bronze), \
        [(r["_start_lsn"], r["_commit_ts"]) for r in bronze]
    facts = [r for r in DeltaTable(os.path.join(d, "facts")).to_pyarrow_table().to_pylist()
             if r["event"] is None]
    assert facts
    for r in facts:
        got = {k: r[k] for k in ("end_commit_ts", "min_commit_ts", "max_commit_ts")}
        want = {"end_commit_ts": when[r["end_lsn"]], "min_commit_ts": when[r["min_lsn"]],
                "max_commit_ts": when[r["max_lsn"]]}
        assert got == want, (r["batch_id"], got, want)
        if r["batch_id"] >= run_from:
            assert r["source_max_commit_ts"] == when[newest], r
            assert r["retention_watermark_ts"] == watermark, r
    for path in glob.glob(os.path.join(d, "ckpt", "offsets", "[0-9]*")):
        with open(path) as f:
            end = json.load(f)["end"]
        assert utc(end["commit_ts"]) == when[end["lsn"]], end
    verdict = DeltaTable(os.path.join(d, "control")).to_pyarrow_table().to_pylist()
    assert len(verdict) == 1
    last = max(r["end_lsn"] for r in facts)
    assert verdict[0]["end_commit_ts"] == when[last]
    assert verdict[0]["finalized_until"] == when[last].replace(minute=0, second=0)


def test_commit_times_across_a_fall_back_are_the_true_utc_times_everywhere(dst_sim, workdir):
    sim = dst_sim
    sim.run(f"EXEC sim.set_time_zone @zone = N'{ZONE}'; "
            "EXEC sim.set_clock @utc = '2027-04-03 13:00:00', @frozen = 1; CREATE DATABASE shop;")
    sim.run("CREATE TABLE dbo.t (id INT NOT NULL PRIMARY KEY, v NVARCHAR(20) NULL); "
            "EXEC sys.sp_cdc_enable_db; EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', "
            "@source_name = N't', @role_name = NULL;", database="shop")
    sim.run("EXEC sim.run_capture @ignore_latency = 1;", database="shop")
    for i, when in enumerate(COMMITS[:FIRST_RUN]):
        commit_at(sim, when, i)
    when = truth(sim, FIRST_RUN)
    newest = max(when)
    # the first run ends in the repeated hour's second pass, and so does max_lsn
    p = stream(sim, workdir)
    assert p.stdout.count('"batch_id"') == FIRST_RUN, p.stdout
    # min_lsn is the instance's start LSN, which no commit holds: no watermark yet
    check_tables(workdir, when, newest, 0, None)

    # seed --as-of a UTC time: the last commit at or before it, or an earlier one (its
    # changes are replayed), never a later one (they would be skipped)
    lsns = sorted(when)
    sim.run("EXEC sim.set_clock @utc = '2027-04-03 16:40:00', @frozen = 1;")
    copy = os.path.join(workdir, "copy")
    os.makedirs(copy)
    pq.write_table(pa.table({"id": pa.array([0], pa.int32()), "v": pa.array(["v0"])}),
                   os.path.join(copy, "part-0.parquet"))
    for n, (as_of, want) in enumerate((("2027-04-03T15:55:00", lsns[0]),
                                       ("2027-04-03T16:30:00", lsns[3]))):
        p = run_cli("seed", "--captureInstance", "dbo_t",
                    "--connectionString", sim.connection_string("shop"),
                    "--target", os.path.join(workdir, f"seeded{n}"), "--from", copy,
                    "--as-of", as_of)
        got = json.loads(p.stdout)
        last_before = max(lsn for lsn in lsns if when[lsn] <= utc(as_of))
        assert got["lsn"] <= last_before, (as_of, got, last_before)
        assert got["lsn"] == want, (as_of, got)
        assert utc(got["commit_ts"]) == when[got["lsn"]], got

    # cleanup moves min_lsn to the commit in the first pass of the repeated hour
    mark = sorted(when)[2]
    sim.run("EXEC sys.sp_cdc_cleanup_change_table @capture_instance = N'dbo_t', "
            f"@low_water_mark = {mark};", database="shop")
    for i, at in enumerate(COMMITS[FIRST_RUN:], FIRST_RUN):
        commit_at(sim, at, i)
    # the mapping's rows below the mark are gone with the cleanup: the later commits'
    # true times are the commits' after them
    rows = sim.run("SELECT CONVERT(varchar(22), start_lsn, 1) FROM cdc.lsn_time_mapping "
                   "WHERE start_lsn > CONVERT(binary(10), '%s', 1) ORDER BY start_lsn" % max(when),
                   database="shop")
    assert len(rows) == len(COMMITS) - FIRST_RUN, rows
    when.update({lsn: utc(c) for (lsn,), c in zip(rows, COMMITS[FIRST_RUN:])})
    stream(sim, workdir)
    check_tables(workdir, when, max(when), FIRST_RUN, when[mark])
