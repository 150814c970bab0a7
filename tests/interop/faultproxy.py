"""A fault-injecting HTTP proxy for the object-store tests, on loopback.

It sits in front of an object store's test server (moto's S3, Azurite) and
forwards each request unchanged: the Host header included, so that a
signature the client computed for the proxy's address still verifies at the
server behind it. Every request is counted (method and path), which is how
the tests and the benchmark count requests per commit. A test arms faults;
each names the requests it hits (a method, a regular expression on the path
and query, a header the request carries, the nth match from now, how many
times, or only the first time each path is seen) and what happens to them:

  status       answer with this status and body without asking the server
               (503 SlowDown, 500 InternalError...); nothing reaches it
  after        forward the request, then answer with this status instead of
               the server's (a 412 on a commit that did land)
  reset        forward the request, then close the connection without an
               answer (the request reached the server: an ambiguous failure)
  reset_before close the connection before forwarding (nothing reached it)
  stall        hold the request this many seconds, then forward it (a
               client with a shorter timeout gives up first)

Use:
    with FaultProxy(upstream_port) as proxy:
        endpoint = proxy.url
        proxy.arm("PUT", r"_delta_log/0+3\\.json", after=412)
        # every conditional write loses its answer, once per path
        proxy.arm(None, header="If-None-Match", per_path=True, times=None, reset=True)
        ...
        proxy.count("PUT", r"_delta_log/")
"""
import http.client
import http.server
import re
import socket
import socketserver
import threading
import time

# S3's and Azure's error bodies for the statuses tests inject most, so that
# a client's error parser sees what the real service sends.
BODIES = {
    503: b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code>'
         b'<Message>Please reduce your request rate.</Message></Error>',
    500: b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>InternalError</Code>'
         b'<Message>We encountered an internal error. Please try again.</Message></Error>',
    412: b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>PreconditionFailed</Code>'
         b'<Message>At least one of the pre-conditions you specified did not hold</Message>'
         b'</Error>',
}

# Hop-by-hop headers (RFC 9110 7.6.1) are not forwarded.
HOP = {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "te", "trailer",
       "upgrade"}


class Fault:
    def __init__(self, method, path_re, nth, times, header, per_path, **action):
        self.method = method.upper() if method else None
        self.path_re = re.compile(path_re) if path_re else None
        self.header = header     # a header name the request must carry, or None
        self.skip = nth - 1      # matches to let through first
        self.left = times        # matches to hit (None: no end)
        self.seen = set() if per_path else None  # (method, path) already hit
        self.action = action
        self.fired = 0
        self.hits = []           # the paths hit, in order

    def matches(self, method, path, headers):
        return ((self.method is None or self.method == method) and
                (self.path_re is None or self.path_re.search(path) is not None) and
                (self.header is None or headers.get(self.header) is not None) and
                (self.seen is None or (method, path) not in self.seen))


class FaultProxy:
    def __init__(self, upstream_port, upstream_host="127.0.0.1"):
        self.upstream = (upstream_host, upstream_port)
        self.lock = threading.Lock()
        self.faults = []
        self.log = []  # (method, path, status or a fault's name), in arrival order
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # TCP_NODELAY: an answer goes out as its head and then its body,
            # and Nagle's algorithm held the body until the client's delayed
            # ACK, some 40 ms a request (a benchmark's figures, the tests' time)
            disable_nagle_algorithm = True

            def log_message(self, *args):
                pass

            def _any(self):
                proxy._handle(self)

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = do_PATCH = do_OPTIONS = _any

        class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
            daemon_threads = True
            allow_reuse_address = True

        self.server = Server(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    # ---- control ---------------------------------------------------------------
    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        self.server.shutdown()
        self.server.server_close()

    def arm(self, method=None, path_re=None, nth=1, times=1, header=None, per_path=False,
            **action):
        """Arms a fault (see the module's comment); returns it (its .fired
        counts hits, .hits lists their paths, as they arrive). header: only requests carrying it; per_path: each
        (method, path) is hit once at most; times=None: no limit."""
        assert len(action) == 1 and next(iter(action)) in (
            "status", "after", "reset", "reset_before", "stall"), action
        f = Fault(method, path_re, nth, times, header, per_path, **action)
        with self.lock:
            self.faults.append(f)
        return f

    def clear(self):
        with self.lock:
            self.faults.clear()

    def count(self, method=None, path_re=None):
        """Requests seen so far (faulted ones too) of method whose path matches."""
        rx = re.compile(path_re) if path_re else None
        with self.lock:
            return sum(1 for m, p, _ in self.log
                       if (method is None or m == method.upper()) and
                       (rx is None or rx.search(p)))

    def reset_counts(self):
        with self.lock:
            self.log.clear()

    # ---- the proxy ---------------------------------------------------------------
    def _fault_for(self, method, path, headers):
        with self.lock:
            for f in self.faults:
                if (f.left is None or f.left > 0) and f.matches(method, path, headers):
                    if f.skip > 0:
                        f.skip -= 1
                        continue
                    if f.left is not None:
                        f.left -= 1
                    if f.seen is not None:
                        f.seen.add((method, path))
                    f.fired += 1
                    f.hits.append(path)
                    return f.action
        return None

    def _note(self, method, path, what):
        with self.lock:
            self.log.append((method, path, what))

    def _handle(self, h):
        method, path = h.command, h.path
        n = int(h.headers.get("Content-Length") or 0)
        body = h.rfile.read(n) if n else b""
        action = self._fault_for(method, path, h.headers) or {}
        if "status" in action:
            self._note(method, path, action["status"])
            return self._answer(h, action["status"], BODIES.get(action["status"], b""), {})
        if "reset_before" in action:
            self._note(method, path, "reset_before")
            return self._drop(h)
        if "stall" in action:
            time.sleep(action["stall"])
        try:
            status, headers, payload = self._forward(method, path, h.headers, body)
        except OSError:
            self._note(method, path, "upstream failed")
            return self._drop(h)
        if "reset" in action:
            self._note(method, path, "reset")
            return self._drop(h)
        if "after" in action:
            self._note(method, path, action["after"])
            return self._answer(h, action["after"], BODIES.get(action["after"], b""), {})
        self._note(method, path, status)
        self._answer(h, status, payload, headers, head=method == "HEAD")

    def _forward(self, method, path, headers, body):
        c = http.client.HTTPConnection(*self.upstream, timeout=60)
        try:
            c.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
            for k, v in headers.items():
                if k.lower() not in HOP:
                    c.putheader(k, v)
            if body and "Content-Length" not in headers:
                c.putheader("Content-Length", str(len(body)))
            c.endheaders(body if body else None)
            r = c.getresponse()
            payload = r.read()
            return r.status, [(k, v) for k, v in r.getheaders() if k.lower() not in HOP], payload
        finally:
            c.close()

    @staticmethod
    def _answer(h, status, payload, headers, head=False):
        h.send_response_only(status)
        has_len = False
        for k, v in headers:
            if k.lower() == "content-length":
                has_len = True
            if k.lower() not in ("date", "server"):
                h.send_header(k, v)
        if not has_len:
            h.send_header("Content-Length", str(len(payload)))
        if not headers:
            h.send_header("Content-Type", "application/xml")
        h.end_headers()
        if payload and not head:
            h.wfile.write(payload)
        h.wfile.flush()

    @staticmethod
    def _drop(h):
        h.close_connection = True
        try:
            h.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
