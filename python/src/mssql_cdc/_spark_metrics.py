"""The metrics side channel of the Spark stream (decision record 0014 of the
reference): each executor task that reads a range leaves one JSON file in
the source option ``metricsPath``; the sink (``delta_sink``, on the driver)
empties the directory before each batch is read, folds every file into the
batch's facts row after the append, and removes them.

A file holds the range (``from_lsn``, ``to_lsn``), ``rows``, ``bytes`` (the
Arrow buffers handed to Spark), ``seconds`` (from the first fetch to the
stream's end, Spark's consumption included, as the reference counts it).
The batch's last range (the one ending at the batch's end offset) also
measures where the stream is once it has read: the commit time of its
``to_lsn``, the retention watermark (commit time of the capture
instance's min_lsn) and the source's max commit time, on one connection of
its own. The sink therefore never connects to SQL Server.

A local or FUSE path goes through Python's file functions; a path with a
URI scheme (``s3://``, ``file://``...) through ``pyarrow.fs``. Metrics are
best effort: an error writing or reading them leaves the facts' values
NULL and never fails a batch."""
from __future__ import annotations

import json
import logging
import os
import re
import statistics
import time
import uuid
from collections.abc import Iterator, Mapping
from datetime import datetime, timezone
from typing import Any

log = logging.getLogger("mssql_cdc")

URI = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]+://")
_PREFIX = "range-"
_EVENT = "event-"


def join(base: str, name: str) -> str:
    """``base``/``name``; a URI keeps its query (pyarrow's options) last."""
    if URI.match(base) and "?" in base:
        head, _, query = base.partition("?")
        return f"{head.rstrip('/')}/{name}?{query}"
    return f"{base.rstrip('/')}/{name}"


def _fs(path: str):
    """(filesystem, path inside it) for a URI; (None, path) for a local one."""
    if not URI.match(path):
        return None, path
    from pyarrow import fs
    return fs.FileSystem.from_uri(path)


def write_json(directory: str, name: str, value: Mapping[str, Any]) -> None:
    data = json.dumps(value, default=str).encode()
    filesystem, where = _fs(directory)
    if filesystem is None:
        os.makedirs(where, exist_ok=True)
        tmp = os.path.join(where, f".{name}.{uuid.uuid4().hex}.tmp")
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, os.path.join(where, name))  # whole or absent: a retry rewrites it
        return
    filesystem.create_dir(where, recursive=True)
    with filesystem.open_output_stream(f"{where}/{name}") as f:  # one upload: whole or absent
        f.write(data)


def list_files(directory: str, prefix: str = _PREFIX) -> list[str]:
    """The metrics files in ``directory`` (full paths or URIs' inner paths);
    ``prefix`` "event-": the planner's event files."""
    filesystem, where = _fs(directory)
    if filesystem is None:
        try:
            names = os.listdir(where)
        except FileNotFoundError:
            return []
        return [os.path.join(where, n) for n in sorted(names)
                if n.startswith(prefix) and n.endswith(".json")]
    from pyarrow import fs
    infos = filesystem.get_file_info(fs.FileSelector(where, allow_not_found=True))
    return sorted(i.path for i in infos
                  if i.base_name.startswith(prefix) and i.base_name.endswith(".json"))


def read_json(directory: str, path: str) -> dict[str, Any]:
    filesystem, _ = _fs(directory)
    if filesystem is None:
        with open(path, "rb") as f:
            return json.loads(f.read())
    with filesystem.open_input_stream(path) as f:
        return json.loads(f.read())


def remove(directory: str, paths: list[str]) -> None:
    filesystem, _ = _fs(directory)
    for path in paths:
        try:
            if filesystem is None:
                os.remove(path)
            else:
                filesystem.delete_file(path)
        except (FileNotFoundError, OSError):
            pass  # removed already (a retried batch), or gone with its directory


def _iso(ts: str) -> datetime | None:
    return datetime.fromisoformat(ts.rstrip("Z")) if ts else None


def _counted(batches: Iterator, tally: dict[str, Any]) -> Iterator:
    """``batches`` passed through, counted into ``tally``: rows, bytes (the
    Arrow buffers handed on) and seconds from the first fetch to the end."""
    started = time.monotonic()
    tally.update(rows=0, bytes=0)
    for batch in batches:
        tally["rows"] += batch.num_rows
        tally["bytes"] += batch.nbytes
        yield batch
    tally["seconds"] = round(time.monotonic() - started, 6)


def measured(directory: str, options: Mapping[str, Any], token: str,
             batches: Iterator) -> Iterator:
    """``batches`` passed through; once they end, the range's metrics file
    (its name from the range, so a retried task rewrites it)."""
    tally: dict[str, Any] = {}
    yield from _counted(batches, tally)
    try:
        info = json.loads(token)
        out: dict[str, Any] = {"from_lsn": info["from_lsn"], "to_lsn": info["to_lsn"], **tally}
        if info["index"] == info["count"] - 1:  # the batch's last range: where the stream is
            out.update(_position(options, info["to_lsn"]))
        write_json(directory, f"{_PREFIX}{info['to_lsn']}-{info['index']}.json", out)
    except Exception as exc:  # noqa: BLE001 - metrics never fail a read
        log.warning("mssql_cdc: no metrics file for a range in %s: %s", directory, exc)


_CHUNK = "chunk-"


def measured_chunk(directory: str, chunk: int, batches: Iterator) -> Iterator:
    """A backfill wave's chunk read: ``batches`` passed through, then its
    figures as ``chunk-<n>.json`` ({chunk, rows, bytes, seconds}, counted as
    ``measured`` counts a range; a retried task rewrites it)."""
    tally: dict[str, Any] = {"chunk": chunk}
    yield from _counted(batches, tally)
    try:
        write_json(directory, f"{_CHUNK}{chunk}.json", tally)
    except Exception as exc:  # noqa: BLE001 - metrics never fail a read
        log.warning("mssql_cdc: no metrics file for chunk %d in %s: %s", chunk, directory, exc)


def chunk_figures(directory: str, chunks: list[int]) -> dict[int, tuple[float, float]]:
    """The figures the wave's chunks left in ``directory``: {chunk:
    (read_seconds, read_mb)} as `mssql-cdc backfill` records them (3 and 6
    decimals); a chunk with no readable file is left out (its facts say
    NULL). Removes every file read."""
    found, paths = _read_all(directory, _CHUNK)
    out = {}
    for m in found:
        try:
            if m["chunk"] in chunks:
                out[int(m["chunk"])] = (round(float(m["seconds"]), 3),
                                        round(int(m["bytes"]) / 1e6, 6))
        except (KeyError, TypeError, ValueError):
            continue
    remove(directory, paths)
    return out


def _position(options: Mapping[str, Any], to_lsn: str) -> dict[str, Any]:
    from ._positions import Positions, lsn_after
    p = Positions(options)
    try:
        watermark = p.commit_ts(lsn_after(p.initial_lsn("earliest")))
        top = p.commit_ts(p.max_lsn())
        now = datetime.now(timezone.utc).replace(tzinfo=None)
        return {"to_commit_ts": p.commit_ts(to_lsn), "retention_watermark_ts": watermark,
                "source_max_commit_ts": top,
                "capture_lag_seconds": (round((now - _iso(top)).total_seconds(), 3)
                                        if top else None)}
    finally:
        p.close()


def _read_all(directory: str, prefix: str) -> tuple[list[dict[str, Any]], list[str]]:
    """The files of ``prefix`` in ``directory``: those read (a torn or
    vanished one is left out) and every path listed (none if the listing
    failed: it is logged, and nothing is folded)."""
    try:
        paths = list_files(directory, prefix)
    except Exception as exc:  # noqa: BLE001 - a listing that fails folds nothing
        log.warning("mssql_cdc: could not list %s in %s: %s", prefix, directory, exc)
        return [], []
    found = []
    for path in paths:
        try:
            found.append(read_json(directory, path))
        except (OSError, ValueError):
            continue
    return found, paths


def fold(directory: str) -> tuple[dict[str, Any], list[str]]:
    """Every file in ``directory`` (all are the current batch's: the sink
    emptied it before the batch was read) folded into facts values, and the
    files read."""
    picked, paths = _read_all(directory, _PREFIX)
    if not picked:
        return {}, paths
    end = max(picked, key=lambda m: m["to_lsn"])
    return {
        "end_lsn": end["to_lsn"],
        "end_commit_ts": _iso(end.get("to_commit_ts") or ""),
        "retention_watermark_ts": _iso(end.get("retention_watermark_ts") or ""),
        "source_max_commit_ts": _iso(end.get("source_max_commit_ts") or ""),
        "capture_lag_seconds": end.get("capture_lag_seconds"),
        "source_rtt_ms": (round(statistics.median(m["rtt_ms"] for m in picked), 1)
                          if all(m.get("rtt_ms") is not None for m in picked) else None),
        "read_seconds": round(sum(m["seconds"] for m in picked), 3),
        "read_mb": round(sum(m["bytes"] for m in picked) / 1e6, 6),
        "network_wait_ms": None,  # the library does not report the session's wait to Python
    }, paths


# ---- the planner's events -------------------------------------------------
# The driver's planner (partitions() of the stream source) meets the batch's
# DDL, a newer capture instance and, with failOnDataLoss=false, purged gaps;
# `mssql-cdc stream` writes each as a facts row inside the batch's facts
# commit. Here each goes into one file of the stream's metrics directory,
# named by the batch's end LSN and its place in the plan (a replanned batch
# rewrites its own), and the sink turns those of its batch into facts rows.
# Spark may plan a batch before its foreachBatch function runs, so the sink
# does not empty event files first: it takes the files of the newest batch
# end (the batch's end when its ranges say it) and removes every one read.


def write_events(directory: str, start: Mapping[str, Any], end: Mapping[str, Any],
                 events: list[Mapping[str, Any]]) -> None:
    try:
        for i, e in enumerate(events):
            write_json(directory, f"{_EVENT}{end['lsn']}-{i}.json",
                       {**e, "batch_start_commit_ts": start.get("commit_ts") or "",
                        "batch_end": end["lsn"]})
    except Exception as exc:  # noqa: BLE001 - the warning was logged; metrics never fail a plan
        log.warning("mssql_cdc: no event file in %s: %s", directory, exc)


def _lsn_before(lsn: str) -> str:
    return "0x" + format(int(lsn, 16) - 1, "020X")


def _event_row(e: Mapping[str, Any]) -> dict[str, Any]:
    """An event as `mssql-cdc stream` writes its facts row (the batch's
    app_id, batch_id and target added by the sink)."""
    at = _iso(e.get("commit_ts") or "")
    if e["event"] == "data_skipped":  # detail {from_lsn, to_lsn}: to_lsn is the new min_lsn
        gap = json.loads(e.get("detail") or "{}")
        first, last = gap.get("from_lsn", e["lsn"]), _lsn_before(gap["to_lsn"])
        return {"rows": 0, "min_lsn": first, "max_lsn": last, "end_lsn": last,
                "event": "data_skipped",
                "lost_from_ts": _iso(e.get("batch_start_commit_ts") or ""),
                "lost_to_ts": at,
                "detail": json.dumps({"certain": True, "from": first, "to": last},
                                     separators=(",", ":"), sort_keys=True)}
    return {"rows": 0, "min_lsn": e["lsn"], "max_lsn": e["lsn"], "end_lsn": e["lsn"],
            "min_commit_ts": at, "max_commit_ts": at, "end_commit_ts": at, "deletes": 0,
            "inserts": 0, "updates": 0, "event": e["event"], "detail": e.get("detail")}


def fold_events(directory: str, batch_end: str | None) -> tuple[list[dict[str, Any]], list[str]]:
    """The facts rows of the batch's events (those of ``batch_end``, else of
    the newest batch end found), in plan order, and every event file read."""
    found, paths = _read_all(directory, _EVENT)
    ends = {e.get("batch_end") for e in found}
    pick = batch_end if batch_end in ends else max((x for x in ends if x), default=None)
    mine = [e for e in found if e.get("batch_end") == pick]
    mine.sort(key=lambda e: e.get("lsn", ""))
    rows = []
    for e in mine:
        try:
            rows.append(_event_row(e))
        except (KeyError, ValueError) as exc:
            log.warning("mssql_cdc: an event file in %s was not understood: %s", directory, exc)
    return rows, paths
