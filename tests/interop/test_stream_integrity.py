"""State on disk the stream cannot trust: each case used to exit 0 with a gap or
a duplicate in bronze. Now each stops with its documented exit code before it
writes anything wrong, and bronze still equals the change table afterwards.

Exit codes: 7 state of another job, 8 target behind its checkpoint,
9 checkpoint rewound, 11 facts behind, 12 another writer under the app id."""
import glob
import json
import os
import shutil
import subprocess
import time

from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake

from conftest import CLI, run_cli
from test_stream_e2e import (assert_exactly_once, bronze_keys, change_rows, make_db,
                             stream_args, write_changes)


def log_versions(table):
    return sorted(int(os.path.basename(p)[:20])
                  for p in glob.glob(os.path.join(table, "_delta_log", "*.json")))


def snapshot_dir(path):
    """Every file under path with its bytes: to prove a refused run wrote nothing."""
    out = {}
    for root, _, files in os.walk(path):
        for f in files:
            full = os.path.join(root, f)
            with open(full, "rb") as fh:
                out[os.path.relpath(full, path)] = fh.read()
    return out


def with_paths(args, **paths):
    args = list(args)
    for flag, value in paths.items():
        args[args.index("--" + flag.replace("_", "-")) + 1] = value
    return args


def test_bronze_behind_its_checkpoint_is_refused_then_resumes_once_restored(sim, workdir):
    make_db(sim)
    write_changes(sim, 1, 6)
    run_cli(*stream_args(sim, workdir, extra=["--maxCommitsPerBatch", "1"]))
    bronze = os.path.join(workdir, "bronze")
    versions = log_versions(bronze)
    assert len(versions) >= 5
    # what restoring an older backup of the table does: its last three commits go
    saved = {}
    for v in versions[-3:]:
        p = os.path.join(bronze, "_delta_log", f"{v:020d}.json")
        saved[p] = open(p, "rb").read()
        os.remove(p)
    write_changes(sim, 500, 1)
    before = snapshot_dir(workdir)
    p = run_cli(*stream_args(sim, workdir, extra=["--maxCommitsPerBatch", "1"]), check=False)
    assert p.returncode == 8, p.stderr
    assert "target behind checkpoint" not in p.stdout
    assert "Restore the target's missing commits" in p.stderr, p.stderr
    after = snapshot_dir(workdir)
    assert {k: v for k, v in after.items() if not k.startswith("sim")} == \
        {k: v for k, v in before.items() if not k.startswith("sim")}, "a refused run wrote"
    # doing what the message says: the commits come back, the stream goes on
    for path, data in saved.items():
        with open(path, "wb") as f:
            f.write(data)
    run_cli(*stream_args(sim, workdir, extra=["--maxCommitsPerBatch", "1"]))
    assert_exactly_once(sim, workdir)


def test_two_checkpoints_on_one_app_id_and_target_cannot_both_write(sim, workdir):
    make_db(sim)
    write_changes(sim, 1, 12, rows_per_tx=2)
    a = stream_args(sim, workdir, trigger="availableNow", extra=["--maxCommitsPerBatch", "2"])
    b = with_paths(stream_args(sim, workdir, trigger="availableNow",
                               extra=["--maxCommitsPerBatch", "3"]),
                   checkpoint=os.path.join(workdir, "ckpt-b"))
    pa_ = subprocess.Popen([CLI, *a], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    pb = subprocess.Popen([CLI, *b], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    outs = [(pa_, a, *pa_.communicate(timeout=120)), (pb, b, *pb.communicate(timeout=120))]
    codes = sorted(p.returncode for p, *_ in outs)
    # one of them finds the other's commits: a rewound-looking target (9: it
    # started after the first commit) or a commit of another checkpoint (12);
    # or, starting while the other's first data file is written but not yet
    # committed, a target holding files without a log (7, nothing written)
    assert codes[0] == 0 and codes[1] in (7, 9, 12), [o[3] for o in outs]
    loser = next(o for o in outs if o[0].returncode != 0)
    assert codes[1] != 7 or "another writer is creating this table" in loser[3], loser[3]
    bronze = bronze_keys(workdir)
    assert len(bronze) == len(set(bronze)), "a change is in bronze twice"
    survivor = next(args for p, args, *_ in outs if p.returncode == 0)
    run_cli(*survivor)
    assert sorted(change_rows(sim)) == bronze_keys(workdir)


def test_a_checkpoint_given_another_target_or_capture_instance_is_refused(sim, workdir):
    make_db(sim)
    sim.run("""CREATE TABLE dbo.other (id INT NOT NULL PRIMARY KEY, v INT NULL);
EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'other',
     @role_name = NULL;""", database="shop")
    write_changes(sim, 1, 3)
    run_cli(*stream_args(sim, workdir))
    write_changes(sim, 100, 2)
    t2 = os.path.join(workdir, "bronze2")
    p = run_cli(*with_paths(stream_args(sim, workdir), target=t2), check=False)
    assert p.returncode == 7, p.stderr
    assert "bound to target" in p.stderr and "new checkpoint" in p.stderr, p.stderr
    assert not os.path.exists(t2), "the refused run created the other target"
    args = stream_args(sim, workdir)
    args[args.index("--captureInstance") + 1] = "dbo_other"
    p = run_cli(*args, check=False)
    assert p.returncode == 7, p.stderr
    assert "capture instance" in p.stderr
    # the facts table is bound too
    p = run_cli(*with_paths(stream_args(sim, workdir),
                            facts_table=os.path.join(workdir, "facts2")), check=False)
    assert p.returncode == 7, p.stderr
    # back on its own target it goes on, without a gap
    run_cli(*stream_args(sim, workdir))
    assert_exactly_once(sim, workdir)


def test_one_table_in_two_roles_or_of_another_kind_is_refused_before_anything_is_written(
        sim, workdir):
    make_db(sim)
    write_changes(sim, 1, 2)
    d = workdir
    cases = [
        # --target equal to --facts-table
        dict(target=os.path.join(d, "t"), facts_table=os.path.join(d, "t")),
        # --checkpoint equal to --target
        dict(target=os.path.join(d, "t"), checkpoint=os.path.join(d, "t")),
        # a table inside another
        dict(target=os.path.join(d, "t"), facts_table=os.path.join(d, "t", "facts")),
        # the checkpoint inside the target
        dict(target=os.path.join(d, "t"), checkpoint=os.path.join(d, "t", "_ckpt")),
    ]
    for case in cases:
        p = run_cli(*with_paths(stream_args(sim, d), **case), check=False)
        assert p.returncode == 7, (case, p.stderr)
        assert "a place of its own" in p.stderr, p.stderr
        assert not os.path.exists(os.path.join(d, "t")), case
    # another stream's facts table given as the target
    run_cli(*stream_args(sim, d))
    other = with_paths(stream_args(sim, d, app_id="orders-v2"),
                       target=os.path.join(d, "facts"), facts_table=os.path.join(d, "facts2"),
                       checkpoint=os.path.join(d, "ckpt2"),
                       control_table=os.path.join(d, "control2"))
    facts_before = snapshot_dir(os.path.join(d, "facts"))
    p = run_cli(*other, check=False)
    assert p.returncode == 7, p.stderr
    assert "is a facts table" in p.stderr, p.stderr
    assert snapshot_dir(os.path.join(d, "facts")) == facts_before
    assert not os.path.exists(os.path.join(d, "ckpt2", "metadata"))
    # the bronze given as a facts table, and as a control table
    for flag in ("facts_table", "control_table"):
        p = run_cli(*with_paths(other, target=os.path.join(d, "b3"),
                                **{flag: os.path.join(d, "bronze")}), check=False)
        assert p.returncode == 7, (flag, p.stderr)
        assert "is a bronze table" in p.stderr, p.stderr
    # a directory that holds files but is no Delta table
    os.makedirs(os.path.join(d, "junk"))
    open(os.path.join(d, "junk", "notes.txt"), "w").write("mine")
    p = run_cli(*with_paths(other, target=os.path.join(d, "junk")), check=False)
    assert p.returncode == 7 and "not a Delta table" in p.stderr, p.stderr
    # the tables carry their kind and the reference's schema version
    for name, kind, version in (("bronze", "bronze", "2"), ("facts", "facts", "14"),
                                ("control", "control", "4")):
        conf = DeltaTable(os.path.join(d, name)).metadata().configuration
        assert conf.get("mssql_cdc.kind") == kind and \
            conf.get("mssql_cdc.schema_version") == version, (name, conf)
    assert_exactly_once(sim, d)


def test_following_the_old_advice_on_the_same_target_is_refused(sim, workdir):
    """A deleted checkpoint is refused (9); "a new app id with a new checkpoint"
    on the same target would write every change a second time: refused (7)."""
    make_db(sim)
    write_changes(sim, 1, 4)
    run_cli(*stream_args(sim, workdir))
    shutil.rmtree(os.path.join(workdir, "ckpt"))
    write_changes(sim, 100, 1)
    p = run_cli(*stream_args(sim, workdir), check=False)
    assert p.returncode == 9, p.stderr
    assert "a new app id AND a new (or rebuilt) target" in p.stderr, p.stderr
    before = snapshot_dir(os.path.join(workdir, "bronze"))
    advice = with_paths(stream_args(sim, workdir, app_id="orders-v2"),
                        checkpoint=os.path.join(workdir, "ckpt2"))
    p = run_cli(*advice, check=False)
    assert p.returncode == 7, p.stderr
    assert "twice" in p.stderr and "new (or rebuilt) target" in p.stderr, p.stderr
    assert snapshot_dir(os.path.join(workdir, "bronze")) == before
    bronze = bronze_keys(workdir)
    assert len(bronze) == len(set(bronze))
    # continuing after what the target holds, as the message offers, is fine
    last = max(k[0] for k in bronze)
    p = run_cli(*advice, "--startingLsn", last)
    keys = bronze_keys(workdir)
    assert len(keys) == len(set(keys)) and keys == sorted(change_rows(sim))


def test_a_replay_of_another_range_is_not_skipped(sim, workdir):
    """A crash after bronze's commit; the checkpoint then plans the batch with
    another range (what a second checkpoint on the same app id does). The txn
    rule would skip it; the range in userMetadata says it is not ours."""
    make_db(sim)
    write_changes(sim, 1, 4)
    args = stream_args(sim, workdir, extra=["--maxCommitsPerBatch", "2"])
    p = run_cli(*args, env={"MCDC_CRASH_AT": "after_bronze:1"}, check=False)
    assert p.returncode < 0
    plan = os.path.join(workdir, "ckpt", "offsets", "1")
    doc = json.load(open(plan))
    doc["end"] = doc["start"]  # same batch id, another range
    os.chmod(plan, 0o644)
    json.dump(doc, open(plan, "w"))
    p = run_cli(*args, check=False)
    assert p.returncode == 12, p.stderr
    assert "planned unit 1 as" in p.stderr and "for another range" in p.stderr, p.stderr
    bronze = bronze_keys(workdir)
    assert len(bronze) == len(set(bronze))


def test_missing_facts_rows_of_committed_batches_are_refused(sim, workdir):
    make_db(sim)
    write_changes(sim, 1, 4)
    args = stream_args(sim, workdir, extra=["--maxCommitsPerBatch", "1"])
    run_cli(*args)
    facts = os.path.join(workdir, "facts")
    last = log_versions(facts)[-1]
    os.remove(os.path.join(facts, "_delta_log", f"{last:020d}.json"))
    write_changes(sim, 100, 1)
    p = run_cli(*args, check=False)
    assert p.returncode == 11, p.stderr
    assert "facts rows of units" in p.stderr, p.stderr


def test_a_second_writer_during_a_running_stream_is_caught_within_one_batch(sim, workdir):
    make_db(sim)
    write_changes(sim, 1, 2)
    args = stream_args(sim, workdir, trigger="processingTime=100ms",
                       extra=["--maxCommitsPerBatch", "1"])
    proc = subprocess.Popen([CLI, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    bronze = os.path.join(workdir, "bronze")
    deadline = time.time() + 30
    while time.time() < deadline and not os.path.exists(os.path.join(bronze, "_delta_log")):
        time.sleep(0.05)
    time.sleep(0.5)
    # another program appends with the stream's app id, a few batches ahead
    dt = DeltaTable(bronze)
    have = [t for t in (dt.transaction_version("orders-v1"),) if t is not None]
    ahead = (have[0] if have else 0) + 5
    empty = dt.to_pyarrow_table().slice(0, 0)
    write_deltalake(bronze, empty, mode="append",
                    commit_properties=CommitProperties(
                        app_transactions=[Transaction(app_id="orders-v1", version=ahead)]))
    foreign = DeltaTable(bronze).version()
    writes_after = 0
    for i in range(3):  # the stream goes on only until its next batch
        write_changes(sim, 100 + 10 * i, 1)
        writes_after += 1
        try:
            proc.wait(timeout=3)
            break
        except subprocess.TimeoutExpired:
            pass
    if proc.poll() is None:
        proc.kill()
    out, err = proc.communicate()
    assert proc.returncode == 12, err
    assert "another" in err, err
    # nothing was written under the app id after the foreign commit
    versions = log_versions(bronze)
    for v in versions:
        if v > foreign:
            text = open(os.path.join(bronze, "_delta_log", f"{v:020d}.json")).read()
            assert "orders-v1" not in text, text


# ---- bad input: a clear error naming what is wrong, and nothing written ----

def test_bad_options_files_are_clear_errors(sim, workdir):
    make_db(sim)
    base = stream_args(sim, workdir)
    cs = base[base.index("--connectionString") + 1]
    no_cs = base[:base.index("--connectionString")] + base[base.index("--connectionString") + 2:]
    nul = os.path.join(workdir, "nul.conf")
    with open(nul, "wb") as f:
        f.write(b"captureInstance = dbo_orders\nconnectionString = " + cs.encode()[:20] +
                b"\0" + cs.encode()[20:] + b"\n")
    os.chmod(nul, 0o600)
    cases = [(nul, "NUL byte"), (workdir, "a directory"), ("/dev/zero", "not a regular file")]
    for path, want in cases:
        t0 = time.time()
        p = run_cli(*no_cs, "--options-file", path, check=False, timeout=20)
        assert p.returncode == 2, (path, p.stderr)
        assert want in p.stderr and path in p.stderr, (path, p.stderr)
        assert time.time() - t0 < 10
    assert not os.path.exists(os.path.join(workdir, "ckpt"))
    # a password in a file others may read: a warning, and the run goes on
    loose = os.path.join(workdir, "loose.conf")
    with open(loose, "w") as f:
        f.write(f"connectionString = {cs}\n")
    os.chmod(loose, 0o644)
    write_changes(sim, 1, 1)
    p = run_cli(*no_cs, "--options-file", loose)
    assert "chmod 600" in p.stderr and "Sim-Passw0rd" not in p.stderr, p.stderr
    os.chmod(loose, 0o600)
    p = run_cli(*no_cs, "--options-file", loose)
    assert "chmod 600" not in p.stderr


def test_absurd_values_are_usage_errors_naming_the_option(sim, workdir):
    make_db(sim)
    base = stream_args(sim, workdir)
    long_cs = base[base.index("--connectionString") + 1] + ";App=" + "x" * 9000
    cases = [
        (with_paths(base, connectionString=long_cs), "connectionString"),
        (base + ["--arrowBatchSize", "1000000000000"], "arrowBatchSize"),
        (base + ["--numPartitions", "100000"], "numPartitions"),
        (base + ["--connectTimeout", "99999999999"], "connectTimeout"),
        (with_paths(base, trigger="processingTime=1e300s"), "processingTime"),
        (with_paths(base, trigger="processingTime=nan"), "processingTime"),
        (with_paths(base, app_id=""), "app-id"),
        (with_paths(base, app_id="a\tb"), "app-id"),
    ]
    for args, name in cases:
        p = run_cli(*args, check=False)
        assert p.returncode == 2, (name, p.stderr)
        assert name in p.stderr, (name, p.stderr)
        assert "x" * 100 not in p.stderr and "Sim-Passw0rd" not in p.stderr
        for d in ("ckpt", "bronze", "facts", "control"):
            assert not os.path.exists(os.path.join(workdir, d)), (name, d)


def test_a_starting_lsn_beyond_max_lsn_is_refused_before_anything_is_written(sim, workdir):
    """A new checkpoint starting past max_lsn would commit batch 0 ending
    there, and skip every change captured up to it as processed."""
    make_db(sim)
    write_changes(sim, 1, 1)
    p = run_cli(*stream_args(sim, workdir), "--startingLsn", "0x7FFFFFFF000000000001",
                check=False)
    assert p.returncode == 2, p.stderr
    assert "beyond the server's max_lsn" in p.stderr and "Nothing was written" in p.stderr
    for d in ("ckpt", "bronze", "facts", "control"):
        assert not os.path.exists(os.path.join(workdir, d)), d


def test_a_last_checkpoint_ahead_of_the_listing_is_no_warning(sim, workdir):
    """_last_checkpoint naming a newer version than the checkpoint files the
    reader listed is what another writer checkpointing meanwhile leaves (it
    writes the checkpoint, then the hint): not worth a warning. A hint naming a
    version the log does not have is wrong, and still warned about."""
    make_db(sim)
    write_changes(sim, 1, 13, rows_per_tx=1)
    args = stream_args(sim, workdir, extra=["--maxCommitsPerBatch", "1"])
    run_cli(*args)
    facts = os.path.join(workdir, "facts")
    versions = log_versions(facts)
    assert versions[-1] >= 12 and os.path.exists(
        os.path.join(facts, "_delta_log", "00000000000000000010.checkpoint.parquet"))
    hint = os.path.join(facts, "_delta_log", "_last_checkpoint")
    # what a reader sees when it listed the log just before another writer
    # wrote checkpoint 12 and pointed the hint at it
    with open(hint, "w") as f:
        json.dump({"version": 12, "size": 20}, f)
    write_changes(sim, 100, 1, rows_per_tx=1)
    p = run_cli(*args)
    assert "_last_checkpoint" not in p.stderr, p.stderr
    # a hint past the end of the log is damage: warned about, the log listed
    with open(hint, "w") as f:
        json.dump({"version": versions[-1] + 50, "size": 20}, f)
    write_changes(sim, 200, 1, rows_per_tx=1)
    p = run_cli(*args)
    assert "_last_checkpoint" in p.stderr and "ignored" in p.stderr, p.stderr
    with open(hint, "w") as f:  # delta-rs refuses that hint: put the true one back
        json.dump({"version": 10, "size": 20}, f)
    assert_exactly_once(sim, workdir)
