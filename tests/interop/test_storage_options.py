"""Storage options from the user to the jobs (issue 23): --storage-option
NAME=VALUE on every command that opens tables or a checkpoint, an options
file's [storage] section, the environment variables of those names; the
priority flag > file > environment (shown by --verbose, which names where
each came from); the malformed forms refused with exit 2 and the names
there are; a secret never printed (stdout, stderr, --verbose, errors) nor
written into the lake."""
import os
import subprocess

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from conftest import CLI, run_cli

# Every command that opens a table or a checkpoint.
COMMANDS = ("stream", "snapshot", "seed", "backfill", "apply", "reconcile", "repair",
            "finalization", "table-rows")
SECRET = "wJalrXUtnFEMI-K7MDENG-bPxRfiCYEXAMPLEKEY"
TOKEN = "sv=2024-08-04&sig=c2VjcmV0LXNhcy1zaWduYXR1cmU"


def cli(*args, env=None, cwd=None):
    """The CLI with a clean environment (no AWS_/AZURE_ variables of the
    host leak in) plus env."""
    e = {k: v for k, v in os.environ.items()
         if not k.startswith(("AWS_", "AZURE_"))}
    e.update(env or {})
    return subprocess.run([CLI, *args], capture_output=True, text=True, env=e, cwd=cwd,
                          timeout=120)


def small_table(path):
    write_deltalake(path, pa.table({"id": pa.array([1, 2], pa.int32())}))


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_names_the_flag_in_its_help(command):
    p = cli(command, "--help")
    assert p.returncode == 0
    assert "--storage-option NAME=VALUE" in p.stdout
    assert "[storage]" in p.stdout


BAD = [
    # (argument, what the message says)
    ("AWS_SECRET_ACCESS_KEY", "has no '='"),
    ("=" + SECRET, "the name before '=' is empty"),
    ("AWS_SECRET_KEY=" + SECRET, "'AWS_SECRET_KEY=...': no storage option has that name"),
    ("FOO=" + SECRET, "'FOO=...': no storage option has that name"),
    ("aws_session_token=", "storage option AWS_SESSION_TOKEN is empty"),
    ("AWS_ALLOW_HTTP=maybe", "AWS_ALLOW_HTTP must be true or false"),
]


@pytest.mark.parametrize("arg,says", BAD)
@pytest.mark.parametrize("command", ("stream", "apply", "table-rows", "finalization"))
def test_a_malformed_storage_option_is_exit_2_and_shows_no_secret(tmp_path, command, arg, says):
    args = {
        "stream": ["stream", "--captureInstance", "dbo_t", "--connectionString",
                   "Server=127.0.0.1,1;UID=sa;PWD=x;Encrypt=no", "--target", "./b", "--app-id",
                   "a", "--checkpoint", "./c"],
        "apply": ["apply", "--bronze", "./b", "--target", "./s", "--control-table", "./c",
                  "--keys", "id"],
        "table-rows": ["table-rows", "./b"],
        "finalization": ["finalization", "show", "--control-table", "./c", "--table", "t"],
    }[command]
    p = cli(*args, "--storage-option", arg, cwd=tmp_path)
    assert p.returncode == 2, p.stderr
    assert says in p.stderr
    if "no storage option" in says or "'='" in says:
        assert "AZURE_STORAGE_SAS_TOKEN" in p.stderr  # the names there are
    assert SECRET not in p.stdout + p.stderr
    assert os.listdir(tmp_path) == []  # nothing written


def test_the_flag_without_a_value_is_a_usage_error(tmp_path):
    p = cli("table-rows", "./b", "--storage-option", cwd=tmp_path)
    assert p.returncode == 2 and "--storage-option needs a value" in p.stderr


def verbose_sources(stderr):
    """{NAME: (value, where)} from --verbose's storage option lines."""
    out = {}
    for line in stderr.splitlines():
        if line.startswith("mssql-cdc: storage option "):
            pair, where = line[len("mssql-cdc: storage option "):].rsplit(" (", 1)
            name, value = pair.split("=", 1)
            out[name] = (value, where.rstrip(")"))
    return out


def test_priority_flag_over_file_over_environment(tmp_path):
    small_table(str(tmp_path / "t"))
    conf = tmp_path / "store.conf"
    conf.write_text("[storage]\naws_region = eu-west-1\nAWS_ENDPOINT_URL = http://from-file\n"
                    "AWS_SESSION_TOKEN = " + TOKEN + "\n")
    conf.chmod(0o600)
    env = {"AWS_REGION": "env-region", "AWS_ENDPOINT_URL": "http://from-env",
           "AWS_PROFILE": "env-profile", "AWS_SECRET_ACCESS_KEY": SECRET,
           "AWS_ALLOW_HTTP": "", "HOME": str(tmp_path)}
    # the flag comes before the file on the line, and still wins over it
    p = cli("table-rows", "./t", "--storage-option", "Aws_Region=flag-region",
            "--options-file", str(conf), "--verbose", env=env, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert len(p.stdout.splitlines()) == 2
    got = verbose_sources(p.stderr)
    assert got["AWS_REGION"] == ("flag-region", "--storage-option")
    assert got["AWS_ENDPOINT_URL"] == ("http://from-file", "options file or -o")
    assert got["AWS_PROFILE"] == ("env-profile", "environment")
    assert got["AWS_SECRET_ACCESS_KEY"] == ("<redacted>", "environment")
    assert got["AWS_SESSION_TOKEN"] == ("<redacted>", "options file or -o")
    assert "HOME" not in got  # every process's: not worth a line
    p = cli("table-rows", "./t", "--storage-option", "home=/srv/lake", "--verbose", env=env,
            cwd=tmp_path)
    assert verbose_sources(p.stderr)["HOME"] == ("/srv/lake", "--storage-option")
    assert "AWS_ALLOW_HTTP" not in got  # an empty variable is no value
    assert SECRET not in p.stderr + p.stdout and TOKEN not in p.stderr + p.stdout


def test_delta_rs_spellings_set_the_option_they_stand_for(tmp_path):
    small_table(str(tmp_path / "t"))
    conf = tmp_path / "store.conf"
    conf.write_text("[storage]\nsas_key = " + TOKEN + "\naccount_name = devstoreaccount1\n")
    conf.chmod(0o600)
    p = cli("table-rows", "./t", "--storage-option", "region=eu-north-1", "--storage-option",
            "Secret_Access_Key=" + SECRET, "--storage-option", "use_emulator=yes",
            "--options-file", str(conf), "--verbose", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    got = verbose_sources(p.stderr)
    assert got["AWS_REGION"] == ("eu-north-1", "--storage-option")
    assert got["AWS_SECRET_ACCESS_KEY"] == ("<redacted>", "--storage-option")
    assert got["AZURE_STORAGE_USE_EMULATOR"] == ("true", "--storage-option")
    assert got["AZURE_STORAGE_SAS_TOKEN"] == ("<redacted>", "options file or -o")
    assert got["AZURE_STORAGE_ACCOUNT_NAME"] == ("devstoreaccount1", "options file or -o")
    assert SECRET not in p.stderr + p.stdout and TOKEN not in p.stderr + p.stdout
    # a bare name that is an S3 option and an Azure one alike: refused, saying so
    # (in the words an options file's [storage] gets, below)
    for bare, means in (("endpoint=http://127.0.0.1:9000", "AWS_ENDPOINT_URL or "
                         "AZURE_STORAGE_ENDPOINT"),
                        ("token=" + SECRET, "AWS_SESSION_TOKEN or AZURE_STORAGE_TOKEN"),
                        ("ALLOW_HTTP=true", "AWS_ALLOW_HTTP or AZURE_STORAGE_ALLOW_HTTP")):
        p = cli("table-rows", "./t", "--storage-option", bare, cwd=tmp_path)
        assert p.returncode == 2, p.stderr
        name = bare.split("=")[0]
        assert "'%s=...' is ambiguous" % name in p.stderr, p.stderr
        assert "for S3 and for Azure alike; write " + means in p.stderr, p.stderr
        assert "no storage option has that name" not in p.stderr
        assert SECRET not in p.stderr + p.stdout
    p = cli("snapshot", "--bogus", cwd=tmp_path)  # other usage errors do not list them
    assert p.returncode == 2 and "other spellings" not in p.stderr, p.stderr
    conf.write_text("[storage]\ntoken = " + TOKEN + "\n")
    p = cli("table-rows", "./t", "--options-file", str(conf), cwd=tmp_path)
    assert p.returncode == 2, p.stderr
    assert "'token' is ambiguous" in p.stderr and "AZURE_STORAGE_TOKEN" in p.stderr
    assert "for S3 and for Azure alike; write AWS_SESSION_TOKEN or AZURE_STORAGE_TOKEN" \
        in p.stderr, p.stderr
    assert TOKEN not in p.stderr + p.stdout


def test_a_bad_environment_value_is_exit_2_naming_the_variable(tmp_path):
    small_table(str(tmp_path / "t"))
    p = cli("table-rows", "./t", env={"AZURE_STORAGE_USE_EMULATOR": "perhaps"}, cwd=tmp_path)
    assert p.returncode == 2
    assert "environment variable AZURE_STORAGE_USE_EMULATOR" in p.stderr
    assert "fix or unset it" in p.stderr
    # given by a flag, the variable is not read at all
    p = cli("table-rows", "./t", "--storage-option", "azure_storage_use_emulator=true",
            env={"AZURE_STORAGE_USE_EMULATOR": "perhaps"}, cwd=tmp_path)
    assert p.returncode == 0, p.stderr


def test_the_options_file_section_refuses_source_options_and_warns_when_readable(tmp_path):
    small_table(str(tmp_path / "t"))
    conf = tmp_path / "bad.conf"
    conf.write_text("[storage]\nmaxCommitsPerBatch = 4\n")
    p = cli("table-rows", "./t", "--options-file", str(conf), cwd=tmp_path)
    assert p.returncode == 2 and "maxCommitsPerBatch is a source option" in p.stderr
    conf.write_text("[storage]\nAZURE_STORAGE_ACCOUNT_KEY = " + SECRET + "\n")
    conf.chmod(0o644)
    p = cli("table-rows", "./t", "--options-file", str(conf), cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert "storage secret and others than its owner may read it" in p.stderr
    assert SECRET not in p.stderr + p.stdout


def test_every_option_a_backend_reads_is_accepted_and_proxies_are_kept_secret(tmp_path):
    """The names the S3 and Azure backends read beyond delta-rs's list (the
    CA bundle, the S3 and STS endpoints, the metadata endpoint, proxies,
    part and block sizes) are storage options like the others: a backend
    reading a name the CLI refuses would be a documented setting nobody can
    set. A proxy URL may hold a password: --verbose shows it redacted."""
    small_table(str(tmp_path / "t"))
    proxy = "http://user:" + SECRET + "@proxy.example:3128"
    names = {"AWS_CA_BUNDLE": "/etc/ssl/certs/ca-certificates.crt",
             "AWS_ENDPOINT_URL_S3": "http://127.0.0.1:9", "AWS_ENDPOINT_URL_STS":
             "http://127.0.0.1:9", "AWS_EC2_METADATA_SERVICE_ENDPOINT": "http://127.0.0.1:9",
             "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE": "/dev/null", "NO_PROXY": "localhost",
             "MCDC_S3_PART_BYTES": "5242880", "MCDC_AZURE_BLOCK_BYTES": "1048576",
             "HTTPS_PROXY": proxy, "HTTP_PROXY": proxy}
    args = []
    for k, v in names.items():
        args += ["--storage-option", f"{k}={v}"]
    p = cli("table-rows", "./t", *args, "--verbose", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    got = verbose_sources(p.stderr)
    for k in names:
        assert k in got, (k, p.stderr)
    assert got["HTTPS_PROXY"][0] == "<redacted>" and got["HTTP_PROXY"][0] == "<redacted>"
    assert got["MCDC_S3_PART_BYTES"][0] == "5242880"
    assert SECRET not in p.stderr + p.stdout
    # from the environment too, as curl users set them
    p = cli("table-rows", "./t", "--verbose", env={"HTTPS_PROXY": proxy}, cwd=tmp_path)
    assert p.returncode == 0 and verbose_sources(p.stderr)["HTTPS_PROXY"] == \
        ("<redacted>", "environment"), p.stderr


def test_a_uri_target_is_still_refused_until_its_backend_lands(tmp_path):
    p = cli("table-rows", "gs://bucket/t", "--storage-option", "AWS_SECRET_ACCESS_KEY=" + SECRET,
            "--verbose", cwd=tmp_path)
    assert p.returncode == 2 and "not built yet" in p.stderr
    assert SECRET not in p.stderr + p.stdout


def test_stream_and_finalization_carry_secrets_nowhere(sim, workdir):
    """A whole run with storage secrets given every way: none of them in any
    output (--verbose included) nor in any file of the lake."""
    sim.run("CREATE DATABASE shop;")
    sim.run("CREATE TABLE dbo.t (id INT NOT NULL PRIMARY KEY, v INT NULL);"
            "EXEC sys.sp_cdc_enable_db;"
            "EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N't', "
            "@role_name = NULL;"
            "INSERT INTO dbo.t VALUES (1, 1), (2, 2);"
            "EXEC sim.run_capture @ignore_latency = 1;", database="shop")
    lake = os.path.join(workdir, "lake")
    os.makedirs(lake)
    conf = os.path.join(workdir, "src.conf")
    with open(conf, "w") as f:
        f.write(f"captureInstance = dbo_t\nconnectionString = {sim.connection_string('shop')}\n"
                f"[storage]\nAZURE_STORAGE_SAS_TOKEN = {TOKEN}\n")
    os.chmod(conf, 0o600)
    env = {"AZURE_STORAGE_ACCOUNT_KEY": SECRET + "-env"}
    outs = []
    p = cli("stream", "--options-file", conf, "--target", "./bronze", "--app-id", "t-v1",
            "--checkpoint", "./ckpt", "--facts-table", "./facts", "--control-table", "./control",
            "--trigger", "availableNow", "--verbose",
            "--storage-option", "aws_secret_access_key=" + SECRET, env=env, cwd=lake)
    assert p.returncode == 0, p.stderr
    outs.append(p.stdout + p.stderr)
    assert verbose_sources(p.stderr)["AWS_SECRET_ACCESS_KEY"] == ("<redacted>", "--storage-option")
    p = cli("apply", "--options-file", conf, "--bronze", "./bronze", "--target", "./silver",
            "--control-table", "./control", "--facts-table", "./facts", "--verbose",
            "--storage-option", "AWS_SECRET_ACCESS_KEY=" + SECRET, env=env, cwd=lake)
    assert p.returncode == 0, p.stderr
    outs.append(p.stdout + p.stderr)
    p = cli("finalization", "show", "--control-table", "./control", "--table", "./bronze",
            "--verbose", "--storage-option", "AWS_SECRET_ACCESS_KEY=" + SECRET, env=env, cwd=lake)
    assert p.returncode == 0, p.stderr
    outs.append(p.stdout + p.stderr)
    p = cli("table-rows", "./silver", "--options-file", conf, "--verbose", env=env, cwd=lake)
    assert p.returncode == 0 and len(p.stdout.splitlines()) == 2, p.stderr
    outs.append(p.stdout + p.stderr)
    # and an error on the way out of a job: a secret in no message
    p = cli("apply", "--options-file", conf, "--bronze", "./bronze", "--target", "./bronze",
            "--control-table", "./control", "--verbose",
            "--storage-option", "AWS_SECRET_ACCESS_KEY=" + SECRET, env=env, cwd=lake)
    assert p.returncode == 7, p.stderr
    outs.append(p.stdout + p.stderr)
    for out in outs:
        for secret in (SECRET, TOKEN):
            assert secret not in out
    for root, _, files in os.walk(lake):
        for name in files:
            with open(os.path.join(root, name), "rb") as f:
                data = f.read()
            for secret in (SECRET, TOKEN):
                assert secret.encode() not in data, os.path.join(root, name)


@pytest.mark.parametrize("form", ["--connectionString", "-o"])
def test_a_running_commands_arguments_show_no_password_or_secret(sim, workdir, form):
    """What ps shows of a running stream (/proc/PID/cmdline, readable by
    every user): x's where the connection string and a secret storage
    option's value were, the other arguments as given."""
    import signal
    import time
    from conftest import PASSWORD
    sim.run("CREATE DATABASE shop;")
    sim.run("CREATE TABLE dbo.t (id INT NOT NULL PRIMARY KEY);"
            "EXEC sys.sp_cdc_enable_db;"
            "EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N't', "
            "@role_name = NULL;"
            "INSERT INTO dbo.t VALUES (1);"
            "EXEC sim.run_capture @ignore_latency = 1;", database="shop")
    cs = sim.connection_string("shop")
    source = [form, cs] if form != "-o" else ["-o", "connectionString=" + cs]
    p = subprocess.Popen([CLI, "stream", "--captureInstance", "dbo_t", *source,
                          "--target", "./bronze", "--app-id", "t-v1", "--checkpoint", "./ckpt",
                          "--facts-table", "./facts", "--quiet",
                          "--storage-option", "aws_secret_access_key=" + SECRET,
                          "--storage-option", "AWS_REGION=eu-west-1"],
                         cwd=workdir, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        first = os.path.join(workdir, "bronze", "_delta_log", "00000000000000000000.json")
        deadline = time.monotonic() + 60
        while not os.path.exists(first) and p.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert os.path.exists(first), p.poll()
        with open(f"/proc/{p.pid}/cmdline", "rb") as f:
            shown = f.read().split(b"\0")
        assert PASSWORD.encode() not in b" ".join(shown) and SECRET.encode() not in b" ".join(shown)
        hidden = b"x" * len(cs) if form != "-o" else b"connectionString=" + b"x" * len(cs)
        assert hidden in shown, shown
        assert b"aws_secret_access_key=" + b"x" * len(SECRET) in shown, shown
        assert b"AWS_REGION=eu-west-1" in shown and b"dbo_t" in shown, shown
        p.send_signal(signal.SIGTERM)
        out, err = p.communicate(timeout=60)
        assert p.returncode == 0, err
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
