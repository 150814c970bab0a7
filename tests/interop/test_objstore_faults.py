"""Faults, kills and racing writers on object stores (issue 23): the CLI's
stream with bronze, facts and the checkpoint on s3:// (moto) and az://
(Azurite), behind tests/interop/faultproxy.py, which answers 503 SlowDown
or 500, resets a connection after a commit went through, answers 412 to a
commit that landed, or stalls past the client's timeout. Whatever happens
the run exits 0 or with a clear error, and then the lake is whole: bronze
holds each change of the change table once (read back by deltalake), no
two commits of the Delta log carry one batch (txn app id and version), and
a rerun completes."""
import json
import os
import random
import re
import signal
import string
import subprocess
import time
import uuid

import pytest
from deltalake import DeltaTable

from conftest import CLI
from faultproxy import FaultProxy
from objstore import Azurite, Moto

TABLE = ("CREATE TABLE dbo.t (id INT NOT NULL PRIMARY KEY, v INT NULL, note NVARCHAR(MAX) NULL);"
         "EXEC sys.sp_cdc_enable_db;"
         "EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N't', "
         "@role_name = NULL;")
CAPTURE = "EXEC sim.run_capture @ignore_latency = 1;"
COMMIT = r"_delta_log/\d{20}\.json"


@pytest.fixture(scope="module")
def moto():
    with Moto(bucket="lake") as m:
        yield m


@pytest.fixture(scope="module")
def azurite():
    with Azurite(container="lake") as a:
        yield a


class Lake:
    """A lake under root on one store, reached by the CLI through a fault
    proxy and by deltalake directly; log(name) is the table's Delta log
    read with the store's own client: {version: [action, ...]}."""

    def __init__(self, root, cli_options, reader_options, proxy, objects):
        self.root, self.cli_options, self.reader_options = root, cli_options, reader_options
        self.proxy, self.objects = proxy, objects

    def table(self, name):
        return DeltaTable(f"{self.root}/{name}", storage_options=self.reader_options)

    def log(self, name):
        prefix = self.root.split("/", 3)[3] + f"/{name}/_delta_log/"
        return {int(k.rsplit("/", 1)[1][:20]): [json.loads(ln) for ln in body.splitlines()
                                                if ln.strip()]
                for k, body in self.objects(prefix) if re.search(r"/\d{20}\.json$", k)}


def s3_objects(m):
    def objects(prefix):
        s3 = m.s3()
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket="lake", Prefix=prefix):
            for o in page.get("Contents", []):
                yield o["Key"], s3.get_object(Bucket="lake", Key=o["Key"])["Body"].read()
    return objects


def azure_objects(a):
    def objects(prefix):
        for n in a.names(prefix):
            status, body = a.request("GET", "/lake/" + n)
            assert status == 200, (n, status)
            yield n, body
    return objects


@pytest.fixture(params=["s3", "azure"])
def lake(request, workdir, monkeypatch):
    name = "t" + uuid.uuid4().hex[:12]
    if request.param == "s3":
        m = request.getfixturevalue("moto")
        with FaultProxy(m.port) as proxy:
            yield Lake(f"s3://lake/{name}", dict(m.options, AWS_ENDPOINT_URL=proxy.url),
                       m.options, proxy, s3_objects(m))
    else:
        a = request.getfixturevalue("azurite")
        monkeypatch.setenv("AZURITE_BLOB_STORAGE_URL", "http://127.0.0.1:%d" % a.port)
        with FaultProxy(a.port) as proxy:
            yield Lake(f"az://lake/{name}",
                       {"AZURE_STORAGE_USE_EMULATOR": "true",
                        "AZURE_STORAGE_ENDPOINT": proxy.url},
                       {"AZURE_STORAGE_USE_EMULATOR": "true"}, proxy, azure_objects(a))


def source(sim, rows):
    """The source table with rows inserted and captured."""
    sim.run("CREATE DATABASE shop;")
    values = ", ".join(f"({i}, {i * 10}, N'n{i}')" for i in range(1, rows + 1))
    sim.run(TABLE + f"INSERT INTO dbo.t VALUES {values};" + CAPTURE, database="shop")


def more_changes(sim, first, rows):
    values = ", ".join(f"({i}, {i * 10}, N'n{i}')" for i in range(first, first + rows))
    sim.run(f"INSERT INTO dbo.t VALUES {values}; UPDATE dbo.t SET v = v + 1 WHERE id = 1;" +
            CAPTURE, database="shop")


def cli(sim, workdir, lake, command, args, env=None, spawn=False, timeout=120):
    """mssql-cdc command on the lake, its storage options by --storage-option."""
    e = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "AZURE_"))}
    e["HOME"] = workdir
    e.update(env or {})
    opts = []
    for k, v in lake.cli_options.items():
        opts += ["--storage-option", f"{k}={v}"]
    argv = [CLI, command, "--captureInstance", "dbo_t", "--connectionString",
            sim.connection_string("shop"), *args, *opts]
    if spawn:
        return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                cwd=workdir, env=e)
    return subprocess.run(argv, capture_output=True, text=True, cwd=workdir, env=e,
                          timeout=timeout)


def stream(sim, workdir, lake, env=None, spawn=False, control=False, args=()):
    r = lake.root
    more = ["--control-table", f"{r}/control"] if control else []
    return cli(sim, workdir, lake, "stream",
               ["--target", f"{r}/bronze", "--app-id", "t-v1", "--checkpoint", f"{r}/ckpt",
                "--facts-table", f"{r}/facts", "--trigger", "availableNow", *more, *args],
               env=env, spawn=spawn)


def apply(sim, workdir, lake):
    r = lake.root
    p = cli(sim, workdir, lake, "apply",
            ["--bronze", f"{r}/bronze", "--target", f"{r}/silver", "--control-table",
             f"{r}/control", "--facts-table", f"{r}/facts"])
    assert p.returncode == 0, f"apply exited {p.returncode}:\n{p.stderr[-3000:]}"
    return p


def hexed(v):
    return (v.hex() if isinstance(v, bytes) else v).upper().removeprefix("0X")


def change_rows(sim):
    return sorted((hexed(s), op, i) for s, op, i in sim.run(
        "SELECT __$seqval, __$operation, id FROM cdc.dbo_t_CT", database="shop"))


def assert_whole(sim, lake):
    """Bronze holds each change once, and no two commits of a table's log
    carry one batch."""
    bronze = lake.table("bronze").to_pyarrow_table().to_pylist()
    got = sorted((hexed(r["_seqval"]), r["_operation"], r["id"]) for r in bronze)
    assert got == change_rows(sim)
    no_batch_twice(lake, "bronze", "facts")


def no_batch_twice(lake, *names):
    for name in names:
        seen = {}
        for v, actions in sorted(lake.log(name).items()):
            for a in actions:
                if "txn" in a:
                    key = (a["txn"]["appId"], a["txn"]["version"])
                    assert key not in seen, f"{name}: batch {key} in versions {seen[key]} and {v}"
                    seen[key] = v


def run_ok(sim, workdir, lake, **kw):
    p = stream(sim, workdir, lake, **kw)
    assert p.returncode == 0, f"stream exited {p.returncode}:\n{p.stderr[-3000:]}"
    return p


def test_a_commit_that_landed_unanswered_is_not_made_twice(sim, workdir, lake):
    """Batch 1's commits reach the store, but their answers do not: bronze's
    connection (a reused one) is reset after the store took the commit,
    which libcurl answers by sending the request again by itself, and
    facts' is answered 412. Each commit is ours: read back, taken as made,
    never made again at the next version. (S3 failed here, exit 12 "another
    process ... committed unit 1", before it read back every 412.)"""
    source(sim, 3)
    run_ok(sim, workdir, lake)
    more_changes(sim, 10, 2)
    armed = [lake.proxy.arm("PUT", r"/bronze/_delta_log/0+2\.json$", reset=True),
             lake.proxy.arm("PUT", r"/facts/_delta_log/0+2\.json$", after=412)]
    run_ok(sim, workdir, lake)
    assert [f.fired for f in armed] == [1, 1]
    assert_whole(sim, lake)
    assert lake.table("bronze").version() == 2  # the create and two batches
    more_changes(sim, 20, 1)
    run_ok(sim, workdir, lake)
    assert_whole(sim, lake)


# Faults armed together on one run: (method, path, action, times).
THROTTLED = [("PUT", r"/bronze/part-[^/]*\.parquet", {"status": 503}, 1),
             ("PUT", r"/bronze/part-[^/]*\.parquet", {"status": 500}, 1),
             ("PUT", r"/bronze/" + COMMIT, {"status": 500}, 1),
             ("PUT", r"/facts/" + COMMIT, {"status": 503}, 1),
             ("PUT", r"/facts/part-[^/]*\.parquet", {"reset_before": True}, 1),
             ("PUT", r"/ckpt/commits/", {"status": 500}, 1),
             ("PUT", r"/ckpt/offsets/", {"reset": True}, 1)]
STALLED = [("PUT", r"/bronze/" + COMMIT, {"stall": 2.5}, 1),
           ("PUT", r"/facts/part-[^/]*\.parquet", {"stall": 2.5}, 1)]


@pytest.mark.parametrize("faults", [THROTTLED, STALLED], ids=["throttled", "stalled"])
def test_retried_faults_leave_each_change_once(sim, workdir, lake, faults):
    """503 SlowDown, 500 and resets on data files, commits and the
    checkpoint, and stalls past a 1 s timeout: retried, the run ends well
    and bronze holds each change once; a rerun goes on from there."""
    source(sim, 3)
    more_changes(sim, 10, 2)
    armed = [lake.proxy.arm(m, rx, times=n, **a) for m, rx, a, n in faults]
    run_ok(sim, workdir, lake, env={"MCDC_HTTP_TIMEOUT_MS": "1000"})
    assert [f.fired for f in armed] == [n for _, _, _, n in faults]
    assert_whole(sim, lake)
    more_changes(sim, 20, 1)
    run_ok(sim, workdir, lake)
    assert_whole(sim, lake)


def test_a_store_down_throughout_is_a_clear_error_and_a_rerun_completes(sim, workdir, lake):
    source(sim, 3)
    down = lake.proxy.arm("PUT", r"/bronze/" + COMMIT, times=None, status=503)
    p = stream(sim, workdir, lake, env={"MCDC_HTTP_DEADLINE_MS": "1500"})
    assert p.returncode == 6, p.stderr[-3000:]
    assert "failed after" in p.stderr and "/bronze/_delta_log/" in p.stderr, p.stderr[-3000:]
    assert down.fired >= 2
    lake.proxy.clear()
    run_ok(sim, workdir, lake)
    assert_whole(sim, lake)


def killed_when(proc, fault, timeout=60):
    """SIGKILL proc once fault has hit a request (the request is then
    held by the proxy: the process is waiting on it)."""
    end = time.monotonic() + timeout
    while fault.fired == 0 and proc.poll() is None and time.monotonic() < end:
        time.sleep(0.05)
    assert fault.fired == 1, proc.communicate(timeout=30)[1][-3000:] if proc.poll() is not None \
        else "the fault never hit"
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL


# A killed run's checkpoint lease (docs/object-stores.md) expires instead of
# vanishing with it: the killed runs take a short one, and the rerun waits
# it out (ttl, grace, and a second for the stores' whole-second times).
KILLED = {"MCDC_LEASE_TTL_MS": "2000"}
LEASE_WAIT_S = 5.0


def rerun_is_whole(sim, workdir, lake):
    """After a kill: once the killed run's lease has expired, a rerun
    completes (taking the lease over), every table opens, each change once."""
    lake.proxy.clear()
    time.sleep(LEASE_WAIT_S)
    p = run_ok(sim, workdir, lake)
    assert "taken over" in p.stderr, p.stderr[-3000:]
    for name in ("bronze", "facts"):
        lake.table(name).to_pyarrow_table()
    assert_whole(sim, lake)


def big_rows(sim, first, n, size):
    """n rows of size random letters each: Parquet cannot shrink them much."""
    rnd = random.Random(first)
    values = ", ".join(
        f"({i}, {i}, N'{''.join(rnd.choices(string.ascii_letters + string.digits, k=size))}')"
        for i in range(first, first + n))
    sim.run(f"INSERT INTO dbo.t VALUES {values};" + CAPTURE, database="shop")


def test_killed_mid_upload_leaves_no_object_and_a_rerun_is_whole(sim, workdir, lake):
    """kill -9 while a data file's multipart upload (S3) or block list
    (Azure) is half sent: its object never appears; the rerun writes the
    batch once."""
    source(sim, 3)
    if lake.root.startswith("s3://"):
        big_rows(sim, 100, 7, 1024 * 1024)  # one ~7 MB data file: two parts of 5 MiB
        env, part = {"MCDC_S3_PART_BYTES": str(5 * 1024 * 1024), **KILLED}, r"partNumber=2"
    else:
        env, part = {"MCDC_AZURE_BLOCK_BYTES": "1024", **KILLED}, r"comp=block&"
    f = lake.proxy.arm("PUT", r"/bronze/part-[^/]*\.parquet\?.*" + part, stall=30)
    proc = stream(sim, workdir, lake, env=env, spawn=True)
    killed_when(proc, f)
    key = re.sub(r"\?.*", "", f.hits[0]).split("/bronze/")[1]
    names = [k for k, _ in lake.objects(lake.root.split("/", 3)[3] + "/bronze/")]
    assert not any(n.endswith(key) for n in names), (key, names)
    rerun_is_whole(sim, workdir, lake)


def test_killed_during_a_commit_that_lands_after_a_rerun_is_whole(sim, workdir, lake):
    """kill -9 while the bronze commit PUT is held; the proxy sends it on
    after the process died (it lands): the rerun finds its batch committed
    and does not write it again."""
    source(sim, 3)
    f = lake.proxy.arm("PUT", r"/bronze/_delta_log/0+1\.json$", stall=1.0)
    killed_when(stream(sim, workdir, lake, env=KILLED, spawn=True), f)
    time.sleep(1.5)  # the held commit reaches the store
    assert 1 in lake.log("bronze")
    rerun_is_whole(sim, workdir, lake)


def test_killed_during_a_commit_while_the_next_batch_is_read(sim, workdir, lake):
    """overlapBatches (on for object stores): batch 2 is read while batch 1
    uploads and commits. kill -9 while batch 1's bronze commit PUT is held
    (it lands after the process died): batch 2's plan was never recorded
    (the checkpoint plans one batch at a time), and the rerun replays batch
    1 as committed, then reads batch 2 again: each change once."""
    source(sim, 3)
    more_changes(sim, 10, 2)
    more_changes(sim, 20, 2)
    f = lake.proxy.arm("PUT", r"/bronze/_delta_log/0+2\.json$", stall=1.0)
    proc = stream(sim, workdir, lake, env=KILLED, spawn=True,
                  args=["--maxCommitsPerBatch", "1"])
    killed_when(proc, f)
    time.sleep(1.5)  # the held commit reaches the store
    assert 2 in lake.log("bronze")
    ckpt = lake.root.split("/", 3)[3] + "/ckpt/"
    planned = sorted(k.rsplit("/", 1)[1] for k, _ in lake.objects(ckpt + "offsets/"))
    assert planned == ["0", "1"], planned
    rerun_is_whole(sim, workdir, lake)


def test_killed_between_a_bronze_commit_and_its_facts_row(sim, workdir, lake):
    source(sim, 3)
    run_ok(sim, workdir, lake)
    more_changes(sim, 10, 1)
    p = stream(sim, workdir, lake, env={"MCDC_CRASH_AT": "after_bronze:1", **KILLED})
    assert p.returncode == -signal.SIGKILL, p.stderr[-3000:]
    assert len(lake.log("bronze")) == len(lake.log("facts")) + 1
    rerun_is_whole(sim, workdir, lake)


@pytest.mark.parametrize("lake", ["s3"], indirect=True)
def test_apply_under_faults_builds_silver_once(sim, workdir, lake):
    """apply with silver and the control table on the store while data
    files are throttled, silver's commit lands unanswered and control's is
    answered 412: silver equals the source, no pass is committed twice, and
    a rerun finds nothing more to do. (On S3 only: an apply with nothing to
    do costs some 200 requests, 11 s on moto; the store's side of each
    fault is the same one the stream's tests run on Azure.)"""
    source(sim, 3)
    more_changes(sim, 10, 2)
    run_ok(sim, workdir, lake, control=True)
    armed = [lake.proxy.arm("PUT", r"/silver/part-[^/]*\.parquet", status=503),
             lake.proxy.arm("PUT", r"/silver/_delta_log/0+1\.json$", reset=True),
             lake.proxy.arm("PUT", r"/control/" + COMMIT, after=412)]
    apply(sim, workdir, lake)
    assert [f.fired for f in armed] == [1, 1, 1]
    want = sorted(tuple(r) for r in sim.run("SELECT id, v, note FROM dbo.t", database="shop"))
    silver = lake.table("silver").to_pyarrow_table().to_pylist()
    assert sorted((r["id"], r["v"], r["note"]) for r in silver) == want
    no_batch_twice(lake, "silver", "control")
    version = lake.table("silver").version()
    apply(sim, workdir, lake)
    assert lake.table("silver").version() == version
