"""Credential chains through the CLI (issue 23): on moto's S3 (signatures
checked) the keys from the environment, from a named profile of the shared
credentials and config files, from the default profile under HOME, from a
web identity token file exchanged by moto's STS, and from a container
credentials endpoint of the test's own whose first keys have already
expired (renewed before the first request: the expired session token is
never sent); on Azure, Entra ID's client secret, workload identity and
managed identity against token and blob endpoints of the test's own on
loopback, and the client secret's tokens on Azurite (--oauth basic, over
https behind a relay of the test's own), which checks each request's bearer
token while stream and apply write every table. Every output, every
file the runs left and every object of the lake is scanned for every
secret: 0 hits."""
import datetime
import http.server
import json
import os
import subprocess
import threading
import urllib.parse
import urllib.request

import pytest
from deltalake import DeltaTable

from conftest import CLI
from test_objstore_e2e import CAPTURE, TABLE

objstore = pytest.importorskip("objstore")

ROLE = "arn:aws:iam::123456789012:role/lake-role"
ALLOW = lambda *actions: json.dumps({  # noqa: E731
    "Version": "2012-10-17",
    "Statement": [{"Effect": "Allow", "Action": list(actions), "Resource": "*"}]})


class MotoRoles(objstore.Moto):
    """Moto with a role to assume (s3:*) and its user allowed to assume it."""

    SETUP_REQUESTS = objstore.Moto.SETUP_REQUESTS + 3

    def _setup(self):
        super()._setup()
        iam = self.client("iam")
        iam.create_role(RoleName="lake-role", AssumeRolePolicyDocument=ALLOW("sts:*"))
        iam.put_role_policy(RoleName="lake-role", PolicyName="s3", PolicyDocument=ALLOW("s3:*"))
        iam.put_user_policy(UserName="lake-writer", PolicyName="sts",
                            PolicyDocument=ALLOW("sts:AssumeRole"))

    def allow_unsigned(self, n):
        """The next n requests pass unchecked (STS's web identity call is
        unsigned, as on AWS; moto checks every request after its setup)."""
        req = urllib.request.Request(self.endpoint + "/moto-api/reset-auth", data=str(n).encode(),
                                     method="POST", headers={"Content-Type": "text/plain"})
        urllib.request.urlopen(req, timeout=10).read()

    def assume(self):
        sts = self.client("sts", self.key_id, self.secret)
        return sts.assume_role(RoleArn=ROLE, RoleSessionName="container")["Credentials"]


class Endpoint:
    """A small HTTP server on loopback; answer(handler) -> (status, headers,
    body) for each request, which it keeps in .seen (method, path, headers,
    body)."""

    def __init__(self, answer, latin1=False):
        self.seen = []
        outer = self

        class H(http.server.BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def _any(self):
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n).decode("latin-1" if latin1 else "utf-8") if n else ""
                outer.seen.append((self.command, self.path, dict(self.headers), body))
                status, headers, out = answer(self, body)
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(out)

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _any

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.url = "http://127.0.0.1:%d" % self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def iso(dt):
    return dt.strftime("%Y-%m-%dT%H:%M:%SZ")


def scan(secrets, outs, workdir, skip, blobs=()):
    """No secret in any output, file under workdir (but the credential
    files in skip, which hold them by design) or object."""
    hits = []
    for i, out in enumerate(outs):
        hits += [("output %d" % i, s) for s in secrets if s in out]
    for d, _, files in os.walk(workdir):
        for f in files:
            p = os.path.join(d, f)
            if p in skip or not os.path.isfile(p):
                continue
            data = open(p, "rb").read()
            hits += [(p, s) for s in secrets if s.encode() in data]
    for name, data in blobs:
        hits += [(name, s) for s in secrets if s.encode() in data]
    assert hits == [], hits


def test_s3_credential_chains_and_an_expired_session_token(sim, workdir):
    sim.run("CREATE DATABASE shop;")
    sim.run(TABLE + "INSERT INTO dbo.t VALUES (1, 10, N'a'), (2, 20, N'b');" + CAPTURE,
            database="shop")
    src = ["--captureInstance", "dbo_t", "--connectionString", sim.connection_string("shop")]
    base = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "AZURE_"))}
    outs, secrets, skip = [], [], set()
    with MotoRoles() as m:
        base.update({"AWS_ENDPOINT_URL": m.endpoint, "AWS_ALLOW_HTTP": "true",
                     "AWS_EC2_METADATA_DISABLED": "true", "HOME": os.path.join(workdir, "nohome")})
        secrets.append(m.secret)

        def cli(extra, *args, ok=0):
            env = dict(base, **extra)
            p = subprocess.run([CLI, *args], capture_output=True, text=True, env=env,
                               cwd=workdir, timeout=180)
            outs.append(p.stdout + p.stderr)
            assert p.returncode == ok, (args[0], extra.keys(), p.stderr[-3000:])
            return p

        def silver_rows(extra):
            p = cli(extra, "table-rows", "s3://lake/c/silver", "--verbose")
            return sorted((r["id"], r["v"]) for r in map(json.loads, p.stdout.splitlines()))

        # 1. the environment's keys write the lake
        keys = {"AWS_ACCESS_KEY_ID": m.key_id, "AWS_SECRET_ACCESS_KEY": m.secret,
                "AWS_REGION": "us-east-1"}
        r = "s3://lake/c"
        cli(keys, "stream", *src, "--target", f"{r}/bronze", "--app-id", "t-v1", "--checkpoint",
            f"{r}/ckpt", "--facts-table", f"{r}/facts", "--control-table", f"{r}/control",
            "--trigger", "availableNow")
        cli(keys, "apply", *src, "--bronze", f"{r}/bronze", "--target", f"{r}/silver",
            "--control-table", f"{r}/control", "--facts-table", f"{r}/facts")
        want = silver_rows(keys)
        assert want == [(1, 10), (2, 20)]
        # without any: said, and nothing asked of instance metadata
        p = cli({}, "table-rows", f"{r}/silver", ok=5)
        assert "no AWS credentials" in p.stderr and "AWS_EC2_METADATA_DISABLED" in p.stderr

        # 2. a named profile of the credentials file, its region from the config file
        cred, conf = os.path.join(workdir, "credentials"), os.path.join(workdir, "config")
        with open(cred, "w") as f:
            f.write(f"[other]\naws_access_key_id = AKIDOTHER\naws_secret_access_key = nope\n"
                    f"[dev]\naws_access_key_id = {m.key_id}\n"
                    f"aws_secret_access_key = {m.secret}\n")
        with open(conf, "w") as f:
            f.write("[profile dev]\nregion = us-east-1\n")
        skip |= {cred, conf}
        prof = {"AWS_PROFILE": "dev", "AWS_SHARED_CREDENTIALS_FILE": cred,
                "AWS_CONFIG_FILE": conf}
        assert silver_rows(prof) == want
        # a profile neither file has: said
        p = cli(dict(prof, AWS_PROFILE="nosuch"), "table-rows", f"{r}/silver", ok=2)
        assert 'the profile "nosuch"' in p.stderr

        # 3. the default profile under HOME
        home = os.path.join(workdir, "home")
        os.makedirs(os.path.join(home, ".aws"))
        dflt = os.path.join(home, ".aws", "credentials")
        with open(dflt, "w") as f:
            f.write(f"[default]\naws_access_key_id={m.key_id}\naws_secret_access_key={m.secret}\n"
                    "region=us-east-1\n")
        skip.add(dflt)
        assert silver_rows({"HOME": home}) == want

        # 4. web identity: the token file exchanged by STS for the role's keys
        tok = os.path.join(workdir, "web-identity.jwt")
        jwt = "eyJhbGciOiJub25lIn0.eyJzdWIiOiJsYWtlIn0.web-identity-token-7f3a"
        with open(tok, "w") as f:
            f.write(jwt + "\n")
        skip.add(tok)
        secrets.append(jwt)
        m.allow_unsigned(1)
        wi = {"AWS_WEB_IDENTITY_TOKEN_FILE": tok, "AWS_ROLE_ARN": ROLE,
              "AWS_ENDPOINT_URL_STS": m.endpoint, "AWS_REGION": "us-east-1"}
        assert silver_rows(wi) == want

        # 5. container credentials: the first keys already expired (and
        # not moto's: sending them would be refused), renewed before the
        # first request
        issued = []
        auth = "container-auth-token-1b2c"
        secrets += [auth, "expired-secret-9d8e", "expired-session-token-4c5d"]

        def creds(handler, body):
            now = datetime.datetime.now(datetime.timezone.utc)
            if not issued:
                c = {"AccessKeyId": "ASIAEXPIREDEXPIRED00", "SecretAccessKey": secrets[-2],
                     "Token": secrets[-1], "Expiration": iso(now - datetime.timedelta(minutes=1))}
            else:
                a = m.assume()
                c = {"AccessKeyId": a["AccessKeyId"], "SecretAccessKey": a["SecretAccessKey"],
                     "Token": a["SessionToken"], "Expiration": iso(now + datetime.timedelta(hours=1))}
            issued.append(c)
            return 200, {"Content-Type": "application/json"}, json.dumps(c).encode()

        ep = Endpoint(creds)
        try:
            cont = {"AWS_CONTAINER_CREDENTIALS_FULL_URI": ep.url + "/v2/credentials",
                    "AWS_CONTAINER_AUTHORIZATION_TOKEN": auth, "AWS_REGION": "us-east-1"}
            assert silver_rows(cont) == want
        finally:
            ep.close()
        assert len(issued) == 2, len(issued)  # once at the start, once renewed
        assert all(h.get("Authorization") == auth for _, _, h, _ in ep.seen)
        secrets += [c["SecretAccessKey"] for c in issued] + [c["Token"] for c in issued]

        s3 = m.s3()
        objects = [(o["Key"], s3.get_object(Bucket="lake", Key=o["Key"])["Body"].read())
                   for o in s3.list_objects_v2(Bucket="lake")["Contents"]]
        tables = [(n, repr(DeltaTable(f"{r}/{n}", storage_options=m.options)
                           .to_pyarrow_table().to_pylist()).encode())
                  for n in ("bronze", "facts", "control", "silver")]
    assert len(objects) > 10
    scan(secrets, outs, workdir, skip, objects + tables)


def entra_endpoints():
    """A token endpoint (Entra ID's and a managed identity's paths) issuing
    tokens, and a blob endpoint that takes only them: an empty container."""
    tokens = []

    def token(handler, body):
        t = "entra-token-%d-5e6f" % len(tokens)
        tokens.append(t)
        return 200, {"Content-Type": "application/json"}, json.dumps(
            {"token_type": "Bearer", "expires_in": 3600, "access_token": t}).encode()

    def blob(handler, body):
        if handler.headers.get("Authorization") not in ["Bearer " + t for t in tokens]:
            return 403, {"x-ms-error-code": "AuthenticationFailed"}, b""
        q = urllib.parse.parse_qs(urllib.parse.urlsplit(handler.path).query)
        if q.get("comp") == ["list"]:
            return 200, {"Content-Type": "application/xml"}, (
                b'<?xml version="1.0" encoding="utf-8"?><EnumerationResults><Blobs/>'
                b"<NextMarker/></EnumerationResults>")
        return 404, {"x-ms-error-code": "BlobNotFound"}, b""

    return Endpoint(token), Endpoint(blob), tokens


@pytest.mark.parametrize("kind", ["client-secret", "workload", "managed"])
def test_azure_entra_id_through_the_cli(workdir, kind):
    tok_ep, blob_ep, tokens = entra_endpoints()
    secret = "entra-client-secret-0a1b2c"
    fed = os.path.join(workdir, "federated.jwt")
    with open(fed, "w") as f:
        f.write("federated-assertion-3d4e\n")
    opts = {"AZURE_STORAGE_ACCOUNT_NAME": "acct1", "AZURE_STORAGE_ENDPOINT": blob_ep.url,
            "AZURE_ALLOW_HTTP": "true"}
    if kind == "client-secret":
        opts.update({"AZURE_CLIENT_ID": "cid", "AZURE_TENANT_ID": "tenant1",
                     "AZURE_AUTHORITY_HOST": tok_ep.url})
    elif kind == "workload":
        opts.update({"AZURE_CLIENT_ID": "cid", "AZURE_TENANT_ID": "tenant1",
                     "AZURE_AUTHORITY_HOST": tok_ep.url, "AZURE_FEDERATED_TOKEN_FILE": fed})
    else:
        opts.update({"IDENTITY_ENDPOINT": tok_ep.url + "/msi/token",
                     "IDENTITY_HEADER": secret})
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "AZURE_"))}
    env.update(opts)
    flags = ["--storage-option", "AZURE_CLIENT_SECRET=" + secret] if kind == "client-secret" \
        else []
    try:
        p = subprocess.run([CLI, "table-rows", "az://lake/t/silver", "--verbose", *flags],
                           capture_output=True, text=True, env=env, cwd=workdir, timeout=120)
    finally:
        tok_ep.close()
        blob_ep.close()
    out = p.stdout + p.stderr
    # an empty container: no table there (not a refused credential)
    assert p.returncode == 2 and "az://lake/t/silver is not a Delta table" in out, out
    assert len(tokens) == 1, tokens
    method, path, headers, body = tok_ep.seen[0]
    if kind == "managed":
        assert method == "GET" and path.startswith("/msi/token?api-version=2019-08-01&resource="
                                                   "https%3A%2F%2Fstorage.azure.com%2F"), path
        assert headers.get("Metadata") == "true" and headers.get("X-IDENTITY-HEADER") == secret
    else:
        form = urllib.parse.parse_qs(body)
        assert method == "POST" and path == "/tenant1/oauth2/v2.0/token", path
        assert form["scope"] == ["https://storage.azure.com/.default"]
        assert form["client_id"] == ["cid"]
        if kind == "workload":
            assert form["client_assertion"] == ["federated-assertion-3d4e"]
            assert "client_secret" not in form
        else:
            assert form["client_secret"] == [secret]
    assert blob_ep.seen and all(h.get("Authorization") == "Bearer " + tokens[0] and
                                h.get("x-ms-version") for _, _, h, _ in blob_ep.seen)
    scan([secret, tokens[0], "federated-assertion-3d4e"], [out], workdir, {fed})


# ---- Entra ID against Azurite: bearer tokens checked by the emulator --------------------

class AzuriteOAuth(objstore.Azurite):
    """Azurite with --oauth basic, which takes bearer tokens only over https
    (a self-signed certificate here), behind a plain-http relay of the
    test's own: the backend and the fixture's Shared Key requests reach
    Azurite through it, so .port and .endpoint are the relay's. Azurite
    checks a token's audience, issuer and times, not its signature."""

    def start(self):
        import http.client
        import ssl
        self.dir = __import__("tempfile").mkdtemp(prefix="azurite-oauth-")
        cert, key = os.path.join(self.dir, "cert.pem"), os.path.join(self.dir, "key.pem")
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                        "-subj", "/CN=127.0.0.1", "-keyout", key, "-out", cert],
                       check=True, capture_output=True)
        self.log_path = os.path.join(self.dir, "azurite.log")
        self.log = open(self.log_path, "w")
        tls_port = objstore.free_port()
        self.proc = subprocess.Popen(
            [self.BIN, "--blobHost", "127.0.0.1", "--blobPort", str(tls_port), "--location",
             self.dir, "--skipApiVersionCheck", "--disableTelemetry", "--cert", cert, "--key",
             key, "--oauth", "basic"], stdout=self.log, stderr=subprocess.STDOUT)
        ctx = ssl.create_default_context()
        ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE

        def relay(handler, body):
            c = http.client.HTTPSConnection("127.0.0.1", tls_port, context=ctx, timeout=30)
            headers = {k: v for k, v in handler.headers.items()
                       if k.lower() not in ("connection", "keep-alive")}
            c.request(handler.command, handler.path, body=body.encode("latin-1") or None,
                      headers=headers)
            r = c.getresponse()
            out = r.read()
            keep = {k: v for k, v in r.getheaders()
                    if k.lower() not in ("transfer-encoding", "connection", "content-length")}
            c.close()
            return r.status, keep, out

        for _ in range(100):  # until Azurite answers through TLS
            try:
                http.client.HTTPSConnection("127.0.0.1", tls_port, context=ctx,
                                            timeout=1).request("GET", "/")
                break
            except OSError:
                if self.proc.poll() is not None:
                    raise RuntimeError(open(self.log_path).read()[-2000:])
                __import__("time").sleep(0.2)
        self.relay = Endpoint(relay, latin1=True)
        self.port = int(self.relay.url.rsplit(":", 1)[1])
        self.create_container(self.container)
        return self

    def stop(self):
        if getattr(self, "relay", None):
            self.relay.close()
            self.relay = None
        super().stop()
        __import__("shutil").rmtree(self.dir, ignore_errors=True)


def jwt(**claims):
    import base64

    def b64(d):
        return base64.urlsafe_b64encode(json.dumps(d).encode()).rstrip(b"=").decode()
    return b64({"alg": "RS256", "typ": "JWT"}) + "." + b64(claims) + ".c2lnbmF0dXJl"


def test_entra_client_secret_on_azurite_every_table_and_the_checkpoint(sim, workdir):
    """stream and apply with every table and the checkpoint on az:// with a
    client secret only: Azurite takes each request's bearer token; a token
    for another audience is refused (exit 5, what to check said)."""
    import time
    sim.run("CREATE DATABASE shop;")
    sim.run(TABLE + "INSERT INTO dbo.t VALUES (1, 10, N'a'), (2, 20, N'b');" + CAPTURE,
            database="shop")
    src = ["--captureInstance", "dbo_t", "--connectionString", sim.connection_string("shop")]
    audience = ["https://storage.azure.com"]
    issued = []

    def token(handler, body):
        now = int(time.time())
        t = jwt(aud=audience[0], iss="https://sts.windows.net/tenant1/", nbf=now - 60,
                exp=now + 3600, iat=now - 60, appid="cid", tid="tenant1")
        issued.append(t)
        return 200, {"Content-Type": "application/json"}, json.dumps(
            {"token_type": "Bearer", "expires_in": 3600, "access_token": t}).encode()

    secret = "entra-azurite-secret-6a7b"
    tok_ep = Endpoint(token)
    outs = []
    a = AzuriteOAuth(container="lake")
    try:
        a.start()
        env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "AZURE_"))}
        env.update({"AZURE_STORAGE_ACCOUNT_NAME": a.ACCOUNT, "AZURE_STORAGE_ENDPOINT": a.endpoint,
                    "AZURE_ALLOW_HTTP": "true", "AZURE_CLIENT_ID": "cid",
                    "AZURE_TENANT_ID": "tenant1", "AZURE_AUTHORITY_HOST": tok_ep.url,
                    "AZURE_CLIENT_SECRET": secret})
        r = "az://lake/oauth"

        def cli(*args, ok=0):
            p = subprocess.run([CLI, *args], capture_output=True, text=True, env=env,
                               cwd=workdir, timeout=180)
            outs.append(p.stdout + p.stderr)
            assert p.returncode == ok, (args[0], p.stderr[-3000:])
            return p

        cli("stream", *src, "--target", f"{r}/bronze", "--app-id", "t-v1", "--checkpoint",
            f"{r}/ckpt", "--facts-table", f"{r}/facts", "--control-table", f"{r}/control",
            "--trigger", "availableNow")
        cli("apply", *src, "--bronze", f"{r}/bronze", "--target", f"{r}/silver",
            "--control-table", f"{r}/control", "--facts-table", f"{r}/facts")
        p = cli("table-rows", f"{r}/silver")
        assert sorted((x["id"], x["v"]) for x in map(json.loads, p.stdout.splitlines())) == \
            [(1, 10), (2, 20)]
        # a token per table or checkpoint a command opens (each storage has
        # its own), not per request
        assert 3 <= len(issued) <= 24, len(issued)
        names = a.names("oauth/")
        assert any(n.startswith("oauth/ckpt/") for n in names), names
        assert any(n.startswith("oauth/silver/_delta_log/") for n in names), names
        # a token for another audience: Azurite refuses it, and we say what to check
        audience[0] = "https://vault.azure.net"
        p = cli("table-rows", f"{r}/silver", ok=5)
        assert "refused the client secret" in p.stderr and "AZURE_CLIENT_SECRET" in p.stderr, \
            p.stderr
    finally:
        a.stop()
        tok_ep.close()
    scan([secret] + issued, outs, workdir, set())
