"""Progress on long work (`--progress auto|line|json|none`): snapshot, the
stream's bootstrap, seed, backfill, apply and reconcile report how far they
are on stderr while stdout keeps the command's result alone.

One simulator and one table of ROWS rows (sim.bulk_load_table) serve every
test. MCDC_PROGRESS_JSON_MS (the CLI's test hook) makes the JSON lines come
at every report (every 200 ms) instead of every 5 s, so that a run of a
second shows more than its phases."""
import json
import os
import pty
import select
import shutil
import subprocess
import tempfile

import pytest
from deltalake import DeltaTable

from conftest import CLI, run_cli, start_sim

ROWS = 300000
FAST_JSON = {"MCDC_PROGRESS_JSON_MS": "1"}


@pytest.fixture(scope="module")
def env():
    d = tempfile.mkdtemp(prefix="mcdc-prog-")
    sim = start_sim(d)
    try:
        sim.run("CREATE DATABASE shop;")
        sim.run("CREATE TABLE dbo.t (id INT NOT NULL PRIMARY KEY, a INT NULL, b NVARCHAR(40) NULL,"
                " c DECIMAL(18,2) NULL, d DATETIME2(3) NULL);", database="shop")
        sim.run(f"EXEC sim.bulk_load_table @table = N'dbo.t', @rows = {ROWS}, @seed = 1;",
                database="shop")
        sim.run("EXEC sys.sp_cdc_enable_db; EXEC sys.sp_cdc_enable_table @source_schema = N'dbo',"
                " @source_name = N't', @role_name = NULL;", database="shop")
        # a captured commit: max_lsn past the start, for seed --as-of
        sim.run("UPDATE dbo.t SET a = 7 WHERE id = 1; EXEC sim.run_capture @ignore_latency = 1;",
                database="shop")
        yield sim, d
    finally:
        sim.stop()
        shutil.rmtree(d, ignore_errors=True)


def source(sim):
    return ["--captureInstance", "dbo_t", "--connectionString", sim.connection_string("shop")]


def progress_lines(stderr):
    """The {"progress": {...}} lines of stderr, each a whole JSON object."""
    out = []
    for line in stderr.splitlines():
        if line.startswith('{"progress"'):
            out.append(json.loads(line)["progress"])
        else:
            assert '"progress"' not in line, line
    return out


def phases(lines):
    """The lines grouped by phase (its number: the same name again, a
    backfill's next wave, is another phase)."""
    groups = []
    for p in lines:
        if not groups or groups[-1][0]["phase_number"] != p["phase_number"]:
            assert not groups or p["phase_number"] > groups[-1][0]["phase_number"]
            groups.append([])
        groups[-1].append(p)
    return groups


def check_lines(lines, job):
    """Every line of the job; rows never go back within a phase; one done
    line, the last."""
    assert lines, "no progress line"
    assert all(p["job"] == job for p in lines), lines
    for g in phases(lines):
        rows = [p["rows"] for p in g]
        assert rows == sorted(rows), (g[0]["phase"], rows)
        parts = [p["parts"] for p in g]
        assert parts == sorted(parts), (g[0]["phase"], parts)
    assert [p["done"] for p in lines] == [False] * (len(lines) - 1) + [True], lines
    return lines[-1]


def snapshot(sim, target, *extra, env=None):
    return run_cli("snapshot", *source(sim), "--target", target, "--numPartitions", "2", *extra,
                   env=env)


def delta_rows(path):
    return DeltaTable(path).to_pyarrow_table().num_rows


def test_snapshot_json_lines_a_phase_an_estimate_and_a_done_line_of_the_rows_written(env):
    sim, d = env
    target = os.path.join(d, "snap-json", "bronze")
    p = snapshot(sim, target, "--progress", "json", env=FAST_JSON)
    lines = progress_lines(p.stderr)
    done = check_lines(lines, "snapshot")
    reading = [x for x in lines if x["phase"] == "reading"]
    # the read's first line: the server's estimate of the rows, the ranges
    assert reading and reading[0]["rows"] == 0 and reading[0]["rows_estimated"] is True
    assert reading[0]["rows_total"] == ROWS  # the simulator's sp_spaceused counts them
    assert reading[0]["parts_name"] == "ranges" and reading[0]["parts_total"] == 2
    assert [g[0]["phase"] for g in phases(lines)] == ["reading", "committing"]
    assert done["phase"] == "committing" and done["rows"] == ROWS == delta_rows(target)
    assert done["rows_total"] == ROWS and done["rows_estimated"] is False
    # stdout: the offset alone
    assert list(json.loads(p.stdout)) == ["lsn", "commit_ts"] and len(p.stdout.splitlines()) == 1


def test_snapshot_progress_none_prints_none_and_stdout_is_the_same(env):
    sim, d = env
    a = snapshot(sim, os.path.join(d, "snap-none", "bronze"), "--progress", "none", env=FAST_JSON)
    b = snapshot(sim, os.path.join(d, "snap-json2", "bronze"), "--progress", "json")
    assert '{"progress"' not in a.stderr and "\r" not in a.stderr
    assert progress_lines(b.stderr)
    assert a.stdout == b.stdout  # the same offset: no commit since
    assert "snapshot taken" in a.stderr and "300000 rows at" in a.stderr


def run_on_a_pty(args):
    """args with stderr on a pseudo-terminal (auto: the line mode); returns
    (exit code, stdout, what the terminal got)."""
    master, slave = pty.openpty()
    p = subprocess.Popen([CLI, *args], stdout=subprocess.PIPE, stderr=slave)
    os.close(slave)
    got = b""
    while True:
        ready, _, _ = select.select([master], [], [], 0.2)
        if ready:
            try:
                data = os.read(master, 65536)
            except OSError:  # the other side closed: the process ended
                break
            if not data:
                break
            got += data
        elif p.poll() is not None:
            break
    os.close(master)
    out = p.stdout.read().decode()
    return p.wait(30), out, got.decode()


def test_snapshot_line_mode_on_a_terminal_redraws_and_ends_its_line(env):
    sim, d = env
    rc, out, tty = run_on_a_pty(["snapshot", *source(sim), "--target",
                                 os.path.join(d, "snap-tty", "bronze"), "--numPartitions", "2"])
    assert rc == 0, tty
    assert '{"progress"' not in tty  # auto on a terminal: the line
    redraws = tty.split("\r\x1b[K")
    assert len(redraws) >= 3, repr(tty)  # reading, committing, done
    assert redraws[1].startswith("snapshot, reading: 0 of ~300.0k rows (0%), 0 of 2 ranges")
    last = redraws[-1]
    # the last line stays, ended by a newline (the terminal shows \r\n),
    # before the command's own lines
    assert last.startswith("snapshot, committing: 300.0k of 300.0k rows (100%)"), repr(last)
    line, rest = last.split("\r\n", 1)
    assert "snapshot taken" in rest and "\r" not in line
    assert list(json.loads(out)) == ["lsn", "commit_ts"]


def test_line_mode_clears_its_line_before_a_message(env):
    """apply --verbose writes info lines between its phases: each starts on a
    line of its own, the progress line cleared first, and drawn again."""
    sim, d = env
    bronze = os.path.join(d, "snap-json", "bronze")
    if not os.path.exists(bronze):
        snapshot(sim, bronze, "--progress", "none")
    w = os.path.join(d, "silver-tty")
    rc, out, tty = run_on_a_pty(["apply", *source(sim), "--bronze", bronze,
                                 "--target", os.path.join(w, "silver"),
                                 "--control-table", os.path.join(w, "control"), "--verbose"])
    assert rc == 0, tty
    infos = tty.split("mssql-cdc: info: ")
    assert len(infos) >= 3, repr(tty)
    for before in infos[:-1]:
        line = before.rsplit("\n", 1)[-1]
        assert line == "" or line.endswith("\r\x1b[K"), repr(before[-200:])
    assert "apply, rebuilding: 300.0k of 300.0k rows (100%)" in tty
    assert json.loads(out)["rebuilt"] is True


def test_stream_bootstrap_reports_its_snapshot_and_batches_go_on(env):
    sim, d = env
    w = os.path.join(d, "stream")
    p = run_cli("stream", *source(sim), "--target", os.path.join(w, "bronze"), "--app-id", "t-v1",
                "--checkpoint", os.path.join(w, "ckpt"), "--trigger", "once", "--bootstrap",
                "--numPartitions", "2", "--progress", "json", "--json", env=FAST_JSON)
    done = check_lines(progress_lines(p.stderr), "snapshot")
    assert done["rows"] == ROWS == delta_rows(os.path.join(w, "bronze"))
    # stdout: the batches' JSON lines, nothing of the progress
    assert p.stdout.strip() and all("batch_id" in json.loads(x) for x in p.stdout.splitlines())


def test_backfill_reports_each_wave_and_the_snapshots_chunks(env):
    sim, d = env
    w = os.path.join(d, "chunked")
    common = ["--target", os.path.join(w, "bronze"), "--app-id", "t-v1",
              "--facts-table", os.path.join(w, "facts")]
    run_cli("stream", *source(sim), *common, "--checkpoint", os.path.join(w, "ckpt"),
            "--trigger", "once", "--bootstrap", "--snapshot", "chunked", "--quiet")
    p = run_cli("backfill", *source(sim), *common, "--numPartitions", "2", "--chunk-rows", "40000",
                "--target-wave-seconds", "0", "--progress", "json", env=FAST_JSON)
    status = json.loads(p.stdout)
    assert status["done"] and status["chunks_total"] >= 7
    lines = progress_lines(p.stderr)
    done = check_lines(lines, "backfill")
    groups = phases(lines)
    assert groups[0][0]["phase"] == "planning"
    waves = [g for g in groups if g[0]["phase"] == "reading"]
    assert len(waves) >= 4  # a wave a phase: two chunks each
    for g in waves:
        assert g[0]["parts_name"] == "chunks" and g[0]["parts_total"] in (1, 2)
    # the snapshot's chunks: done of the plan's, never back, all at the end
    job = [x["job_parts"] for x in lines if x["job_parts"] is not None]
    assert job == sorted(job) and job[0] == 0
    assert done["job_parts_name"] == "chunks"
    assert done["job_parts"] == done["job_parts_total"] == status["chunks_total"]


def test_apply_and_reconcile_report_their_phases(env):
    sim, d = env
    bronze = os.path.join(d, "snap-json", "bronze")
    if not os.path.exists(bronze):
        snapshot(sim, bronze, "--progress", "none")
    w = os.path.join(d, "silver")
    silver, control = os.path.join(w, "silver"), os.path.join(w, "control")
    p = run_cli("apply", *source(sim), "--bronze", bronze, "--target", silver,
                "--control-table", control, "--progress", "json", env=FAST_JSON)
    lines = progress_lines(p.stderr)
    done = check_lines(lines, "apply")
    names = [g[0]["phase"] for g in phases(lines)]
    # Each of the snapshot's two readers wrote files of its own, whose key
    # ranges stand apart: the rebuild reads bronze once expecting its rows
    # in key order (replayed rather than sorted), and finds them so (a
    # second 'reading bronze' would be the sort after rows out of order)
    assert names == ["reading bronze", "sorting", "rebuilding"], names
    first = lines[0]
    # bronze's rows by its files' statistics (the rebuild's scan prunes
    # below the snapshot's LSN: at most that many)
    assert first["rows"] == 0 and first["rows_total"] == ROWS
    assert done["rows"] == ROWS and done["parts_name"] == "files"
    assert json.loads(p.stdout)["rebuilt"] is True
    # reconcile: Tier 1 counts silver's rows, Tier 2 hashes both sides'
    p = run_cli("reconcile", *source(sim), "--silver", silver, "--bronze", bronze,
                "--control-table", control, "--bucket-rows", "20000", "--sample", "1",
                "--progress", "json", env=FAST_JSON)
    lines = progress_lines(p.stderr)
    done = check_lines(lines, "reconcile")
    groups = phases(lines)
    assert [g[0]["phase"] for g in groups] == ["counting", "comparing"]
    assert groups[0][0]["rows_total"] == ROWS and groups[0][-1]["rows"] <= ROWS
    res = json.loads(p.stdout)
    assert res["match"] == res["buckets"] == res["hashed"] and res["buckets"] >= 10
    assert done["parts_name"] == "buckets" and done["parts"] == done["parts_total"] == res["hashed"]
    assert done["rows"] == done["rows_total"] == 2 * ROWS


def test_seed_reports_the_key_check_and_the_read_by_the_copys_metadata(env):
    sim, d = env
    bronze = os.path.join(d, "snap-json", "bronze")
    if not os.path.exists(bronze):
        snapshot(sim, bronze, "--progress", "none")
    lsn = DeltaTable(bronze).to_pyarrow_table(columns=["_start_lsn"])["_start_lsn"][0].as_py()
    target = os.path.join(d, "seeded", "bronze")
    p = run_cli("seed", *source(sim), "--target", target, "--from", bronze, "--as-of", lsn,
                "--progress", "json", env=FAST_JSON)
    lines = progress_lines(p.stderr)
    done = check_lines(lines, "seed")
    groups = phases(lines)
    assert [g[0]["phase"] for g in groups] == ["checking keys", "reading", "committing"]
    assert all(g[0]["rows_total"] == ROWS and not g[0]["rows_estimated"] for g in groups[:2])
    assert done["rows"] == ROWS == delta_rows(target)
    assert json.loads(p.stdout)["lsn"] == lsn


def test_progress_mode_is_checked_and_documented():
    for cmd in ("snapshot", "seed", "backfill", "apply", "reconcile", "stream"):
        p = run_cli(cmd, "--progress", "fancy", check=False)
        assert p.returncode == 2 and "--progress: expected auto, line, json or none" in p.stderr
        p = run_cli(cmd, "--progress", check=False)
        assert p.returncode == 2 and "--progress needs a value" in p.stderr
        assert "--progress MODE" in run_cli(cmd, "--help").stdout, cmd
    readme = open(os.path.join(os.path.dirname(__file__), "..", "..", "README.md")).read()
    assert "--progress" in readme and "MCDC_PROGRESS_JSON_MS" in readme


def test_every_command_takes_verbose(env):
    sim, d = env
    for cmd in ("stream", "snapshot", "seed", "backfill", "apply", "reconcile", "repair",
                "finalization", "table-rows"):
        assert "--verbose" in run_cli(cmd, "--help").stdout, cmd
    bronze = os.path.join(d, "snap-json", "bronze")
    if not os.path.exists(bronze):
        snapshot(sim, bronze, "--progress", "none")
    p = run_cli("table-rows", bronze, "--verbose")
    assert len(p.stdout.splitlines()) == ROWS
    assert f"mssql-cdc: {ROWS} rows of {bronze}" in p.stderr
    # the snapshot's own lines at info: what it read
    p = run_cli("snapshot", *source(sim), "--target", os.path.join(d, "snap-verbose", "bronze"),
                "--numPartitions", "2", "--verbose", "--progress", "none")
    assert "mssql-cdc: info: snapshot of dbo.t stamped 0x" in p.stderr
    assert "2 ranges on 2 connections" in p.stderr
    assert f"mssql-cdc: info: snapshot of dbo.t: {ROWS} rows read and committed in" in p.stderr
    control = os.path.join(d, "fin", "control")
    p = run_cli("finalization", "advance", "--control-table", control, "--table", "x",
                "--end-lsn", "0x00000001000000010001", "--end-commit-ts", "2026-01-01T10:30:00",
                "--verbose")
    assert "finalized_until 2026-01-01T10:00:00.000" in p.stdout
    assert "mssql-cdc: control table" in p.stderr and "moved by this call" in p.stderr
    p = run_cli("finalization", "show", "--control-table", control, "--table", "y", "--verbose")
    assert "holds no verdict for y" in p.stderr
