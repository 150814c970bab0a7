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


def list_files(directory: str) -> list[str]:
    """The metrics files in ``directory`` (full paths or URIs' inner paths)."""
    filesystem, where = _fs(directory)
    if filesystem is None:
        try:
            names = os.listdir(where)
        except FileNotFoundError:
            return []
        return [os.path.join(where, n) for n in sorted(names)
                if n.startswith(_PREFIX) and n.endswith(".json")]
    from pyarrow import fs
    infos = filesystem.get_file_info(fs.FileSelector(where, allow_not_found=True))
    return sorted(i.path for i in infos
                  if i.base_name.startswith(_PREFIX) and i.base_name.endswith(".json"))


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


def measured(directory: str, options: Mapping[str, Any], token: str,
             batches: Iterator) -> Iterator:
    """``batches`` passed through; once they end, the range's metrics file
    (its name from the range, so a retried task rewrites it)."""
    started = time.monotonic()
    rows = nbytes = 0
    for batch in batches:
        rows += batch.num_rows
        nbytes += batch.nbytes
        yield batch
    seconds = time.monotonic() - started
    try:
        info = json.loads(token)
        out: dict[str, Any] = {"from_lsn": info["from_lsn"], "to_lsn": info["to_lsn"],
                               "rows": rows, "bytes": nbytes, "seconds": round(seconds, 6)}
        if info["index"] == info["count"] - 1:  # the batch's last range: where the stream is
            out.update(_position(options, info["to_lsn"]))
        write_json(directory, f"{_PREFIX}{info['to_lsn']}-{info['index']}.json", out)
    except Exception as exc:  # noqa: BLE001 - metrics never fail a read
        log.warning("mssql_cdc: no metrics file for a range in %s: %s", directory, exc)


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


def fold(directory: str) -> tuple[dict[str, Any], list[str]]:
    """Every file in ``directory`` (all are the current batch's: the sink
    emptied it before the batch was read) folded into facts values, and the
    files read."""
    try:
        paths = list_files(directory)
    except Exception as exc:  # noqa: BLE001 - a listing that fails folds nothing
        log.warning("mssql_cdc: could not list the metrics in %s: %s", directory, exc)
        return {}, []
    picked = []
    for path in paths:
        try:
            picked.append(read_json(directory, path))
        except (OSError, ValueError):
            continue
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
