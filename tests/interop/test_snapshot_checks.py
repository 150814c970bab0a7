"""The checks the snapshot tests rely on, on small hand-made Delta tables:
the rebuild rule (a chunked snapshot counts only once complete), in Python
and in DuckDB, and the chunk and verdict checks, each shown to fail on the
state it is there to catch."""
import datetime as dt
import json
import os

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from snapshot_jobs import Job, assert_chunks_once, assert_verdict_behind_data
from workload import Spec, completed_snapshots, delta_rows, rebuild, rebuild_duckdb


class Tiny(Spec):
    name = "tiny"
    columns = (("id", "INT", pa.int32()), ("v", "NVARCHAR(10)", pa.string()))
    keys = ("id",)


class Folded(Spec):
    name = "folded"
    columns = (("region", "NVARCHAR(10)", pa.string()), ("id", "INT", pa.int32()),
               ("v", "NVARCHAR(10)", pa.string()))
    keys = ("region", "id")
    folded = ("region",)


META = [("_start_lsn", pa.string()), ("_seqval", pa.string()), ("_operation", pa.int32()),
        ("_command_id", pa.int32()), ("_batch_id", pa.int64()), ("_snapshot", pa.string()),
        ("_chunk", pa.int32())]


def lsn(n):
    return "0x" + format(n, "020X")


def row(op, at, spec_values, seq=None, snap=None, chunk=None, batch=None):
    r = {"_start_lsn": lsn(at), "_seqval": lsn(seq) if seq is not None else None,
         "_operation": op, "_command_id": 1 if op else None, "_batch_id": batch,
         "_snapshot": lsn(snap) if snap is not None else None, "_chunk": chunk}
    r.update(spec_values)
    return r


def write(path, spec, rows, mode="append"):
    schema = pa.schema(META + [(c[0], c[2]) for c in spec.columns])
    write_deltalake(path, pa.Table.from_pylist(rows, schema=schema), mode=mode)


FACTS = pa.schema([("app_id", pa.string()), ("event", pa.string()), ("batch_id", pa.int64()),
                   ("rows", pa.int64()), ("min_lsn", pa.string()), ("max_lsn", pa.string()),
                   ("end_commit_ts", pa.timestamp("us")), ("detail", pa.string()),
                   ("written_at", pa.timestamp("us"))])


def write_facts(path, rows):
    full = [{f.name: r.get(f.name) for f in FACTS} for r in rows]
    write_deltalake(path, pa.Table.from_pylist(full, schema=FACTS), mode="append")


def both(spec, bronze, facts=None):
    py = rebuild(spec, bronze, facts)
    duck = rebuild_duckdb(spec, bronze, facts)
    assert py == duck, (py, duck)
    return py


def test_a_chunked_snapshot_counts_only_once_its_completion_row_is_written(workdir):
    spec = Tiny()
    bronze, facts = os.path.join(workdir, "bronze"), os.path.join(workdir, "facts")
    # S1 = 0x10, whole: ids 1, 2, 3, 6, 7
    write(bronze, spec, [row(0, 0x10, {"id": i, "v": v}, snap=0x10)
                         for i, v in ((1, "a"), (2, "b"), (3, "c"), (6, "f"), (7, "g"))])
    write(bronze, spec, [row(3, 0x20, {"id": 2, "v": "b"}, seq=0x20, batch=0),
                         row(4, 0x20, {"id": 2, "v": "b2"}, seq=0x21, batch=0),
                         row(1, 0x30, {"id": 3, "v": "c"}, seq=0x30, batch=0)])
    # changes lost here (cleanup): 7 deleted without a row; then a chunked S2 = 0x35,
    # chunk 0 read at 0x36, the stream from S2 on
    write(bronze, spec, [row(0, 0x36, {"id": 1, "v": "a"}, snap=0x35, chunk=0),
                         row(0, 0x36, {"id": 2, "v": "b2"}, snap=0x35, chunk=0)])
    write(bronze, spec, [row(2, 0x40, {"id": 4, "v": "d"}, seq=0x40, batch=0)])
    write_facts(facts, [{"event": "bootstrap", "min_lsn": lsn(0x10), "max_lsn": lsn(0x10)},
                        {"event": "snapshot_open", "min_lsn": lsn(0x35), "max_lsn": lsn(0x35)}])
    # open: S1 and every change after it; S2's one chunk does not count
    assert both(spec, bronze, facts) == [(1, "a"), (2, "b2"), (4, "d"), (6, "f"), (7, "g")]
    assert completed_snapshots(delta_rows(bronze), delta_rows(facts)) == {lsn(0x10)}
    with pytest.raises(AssertionError, match="needs the facts table"):
        rebuild(spec, bronze)
    # chunk 1 read at 0x45 (after the insert of 4), then the completion row
    write(bronze, spec, [row(0, 0x45, {"id": 4, "v": "d"}, snap=0x35, chunk=1),
                         row(0, 0x45, {"id": 6, "v": "f"}, snap=0x35, chunk=1)])
    write(bronze, spec, [row(4, 0x50, {"id": 6, "v": "f2"}, seq=0x50, batch=1),
                         row(3, 0x50, {"id": 6, "v": "f"}, seq=0x50, batch=1)])
    assert both(spec, bronze, facts)[-1] == (7, "g")  # still open
    write_facts(facts, [{"event": "bootstrap", "min_lsn": lsn(0x35), "max_lsn": lsn(0x35)}])
    # complete: S2 (7 is gone) and the changes after it, latest image per key
    assert both(spec, bronze, facts) == [(1, "a"), (2, "b2"), (4, "d"), (6, "f2")]


def test_keys_are_compared_as_the_collation_does(workdir):
    spec = Folded()
    bronze = os.path.join(workdir, "bronze")
    write(bronze, spec, [row(0, 0x10, {"region": "EU", "id": 1, "v": "a"}, snap=0x10),
                         row(0, 0x10, {"region": "us", "id": 1, "v": "b"}, snap=0x10)])
    # a key update changing only the case: a delete and an insert of the same key
    write(bronze, spec, [row(1, 0x20, {"region": "EU", "id": 1, "v": "a"}, seq=0x20),
                         row(2, 0x20, {"region": "eu", "id": 1, "v": "a"}, seq=0x21),
                         row(4, 0x30, {"region": "US", "id": 1, "v": "b2"}, seq=0x30)])
    assert both(spec, bronze) == [("eu", 1, "a"), ("US", 1, "b2")]


def make_job(workdir, spec):
    return Job(None, spec, workdir)


def chunk_fact(s, chunk, rows):
    return {"event": "snapshot_chunk", "rows": rows, "min_lsn": lsn(s), "max_lsn": lsn(s),
            "detail": json.dumps({"snapshot": lsn(s), "chunk": chunk, "wave": chunk})}


def test_the_chunk_check_finds_a_chunk_read_twice(workdir):
    spec = Tiny()
    job = make_job(workdir, spec)
    write(job.bronze, spec, [row(0, 0x36, {"id": 1, "v": "a"}, snap=0x35, chunk=0),
                             row(0, 0x37, {"id": 5, "v": "e"}, snap=0x35, chunk=1)])
    write_facts(job.facts, [chunk_fact(0x35, 0, 1), chunk_fact(0x35, 1, 1),
                            {"event": "bootstrap", "rows": 2, "min_lsn": lsn(0x35),
                             "max_lsn": lsn(0x35)}])
    assert assert_chunks_once(job) == 2
    # the same chunk appended again by a second wave
    write(job.bronze, spec, [row(0, 0x38, {"id": 5, "v": "e"}, snap=0x35, chunk=1)])
    with pytest.raises(AssertionError, match="bronze holds 2 rows"):
        assert_chunks_once(job)
    # a second facts row for a chunk
    job2 = make_job(os.path.join(workdir, "two"), spec)
    write(job2.bronze, spec, [row(0, 0x36, {"id": 1, "v": "a"}, snap=0x35, chunk=0)])
    write_facts(job2.facts, [chunk_fact(0x35, 0, 1), chunk_fact(0x35, 0, 1)])
    with pytest.raises(AssertionError, match="more than one snapshot_chunk row"):
        assert_chunks_once(job2)
    # a gap in the chunks of a completed snapshot
    job3 = make_job(os.path.join(workdir, "gap"), spec)
    write(job3.bronze, spec, [row(0, 0x36, {"id": 1, "v": "a"}, snap=0x35, chunk=0),
                              row(0, 0x36, {"id": 9, "v": "i"}, snap=0x35, chunk=2)])
    write_facts(job3.facts, [chunk_fact(0x35, 0, 1), chunk_fact(0x35, 2, 1),
                             {"event": "bootstrap", "rows": 2, "max_lsn": lsn(0x35)}])
    with pytest.raises(AssertionError, match="leave a gap"):
        assert_chunks_once(job3)


def test_the_verdict_check_finds_a_verdict_ahead_of_bronze(workdir):
    spec = Tiny()
    job = make_job(workdir, spec)
    t0 = dt.datetime(2026, 1, 1, 10, 0)
    write(job.bronze, spec, [row(2, 0x20, {"id": 1, "v": "a"}, seq=0x20, batch=0)])
    write_facts(job.facts, [
        {"event": None, "batch_id": 0, "rows": 1, "min_lsn": lsn(0x20), "max_lsn": lsn(0x20),
         "end_commit_ts": t0},
        # a batch whose facts row is there but whose rows are not
        {"event": None, "batch_id": 1, "rows": 2, "min_lsn": lsn(0x30), "max_lsn": lsn(0x31),
         "end_commit_ts": t0 + dt.timedelta(minutes=5)}])
    control = pa.schema([("table_name", pa.string()), ("finalized_until", pa.timestamp("us"))])
    write_deltalake(job.control, pa.Table.from_pylist(
        [{"table_name": job.bronze, "finalized_until": t0}], schema=control))
    assert assert_verdict_behind_data(job) == t0
    with pytest.raises(AssertionError, match="moved back"):
        assert_verdict_behind_data(job, previous=t0 + dt.timedelta(minutes=1))
    write_deltalake(job.control, pa.Table.from_pylist(
        [{"table_name": job.bronze, "finalized_until": t0 + dt.timedelta(minutes=5)}],
        schema=control), mode="overwrite")
    with pytest.raises(AssertionError, match="after the newest batch in bronze"):
        assert_verdict_behind_data(job)
