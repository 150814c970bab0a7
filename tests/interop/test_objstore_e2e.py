"""The CLI end to end on S3 (issue 23): stream and apply with every table
(bronze, facts, control, silver) and the checkpoint on s3://, against moto's
S3 server with signature checks on (tests/interop/objstore.py). The storage
options reach the jobs by each of their three ways at once: the secret key
by --storage-option, the endpoint by the options file's [storage] section,
the key id and the region by the environment. The tables read back by
delta-rs from the same bucket equal the source and a run of the same
commands on local disk; the secret appears in no output."""
import json
import os
import subprocess

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
