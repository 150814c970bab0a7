"""Object-store servers for the tests, started on loopback on a free port
and stopped after: nothing depends on a server left running.

Moto: moto's S3 server (moto[server], pinned in tests/requirements.txt) with
IAM access control on, so that every request's SigV4 signature is checked
(moto lets the first few requests through unchecked, which the fixture
spends creating the user, its policy, its access key and the bucket). Other
stores add their own class here, with the same shape: start(), stop(),
options (the storage options our backend takes) and a context manager.

Azurite: its blob service only, strict (signatures checked), with requests
of the tests' own (Shared Key written here, apart from the C code) to create
containers and read what the backend wrote, and account SAS tokens made by
the documented algorithm. Its account (devstoreaccount1) and key are
published with the emulator: they are not secrets.
"""
import base64
import datetime
import hashlib
import hmac
import html
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request

VENV_BIN = os.path.dirname(sys.executable)
HERE = os.path.dirname(os.path.abspath(__file__))


def stop_process(proc, grace=10):
    """Stops proc: SIGTERM, then SIGKILL when it is still there after
    grace seconds."""
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, None)):
        if proc.poll() is not None:
            return
        proc.send_signal(sig)
        try:
            proc.wait(wait)
            return
        except subprocess.TimeoutExpired:
            pass


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_http(url, proc, log_path, timeout=30):
    deadline = time.time() + timeout
    while True:
        try:
            urllib.request.urlopen(url, timeout=1)
            return
        except urllib.error.HTTPError:
            return  # it answers
        except OSError:
            pass
        if proc.poll() is not None or time.time() > deadline:
            raise RuntimeError("server did not start: " + open(log_path).read()[-2000:])
        time.sleep(0.1)


class Moto:
    """moto's S3 server with signature checks; .options are the storage
    options of a user allowed s3:* (AWS_* names, as delta-rs takes them)."""

    # user, policy, access key, bucket: the requests moto lets through
    # before it checks signatures
    SETUP_REQUESTS = 4

    def __init__(self, bucket="lake"):
        self.bucket = bucket
        self.port = None
        self.proc = None

    def start(self):
        self.dir = tempfile.mkdtemp(prefix="moto-")
        self.log_path = os.path.join(self.dir, "moto.log")
        env = dict(os.environ, INITIAL_NO_AUTH_ACTION_COUNT=str(self.SETUP_REQUESTS))
        for _ in range(3):  # a free port can be taken between the probe and the bind
            self.port = free_port()
            self.log = open(self.log_path, "w")
            self.proc = subprocess.Popen(
                [os.path.join(VENV_BIN, "python"), os.path.join(HERE, "moto_atomic.py"), "127.0.0.1",
                 str(self.port)],
                stdout=self.log, stderr=subprocess.STDOUT, env=env)
            try:
                wait_http(self.endpoint + "/moto-api/", self.proc, self.log_path)
                break
            except RuntimeError:
                self.stop()
        else:
            raise RuntimeError("moto did not start")
        self._setup()
        return self

    @property
    def endpoint(self):
        return "http://127.0.0.1:%d" % self.port

    def client(self, service, key_id="AKIDSETUP", secret="setup"):
        import boto3
        return boto3.client(service, endpoint_url=self.endpoint, region_name="us-east-1",
                            aws_access_key_id=key_id, aws_secret_access_key=secret)

    def _setup(self):
        iam = self.client("iam")
        iam.create_user(UserName="lake-writer")
        iam.put_user_policy(UserName="lake-writer", PolicyName="s3-all", PolicyDocument=json.dumps(
            {"Version": "2012-10-17",
             "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]}))
        key = iam.create_access_key(UserName="lake-writer")["AccessKey"]
        self.key_id, self.secret = key["AccessKeyId"], key["SecretAccessKey"]
        self.s3().create_bucket(Bucket=self.bucket)

    def s3(self):
        """A boto3 S3 client of the allowed user (signatures checked)."""
        return self.client("s3", self.key_id, self.secret)

    @property
    def options(self):
        return {"AWS_ACCESS_KEY_ID": self.key_id, "AWS_SECRET_ACCESS_KEY": self.secret,
                "AWS_REGION": "us-east-1", "AWS_ENDPOINT_URL": self.endpoint,
                "AWS_ALLOW_HTTP": "true"}

    def stop(self):
        if self.proc:
            stop_process(self.proc)
        self.proc = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class Azurite:
    """azurite-blob (npm, under .node) on a free loopback port in a fresh
    directory; .options are the storage options of its account
    (AZURE_* names, as delta-rs takes them)."""

    BIN = os.path.join(ROOT, ".node", "node_modules", ".bin", "azurite-blob")
    ACCOUNT = "devstoreaccount1"
    KEY = ("Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/"
           "K1SZFPTOtr/KBHBeksoGMGw==")
    VERSION = "2025-01-05"

    def __init__(self, container="lake"):
        self.container = container
        self.port = None
        self.proc = None

    def start(self):
        if not os.path.exists(self.BIN):
            raise RuntimeError("Azurite is not installed: run scripts/install-deps.sh")
        self.dir = tempfile.mkdtemp(prefix="azurite-")
        self.log_path = os.path.join(self.dir, "azurite.log")
        debug = os.environ.get("AZURITE_DEBUG_LOG")  # its string to sign, when a test fails
        for _ in range(3):  # a free port can be taken between the probe and the bind
            self.port = free_port()
            self.log = open(self.log_path, "w")
            self.proc = subprocess.Popen(
                [self.BIN, "--blobHost", "127.0.0.1", "--blobPort", str(self.port),
                 "--location", self.dir, "--skipApiVersionCheck", "--disableTelemetry"] +
                (["--debug", debug] if debug else []),
                stdout=self.log, stderr=subprocess.STDOUT)
            try:
                wait_http(self.endpoint, self.proc, self.log_path)
                break
            except RuntimeError:
                self.stop()
        else:
            raise RuntimeError("Azurite did not start")
        self.create_container(self.container)
        return self

    @property
    def endpoint(self):
        """The blob endpoint: the account's path below the host, as Azurite
        serves accounts."""
        return "http://127.0.0.1:%d/%s" % (self.port, self.ACCOUNT)

    @property
    def options(self):
        """Shared Key through the emulator's well-known account, on this port."""
        return {"AZURE_STORAGE_USE_EMULATOR": "true",
                "AZURE_STORAGE_ENDPOINT": "http://127.0.0.1:%d" % self.port}

    def request(self, method, path, query=None, headers=None, body=b""):
        """A Shared Key request on the account; (status, body)."""
        query = dict(query or {})
        headers = dict(headers or {})
        headers["x-ms-date"] = datetime.datetime.now(datetime.timezone.utc).strftime(
            "%a, %d %b %Y %H:%M:%S GMT")
        headers["x-ms-version"] = self.VERSION
        if method in ("PUT", "POST"):  # urllib would add a form type of its own
            headers.setdefault("Content-Type", "application/octet-stream")
        url_path = "/%s%s" % (self.ACCOUNT, urllib.parse.quote(path))
        # the eleven standard headers (Content-Length empty for no body)
        std = ["", "", str(len(body)) if body else "", "", headers.get("Content-Type", ""),
               "", "", "", headers.get("If-None-Match", ""), "", ""]
        ms = "".join("%s:%s\n" % (k.lower(), v)
                     for k, v in sorted(headers.items(), key=lambda kv: kv[0].lower())
                     if k.lower().startswith("x-ms-"))
        resource = "/%s%s" % (self.ACCOUNT, url_path) + "".join(
            "\n%s:%s" % (k, v) for k, v in sorted(query.items()))
        sts = method + "\n" + "\n".join(std) + "\n" + ms + resource
        headers["Authorization"] = "SharedKey %s:%s" % (self.ACCOUNT, self._sign(sts))
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

    def _sign(self, text):
        return base64.b64encode(hmac.new(base64.b64decode(self.KEY), text.encode(),
                                         hashlib.sha256).digest()).decode()

    def create_container(self, name):
        status, body = self.request("PUT", "/" + name, {"restype": "container"})
        assert status == 201, (status, body)

    def names(self, prefix):
        """The committed blob names under prefix in the container."""
        status, body = self.request("GET", "/" + self.container,
                                    {"restype": "container", "comp": "list", "prefix": prefix})
        assert status == 200, (status, body)
        return [html.unescape(n.decode()) for n in re.findall(rb"<Name>([^<]*)</Name>", body)]

    def account_sas(self, permissions, hours=2):
        """An account SAS for the blob service (version 2025-01-05: the
        string to sign of versions since 2020-12-06, encryption scope line
        included)."""
        expiry = (datetime.datetime.now(datetime.timezone.utc) +
                  datetime.timedelta(hours=hours)).strftime("%Y-%m-%dT%H:%M:%SZ")
        fields = {"sv": self.VERSION, "ss": "b", "srt": "sco", "sp": permissions, "se": expiry,
                  "spr": "https,http"}
        fields["sig"] = self._sign("\n".join(
            [self.ACCOUNT, permissions, "b", "sco", "", expiry, "", "https,http", self.VERSION,
             "", ""]))
        return urllib.parse.urlencode(fields)

    def stop(self):
        if self.proc:
            stop_process(self.proc)
            self.log.close()
        self.proc = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


def unit_env(prefix, uri, options):
    """The environment under which build/unit-tests runs its contract suite
    on a remote store: <prefix>_URI and <prefix>_OPT_<NAME> (see
    tests/unit/test_storage.c)."""
    env = dict(os.environ)
    env[prefix + "_URI"] = uri
    for k, v in options.items():
        env["%s_OPT_%s" % (prefix, k)] = v
    return env
