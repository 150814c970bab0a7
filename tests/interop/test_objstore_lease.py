"""The checkpoint's hold on object stores (issue 23): a lease made of
put-if-absent links next to the checkpoint (src/storage/mcdc_storage_lease.c).
A second stream on a running stream's s3:// or az:// checkpoint is refused at
start with exit 12 naming the holder, as on local disk; a holder killed with
SIGKILL stops renewing, and its lease is taken over once it has expired (a
short MCDC_LEASE_TTL_MS here: 3 s). Against moto and Azurite, through the
fault proxy with no fault armed."""
import signal
import socket
import time

from test_objstore_faults import (assert_whole, azurite, cli, lake, more_changes,  # noqa: F401
                                  moto, source)

TTL_MS = 3000


def stream(sim, workdir, lake, trigger="availableNow", spawn=False):
    r = lake.root
    return cli(sim, workdir, lake, "stream",
               ["--target", f"{r}/bronze", "--app-id", "t-v1", "--checkpoint", f"{r}/ckpt",
                "--facts-table", f"{r}/facts", "--trigger", trigger], spawn=spawn)


def ckpt_names(lake, sub):
    prefix = lake.root.split("/", 3)[3] + f"/ckpt/{sub}"
    return [k for k, _ in lake.objects(prefix)]


def first_batch_seen(proc, lake, timeout=60):
    deadline = time.time() + timeout
    while time.time() < deadline and proc.poll() is None:
        if ckpt_names(lake, "commits/"):
            return
        time.sleep(0.2)
    raise AssertionError(f"no batch committed: exit {proc.poll()}: "
                         f"{proc.stderr.read() if proc.poll() is not None else ''}")


def test_a_second_stream_is_refused_and_a_killed_holders_lease_taken_over(sim, workdir, lake):
    lake.cli_options = dict(lake.cli_options, MCDC_LEASE_TTL_MS=str(TTL_MS))
    source(sim, 3)
    running = stream(sim, workdir, lake, trigger="processingTime=200ms", spawn=True)
    try:
        first_batch_seen(running, lake)
        # held: the lease's link is there, and a second process is refused
        # before it writes anything, naming the holder
        links = ckpt_names(lake, "_mssql_cdc_lock.lease.")
        assert len(links) in (1, 2), links
        more_changes(sim, 10, 2)
        second = stream(sim, workdir, lake)
        assert second.returncode == 12, second.stderr[-3000:]
        err = second.stderr
        assert "another process is running on checkpoint" in err, err
        assert f"{lake.root}/ckpt" in err, err
        assert f"pid {running.pid} " in err and socket.gethostname() in err, err
        # renewed while it runs: still refused after two ttls
        time.sleep(2 * TTL_MS / 1000)
        assert running.poll() is None
        third = stream(sim, workdir, lake)
        assert third.returncode == 12, third.stderr[-3000:]
    finally:
        running.send_signal(signal.SIGKILL)  # no release: the lease must expire
        running.wait()
    killed_at = time.time()
    refused = stream(sim, workdir, lake)
    if time.time() - killed_at < TTL_MS / 1000:  # well before the expiry
        assert refused.returncode == 12, refused.stderr[-3000:]
    # taken over once expired (ttl + grace after its last renewal)
    deadline = killed_at + 4 * TTL_MS / 1000 + 10
    while True:
        after = stream(sim, workdir, lake)
        if after.returncode != 12 or time.time() > deadline:
            break
        time.sleep(0.5)
    assert after.returncode == 0, after.stderr[-3000:]
    assert "taken over" in after.stderr, after.stderr[-3000:]
    assert time.time() - killed_at >= TTL_MS / 1000
    assert_whole(sim, lake)
    # given back at the end of the run: one "released" link is all that stays
    links = ckpt_names(lake, "_mssql_cdc_lock.lease.")
    assert len(links) == 1, links
    body = dict(lake.objects(links[0].rsplit("/", 1)[0] + "/_mssql_cdc_lock.lease."))[links[0]]
    assert body.startswith(b'{"state":"released"'), body
    # and the next run takes it at once
    again = stream(sim, workdir, lake)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "taken over" not in again.stderr
