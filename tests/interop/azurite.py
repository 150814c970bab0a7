"""Azurite's blob service for the Azure tests: started on a free loopback port
in a fresh directory, stopped after; requests of the tests' own (Shared Key
written here, independently of the C code) to create containers, and account
SAS tokens made by the documented algorithm.

Azurite's account (devstoreaccount1) and key are published with the
emulator: they are not secrets.
"""
import base64
import datetime
import hashlib
import hmac
import os
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
AZURITE_BLOB = os.path.join(ROOT, ".node", "node_modules", ".bin", "azurite-blob")
ACCOUNT = "devstoreaccount1"
KEY = ("Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/"
       "K1SZFPTOtr/KBHBeksoGMGw==")
VERSION = "2025-01-05"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Azurite:
    """A running azurite-blob (strict: signatures are checked)."""

    def __init__(self):
        if not os.path.exists(AZURITE_BLOB):
            raise RuntimeError("Azurite is not installed: run scripts/install-deps.sh")
        self.dir = tempfile.mkdtemp(prefix="mcdc-azurite-")
        self.port = free_port()
        self.log = open(os.path.join(self.dir, "azurite.log"), "w")
        debug = os.environ.get("AZURITE_DEBUG_LOG")  # its string to sign, when a test fails
        self.proc = subprocess.Popen(
            [AZURITE_BLOB, "--blobHost", "127.0.0.1", "--blobPort", str(self.port),
             "--location", self.dir, "--skipApiVersionCheck", "--disableTelemetry"] +
            (["--debug", debug] if debug else []),
            stdout=self.log, stderr=subprocess.STDOUT)
        self.endpoint = "http://127.0.0.1:%d/%s" % (self.port, ACCOUNT)
        deadline = time.time() + 30
        while True:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    break
            except OSError:
                if self.proc.poll() is not None or time.time() > deadline:
                    self.stop()
                    raise RuntimeError("Azurite did not start: " +
                                       open(self.log.name).read()[-2000:])
                time.sleep(0.1)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def request(self, method, path, query=None, headers=None, body=b""):
        """A Shared Key request on the account; returns (status, body)."""
        query = dict(query or {})
        headers = dict(headers or {})
        headers["x-ms-date"] = datetime.datetime.now(datetime.timezone.utc).strftime(
            "%a, %d %b %Y %H:%M:%S GMT")
        headers["x-ms-version"] = VERSION
        if method in ("PUT", "POST"):  # urllib would add a form type of its own
            headers.setdefault("Content-Type", "application/octet-stream")
        url_path = "/%s%s" % (ACCOUNT, urllib.parse.quote(path))
        length = str(len(body)) if body else ""
        std = ["", "", length, "", headers.get("Content-Type", ""), "", "", "",
               headers.get("If-None-Match", ""), "", ""]
        ms = "".join("%s:%s\n" % (k.lower(), v)
                     for k, v in sorted(headers.items(), key=lambda kv: kv[0].lower())
                     if k.lower().startswith("x-ms-"))
        resource = "/%s%s" % (ACCOUNT, url_path) + "".join(
            "\n%s:%s" % (k, v) for k, v in sorted(query.items()))
        sts = method + "\n" + "\n".join(std) + "\n" + ms + resource
        sig = base64.b64encode(hmac.new(base64.b64decode(KEY), sts.encode(),
                                        hashlib.sha256).digest()).decode()
        headers["Authorization"] = "SharedKey %s:%s" % (ACCOUNT, sig)
        url = "http://127.0.0.1:%d%s" % (self.port, url_path)
        if query:
            url += "?" + urllib.parse.urlencode(query)
        req = urllib.request.Request(url, data=body if method in ("PUT", "POST") else None,
                                     method=method, headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                return r.status, r.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()

    def create_container(self, name):
        status, body = self.request("PUT", "/" + name, {"restype": "container"})
        assert status == 201, (status, body)

    def blob(self, container, name):
        """(status, bytes) of a blob."""
        return self.request("GET", "/%s/%s" % (container, name))

    def account_sas(self, permissions, hours=2):
        """An account SAS for the blob service (sv 2025-01-05: the string to
        sign of versions since 2020-12-06, with the encryption scope line)."""
        expiry = (datetime.datetime.now(datetime.timezone.utc) +
                  datetime.timedelta(hours=hours)).strftime("%Y-%m-%dT%H:%M:%SZ")
        fields = {"sv": VERSION, "ss": "b", "srt": "sco", "sp": permissions, "se": expiry,
                  "spr": "https,http"}
        sts = "\n".join([ACCOUNT, permissions, "b", "sco", "", expiry, "", "https,http",
                         VERSION, "", ""])
        fields["sig"] = base64.b64encode(hmac.new(base64.b64decode(KEY), sts.encode(),
                                                  hashlib.sha256).digest()).decode()
        return urllib.parse.urlencode(fields)
