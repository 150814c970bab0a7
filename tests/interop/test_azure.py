"""The Azure Blob backend against Azurite (tests/interop/objstore.py; strict:
signatures checked), with Shared Key and with a SAS token: the storage
contract suite and the put-if-absent race of tests/unit/test_storage.c
(which opens the store from MCDC_TEST_AZURE_URI and MCDC_TEST_AZURE_OPT_*
options), block-list objects and the errors of
tests/unit/test_storage_azure.c, and a Delta table we wrote read by
deltalake. What they leave in the container is checked with requests of the
fixture's own.

The commands themselves run on az:// in test_objstore_faults.py.
"""
import os
import re
import subprocess

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from conftest import BUILD
from faultproxy import FaultProxy
from objstore import Azurite, unit_env

UNIT = os.path.join(BUILD, "unit-tests")
CONTRACT = ("storage_contract_on_every_backend|storage_put_if_absent_excludes_across_threads|"
            "storage_holds_a_key|storage_lists_after")


@pytest.fixture(scope="module")
def azurite():
    with Azurite(container="lake") as a:
        yield a


def unit(azurite, filter_, location, test_env=None, **options):
    """Runs the unit tests matching filter_ on the Azure store at location,
    with Azurite's options and these."""
    env = unit_env("MCDC_TEST_AZURE", location, dict(azurite.options, **options))
    env.update(test_env or {})
    return subprocess.run([UNIT, filter_], env=env, capture_output=True, text=True, timeout=300)


def secrets_of(*tokens):
    """What must never be printed: the key, and each token's signature."""
    out = [Azurite.KEY, Azurite.KEY[:16]]
    for t in tokens:
        sig = re.search(r"sig=([^&]+)", t).group(1)
        out += [sig, sig[:12]]
    return out


def assert_passed(p, remote_runs, *secrets):
    text = p.stdout + p.stderr
    assert p.returncode == 0 and " 0 failed" in p.stdout, text[-4000:]
    assert text.count("contract on azure (az://") == remote_runs, text[-4000:]
    assert text.count("lists after on azure (az://") == remote_runs, text[-4000:]
    for s in secrets:
        assert s not in text


def test_storage_contract_and_race_with_a_shared_key(azurite):
    p = unit(azurite, CONTRACT, "az://lake/shared-key")
    assert_passed(p, 1, *secrets_of())


def test_storage_contract_and_race_with_a_sas_token(azurite):
    sas = azurite.account_sas("rwdlac")
    p = unit(azurite, CONTRACT, "az://lake/sas", AZURE_STORAGE_SAS_TOKEN="?" + sas)
    assert_passed(p, 1, *secrets_of(sas))
    # the token is what authorizes: one with a wrong signature is refused,
    # named by the option that gave it, its signature never shown
    bad = re.sub(r"sig=[^&]+", "sig=AAAAbm90LWEtc2lnbmF0dXJlLWF0LWFsbA%3D%3D", sas)
    p = unit(azurite, "storage_contract_on_every_backend", "az://lake/sas",
             AZURE_STORAGE_SAS_TOKEN=bad)
    assert p.returncode != 0
    assert 'storage account "devstoreaccount1" refused the SAS token' in p.stderr, p.stderr
    assert "AZURE_STORAGE_SAS_TOKEN" in p.stderr
    assert "AAAAbm90" not in p.stderr + p.stdout and "sig=" not in p.stderr + p.stdout


def test_block_lists_errors_and_a_read_only_token(azurite):
    rl = azurite.account_sas("rl")
    p = unit(azurite, "azure_remote_block_lists|azure_remote_errors", "az://lake/remote",
             {"MCDC_TEST_AZURE_SAS_READ_LIST": rl})
    text = p.stdout + p.stderr
    assert p.returncode == 0 and "2 passed, 0 failed" in p.stdout, text[-4000:]
    assert 'container "nosuchcontainer" does not exist' in p.stderr
    assert "it needs the write (w) permission" in p.stderr
    assert 'storage account "devstoreaccount1" refused the shared key' in p.stderr
    for s in secrets_of(rl):
        assert s not in text
    # what a block list published is one object, read back equal by anyone
    names = [n.split("/", 2)[2] for n in azurite.names("remote/blocks-")]
    assert sorted(n for n in names if n.startswith("d/")) == ["d/big", "d/one", "d/two"], names
    assert "p=1/\u00e9t\u00e9&x?y#z" in names  # the key that needs encoding, as written


def test_deltalake_reads_a_table_we_wrote(azurite, monkeypatch):
    p = unit(azurite, "azure_remote_delta_table_for_readers", "az://lake/unused",
             {"MCDC_TEST_AZURE_DELTA_LOCATION": "az://lake/delta/orders"})
    assert p.returncode == 0 and "1 passed, 0 failed" in p.stdout, p.stdout + p.stderr
    # delta-rs finds Azurite the way object_store does: the emulator flag and
    # AZURITE_BLOB_STORAGE_URL for a port other than 10000
    monkeypatch.setenv("AZURITE_BLOB_STORAGE_URL", "http://127.0.0.1:%d" % azurite.port)
    for uri in ("az://lake/delta/orders",
                "abfs://lake@devstoreaccount1.dfs.core.windows.net/delta/orders"):
        t = DeltaTable(uri, storage_options={"AZURE_STORAGE_USE_EMULATOR": "true"})
        rows = t.to_pyarrow_table()
        assert rows.num_rows == 100
        assert sorted(rows.column("k").to_pylist()) == list(range(100))
        assert set(rows.column("name").to_pylist()) == {"azure"}


def test_a_commit_whose_answer_was_lost_reads_the_blob_back(azurite):
    with FaultProxy(azurite.port) as proxy:
        # the first conditional write of each blob reaches Azurite, its
        # answer is dropped and the connection closed
        lost = proxy.arm(None, header="If-None-Match", per_path=True, times=None, reset=True)
        p = unit(azurite, "azure_remote_lost_commit_answers", "az://lake/lost",
                 {"MCDC_TEST_AZURE_LOST_ANSWERS": "1"}, AZURE_STORAGE_ENDPOINT=proxy.url)
    assert p.returncode == 0 and "1 passed, 0 failed" in p.stdout, p.stdout + p.stderr
    # d/small, d/taken and d/large each lost the answer of their first
    # conditional write (the second writer of d/small came after)
    assert lost.fired == 3
    names = sorted(n.split("/", 2)[2] for n in azurite.names("lost/"))
    assert names == ["d/large", "d/small", "d/taken"], names


def test_deltalake_and_we_take_turns_on_one_table_without_overwriting(azurite, monkeypatch):
    """delta-rs commits on Azure by a conditional copy, we by a conditional
    Put Blob: our commits after delta-rs's, and a delta-rs writer whose
    snapshot is behind ours, replace nothing."""
    monkeypatch.setenv("AZURITE_BLOB_STORAGE_URL", "http://127.0.0.1:%d" % azurite.port)
    so = {"AZURE_STORAGE_USE_EMULATOR": "true"}
    uri = "az://lake/mixed/orders"
    write_deltalake(uri, pa.table({"k": pa.array([1000, 1001], pa.int64()),
                                   "name": ["rs", "rs"]}), storage_options=so)
    stale = DeltaTable(uri, storage_options=so)  # version 0, before our commits
    p = unit(azurite, "azure_remote_delta_table_for_readers", "az://lake/unused",
             {"MCDC_TEST_AZURE_DELTA_LOCATION": uri, "MCDC_TEST_AZURE_DELTA_ROWS_BEFORE": "2"})
    assert p.returncode == 0 and "1 passed, 0 failed" in p.stdout, p.stdout + p.stderr
    # delta-rs, its snapshot behind our two commits, commits after them
    write_deltalake(stale, pa.table({"k": pa.array([2000], pa.int64()), "name": ["rs2"]}),
                    mode="append")
    t = DeltaTable(uri, storage_options=so)
    assert t.version() == 3
    writers = {h["version"]: h.get("engineInfo") or h.get("clientVersion", "")
               for h in t.history()}
    assert writers[0].startswith("delta-rs") and writers[3].startswith("delta-rs"), writers
    assert writers[1].startswith("mssql-cdc") and writers[2].startswith("mssql-cdc"), writers
    keys = sorted(t.to_pyarrow_table().column("k").to_pylist())
    assert keys == [k for k in range(100)] + [1000, 1001, 2000]


def test_two_processes_append_to_one_delta_table_on_azure(azurite):
    """Two processes commit thirty appends to one table at once: each
    version is won by one conditional Put Blob, the other rebases; every
    batch is there once (checked in the test program) and the log holds
    nothing but commits and the checkpoint."""
    p = unit(azurite, "storage_azure_two_processes_append_to_one_table", "az://lake/two")
    assert p.returncode == 0 and "1 passed, 0 failed" in p.stdout, p.stdout + p.stderr
    assert "on azure: az://lake/two/race-" in p.stderr
    log = [n for n in azurite.names("two/") if "/_delta_log/" in n]
    assert len([n for n in log if n.endswith(".json")]) == 31  # the create and thirty appends
    names = [n.rsplit("/", 1)[1] for n in log]
    assert all(re.fullmatch(r"\d{20}\.(json|checkpoint\.parquet)|_last_checkpoint", n)
               for n in names), names
