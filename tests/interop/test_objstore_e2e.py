"""The CLI end to end on the object stores (issue 23): stream and apply with
every table (bronze, facts, control, silver) and the checkpoint on s3://,
against moto's S3 server with signature checks on (tests/interop/objstore.py);
and every flow (a chunked snapshot and its backfill, the stream, apply
copy-on-write and merge-on-read, reconcile) on S3 and on Azurite with a
shared key and with a SAS token, each table equal to a local run's. The storage
options reach the jobs by each of their three ways at once: the secret key
by --storage-option, the endpoint by the options file's [storage] section,
the key id and the region by the environment. The tables read back by
delta-rs from the same bucket equal the source and a run of the same
commands on local disk; the secret appears in no output."""
import json
import os
import subprocess
import urllib.parse

import pytest
from deltalake import DeltaTable

from conftest import CLI

objstore = pytest.importorskip("objstore")

TABLE = ("CREATE TABLE dbo.t (id INT NOT NULL PRIMARY KEY, v INT NULL, note NVARCHAR(20) NULL);"
         "EXEC sys.sp_cdc_enable_db;"
         "EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N't', "
         "@role_name = NULL;")
CAPTURE = "EXEC sim.run_capture @ignore_latency = 1;"
WRONG = "not-the-secret-0123456789abcdefghijklmn"


@pytest.fixture
def moto():
    m = objstore.Moto().start()
    yield m
    m.stop()


def run(cwd, env, *args):
    p = subprocess.run([CLI, *args], capture_output=True, text=True, cwd=cwd, env=env,
                       timeout=180)
    assert p.returncode == 0, f"mssql-cdc {args[0]} exited {p.returncode}:\n{p.stderr[-3000:]}"
    return p


def rows_of(dt_rows):
    return sorted((r["id"], r["v"], r["note"]) for r in dt_rows)


def test_stream_and_apply_with_every_table_and_the_checkpoint_on_s3(sim, workdir, moto):
    sim.run("CREATE DATABASE shop;")
    sim.run(TABLE + "INSERT INTO dbo.t VALUES (1, 10, N'a'), (2, 20, N'b'), (3, 30, NULL);" +
            CAPTURE, database="shop")
    opts = moto.options
    secret = opts["AWS_SECRET_ACCESS_KEY"]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "AZURE_"))}
    # a wrong secret in the environment too: the flag's wins
    env.update({"AWS_ACCESS_KEY_ID": opts["AWS_ACCESS_KEY_ID"], "AWS_REGION": "us-east-1",
                "AWS_SECRET_ACCESS_KEY": WRONG, "HOME": workdir})
    conf = os.path.join(workdir, "lake.conf")
    with open(conf, "w") as f:
        f.write(f"captureInstance = dbo_t\nconnectionString = {sim.connection_string('shop')}\n"
                f"[storage]\nAWS_ENDPOINT_URL = {moto.endpoint}\naws_allow_http = true\n")
    os.chmod(conf, 0o600)
    common = ["--options-file", conf, "--storage-option", "AWS_SECRET_ACCESS_KEY=" + secret]
    outs = []

    def lake_run(root, *args):
        p = run(workdir, env, *args[:1], *common, *args[1:])
        outs.append(p.stdout + p.stderr)
        return p

    def stream(root):
        return lake_run(root, "stream", "--target", f"{root}/bronze", "--app-id", "t-v1",
                        "--checkpoint", f"{root}/ckpt", "--facts-table", f"{root}/facts",
                        "--control-table", f"{root}/control", "--trigger", "availableNow",
                        "--verbose")

    def apply(root):
        p = lake_run(root, "apply", "--bronze", f"{root}/bronze", "--target", f"{root}/silver",
                     "--control-table", f"{root}/control", "--facts-table", f"{root}/facts")
        return json.loads(p.stdout.strip().splitlines()[-1])

    s3, local = "s3://lake/shop", os.path.join(workdir, "local")
    for root in (s3, local):
        stream(root)
    sim.run("UPDATE dbo.t SET v = 11 WHERE id = 1; DELETE FROM dbo.t WHERE id = 2;"
            "INSERT INTO dbo.t VALUES (4, 40, N'd');" + CAPTURE, database="shop")
    results = {}
    for root in (s3, local):
        p = stream(root)  # the checkpoint read back, a second batch
        assert ": batch 1: " in p.stderr, p.stderr
        results[root] = apply(root)
    assert results[s3]["applied_lsn"] == results[local]["applied_lsn"]
    assert results[s3]["finalized_until"] == results[local]["finalized_until"]
    want = sorted(tuple(r) for r in sim.run("SELECT id, v, note FROM dbo.t", database="shop"))
    # read back by delta-rs with its own storage options, and by our table-rows
    so = dict(opts)
    silver = DeltaTable(f"{s3}/silver", storage_options=so).to_pyarrow_table().to_pylist()
    assert rows_of(silver) == want
    assert rows_of(DeltaTable(f"{local}/silver").to_pyarrow_table().to_pylist()) == want
    for name in ("bronze", "facts", "control"):
        remote = DeltaTable(f"{s3}/{name}", storage_options=so)
        here = DeltaTable(f"{local}/{name}")
        assert remote.version() == here.version(), name
        assert remote.to_pyarrow_table().num_rows == here.to_pyarrow_table().num_rows, name
    p = lake_run(s3, "table-rows", f"{s3}/silver")
    assert rows_of(json.loads(ln) for ln in p.stdout.splitlines()) == want
    # the checkpoint is in the bucket, nothing of the lake on local disk
    keys = [o["Key"] for o in moto.s3().list_objects_v2(Bucket="lake")["Contents"]]
    assert any(k.startswith("shop/ckpt/commits/") for k in keys), keys
    assert sorted(os.listdir(workdir)) == sorted(["lake.conf", "local", "sim"])
    # the environment's wrong secret alone: refused by the store, said
    # without either secret
    p = subprocess.run([CLI, "table-rows", f"{s3}/silver", "--options-file", conf],
                       capture_output=True, text=True, cwd=workdir, env=env, timeout=60)
    assert p.returncode == 5, p.stderr
    assert opts["AWS_ACCESS_KEY_ID"] in p.stderr  # which credential
    outs.append(p.stdout + p.stderr)
    for out in outs:
        assert secret not in out and WRONG not in out


def test_apply_on_s3_spills_to_the_temp_directory_and_reconciles(sim, workdir, moto):
    """A silver on S3 spills its sorted runs to the system's temp directory
    ($TMPDIR here), never to the bucket, and removes them; the silver equals
    one built on local disk; reconcile writes its report on S3 too, and
    finalization reads the control table there."""
    from snapshot_jobs import new_job
    from workload import Items

    spec = Items()
    job, _ = new_job(sim, workdir, spec, preload=0)
    sim.run(f"EXEC sim.bulk_load @capture_instance = N'{spec.capture_instance}', "
            "@transactions = 300, @rows_per_tx = 100, @seed = 3;", database="shop")
    tmp = os.path.join(workdir, "tmp")
    os.makedirs(tmp)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "AZURE_"))}
    env.update(moto.options)
    env.update({"HOME": workdir, "TMPDIR": tmp})
    src = ["--captureInstance", spec.capture_instance, "--connectionString",
           sim.connection_string("shop")]
    s3 = "s3://lake/items"
    run(workdir, env, "stream", *src, "--target", f"{s3}/bronze", "--app-id", "i-v1",
        "--checkpoint", f"{s3}/ckpt", "--facts-table", f"{s3}/facts", "--control-table",
        f"{s3}/control", "--trigger", "availableNow", "--maxCommitsPerBatch", "100")
    seen = set()

    def apply(silver, *extra):
        p = run(workdir, env, "apply", *src, "--bronze", f"{s3}/bronze", "--target", silver,
                "--control-table", f"{s3}/control", "--facts-table", f"{s3}/facts",
                "--memory-mb", "1", "--verbose", *extra)
        spilled = int(p.stderr.split(" runs spilled")[0].rsplit("(", 1)[1])
        d = os.path.join(tmp, "mssql-cdc-spill")
        seen.update(os.listdir(d) if os.path.isdir(d) else ())
        return spilled

    assert apply(f"{s3}/silver") > 0
    assert os.path.isdir(os.path.join(tmp, "mssql-cdc-spill"))  # where the runs went
    local = os.path.join(workdir, "silver_local")
    assert apply(local) > 0
    keys = [o["Key"] for o in moto.s3().list_objects_v2(Bucket="lake")["Contents"]]
    assert not any("spill" in k for k in keys), [k for k in keys if "spill" in k]
    assert seen == set()  # each run removed its runs from the temp directory
    assert not os.path.exists(os.path.join(local, "_mssql_cdc_spill")) or \
        not os.listdir(os.path.join(local, "_mssql_cdc_spill"))
    remote = DeltaTable(f"{s3}/silver", storage_options=moto.options).to_pyarrow_table()
    here = DeltaTable(local).to_pyarrow_table()
    assert remote.num_rows > 1000
    assert remote.sort_by("id").equals(here.sort_by("id"))
    p = subprocess.run([CLI, "reconcile", *src, "--silver", f"{s3}/silver", "--bronze",
                        f"{s3}/bronze", "--control-table", f"{s3}/control", "--facts-table",
                        f"{s3}/facts", "--report-table", f"{s3}/report"],
                       capture_output=True, text=True, cwd=workdir, env=env, timeout=300)
    # sim.bulk_load writes change rows only, so the source table differs
    # from them: 19, and the report (on S3) names this run's keys
    assert p.returncode == 19, (p.returncode, p.stdout[-2000:], p.stderr[-3000:])
    result = json.loads(p.stdout.strip().splitlines()[-1])
    assert "run_id" in result
    report = DeltaTable(f"{s3}/report", storage_options=moto.options).to_pyarrow_table()
    assert report.num_rows > 0
    assert set(report.column("run_id").to_pylist()) == {result["run_id"]}
    p = run(workdir, env, "finalization", "freshness", "--control-table", f"{s3}/control",
            "--table", f"{s3}/silver", "--json")
    assert json.loads(p.stdout)["finalized_until"] is not None


def test_seed_from_a_copy_on_s3_into_bronze_on_s3(sim, workdir, moto):
    """seed --from reads a copy on S3 (a directory of Parquet files, and a
    glob of them) into a bronze on S3, through the job's storage options."""
    import io

    import pyarrow.parquet as pq

    from test_seed import copy_of_source, max_lsn, settle
    from test_snapshot import insert, make_db

    make_db(sim, before_cdc=30)
    insert(sim, 100, 4)
    settle(sim)
    as_of = max_lsn(sim)
    copy = copy_of_source(sim)
    s3 = moto.s3()
    for i, part in enumerate((copy.slice(0, 20), copy.slice(20))):
        buf = io.BytesIO()
        pq.write_table(part, buf)
        s3.put_object(Bucket="lake", Key=f"copy/part-{i}.parquet", Body=buf.getvalue())
    s3.put_object(Bucket="lake", Key="copy/_SUCCESS", Body=b"")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "AZURE_"))}
    env.update(moto.options)
    env["HOME"] = workdir
    for n, src in ((1, "s3://lake/copy"), (2, "s3a://lake/copy/part-*.parquet")):
        p = run(workdir, env, "seed", "--captureInstance", "dbo_orders", "--connectionString",
                sim.connection_string("shop"), "--target", f"s3://lake/seeded{n}/bronze",
                "--from", src, "--as-of", as_of)
        assert json.loads(p.stdout)["lsn"] == as_of
        bronze = DeltaTable(f"s3://lake/seeded{n}/bronze", storage_options=moto.options)
        assert bronze.to_pyarrow_table().num_rows == copy.num_rows == 34


# ---- every flow on every store, equal to local disk -----------------------------------

ORDERS = ("CREATE TABLE dbo.t (id INT NOT NULL PRIMARY KEY, v INT NULL, note NVARCHAR(20) NULL);")
ENABLE = ("EXEC sys.sp_cdc_enable_db;"
          "EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N't', "
          "@role_name = NULL;")


class Store:
    """One store for the flows: .root, .cli (the storage options the CLI
    gets, by the environment but for .flag_opts, given by --storage-option),
    .reader (deltalake's), .keys(prefix) (what the store holds, read with
    the test's own client) and .secrets (never printed)."""


def s3_store(workdir):
    m = objstore.Moto().start()
    s = Store()
    s.server, s.root = m, "s3://lake/flows"
    opts = m.options
    s.cli = {k: v for k, v in opts.items() if k != "AWS_SECRET_ACCESS_KEY"}
    s.flag_opts = {"AWS_SECRET_ACCESS_KEY": opts["AWS_SECRET_ACCESS_KEY"]}
    s.reader = opts
    s.secrets = [opts["AWS_SECRET_ACCESS_KEY"]]
    s.keys = lambda prefix: [o["Key"] for page in m.s3().get_paginator("list_objects_v2")
                             .paginate(Bucket="lake", Prefix=prefix)
                             for o in page.get("Contents", [])]
    return s


def azure_store(workdir, monkeypatch, sas):
    a = objstore.Azurite(container="lake").start()
    s = Store()
    s.server, s.root = a, "az://lake/flows"
    s.cli = dict(a.options)
    s.flag_opts = {}
    s.secrets = [objstore.Azurite.KEY]
    if sas:
        token = a.account_sas("rwdlac")
        s.flag_opts = {"AZURE_STORAGE_SAS_TOKEN": token}
        sig = token.split("sig=", 1)[1].split("&", 1)[0]
        s.secrets += [sig, urllib.parse.unquote(sig)]
    # delta-rs finds Azurite on another port than 10000 by this variable
    monkeypatch.setenv("AZURITE_BLOB_STORAGE_URL", "http://127.0.0.1:%d" % a.port)
    s.reader = {"AZURE_STORAGE_USE_EMULATOR": "true"}
    if sas:  # delta-rs reads with the same token
        s.reader["AZURE_STORAGE_SAS_TOKEN"] = s.flag_opts["AZURE_STORAGE_SAS_TOKEN"]
    s.keys = a.names
    return s


@pytest.fixture(params=["s3", "azure-shared-key", "azure-sas"])
def store(request, workdir, monkeypatch):
    if request.param == "s3":
        s = s3_store(workdir)
    else:
        s = azure_store(workdir, monkeypatch, request.param == "azure-sas")
    yield s
    s.server.stop()


def engine_rows(dt):
    """A table read by delta-rs' own engine (its pyarrow reader refuses
    deletion vectors)."""
    import pyarrow as pa
    from deltalake import QueryBuilder
    return pa.table(QueryBuilder().register("t", dt).execute("SELECT * FROM t").read_all())


def test_every_flow_on_the_store_equals_local_disk(sim, workdir, store):
    """Chunked snapshot and its backfill, a whole snapshot (`snapshot`), the
    stream, apply copy-on-write and merge-on-read (deletion vectors), and
    reconcile, with every table and the
    checkpoint on the store, then each table read by delta-rs from the store
    equal to the same commands' tables on local disk; the source's rows in
    both silvers; the checkpoint in the store, nothing of the lake on local
    disk; no secret in any output."""
    sim.run("CREATE DATABASE shop;")
    rows = ", ".join(f"({i}, {i * 10}, N'n{i}')" for i in range(1, 41))
    # rows before CDC: only a snapshot has them
    sim.run(ORDERS + f"INSERT INTO dbo.t VALUES {rows};" + ENABLE, database="shop")
    sim.run("UPDATE dbo.t SET v = -1 WHERE id = 3;" + CAPTURE, database="shop")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "AZURE_"))}
    env.update(store.cli)
    env["HOME"] = workdir
    flags = [a for k, v in store.flag_opts.items() for a in ("--storage-option", f"{k}={v}")]
    src = ["--captureInstance", "dbo_t", "--connectionString", sim.connection_string("shop")]
    outs = []

    def cli(*args, ok=(0,)):
        p = subprocess.run([CLI, *args, *flags], capture_output=True, text=True, cwd=workdir,
                           env=env, timeout=180)
        outs.append(p.stdout + p.stderr)
        assert p.returncode in ok, f"{args[0]} exited {p.returncode}:\n{p.stderr[-3000:]}"
        return p

    def tables(root):
        return {"--target": f"{root}/bronze", "--checkpoint": f"{root}/ckpt",
                "--facts-table": f"{root}/facts", "--control-table": f"{root}/control"}

    def stream(root):
        t = tables(root)
        cli("stream", *src, "--app-id", "t-v1", "--trigger", "availableNow", "--bootstrap",
            "--snapshot", "chunked", *[x for kv in t.items() for x in kv])

    def backfill(root):
        for _ in range(12):
            p = cli("backfill", *src, "--target", f"{root}/bronze", "--app-id", "t-v1",
                    "--facts-table", f"{root}/facts", "--chunk-rows", "20",
                    "--target-wave-seconds", "0", ok=(0, 14))
            if json.loads(p.stdout)["done"]:
                return
        raise AssertionError("the backfill did not finish: " + p.stdout)

    def apply(root, silver, *extra):
        p = cli("apply", *src, "--bronze", f"{root}/bronze", "--target", f"{root}/{silver}",
                "--control-table", f"{root}/control", "--facts-table", f"{root}/facts", *extra)
        return json.loads(p.stdout.strip().splitlines()[-1])

    local = os.path.join(workdir, "local")
    roots = (store.root, local)
    snaps = []
    for root in roots:
        stream(root)  # opens the chunked snapshot, streams from it
        backfill(root)
        # and a whole snapshot of its own into another bronze
        snaps.append(json.loads(cli("snapshot", *src, "--target", f"{root}/snapshot").stdout))
    assert snaps[0]["lsn"] == snaps[1]["lsn"], snaps
    sim.run("UPDATE dbo.t SET v = 11 WHERE id = 1; DELETE FROM dbo.t WHERE id = 2;"
            "INSERT INTO dbo.t VALUES (41, 410, N'd');" + CAPTURE, database="shop")
    results = {}
    for root in roots:
        stream(root)
        results[root] = (apply(root, "silver"), apply(root, "silver_dv", "--deletion-vectors"))
        p = cli("reconcile", *src, "--silver", f"{root}/silver", "--bronze", f"{root}/bronze",
                "--control-table", f"{root}/control", "--facts-table", f"{root}/facts",
                "--report-table", f"{root}/report")
        r = json.loads(p.stdout.strip().splitlines()[-1])
        assert r["mismatch"] == 0 and r["match"] == r["buckets"] > 0, r
    for a, b in zip(*results.values()):
        assert a["applied_lsn"] == b["applied_lsn"] and a["rebuilt"] == b["rebuilt"], (a, b)
    want = sorted(tuple(r) for r in sim.run("SELECT id, v, note FROM dbo.t", database="shop"))
    assert len(want) == 40
    for name in ("bronze", "snapshot", "facts", "control", "silver", "silver_dv", "report"):
        remote = DeltaTable(f"{store.root}/{name}", storage_options=store.reader)
        here = DeltaTable(f"{local}/{name}")
        assert remote.version() == here.version(), name
        rt, ht = engine_rows(remote), engine_rows(here)
        assert rt.num_rows == ht.num_rows, name
        if name.startswith("silver"):
            assert rows_of(rt.to_pylist()) == rows_of(ht.to_pylist()) == want, name
            # every column, _start_lsn and _commit_ts too
            assert (sorted(rt.to_pylist(), key=lambda d: d["id"]) ==
                    sorted(ht.to_pylist(), key=lambda d: d["id"])), name
        if name in ("bronze", "snapshot"):
            cols = ["id", "v", "note", "_operation", "_start_lsn"]

            def proj(t):
                return sorted(tuple(d[c] for c in cols) for d in t.select(cols).to_pylist())
            assert proj(rt) == proj(ht)
        if name == "silver_dv":
            conf = remote.metadata().configuration
            assert conf.get("delta.enableDeletionVectors") == "true", conf
    prefix = store.root.split("/", 3)[3]
    keys = store.keys(prefix + "/")
    assert any(k.startswith(prefix + "/ckpt/") for k in keys), keys
    assert sorted(os.listdir(workdir)) == sorted(["local", "sim"])
    for out in outs:
        for s in store.secrets:
            assert s not in out
