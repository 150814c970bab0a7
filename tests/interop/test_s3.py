"""The S3 backend against moto's S3 server with signature checks on
(tests/interop/objstore.py): the storage contract suite and the S3 tests of
build/unit-tests run on s3:// (the suite opens the store from
MCDC_TEST_S3_URI and MCDC_TEST_S3_OPT_* options); what they leave in the
bucket is checked here with boto3, an independent client.

The commands themselves run on s3:// in test_objstore_e2e.py and test_objstore_faults.py.
"""
import re
import subprocess

import pytest

from conftest import BUILD
from objstore import Moto, unit_env

UNIT = BUILD + "/unit-tests"
PART_BYTES = 5 * 1024 * 1024  # S3's smallest part: the multipart test stays small


@pytest.fixture(scope="module")
def moto():
    with Moto(bucket="lake") as m:
        yield m


def run_unit(moto, name, uri="s3://lake/t", **over):
    opts = dict(moto.options, MCDC_S3_PART_BYTES=str(PART_BYTES), **over)
    p = subprocess.run([UNIT, name], env=unit_env("MCDC_TEST_S3", uri, opts),
                       capture_output=True, text=True, timeout=600)
    out = p.stdout + p.stderr
    assert moto.secret not in out  # whatever happened, the secret was never printed
    return p.returncode, out


def keys(moto, prefix=""):
    s3 = moto.s3()
    out = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket="lake", Prefix=prefix):
        out += page.get("Contents", [])
    return out


def test_contract_suite_on_s3(moto):
    rc, out = run_unit(moto, "storage_contract_on_every_backend")
    assert rc == 0, out
    assert "contract on s3 (s3://lake/t/run-" in out
    assert "1 passed, 0 failed" in out


def test_listing_after_a_name_on_s3(moto):
    """start-after: the names after the one given, S3 skipping the rest."""
    rc, out = run_unit(moto, "storage_lists_after_a_name_on_every_backend")
    assert rc == 0, out
    assert "lists after on s3 (s3://lake/t/run-" in out
    assert "1 passed, 0 failed" in out


def test_put_if_absent_race_has_one_winner_per_key(moto):
    before = {o["Key"] for o in keys(moto)}
    rc, out = run_unit(moto, "storage_put_if_absent_excludes_across_threads", uri="s3://lake/race")
    assert rc == 0, out
    new = [o for o in keys(moto, "race/") if o["Key"] not in before]
    # 4 threads raced for each of 64 commit keys: one object each, nothing else
    assert len(new) == 64
    assert all("/_delta_log/" in o["Key"] and o["Key"].endswith(".json") for o in new)


def test_multipart_upload_and_conditional_complete(moto):
    rc, out = run_unit(moto, "storage_s3_multipart_upload", uri="s3://lake/mp")
    assert rc == 0, out
    assert "on s3: s3://lake/mp/run-" in out
    objs = keys(moto, "mp/")
    assert [o["Key"].split("/", 2)[2] for o in objs] == ["big/part-0.parquet"]
    big = objs[0]
    assert big["Size"] == 11 * 1024 * 1024
    assert big["ETag"].endswith('-3"')  # three parts: a multipart upload
    # the losing second upload and the dropped one were aborted
    assert not moto.s3().list_multipart_uploads(Bucket="lake").get("Uploads")


def test_a_large_upload_holds_a_few_parts_in_memory(moto):
    """96 MiB in parts of 5 MiB: the writer's peak RSS grows by the parts in
    flight and the one filling, not by the object."""
    rc, out = run_unit(moto, "storage_s3_large_upload_holds_a_few_parts", uri="s3://lake/huge")
    assert rc == 0, out
    grew = re.search(r"a 96 MiB upload grew the peak RSS by (\d+) MiB", out)
    # (an ASan build keeps freed parts in its quarantine: its figure is higher
    # and its unit test does not check it)
    assert grew and ("build-san" in UNIT or int(grew.group(1)) < 48), out
    print(grew.group(0))
    big = keys(moto, "huge/")
    assert len(big) == 1 and big[0]["Size"] == 96 * 1024 * 1024
    assert big[0]["ETag"].endswith('-20"')  # 19 parts of 5 MiB and the last


def test_log_listing_starts_at_its_prefix(moto):
    rc, out = run_unit(moto, "storage_s3_lists_a_log_from_a_version")
    assert rc == 0, out
    assert "on s3:" in out


def test_errors_name_the_key_id_and_the_bucket_never_the_secret(moto):
    rc, out = run_unit(moto, "storage_s3_errors_are_clear")
    assert rc == 0, out
    assert "on s3: s3://no-such-bucket-7/" in out
    # and a whole run with a wrong secret: every failure says so, none shows it
    rc, out = run_unit(moto, "storage_contract_on_every_backend",
                       AWS_SECRET_ACCESS_KEY="not-the-secret-91")
    assert rc != 0
    assert "S3 refused the signature of access key id " + moto.key_id in out
    assert "not-the-secret-91" not in out
    assert moto.secret not in out


def test_a_delta_table_on_s3_is_read_by_delta_rs(moto):
    """The library writes a Delta table on s3:// (twelve commits, a
    checkpoint at 10, through storage_s3_delta_table_round_trip); delta-rs
    reads its log and checkpoint with its own S3 client."""
    from deltalake import DeltaTable
    opts = dict(moto.options, MCDC_S3_PART_BYTES=str(PART_BYTES))
    env = unit_env("MCDC_TEST_S3", "s3://lake/t", opts)
    env["MCDC_TEST_S3_DELTA"] = "s3://lake/delta/orders"
    p = subprocess.run([UNIT, "storage_s3_delta_table_round_trip"], env=env,
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    assert moto.secret not in p.stdout + p.stderr
    assert "on s3: s3://lake/delta/orders" in p.stderr
    # our option names are delta-rs's: the same options open it there
    dt = DeltaTable("s3://lake/delta/orders", storage_options=moto.options)
    assert dt.version() == 12
    assert sorted(u.rsplit("/", 1)[-1] for u in dt.file_uris()) == \
        ["part-%05d.parquet" % n for n in range(1, 13)]
    names = [o["Key"].split("/")[-1] for o in keys(moto, "delta/orders/_delta_log/")]
    assert "00000000000000000010.checkpoint.parquet" in names
    assert "_last_checkpoint" in names


def test_two_processes_append_to_one_delta_table_on_s3(moto):
    rc, out = run_unit(moto, "storage_s3_two_processes_append_to_one_table", uri="s3://lake/two")
    assert rc == 0, out
    assert "on s3: s3://lake/two/race-" in out
    # thirty commits, each one object, and no temporary objects beside them
    log = [o["Key"] for o in keys(moto, "two/") if "/_delta_log/" in o["Key"]]
    commits = [k for k in log if k.endswith(".json")]
    assert len(commits) == 31  # the create and thirty appends
    names = [k.rsplit("/", 1)[1] for k in log]
    assert all(re.fullmatch(r"\d{20}\.(json|checkpoint\.parquet)|_last_checkpoint", n)
               for n in names), names
