"""Requests on bronze's Delta log per stream batch on S3 (issue 23): the
stream keeps its table handle's snapshot as the table's only writer for the
run (mcdc_table_keep_snapshot), so a batch's commit is the conditional PUT
of the next version and nothing else: no check of the cached version, no
probe of the next one, no read-back of its own commit. Counted by the fault
proxy (no fault armed) in front of moto.

Measured when written: 1 request on the log per batch, the same at every
batch, and one listing at the start of the run (since the log is listed
from _last_checkpoint's version, preceded by the read of that hint). Before: 12 (at each of the stream's five reads of the table a size
check of the cached version and a read of the next one, then the commit's
read-back); before that the log was listed and replayed per batch, 16 at the
first batch and two more per batch after."""
import os
import subprocess
import urllib.parse

import pytest

from conftest import CLI
from test_stream_e2e import make_db, write_changes

objstore = pytest.importorskip("objstore")
from faultproxy import FaultProxy  # noqa: E402

BATCHES = 8
# per batch after the first: the commit's PUT, and only it
LOG_REQUESTS_PER_BATCH_MAX = 1


@pytest.fixture
def moto():
    m = objstore.Moto().start()
    yield m
    m.stop()


def test_log_requests_per_batch_do_not_grow_with_the_log(sim, workdir, moto):
    make_db(sim)
    write_changes(sim, 1, BATCHES)
    with FaultProxy(moto.port) as proxy:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "AZURE_"))}
        env.update(moto.options, AWS_ENDPOINT_URL=proxy.url, HOME=workdir)
        p = subprocess.run(
            [CLI, "stream", "--captureInstance", "dbo_orders",
             "--connectionString", sim.connection_string("shop"),
             "--target", "s3://lake/t/bronze", "--app-id", "orders-v1",
             "--checkpoint", "s3://lake/t/ckpt", "--trigger", "availableNow",
             "--maxCommitsPerBatch", "1"],
            capture_output=True, text=True, env=env, cwd=workdir, timeout=180)
        assert p.returncode == 0, p.stderr[-3000:]
        with proxy.lock:
            seen = [(m, urllib.parse.unquote(path)) for m, path, _ in proxy.log]
    # a batch: from the put of its data file to the put of the next one's
    per_batch, n = [], None
    for method, path in seen:
        if method == "PUT" and "/t/bronze/part-" in path:
            if n is not None:
                per_batch.append(n)
            n = 0
        elif n is not None and "t/bronze/_delta_log/" in path:
            n += 1
    assert len(per_batch) == BATCHES - 1, (per_batch, p.stdout)
    assert max(per_batch[1:]) <= LOG_REQUESTS_PER_BATCH_MAX, (per_batch, seen)
    # and that one is the commit: a conditional PUT of the next version
    commits = [path for method, path in seen
               if method == "PUT" and "t/bronze/_delta_log/" in path]
    assert len(commits) == BATCHES + 1, commits  # version 0 and one per batch
    # the whole run: those commits, and at the start one read of
    # _last_checkpoint (none yet) and one listing of the log (the handle then
    # knows the table is new and lists nothing more)
    log = [(method, path) for method, path in seen if "t/bronze/_delta_log" in path]
    assert log[0] == ("GET", "/lake/t/bronze/_delta_log/_last_checkpoint"), log
    assert "list-type=2" in log[1][1], log
    assert len(log) == len(commits) + 2, log
    # the same cost at the last batch as at the second: nothing replays the log
    assert per_batch[-1] <= per_batch[1], per_batch
