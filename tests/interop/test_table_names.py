"""How a command reads a table argument: a path (it holds '/', or starts
with ./), a schema.table name under the warehouse, or an object store URI
(not built yet). A bare name is ambiguous and refused; an object store is a
usage error saying it is not built yet; table-rows says what is at a path
that holds no Delta table. Each is refused before anything is written."""
import os
import subprocess

from deltalake import DeltaTable

from conftest import CLI

SETUP = "CREATE DATABASE shop;"
TABLE = """
CREATE TABLE dbo.orders (order_id INT NOT NULL PRIMARY KEY, status NVARCHAR(20) NULL);
EXEC sys.sp_cdc_enable_db;
EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'orders',
     @role_name = NULL;
INSERT INTO dbo.orders VALUES (1, N'new'), (2, N'paid');
"""


def cli(cwd, *args):
    return subprocess.run([CLI, *args], capture_output=True, text=True, cwd=cwd, timeout=120)


def stream(sim, cwd, target, *extra):
    return cli(cwd, "stream", "--captureInstance", "dbo_orders",
               "--connectionString", sim.connection_string("shop"),
               "--target", target, "--app-id", "names", "--checkpoint", "./ckpt",
               "--trigger", "availableNow", *extra)


def entries(d):
    return sorted(os.listdir(d))


def test_a_bare_table_name_is_refused_a_path_or_schema_table_is_taken(sim, workdir):
    sim.run(SETUP)
    sim.run(TABLE, database="shop")
    sim.run("EXEC sim.run_capture @ignore_latency = 1;", database="shop")
    before = entries(workdir)
    p = stream(sim, workdir, "bronze")
    assert p.returncode == 2, p.stderr
    assert '"bronze"' in p.stderr and "./bronze" in p.stderr and "schema.table" in p.stderr
    assert entries(workdir) == before  # no ./warehouse, no checkpoint
    # the same for every role and command that takes a table
    p = stream(sim, workdir, "./bronze", "--facts-table", "facts")
    assert p.returncode == 2 and '"facts"' in p.stderr, p.stderr
    p = cli(workdir, "table-rows", "bronze")
    assert p.returncode == 2 and "./bronze" in p.stderr, p.stderr
    assert entries(workdir) == before
    # a relative path and a schema.table name are taken as they say
    p = stream(sim, workdir, "./bronze")
    assert p.returncode == 0, p.stderr
    assert DeltaTable(os.path.join(workdir, "bronze")).to_pyarrow_table().num_rows == 2
    p = stream(sim, workdir, "lake.orders", "--warehouse", "./wh", "--checkpoint", "./ckpt2")
    assert p.returncode == 0, p.stderr
    assert DeltaTable(os.path.join(workdir, "wh", "lake.db", "orders")).version() >= 0
    assert not os.path.exists(os.path.join(workdir, "warehouse"))


def test_an_object_store_target_is_a_usage_error_saying_it_is_not_built(sim, workdir):
    for url in ("gs://bucket/bronze",):
        p = stream(sim, workdir, url)
        assert p.returncode == 2, (url, p.returncode, p.stderr)
        assert "object stores are not built yet" in p.stderr, p.stderr
        assert "S3 and Azure Blob are" in p.stderr, p.stderr
        assert not os.path.exists(os.path.join(workdir, "ckpt")), url
    p = cli(workdir, "table-rows", "gs://bucket/bronze")
    assert p.returncode == 2 and "not built yet" in p.stderr, p.stderr
    # Azure is built: a location without an account (a usage error) or a
    # credential (a PermissionError, as S3's) says what to set, before
    # anything is written
    for url, code, needle in (("abfss://lake@acct1.dfs.core.windows.net/bronze", 5,
                               'no credential for account "acct1"'),
                              ("az://lake/bronze", 2, "names no storage account"),
                              ("abfss://c@acct1.dfs.core.windows.net/bronze", 2,
                               '"c" is not a container name')):
        p = stream(sim, workdir, url)
        assert p.returncode == code, (url, p.returncode, p.stderr)
        assert needle in p.stderr, p.stderr
        assert not os.path.exists(os.path.join(workdir, "ckpt")), url


def test_table_rows_says_what_is_at_a_path_that_holds_no_delta_table(workdir):
    with open(os.path.join(workdir, "notes.txt"), "w") as f:
        f.write("hello\n")
    os.makedirs(os.path.join(workdir, "files"))
    with open(os.path.join(workdir, "files", "part-0.parquet"), "wb") as f:
        f.write(b"PAR1")
    os.makedirs(os.path.join(workdir, "empty"))
    p = cli(workdir, "table-rows", "./notes.txt")
    assert p.returncode == 2, p.stderr
    assert "./notes.txt is a file, not a Delta table" in p.stderr, p.stderr
    assert "_delta_log" in p.stderr and "cannot list" not in p.stderr
    p = cli(workdir, "table-rows", "./files")
    assert p.returncode == 2, p.stderr
    assert "./files is not a Delta table" in p.stderr and "no _delta_log" in p.stderr, p.stderr
    for d in ("./empty", "./missing"):
        p = cli(workdir, "table-rows", d)
        assert p.returncode == 2, p.stderr
        assert f"{d} is not a Delta table" in p.stderr and "_delta_log" in p.stderr, p.stderr
