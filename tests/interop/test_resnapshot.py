"""Re-snapshot after data loss: `stream --on-data-loss resnapshot` (reference
§2.4.4, §4.5). CDC cleanup purges changes a stream has not read; the next run
takes a new snapshot into generation n+1 (checkpoint <ckpt>/_generations/<n>,
app id <app_id>.g<n>, the state file as commit point) and streams on from it.
The table rebuilt from bronze equals the source afterwards."""
import json
import os
import signal

from deltalake import DeltaTable

from conftest import run_cli
from test_snapshot import insert, make_db, rebuild, rebuild_duckdb, source_rows, stream_args


def purge(sim):
    """Cleanup up to max_lsn: every change captured so far is gone."""
    sim.run("EXEC sim.run_capture @ignore_latency = 1;", database="shop")
    sim.run("""DECLARE @m binary(10) = sys.fn_cdc_get_max_lsn();
EXEC sys.sp_cdc_cleanup_change_table @capture_instance = N'dbo_orders',
     @low_water_mark = @m, @threshold = 5000;""", database="shop")


def changes(sim, first, n):
    insert(sim, first, n)
    sim.run(f"""UPDATE dbo.orders SET status = N'upd-{first}' WHERE order_id % 5 = {first % 5};
DELETE FROM dbo.orders WHERE order_id = {first - 7};
UPDATE dbo.orders SET order_id = order_id + 500000 WHERE order_id = {first - 3};""",
            database="shop")
    sim.run("EXEC sim.run_capture @ignore_latency = 1;", database="shop")


def state(d):
    with open(os.path.join(d, "ckpt", "_mssql_cdc_generation.json")) as f:
        return json.load(f)


def facts(d):
    return DeltaTable(os.path.join(d, "facts")).to_pyarrow_table().to_pylist()


RESNAP = ("--on-data-loss", "resnapshot")


def test_a_loss_resnapshots_into_the_next_generation_and_the_rebuild_equals_the_source(sim, workdir):
    make_db(sim, before_cdc=50)
    run_cli(*stream_args(sim, workdir, "--bootstrap", *RESNAP))
    assert not os.path.exists(os.path.join(workdir, "ckpt", "_mssql_cdc_generation.json"))
    changes(sim, 1000, 6)
    run_cli(*stream_args(sim, workdir, *RESNAP))
    # changes the stream never reads, then purged
    changes(sim, 2000, 6)
    purge(sim)
    changes(sim, 3000, 6)
    # without the policy: the loss stops the stream, and the message names it
    p = run_cli(*stream_args(sim, workdir), check=False)
    assert p.returncode == 3 and "--on-data-loss resnapshot" in p.stderr, p.stderr
    p = run_cli(*stream_args(sim, workdir, *RESNAP))
    st = state(workdir)
    assert st["generation"] == 1 and "recovering" not in st, st
    assert st["at"].endswith("+00:00") and st["snapshot_lsn"].startswith("0x")
    rows = facts(workdir)
    resnaps = [r for r in rows if r["event"] == "resnapshot"]
    opens = [r for r in rows if r["event"] == "snapshot_open" and r["app_id"] == "orders-v1.g1"]
    assert len(resnaps) == 1 and len(opens) == 1, rows
    r = resnaps[0]
    assert r["app_id"] == "orders-v1.g1" and r["min_lsn"] == r["max_lsn"] == st["snapshot_lsn"]
    assert r["lost_from_ts"] is not None and r["lost_to_ts"] is not None
    assert r["lost_from_ts"] <= r["lost_to_ts"]
    assert r["retention_watermark_ts"] == r["lost_to_ts"]
    assert json.loads(opens[0]["detail"])["kind"] == "resnapshot"
    assert json.loads(opens[0]["detail"])["generation"] == 1
    bronze = os.path.join(workdir, "bronze")
    assert rebuild(bronze) == source_rows(sim)
    assert rebuild_duckdb(bronze) == source_rows(sim)
    # later runs stay in generation 1, with or without the policy; its batches
    # carry its app id and live in its own checkpoint
    changes(sim, 4000, 4)
    run_cli(*stream_args(sim, workdir))
    assert state(workdir)["generation"] == 1
    assert os.path.isdir(os.path.join(workdir, "ckpt", "_generations", "1", "offsets"))
    gen_batches = sorted((x for x in facts(workdir)
                          if x["event"] is None and x["app_id"] == "orders-v1.g1"),
                         key=lambda x: x["batch_id"])
    # its batches count from 0: the run that re-snapshotted found nothing new after the
    # snapshot, and its new checkpoint's batch 0 is empty, as the reference's is
    assert [x["batch_id"] for x in gen_batches] == [0, 1], gen_batches
    assert gen_batches[0]["rows"] == 0 and gen_batches[1]["rows"] > 0
    assert rebuild(bronze) == source_rows(sim)
    # a second loss inside the interval: DataLossError, nothing written
    changes(sim, 5000, 4)
    purge(sim)
    before = len(facts(workdir))
    p = run_cli(*stream_args(sim, workdir, *RESNAP), check=False)
    assert p.returncode == 3 and "--resnapshot-interval-days" in p.stderr, p.stderr
    assert len(facts(workdir)) == before and state(workdir)["generation"] == 1
    # a shorter interval lets it re-snapshot again: generation 2
    run_cli(*stream_args(sim, workdir, *RESNAP, "--resnapshot-interval-days", "0"))
    assert state(workdir)["generation"] == 2
    assert rebuild(bronze) == source_rows(sim)


def test_killed_before_the_state_file_the_rerun_reuses_its_snapshot(sim, workdir):
    make_db(sim, before_cdc=30)
    run_cli(*stream_args(sim, workdir, "--bootstrap", *RESNAP))
    changes(sim, 1000, 5)
    purge(sim)
    p = run_cli(*stream_args(sim, workdir, *RESNAP),
                env={"MCDC_CRASH_AT": "before_generation_state"}, check=False)
    assert p.returncode == -signal.SIGKILL, p.stderr
    st = state(workdir)
    assert st["generation"] == 0 and st["recovering"]["lsn"].startswith("0x"), st
    snaps = {r["_snapshot"] for r in DeltaTable(os.path.join(workdir, "bronze")).to_pyarrow_table()
             .to_pylist() if r["_operation"] == 0}
    changes(sim, 2000, 5)
    run_cli(*stream_args(sim, workdir, *RESNAP))
    assert state(workdir)["generation"] == 1
    after = {r["_snapshot"] for r in DeltaTable(os.path.join(workdir, "bronze")).to_pyarrow_table()
             .to_pylist() if r["_operation"] == 0}
    assert after == snaps, "the rerun took a second snapshot"
    assert [r["event"] for r in facts(workdir)].count("resnapshot") == 1
    assert rebuild(os.path.join(workdir, "bronze")) == source_rows(sim)


def test_bad_resnapshot_arguments_are_refused(sim, workdir):
    make_db(sim)
    d = workdir
    base = ["stream", "--captureInstance", "dbo_orders", "--connectionString",
            sim.connection_string("shop"), "--target", os.path.join(d, "bronze"), "--app-id", "a",
            "--checkpoint", os.path.join(d, "ckpt"), "--trigger", "once"]
    p = run_cli(*base, *RESNAP, check=False)
    assert p.returncode == 2 and "needs --facts-table" in p.stderr, p.stderr
    p = run_cli(*base, "--on-data-loss", "maybe", check=False)
    assert p.returncode == 2 and "fail or resnapshot" in p.stderr
    p = run_cli(*base, "--resnapshot-interval-days", "-1", check=False)
    assert p.returncode == 2 and "resnapshot-interval-days" in p.stderr
    p = run_cli(*base, *RESNAP, "--facts-table", os.path.join(d, "facts"),
                "--failOnDataLoss", "false", check=False)
    assert p.returncode == 2 and "failOnDataLoss=false" in p.stderr
    assert not os.path.exists(os.path.join(d, "bronze")) and not os.path.exists(os.path.join(d, "ckpt"))
    # a damaged state file is refused, not taken for generation 0
    os.makedirs(os.path.join(d, "ckpt"))
    with open(os.path.join(d, "ckpt", "_mssql_cdc_generation.json"), "w") as f:
        f.write("{not json")
    p = run_cli(*base, check=False)
    assert p.returncode == 1 and "generation state is damaged" in p.stderr, p.stderr


def test_a_chunked_resnapshot_is_read_by_backfill_and_completed_by_its_resnapshot_row(sim, workdir):
    from test_backfill import backfill
    make_db(sim, before_cdc=300)
    run_cli(*stream_args(sim, workdir, "--bootstrap", *RESNAP))
    changes(sim, 500, 5)  # read: the position has a commit time, where the loss starts
    run_cli(*stream_args(sim, workdir, *RESNAP))
    changes(sim, 1000, 5)
    purge(sim)
    run_cli(*stream_args(sim, workdir, *RESNAP, "--snapshot", "chunked"))
    st = state(workdir)
    assert st["generation"] == 1
    rows = facts(workdir)
    opens = [r for r in rows if r["event"] == "snapshot_open" and r["app_id"] == "orders-v1.g1"]
    assert len(opens) == 1, rows
    d = json.loads(opens[0]["detail"])
    assert d["mode"] == "chunked" and d["kind"] == "resnapshot" and d["generation"] == 1
    assert d["lost_from_ts"] and d["lost_to_ts"] and "keys" not in d
    assert opens[0]["min_lsn"] == st["snapshot_lsn"]
    assert not [r for r in rows if r["event"] == "resnapshot"]  # backfill writes it
    # the new generation streams while backfill reads the table
    changes(sim, 2000, 5)
    run_cli(*stream_args(sim, workdir, *RESNAP, "--snapshot", "chunked"))
    status = {"done": False}
    while not status["done"]:
        p, status = backfill(sim, workdir, "--chunk-rows", "50", "--max-waves", "1")
        changes(sim, 3000 + len(facts(workdir)), 2)
        run_cli(*stream_args(sim, workdir, *RESNAP, "--snapshot", "chunked"))
    resnaps = [r for r in facts(workdir) if r["event"] == "resnapshot"]
    assert len(resnaps) == 1 and resnaps[0]["app_id"] == "orders-v1.g1", resnaps
    assert resnaps[0]["max_lsn"] == st["snapshot_lsn"]
    assert resnaps[0]["lost_from_ts"] == opens[0]["lost_from_ts"]
    assert rebuild(os.path.join(workdir, "bronze")) == source_rows(sim)
    assert rebuild_duckdb(os.path.join(workdir, "bronze")) == source_rows(sim)


def test_killed_while_reading_the_rerun_leaves_one_open_row_which_its_resnapshot_closes(sim,
                                                                                       workdir):
    """A full re-snapshot killed while it reads has written its snapshot_open
    row. The reruns that complete it write none of their own: the generation
    has one open snapshot, then the resnapshot row at or past it, whatever
    reader (the mode lock, backfill, apply, the reference's) looks."""
    make_db(sim, before_cdc=30)
    run_cli(*stream_args(sim, workdir, "--bootstrap", *RESNAP))
    changes(sim, 1000, 5)
    purge(sim)
    for i in range(2):
        p = run_cli(*stream_args(sim, workdir, *RESNAP, "--arrowBatchSize", "1"),
                    env={"MCDC_CRASH_AT": "during_snapshot"}, check=False)
        assert p.returncode == -signal.SIGKILL, p.stderr
        changes(sim, 2000 + 100 * i, 3)
    run_cli(*stream_args(sim, workdir, *RESNAP))
    st = state(workdir)
    assert st["generation"] == 1
    rows = facts(workdir)
    opens = [r for r in rows if r["event"] == "snapshot_open" and r["app_id"] == "orders-v1.g1"]
    (done,) = [r for r in rows if r["event"] == "resnapshot"]
    assert len(opens) == 1, opens
    assert json.loads(opens[0]["detail"])["kind"] == "resnapshot"
    assert done["max_lsn"] >= opens[0]["min_lsn"] and done["max_lsn"] == st["snapshot_lsn"]
    # the stream's own readers see nothing open: a chunked run may start
    changes(sim, 3000, 3)
    run_cli(*stream_args(sim, workdir, *RESNAP, "--snapshot", "chunked"))
    assert rebuild(os.path.join(workdir, "bronze")) == source_rows(sim)


def test_a_state_file_older_than_the_facts_is_refused_before_anything_is_written(sim, workdir):
    """The generation state file deleted after two re-snapshots: the stream
    would take generation 0's checkpoint for its position and re-enter
    generation 1, whose checkpoint and rows are there already, next to
    generation 2's. The facts hold generation 2's resnapshot row: the state
    is older than they are, and the run stops (exit 9) with nothing
    written, as a rewound checkpoint does."""
    make_db(sim, before_cdc=20)
    run_cli(*stream_args(sim, workdir, "--bootstrap", *RESNAP))
    for gen, first in ((1, 1000), (2, 2000)):
        changes(sim, first, 4)
        purge(sim)
        run_cli(*stream_args(sim, workdir, *RESNAP, "--resnapshot-interval-days", "0"))
        assert state(workdir)["generation"] == gen
    changes(sim, 3000, 4)
    purge(sim)
    os.remove(os.path.join(workdir, "ckpt", "_mssql_cdc_generation.json"))
    bronze, facts_dir = os.path.join(workdir, "bronze"), os.path.join(workdir, "facts")
    versions = (DeltaTable(bronze).version(), DeltaTable(facts_dir).version())
    p = run_cli(*stream_args(sim, workdir, *RESNAP, "--resnapshot-interval-days", "0"), check=False)
    assert p.returncode == 9, (p.returncode, p.stderr)
    assert "orders-v1#events" in p.stderr and "generation 0" in p.stderr, p.stderr
    assert (DeltaTable(bronze).version(), DeltaTable(facts_dir).version()) == versions
    assert not os.path.exists(os.path.join(workdir, "ckpt", "_mssql_cdc_generation.json"))
