"""Every command refuses every bad input before its first side effect.

tests/refusals.tsv lists, a row each, a command line with one wrong input
(a path, a table's kind or role, a key, a capture instance, a run id, a
time, a number, an options file, a flag, a login, a server) and what the
command must do with it: exit with its documented code, say what was wrong
and what to do (two fragments of its message, matched ignoring case), and
write nothing (unless the row says it may). This module builds one world
(the simulator with a few tables under CDC; a lake that stream, apply,
reconcile and a chunked snapshot's first wave wrote; stray files and
directories), then runs each row as its own case: the lake's files (paths,
sizes, mtimes) and the simulator's tables are recorded before and compared
after, and no password may appear in what the command printed.

`python tests/interop/test_refusals.py [word]` builds the world and prints,
for each row (whose case holds word), what the command did: a way to write
a new row.
"""
import json
import os
import re
import shlex
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import time
from collections import namedtuple

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import write_deltalake

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from conftest import CLI, PASSWORD, ROOT, start_sim  # noqa: E402

TABLE = os.path.join(ROOT, "tests", "refusals.tsv")
DB = "shop"
NOGRANT_PASSWORD = "NoGrant-Passw0rd1"
DISABLED_PASSWORD = "Disabled-Passw0rd1"
WRONG_PASSWORD = "Wrong-Passw0rd9"
# a storage secret some rows pass (tests/refusals.tsv): never shown either
STORAGE_SECRET = "wJalrXUtnFEMI-K7MDENG-refusalKEY"
SECRETS = (PASSWORD, NOGRANT_PASSWORD, DISABLED_PASSWORD, WRONG_PASSWORD, STORAGE_SECRET)
# A row may take this long: the unreachable server's retries wait 1 ms each
# (MCDC_RETRY_BACKOFF_MS), everything else fails before or at its first query.
ROW_SECONDS = 10

Row = namedtuple("Row", "case exit writes says fix command")


def load_rows(path=TABLE):
    """The table's rows: tab-separated case, exit, writes (no|yes), says, fix,
    command; '#' lines and blank lines are comments."""
    rows, seen = [], set()
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if not line.strip() or line.startswith("#"):
                continue
            cols = line.split("\t")
            assert len(cols) == 6, f"{path}:{n}: expected 6 tab-separated columns, got {len(cols)}"
            case, code, writes, says, fix, command = cols
            assert re.fullmatch(r"[a-z0-9][a-z0-9-]*", case), f"{path}:{n}: case name {case!r}"
            assert case not in seen, f"{path}:{n}: case {case} twice"
            assert writes in ("no", "yes"), f"{path}:{n}: writes must be no or yes"
            assert says.strip() and fix.strip(), f"{path}:{n}: says and fix must not be empty"
            seen.add(case)
            rows.append(Row(case, int(code), writes == "yes", says, fix, command))
    return rows


ROWS = load_rows()

# Rows that do not hold yet, each a defect still open: strict xfails, so a
# fix that makes one hold fails here until its line is removed.
KNOWN = {}

SQL_TABLES = """
CREATE TABLE dbo.orders (id INT NOT NULL PRIMARY KEY, status NVARCHAR(20) NULL, amount INT NULL);
CREATE TABLE dbo.lines (region NVARCHAR(8) NOT NULL, id INT NOT NULL, qty INT NULL,
                        PRIMARY KEY (region, id));
CREATE TABLE dbo.heap (a INT NULL, b NVARCHAR(10) NULL);
CREATE TABLE dbo.gone (id INT NOT NULL PRIMARY KEY);
EXEC sys.sp_cdc_enable_db;
EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'orders', @role_name = NULL;
EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'lines', @role_name = NULL;
EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'heap', @role_name = NULL,
     @supports_net_changes = 0;
EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'gone', @role_name = NULL;
CREATE LOGIN nogrant WITH PASSWORD = '%s';
CREATE USER nogrant FOR LOGIN nogrant;
CREATE LOGIN offline WITH PASSWORD = '%s';
CREATE USER offline FOR LOGIN offline;
ALTER LOGIN offline DISABLE;
""" % (NOGRANT_PASSWORD, DISABLED_PASSWORD)
CAPTURE = "EXEC sim.run_capture @ignore_latency = 1;"
# What a command could have changed on the server: the tables, their change
# tables, the capture instances. (Not max_lsn: capture adds an idle mapping
# entry every few minutes of its own.)
STATE_SQL = """
SELECT (SELECT COUNT(*) FROM dbo.orders), (SELECT SUM(CAST(id AS bigint) * 7 + amount) FROM dbo.orders),
       (SELECT COUNT(*) FROM dbo.lines), (SELECT COUNT(*) FROM dbo.heap),
       (SELECT COUNT(*) FROM cdc.dbo_orders_CT), (SELECT COUNT(*) FROM cdc.dbo_lines_CT),
       (SELECT COUNT(*) FROM cdc.dbo_heap_CT), (SELECT COUNT(*) FROM cdc.change_tables)
"""
INSTANCES_SQL = ("SELECT capture_instance, CONVERT(varchar(22), start_lsn, 1) FROM cdc.change_tables "
                 "ORDER BY capture_instance")


def free_port():
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cli(cwd, *args, env=None):
    p = subprocess.run([CLI, *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=60)
    if p.returncode not in (0, 14):
        raise RuntimeError(f"building the world: mssql-cdc {' '.join(args[:1])} exited "
                           f"{p.returncode}:\n{p.stderr}")
    return p


def write_parquet(path, columns):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    pq.write_table(pa.table(columns), path)


def write_file(path, text, mode=0o600):
    with open(path, "wb") as f:
        f.write(text if isinstance(text, bytes) else text.encode())
    os.chmod(path, mode)


class World:
    """The simulator and a lake, built once; every row runs in self.lake."""

    def __init__(self):
        self.root = tempfile.mkdtemp(prefix="mcdc-refusals-")
        self.lake = os.path.join(self.root, "lake")
        self.pristine = os.path.join(self.root, "pristine")
        os.makedirs(self.lake)
        self.sim = start_sim(self.root)
        try:
            self._build()
        except BaseException:
            self.close()
            raise

    def _build(self):
        sim, lake = self.sim, self.lake
        sim.run(f"CREATE DATABASE {DB};")
        sim.run(SQL_TABLES, database=DB)
        orders = ",".join(f"({i}, N'{'new' if i % 2 else 'paid'}', {i * 10})" for i in range(1, 41))
        lines = ",".join(f"(N'{r}', {i}, {i})" for r in ("EU", "US") for i in range(1, 11))
        sim.run(f"INSERT INTO dbo.orders VALUES {orders}; INSERT INTO dbo.lines VALUES {lines}; "
                f"INSERT INTO dbo.heap VALUES (1, N'a'), (1, N'a'), (2, N'b'); "
                f"INSERT INTO dbo.gone VALUES (1); {CAPTURE}", database=DB)
        # a capture instance that was, and is no more
        sim.run("EXEC sys.sp_cdc_disable_table @source_schema = N'dbo', @source_name = N'gone', "
                "@capture_instance = N'dbo_gone';", database=DB)
        cs = sim.connection_string(DB)
        self.cs = cs
        orders_src = ["--captureInstance", "dbo_orders", "--connectionString", cs]
        lines_src = ["--captureInstance", "dbo_lines", "--connectionString", cs]
        cli(lake, "stream", *orders_src, "--target", "./bronze", "--app-id", "orders-v1",
            "--checkpoint", "./ckpt", "--facts-table", "./facts", "--control-table", "./control",
            "--trigger", "availableNow", "--quiet")
        cli(lake, "apply", *orders_src, "--bronze", "./bronze", "--target", "./silver",
            "--control-table", "./control", "--facts-table", "./facts")
        p = cli(lake, "reconcile", *orders_src, "--silver", "./silver", "--bronze", "./bronze",
                "--control-table", "./control", "--facts-table", "./facts",
                "--report-table", "./report")
        self.run_id = json.loads(p.stdout.strip().splitlines()[-1])["run_id"]
        # a chunked snapshot, opened by a stream, one wave of it read: its
        # plans table is there and the snapshot is still open
        cli(lake, "stream", *lines_src, "--target", "./chunked", "--app-id", "lines-v1",
            "--checkpoint", "./chunked_ckpt", "--facts-table", "./chunked_facts", "--bootstrap",
            "--snapshot", "chunked", "--trigger", "availableNow", "--quiet")
        cli(lake, "backfill", *lines_src, "--target", "./chunked", "--app-id", "lines-v1",
            "--facts-table", "./chunked_facts", "--max-waves", "1", "--chunk-rows", "3",
            "--target-wave-seconds", "0", "--numPartitions", "1")
        cli(lake, "stream", "--captureInstance", "dbo_heap", "--connectionString", cs,
            "--target", "./heap_bronze", "--app-id", "heap-v1", "--checkpoint", "./heap_ckpt",
            "--trigger", "availableNow", "--quiet")
        # a second capture instance of lines, after the lake was written
        sim.run("EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'lines', "
                f"@role_name = NULL, @capture_instance = N'dbo_lines_v2'; {CAPTURE}", database=DB)
        self.as_of = sim.run("SELECT CONVERT(varchar(22), sys.fn_cdc_get_max_lsn(), 1)",
                             database=DB)[0][0]
        self._strays()
        shutil.copytree(self.lake, self.pristine, symlinks=True)
        self.files = self.snapshot()
        self.state = self.sim_state()

    def _strays(self):
        lake = self.lake
        j = lambda *p: os.path.join(lake, *p)  # noqa: E731
        write_file(j("notes.txt"), "not a table\n", 0o644)
        os.makedirs(j("empty"))
        os.makedirs(j("wh"))
        os.makedirs(j("files"))
        write_file(j("files", "readme.txt"), "exported by hand\n", 0o644)
        write_file(j("files", "data.csv"), "id,status\n1,new\n", 0o644)
        write_deltalake(j("foreign"), pa.table({"x": [1, 2], "y": ["a", "b"]}))
        ids = list(range(1, 41))
        orders = {"id": pa.array(ids, pa.int32()),
                  "status": pa.array(["new" if i % 2 else "paid" for i in ids]),
                  "amount": pa.array([i * 10 for i in ids], pa.int32())}
        write_parquet(j("copy", "part-0.parquet"), orders)
        write_parquet(j("emptycopy", "part-0.parquet"),
                      {k: v.slice(0, 0) for k, v in orders.items()})
        write_parquet(j("dupcopy", "part-0.parquet"),
                      {k: pa.concat_arrays([v, v.slice(0, 1)]) for k, v in orders.items()})
        write_parquet(j("linescopy", "part-0.parquet"),
                      {"region": pa.array(["EU", "US"]), "id": pa.array([1, 1], pa.int32()),
                       "qty": pa.array([1, 1], pa.int32())})
        os.makedirs(j("nolog", "_delta_log"))
        os.makedirs(j("broken", "_delta_log"))
        write_file(j("broken", "_delta_log", "00000000000000000000.json"), "{not json\n", 0o644)
        conf = f"captureInstance = dbo_orders\nconnectionString = {self.cs}\n"
        write_file(j("orders.conf"), conf)
        write_file(j("nul.conf"), conf.encode() + b"\x00numPartitions = 2\n")
        write_file(j("noeq.conf"), conf + "numPartitions 2\n")
        write_file(j("badvalue.conf"), conf + "numPartitions = zero\n")
        write_file(j("locked.conf"), conf, 0o000)
        write_file(j("storage_section.conf"), conf + "[storage]\nmaxCommitsPerBatch = 4\n")
        write_file(j("unknown_section.conf"), conf + "[azure]\nAZURE_STORAGE_ACCOUNT_NAME = a\n")
        write_file(j("storage_misspelt.conf"), f"[storage]\nAWS_SECRET_KEY = {STORAGE_SECRET}\n")
        # serve's configuration files (tests/refusals.tsv's serve-* rows)
        svc = ("[service]\ntarget = ./sv_{ci}\napp_id = sv-{ci}\ncheckpoint = ./sv_ckpt/{ci}\n"
               "trigger = availableNow\n")
        sdb = f"[database shop]\nconnectionString = {self.cs}\n"
        write_file(j("serve_badkey.ini"), svc + sdb + "[table shop.dbo_orders]\nbogus = 1\n")
        write_file(j("serve_twice.ini"), svc + "trigger = once\n" + sdb + "[table shop.dbo_orders]\n")
        write_file(j("serve_nockpt.ini"), svc.replace("checkpoint = ./sv_ckpt/{ci}\n", "") + sdb
                   + "[table shop.dbo_orders]\n")
        write_file(j("serve_noci.ini"), svc.replace("./sv_{ci}", "./sv") + sdb
                   + "[table shop.dbo_orders]\n[table shop.dbo_lines]\n")
        write_file(j("serve_onetarget.ini"), svc + sdb + "[table shop.dbo_orders]\n"
                   "[table shop.dbo_lines]\ntarget = ./sv_dbo_orders\n")
        write_file(j("serve_unknown_ci.ini"), svc + sdb + "[table shop.dbo_nope]\n")
        write_file(j("serve_badtrigger.ini"), svc + sdb + "[table shop.dbo_orders]\n"
                   "trigger = sometimes\n")
        write_file(j("serve_readable.ini"), svc + sdb + "[table shop.dbo_orders]\n", 0o644)
        write_file(j("serve_comment.ini"), svc + f"[database shop]\nconnectionString = "
                   f"{self.cs} ; the shop\n[table shop.dbo_orders]\n")
        write_file(j("serve_notables.ini"), svc + sdb)
        write_file(j("serve_nodb.ini"), svc + sdb + "[table shop.dbo_orders]\n[table crm.dbo_x]\n")
        write_file(j("serve_noenv.ini"), svc + "[database shop]\nconnectionString_env = "
                   "MCDC_NO_SUCH_VARIABLE\n[table shop.dbo_orders]\n")
        write_file(j("serve_ok.ini"), svc + sdb + "[table shop.dbo_orders]\n")
        write_file(j("serve_backfill_flag.ini"), svc + "facts_table = ./sv_facts\n" + sdb
                   + "[table shop.dbo_orders]\nbackfill = 60 --target ./x\n")
        write_file(j("serve_backfill_nofacts.ini"), svc + sdb + "[table shop.dbo_orders]\n"
                   "backfill = 60 --max-waves 1\n")
        write_file(j("keys.jsonl"), '{"id": 1}\n')
        write_file(j("keys_badjson.jsonl"), '{"id": 1\n')
        write_file(j("keys_unknown.jsonl"), '{"nosuch": 1}\n')
        write_file(j("keys_missing.jsonl"), '{}\n')
        write_file(j("keys_type.jsonl"), '{"id": "one"}\n')
        write_file(j("keys_array.jsonl"), '[1]\n')
        write_file(j("keys_range.jsonl"), '{"id": 99999999999}\n')

    def placeholders(self):
        port = self.sim.port
        return {
            "CS": self.cs,
            "CS_BADPW": self.sim.connection_string(DB, password=WRONG_PASSWORD),
            "CS_NOGRANT": self.sim.connection_string(DB, user="nogrant", password=NOGRANT_PASSWORD),
            "CS_DISABLED": self.sim.connection_string(DB, user="offline", password=DISABLED_PASSWORD),
            "CS_NODB": self.sim.connection_string("nosuch"),
            "CS_DOWN": self.sim.connection_string(DB).replace(f",{port};", f",{free_port()};"),
            "RUN": self.run_id,
            "ASOF": self.as_of,
            "LONG": "x" * 9000,
            "CTRL": "\x01",
            "LAKE": self.lake,
        }

    def argv(self, command):
        """The command line's words, {NAME} replaced; {SRC}, {LINES} and
        {HEAP} stand for a capture instance and the connection string."""
        ph = self.placeholders()
        sources = {"{SRC}": "dbo_orders", "{LINES}": "dbo_lines", "{HEAP}": "dbo_heap"}
        out = []
        for word in shlex.split(command):
            if word in sources:
                out += ["--captureInstance", sources[word], "--connectionString", ph["CS"]]
            else:
                out.append(re.sub(r"\{([A-Z_]+)\}", lambda m: ph[m.group(1)], word))
        assert out and out[0] == "mssql-cdc", command
        return out[1:]

    def snapshot(self):
        """Every path under the lake, with size and mtime for files."""
        seen = {}
        for d, dirs, files in os.walk(self.lake):
            for name in dirs:
                seen[os.path.relpath(os.path.join(d, name), self.lake) + "/"] = None
            for name in files:
                p = os.path.join(d, name)
                st = os.lstat(p)
                seen[os.path.relpath(p, self.lake)] = (st.st_size, st.st_mtime_ns,
                                                       stat.S_IMODE(st.st_mode))
        return seen

    def sim_state(self):
        return (tuple(self.sim.run(STATE_SQL, database=DB)[0]),
                tuple(tuple(r) for r in self.sim.run(INSTANCES_SQL, database=DB)))

    def restore(self):
        shutil.rmtree(self.lake)
        shutil.copytree(self.pristine, self.lake, symlinks=True)

    def run(self, row):
        # no credentials of the host's for the object stores either (its
        # variables, its ~/.aws)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("MCDC_", "AWS_", "AZURE_"))}
        env["MCDC_RETRY_BACKOFF_MS"] = "1"
        env["HOME"] = self.root
        t0 = time.monotonic()
        try:
            p = subprocess.run([CLI, *self.argv(row.command)], capture_output=True, text=True,
                               errors="replace", cwd=self.lake, env=env, timeout=2 * ROW_SECONDS)
        except subprocess.TimeoutExpired as e:
            # killed: the row's checks report it (its exit code is none)
            out = lambda b: (b or b"").decode(errors="replace")  # noqa: E731
            p = subprocess.CompletedProcess(e.cmd, -9, out(e.stdout), out(e.stderr))
        return p, time.monotonic() - t0

    def close(self):
        self.sim.stop()
        shutil.rmtree(self.root, ignore_errors=True)


def changes(before, after):
    """What differs between two snapshots, as short lines."""
    out = []
    for k in sorted(set(before) | set(after)):
        if k not in after:
            out.append(f"removed {k}")
        elif k not in before:
            out.append(f"created {k}")
        elif before[k] != after[k]:
            out.append(f"changed {k}")
    return out


@pytest.fixture(scope="module")
def world():
    w = World()
    yield w
    w.close()


@pytest.mark.parametrize("row", [pytest.param(r, marks=pytest.mark.xfail(reason=KNOWN[r.case],
                                                                         strict=True))
                                 if r.case in KNOWN else r for r in ROWS],
                         ids=[r.case for r in ROWS])
def test_refusal(world, row):
    if row.case == "stream-options-file-unreadable" and os.geteuid() == 0:
        pytest.skip("root reads a file of mode 000")
    p, seconds = world.run(row)
    after = world.snapshot()
    state = world.sim_state()
    changed = changes(world.files, after)
    if changed:
        world.restore()
    out = p.stdout + p.stderr
    for secret in SECRETS:
        assert secret not in out, f"{row.case}: a password in the output:\n{out}"
    assert p.returncode == row.exit, (f"{row.case}: exit {p.returncode}, expected {row.exit}:\n"
                                      f"{out}")
    for what, fragment in (("what was wrong", row.says), ("what to do", row.fix)):
        assert fragment.lower() in out.lower(), (f"{row.case}: the message does not say "
                                                 f"{what} ({fragment!r}):\n{out}")
    if not row.writes:
        assert not changed, f"{row.case}: wrote to the lake: {changed[:10]}\n{out}"
    assert state == world.state, f"{row.case}: the simulator's tables changed\n{out}"
    assert seconds < ROW_SECONDS, f"{row.case}: took {seconds:.1f} s"


def test_the_table_covers_every_command():
    commands = {shlex.split(r.command)[1] if len(shlex.split(r.command)) > 1 else ""
                for r in ROWS}
    for c in ("stream", "snapshot", "seed", "backfill", "apply", "reconcile", "repair",
              "finalization", "table-rows"):
        assert c in commands, c
        assert sum(1 for r in ROWS if r.command.split()[1:2] == [c]) >= 8, c
    assert len(ROWS) > 100
    assert set(KNOWN) <= {r.case for r in ROWS}
    for code in (2, 3, 5, 6, 7, 13, 18, 21):
        assert any(r.exit == code for r in ROWS), code


if __name__ == "__main__":
    word = sys.argv[1] if len(sys.argv) > 1 else ""
    table = sys.argv[2] if len(sys.argv) > 2 else TABLE
    rows = [r for r in load_rows(table) if word in r.case]
    w = World()
    try:
        for r in rows:
            p, seconds = w.run(r)
            changed = changes(w.files, w.snapshot())
            if changed:
                w.restore()
            mark = "ok " if p.returncode == r.exit and not changed else "BAD"
            print(f"{mark} {r.case}: exit {p.returncode} (want {r.exit}) {seconds:.2f}s"
                  f"{' WROTE ' + ', '.join(changed[:4]) if changed else ''}")
            for line in (p.stderr + p.stdout).strip().splitlines()[-3:]:
                print("      " + line[:400])
    finally:
        w.close()
