"""Object-store servers for the tests, started on loopback on a free port
and stopped after: nothing depends on a server left running.

Moto: moto's S3 server (moto[server], pinned in tests/requirements.txt) with
IAM access control on, so that every request's SigV4 signature is checked
(moto lets the first few requests through unchecked, which the fixture
spends creating the user, its policy, its access key and the bucket). Other
stores (Azurite) add their own class here, with the same shape: start(),
stop(), options (the storage options our backend takes) and a context
manager.
"""
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

VENV_BIN = os.path.dirname(sys.executable)


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
                [os.path.join(VENV_BIN, "moto_server"), "-H", "127.0.0.1", "-p", str(self.port)],
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


def unit_env(prefix, uri, options):
    """The environment under which build/unit-tests runs its contract suite
    on a remote store: <prefix>_URI and <prefix>_OPT_<NAME> (see
    tests/unit/test_storage.c)."""
    env = dict(os.environ)
    env[prefix + "_URI"] = uri
    for k, v in options.items():
        env["%s_OPT_%s" % (prefix, k)] = v
    return env
