"""moto's S3 server with conditional writes made atomic, as S3 makes them.

moto checks a PUT's If-None-Match/If-Match against the stored object and
stores the new one later in the same request, on a threaded server: two
racing `If-None-Match: *` PUTs of one key can both pass the check and both
get 200 (seen in CI: 65 winners for 64 keys in test_s3.py's race). S3
itself lets exactly one win. This launcher runs moto's own application and
serialises the requests that carry a write condition, so the tests see
S3's semantics; every other request runs concurrently as in moto_server.

Usage: python moto_atomic.py HOST PORT
"""
import os
import signal
import sys
import threading

from werkzeug.serving import run_simple
from moto.moto_server.werkzeug_app import (DomainDispatcherApplication, MotoRequestHandler,
                                           create_backend_app)


def conditional_writes_in_turn(app):
    lock = threading.Lock()

    def serve(environ, start_response):
        conditional = (environ.get("REQUEST_METHOD") in ("PUT", "POST")
                       and ("HTTP_IF_NONE_MATCH" in environ or "HTTP_IF_MATCH" in environ))
        if not conditional:
            return app(environ, start_response)
        with lock:  # the check and the store of one request before the next's check
            return list(app(environ, start_response))

    return serve


def main():
    host, port = sys.argv[1], int(sys.argv[2])
    os.environ.setdefault("MOTO_PORT", str(port))
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    app = DomainDispatcherApplication(create_backend_app)
    run_simple(host, port, conditional_writes_in_turn(app), threaded=True,
               request_handler=MotoRequestHandler)


if __name__ == "__main__":
    main()
