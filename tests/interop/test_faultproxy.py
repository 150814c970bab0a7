"""The object-store tests' fault proxy (faultproxy.py) does what it says,
against a small upstream server of this test's own that records what reached
it: a proxy that passed faults through unseen would make the fault tests
prove nothing."""
import http.client
import http.server
import socketserver
import threading

import pytest

from faultproxy import FaultProxy


class Upstream:
    def __init__(self):
        self.seen = []  # (method, path, host, body)
        up = self

        class H(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def _any(self):
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n) if n else b""
                up.seen.append((self.command, self.path, self.headers.get("Host"), body))
                out = b"stored " + body
                self.send_response(200)
                self.send_header("ETag", '"e1"')
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            do_GET = do_PUT = do_DELETE = _any

        class S(socketserver.ThreadingMixIn, http.server.HTTPServer):
            daemon_threads = True

        self.server = S(("127.0.0.1", 0), H)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def pair():
    up = Upstream()
    with FaultProxy(up.port) as proxy:
        yield up, proxy
    up.close()


def request(proxy, method, path, body=b"", timeout=10, headers=None):
    c = http.client.HTTPConnection("127.0.0.1", proxy.port, timeout=timeout)
    try:
        c.request(method, path, body=body, headers={"Host": "bucket.example:9", **(headers or {})})
        r = c.getresponse()
        return r.status, r.getheader("ETag"), r.read()
    finally:
        c.close()


def test_requests_pass_through_with_their_host_and_are_counted(pair):
    up, proxy = pair
    assert request(proxy, "PUT", "/b/_delta_log/00000000000000000001.json", b"x") == \
        (200, '"e1"', b"stored x")
    assert request(proxy, "GET", "/b/k?list-type=2") == (200, '"e1"', b"stored ")
    assert up.seen[0] == ("PUT", "/b/_delta_log/00000000000000000001.json", "bucket.example:9", b"x")
    assert proxy.count() == 2 and proxy.count("PUT", r"_delta_log/") == 1
    assert proxy.count("GET", r"list-type=2") == 1 and proxy.count("DELETE") == 0


def test_a_status_fault_answers_without_asking_the_server(pair):
    up, proxy = pair
    f = proxy.arm("PUT", r"\.json$", status=503, times=2)
    assert request(proxy, "PUT", "/b/1.json", b"a")[0] == 503
    status, _, body = request(proxy, "PUT", "/b/1.json", b"a")
    assert status == 503 and b"SlowDown" in body
    assert request(proxy, "PUT", "/b/1.json", b"a")[0] == 200  # two times only
    assert f.fired == 2 and len(up.seen) == 1


def test_after_forwards_then_answers_otherwise(pair):
    up, proxy = pair
    proxy.arm("PUT", None, after=412)
    status, _, body = request(proxy, "PUT", "/b/2.json", b"landed")
    assert status == 412 and b"PreconditionFailed" in body
    assert up.seen == [("PUT", "/b/2.json", "bucket.example:9", b"landed")]


def test_reset_forwards_then_drops_and_reset_before_drops_first(pair):
    up, proxy = pair
    proxy.arm("PUT", r"/3", reset=True)
    with pytest.raises((http.client.HTTPException, ConnectionError)):
        request(proxy, "PUT", "/b/3.json", b"r")
    assert [s[1] for s in up.seen] == ["/b/3.json"]
    proxy.arm("PUT", r"/4", reset_before=True)
    with pytest.raises((http.client.HTTPException, ConnectionError)):
        request(proxy, "PUT", "/b/4.json", b"r")
    assert [s[1] for s in up.seen] == ["/b/3.json"]


def test_nth_lets_earlier_matches_through_and_stall_outlasts_a_timeout(pair):
    up, proxy = pair
    proxy.arm("GET", None, nth=2, status=500)
    assert request(proxy, "GET", "/b/a")[0] == 200
    assert request(proxy, "GET", "/b/a")[0] == 500
    assert request(proxy, "GET", "/b/a")[0] == 200
    proxy.arm("DELETE", None, stall=1.0)
    with pytest.raises(TimeoutError):
        request(proxy, "DELETE", "/b/slow", timeout=0.3)
    proxy.clear()
    assert request(proxy, "DELETE", "/b/quick")[0] == 200


def test_a_header_and_the_first_time_per_path_choose_what_is_hit(pair):
    up, proxy = pair
    f = proxy.arm("PUT", None, header="If-None-Match", per_path=True, times=None, reset=True)
    cond = {"If-None-Match": "*"}
    assert request(proxy, "PUT", "/b/plain", b"p")[0] == 200  # no header: passed
    for path in ("/b/5.json", "/b/6.json"):
        with pytest.raises((http.client.HTTPException, ConnectionError)):
            request(proxy, "PUT", path, b"c", headers=cond)
        assert request(proxy, "PUT", path, b"c", headers=cond)[0] == 200  # its second time
    assert f.fired == 2
    assert [s[1] for s in up.seen] == ["/b/plain"] + ["/b/5.json"] * 2 + ["/b/6.json"] * 2
