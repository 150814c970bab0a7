"""The CLI runs of the snapshot tests (stream, backfill, seed against one
working directory), which commands this build has, and the checks on bronze,
facts and the verdict that hold after any crash."""
import functools
import json
import os
import signal
import subprocess
import time
from collections import defaultdict

import pytest

from conftest import CLI, run_cli
from workload import DB, Workload, delta_rows, enable_cdc, make_db, purge_all

# every run of a stream whose snapshots are chunked (--bootstrap acts on a new
# checkpoint only; the mode is given each time, as one mode holds while a
# snapshot is open)
CHUNKED = ("--bootstrap", "--snapshot", "chunked")
# backfill's exit code per BackfillStatus state
BACKFILL_EXIT = {"done": 0, "running": 14, "waiting_headroom": 15, "waiting_metrics": 16,
                 "no_snapshot": 17}
OTHER_MODE_OPEN = 18


@functools.lru_cache(maxsize=None)
def missing(feature):
    """Why this build cannot run feature, or None. Asked of the CLI itself,
    so the tests run as soon as the command lands."""
    if feature in ("backfill", "chunked"):
        p = run_cli("backfill", "--help", check=False)
        if p.returncode == 2 and "unknown command" in p.stderr:
            return "mssql-cdc backfill is missing ('mssql-cdc backfill --help': unknown command)"
    if feature == "chunked":
        p = run_cli("stream", "--help", check=False)
        if "chunked is not built yet" in p.stdout + p.stderr:
            return "mssql-cdc stream --snapshot chunked is not built yet (stream --help says so)"
    if feature == "resnapshot":
        p = run_cli("stream", "--on-data-loss", "resnapshot", "--help", check=False)
        if p.returncode == 2 and "unknown argument '--on-data-loss'" in p.stderr:
            return "mssql-cdc stream --on-data-loss is missing (unknown argument)"
    return None


def require(*features):
    for f in features:
        reason = missing(f)
        if reason:
            pytest.skip(reason)


class Job:
    """One stream's tables and checkpoint under a directory, and its commands."""

    def __init__(self, sim, spec, d, app_id="snap-v1"):
        self.sim, self.spec, self.dir, self.app_id = sim, spec, d, app_id
        self.bronze = os.path.join(d, "bronze")
        self.facts = os.path.join(d, "facts")
        self.control = os.path.join(d, "control")
        self.ckpt = os.path.join(d, "ckpt")
        self.plans = self.bronze + "_snapshot_plans"

    def source(self, keys=True):
        a = ["--captureInstance", self.spec.capture_instance,
             "--connectionString", self.sim.connection_string(DB)]
        if keys and self.spec.snapshot_keys:
            a += ["--snapshotKeys", json.dumps(list(self.spec.snapshot_keys))]
        return a

    def stream_args(self, *extra, trigger="availableNow", keys=True):
        return ["stream", *self.source(keys), "--target", self.bronze, "--app-id", self.app_id,
                "--checkpoint", self.ckpt, "--facts-table", self.facts,
                "--control-table", self.control, "--granularity", "minute",
                "--trigger", trigger, "--quiet", *extra]

    def backfill_args(self, *extra, keys=True):
        return ["backfill", *self.source(keys), "--target", self.bronze, "--app-id", self.app_id,
                "--facts-table", self.facts, *extra]

    def stream(self, *extra, env=None, check=True, timeout=180):
        return run_cli(*self.stream_args(*extra), env=env, check=check, timeout=timeout)

    def spawn(self, args, env=None):
        """A background run (stream with a processingTime trigger, backfill)."""
        e = dict(os.environ)
        if env:
            e.update(env)
        return subprocess.Popen([CLI, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, env=e)

    def backfill(self, *extra, env=None, check=True, keys=True):
        """One backfill call: its BackfillStatus, checked against its exit code."""
        p = run_cli(*self.backfill_args(*extra, keys=keys), env=env, check=False, timeout=180)
        if not check:
            return p, None
        return p, status_of(p)

    def backfill_until_done(self, *extra, timeout=120, env=None):
        """Calls backfill until it says done; no_snapshot while the stream has
        not opened the snapshot yet. Returns every status."""
        statuses = []
        deadline = time.monotonic() + timeout
        while True:
            _, st = self.backfill(*extra, env=env)
            statuses.append(st)
            if st["state"] == "done":
                return statuses
            assert st["state"] in ("running", "no_snapshot"), st
            assert time.monotonic() < deadline, f"backfill not done in {timeout} s: {statuses[-3:]}"
            if st["state"] == "no_snapshot":
                time.sleep(0.1)

    def facts_rows(self):
        return delta_rows(self.facts)

    def bronze_rows(self):
        return delta_rows(self.bronze)

    def versions(self):
        """Each table's Delta version (None: no table): nothing written keeps them."""
        from deltalake import DeltaTable
        out = {}
        for name in ("bronze", "facts", "control", "plans"):
            path = getattr(self, name)
            out[name] = DeltaTable(path).version() \
                if os.path.exists(os.path.join(path, "_delta_log")) else None
        return out

    def events(self, name):
        return [r for r in self.facts_rows() if r["event"] == name]


def new_job(sim, workdir, spec, preload, seed=1):
    """spec's table with preload rows from before CDC (only a snapshot has
    them), CDC enabled, its Job under workdir and a workload on it, not
    started yet."""
    make_db(sim, spec)
    w = Workload(sim, spec, seed=seed)
    w.preload(preload, capture=False)
    enable_cdc(sim, spec)
    return Job(sim, spec, workdir), w


def lose_changes(job, w):
    """With the stream stopped and the workload writing on, CDC cleanup passes
    the checkpoint's position: the changes since are gone."""
    w.wait_for(5)
    purge_all(job.sim, job.spec)
    w.wait_for(3)


def generation_state(job):
    """The checkpoint's _mssql_cdc_generation.json, or None."""
    path = os.path.join(job.ckpt, "_mssql_cdc_generation.json")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def assert_new_generation(job, n=1):
    """Generation n committed: its state file, checkpoint and one resnapshot
    row under its app id, with the lost range."""
    state = generation_state(job)
    assert state and state["generation"] == n, state
    assert state["snapshot_lsn"] and state["commit_ts"] and state["at"], state
    assert not state.get("recovering"), state
    assert os.path.isdir(os.path.join(job.ckpt, "_generations", str(n)))
    rows = job.events("resnapshot")
    assert len(rows) == 1, rows
    (re,) = rows
    assert re["app_id"] == f"{job.app_id}.g{n}", re
    assert re["lost_from_ts"] is not None and re["lost_to_ts"] is not None, re
    assert re["min_lsn"] == re["max_lsn"] == state["snapshot_lsn"], (re, state)
    return state


def status_of(p):
    """backfill's stdout, one JSON BackfillStatus, and its exit code per state
    (p: a finished run, or (exit code, stdout, stderr))."""
    rc, out, err = p if isinstance(p, tuple) else (p.returncode, p.stdout, p.stderr)
    try:
        st = json.loads(out)
    except ValueError:
        raise AssertionError(f"backfill printed no status (exit {rc}):\n{out}\n{err}") from None
    assert set(st) >= {"snapshot", "chunks_done", "chunks_total", "done", "paused", "state",
                       "reason"}, st
    assert rc == BACKFILL_EXIT.get(st["state"], -1000), (rc, st, err)
    assert st["done"] == (st["state"] == "done"), st
    if st["chunks_total"] is not None:
        assert 0 <= st["chunks_done"] <= st["chunks_total"], st
    return st


def kill(proc):
    """SIGKILL a background run we started, and reap it."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGKILL)
    out, err = proc.communicate(timeout=30)
    return out, err


def wait_killed(proc, timeout=90):
    """A run with MCDC_CRASH_AT set must die of SIGKILL at its point."""
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill(proc)
        raise AssertionError("the crash point was never reached") from None
    assert proc.returncode == -signal.SIGKILL, (proc.returncode, err[-2000:])
    return err


def stop_cleanly(proc, timeout=60):
    """SIGTERM: the stream finishes its batch and exits 0."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, (proc.returncode, err[-3000:])
    return out, err


# ---- checks that hold after any crash --------------------------------------------------

def assert_changes_once(job):
    """Every change row of the capture instance once in bronze."""
    seen = [(r["_start_lsn"], r["_seqval"], r["_operation"]) for r in job.bronze_rows()
            if r["_operation"] != 0]
    assert len(seen) == len(set(seen)), "bronze holds a change twice"
    ct = job.sim.run(f"SELECT count(*) FROM cdc.{job.spec.capture_instance}_CT", database=DB)[0][0]
    return len(seen), ct


def chunk_detail(row):
    d = json.loads(row["detail"])
    return d["snapshot"], d["chunk"]


def assert_chunks_once(job):
    """No chunk read twice into bronze: one snapshot_chunk facts row per
    chunk, bronze holding exactly its `rows` rows of it, from one wave (one
    stamp, at or after S), no key twice inside it; the chunks of a completed
    snapshot are numbered without a gap and its completion row counts them."""
    facts = job.facts_rows()
    bronze = job.bronze_rows()
    recorded = defaultdict(list)
    for f in facts:
        if f["event"] == "snapshot_chunk":
            recorded[chunk_detail(f)].append(f)
    twice = {k: len(v) for k, v in recorded.items() if len(v) > 1}
    assert not twice, f"chunks with more than one snapshot_chunk row: {twice}"
    held = defaultdict(list)
    for r in bronze:
        if r["_operation"] == 0 and r.get("_chunk") is not None:
            held[(r["_snapshot"], r["_chunk"])].append(r)
    unrecorded = sorted(set(held) - set(recorded))
    assert not unrecorded, f"bronze holds chunks no snapshot_chunk row records: {unrecorded}"
    for k, (f,) in sorted(recorded.items()):
        rows = held.get(k, [])
        assert len(rows) == f["rows"], \
            f"chunk {k}: bronze holds {len(rows)} rows, its facts row says {f['rows']}"
        stamps = {r["_start_lsn"] for r in rows}
        assert len(stamps) <= 1, f"chunk {k} read in more than one wave: stamps {stamps}"
        assert all(s >= k[0] for s in stamps), f"chunk {k} stamped before its snapshot: {stamps}"
        keys = [job.spec.fold(job.spec.key_of(r)) for r in rows]
        assert len(keys) == len(set(keys)), f"chunk {k} holds a key twice"
    per_snapshot = defaultdict(set)
    for s, c in recorded:
        per_snapshot[s].add(c)
    for done in (f for f in facts if f["event"] in ("bootstrap", "resnapshot")):
        s = done["max_lsn"]
        if s not in per_snapshot:
            continue  # a whole snapshot or a seed
        chunks = sorted(per_snapshot[s])
        assert chunks == list(range(chunks[0], chunks[0] + len(chunks))), \
            f"snapshot {s}: chunks {chunks} leave a gap"
        total = sum(recorded[(s, c)][0]["rows"] for c in chunks)
        assert done["rows"] == total, \
            f"snapshot {s}: its completion row counts {done['rows']} rows, its chunks {total}"
        detail = json.loads(done["detail"]) if done["detail"] else {}
        if isinstance(detail.get("chunks"), int):
            assert detail["chunks"] == len(chunks), (detail, chunks)
    return sum(len(v) for v in held.values())


def assert_verdict_behind_data(job, previous=None):
    """finalized_until never after the newest end_commit_ts of a batch whose
    rows bronze holds (read in that order: verdict, facts, bronze, each later
    read seeing at least what the one before saw), and never moving back."""
    control = delta_rows(job.control)
    facts = job.facts_rows()
    bronze = delta_rows(job.bronze, ["_operation", "_batch_id", "_start_lsn"])
    mine = [r for r in control if r["table_name"] in (job.bronze, os.path.realpath(job.bronze))]
    assert len(control) == len(mine) <= 1, control
    if not mine:
        return previous
    fu = mine[0]["finalized_until"]
    by_batch = defaultdict(list)
    for r in bronze:
        if r["_operation"] != 0:
            by_batch[r["_batch_id"]].append(r["_start_lsn"])
    ends = []
    for b in facts:
        # a bootstrap row: bronze holds the table as of its LSN (a new checkpoint's
        # empty batch 0 at that LSN moves the verdict there, its facts row without an end)
        if b["event"] == "bootstrap" and b["end_commit_ts"] is not None:
            ends.append(b["end_commit_ts"])
            continue
        if b["event"] is not None or b["end_commit_ts"] is None:
            continue
        if b["rows"]:
            held = [lsn for lsn in by_batch.get(b["batch_id"], [])
                    if b["min_lsn"] <= lsn <= b["max_lsn"]]
            if len(held) != b["rows"]:
                continue
        ends.append(b["end_commit_ts"])
    assert ends, f"finalized_until {fu} with no batch in bronze"
    assert fu <= max(ends), f"finalized_until {fu} after the newest batch in bronze ({max(ends)})"
    if previous is not None:
        assert fu >= previous, f"finalized_until moved back from {previous} to {fu}"
    return fu


def snapshot_isolation_refused(sim, spec):
    """Whether this simulator refuses SNAPSHOT isolation (error 3952) on a
    database without ALLOW_SNAPSHOT_ISOLATION, as SQL Server does."""
    try:
        sim.run(f"ALTER DATABASE {DB} SET ALLOW_SNAPSHOT_ISOLATION OFF;", database=DB)
    except Exception:  # noqa: BLE001 - a simulator that does not know the statement
        return False
    try:
        sim.run(f"SET TRANSACTION ISOLATION LEVEL SNAPSHOT; BEGIN TRAN; "
                f"SELECT count(*) FROM dbo.{spec.name}; COMMIT;", database=DB)
    except Exception as e:  # noqa: BLE001 - the refusal looked for
        return "3952" in str(e)
    return False
