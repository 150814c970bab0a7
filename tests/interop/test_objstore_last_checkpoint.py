"""Opening a table on S3 lists its _delta_log/ from the checkpoint that
_last_checkpoint names, not from version 0 (issue 23): ListObjectsV2 with
start-after just below that version, so a long log costs the pages of its
tail. A table of 26 versions written by delta-rs (checkpoint at 20) read by
`mssql-cdc table-rows` through the counting proxy in front of moto.

Measured when written (table-rows, requests on _delta_log/): before, the
listing from zero (26 commits, the checkpoint and the hint in it) and the
hint read after it; after, the hint read first, then a listing of 8 names
(checkpoint 20, commits 20 to 25, the hint); the request count is the same
on a log this short (one page either way), the names listed 28 -> 8."""
import json
import os
import subprocess
import urllib.parse

import pytest

from conftest import CLI

objstore = pytest.importorskip("objstore")
deltalake = pytest.importorskip("deltalake")
pa = pytest.importorskip("pyarrow")
from faultproxy import FaultProxy  # noqa: E402
from test_objstore_log_requests import moto  # noqa: E402,F401 (the fixture)


def make_table(local, moto, key_prefix):
    for v in range(26):
        deltalake.write_deltalake(local, pa.table({"id": [2 * v, 2 * v + 1]}), mode="append")
        if v == 20:
            deltalake.DeltaTable(local).create_checkpoint()
    s3 = moto.s3()
    for d, _, files in os.walk(local):
        for f in files:
            rel = os.path.relpath(os.path.join(d, f), local)
            s3.upload_file(os.path.join(d, f), moto.bucket, key_prefix + "/" + rel)


def read_through_proxy(moto, workdir):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "AZURE_"))}
    with FaultProxy(moto.port) as proxy:
        env.update(moto.options, AWS_ENDPOINT_URL=proxy.url, HOME=workdir)
        p = subprocess.run([CLI, "table-rows", "s3://lake/t"], capture_output=True, text=True,
                           env=env, cwd=workdir, timeout=120)
        with proxy.lock:
            seen = [(m, urllib.parse.unquote(path)) for m, path, _ in proxy.log]
    assert p.returncode == 0, p.stderr[-3000:]
    ids = sorted(json.loads(line)["id"] for line in p.stdout.splitlines() if line.strip())
    return ids, seen, p.stderr


def log_lists(seen):
    return [path for method, path in seen
            if method == "GET" and "list-type=2" in path and "t/_delta_log/" in path]


def test_the_log_is_listed_from_the_checkpoint_last_checkpoint_names(moto, workdir):
    make_table(os.path.join(workdir, "local"), moto, "t")
    ids, seen, _ = read_through_proxy(moto, workdir)
    assert ids == list(range(52))
    lists = log_lists(seen)
    assert lists, seen
    # every listing of the log starts at version 20's names
    for path in lists:
        assert "start-after=t/_delta_log/00000000000000000019~" in path, lists
    # the hint was read, and the checkpoint; no commit before 21
    log = [path for _, path in seen if "t/_delta_log/" in path]
    assert any(path.endswith("_delta_log/_last_checkpoint") for path in log), log
    assert any("00000000000000000020.checkpoint.parquet" in path for path in log), log
    assert not any("%020d.json" % v in path for path in log for v in range(20)), log
    # a hint naming a checkpoint that is missing is not trusted: listed from
    # the hint first, then the whole log, and the table read from its commits
    moto.s3().delete_object(Bucket=moto.bucket,
                            Key="t/_delta_log/00000000000000000020.checkpoint.parquet")
    ids, seen, _ = read_through_proxy(moto, workdir)
    assert ids == list(range(52))
    lists = log_lists(seen)
    assert len(lists) == 2, lists
    assert "start-after=" in lists[0] and "start-after=" not in lists[1], lists
