"""The snapshots a Spark stream takes by itself, as `mssql-cdc stream` takes
them (src/pipeline/mcdc_generation.c, mcdc_stream.c; reference §2.4.4,
§2.5, §4.5):

- ``on_data_loss="resnapshot"``: before the query starts, when CDC cleanup
  purged changes after the position the live generation reached, the
  table is snapshotted again into generation n+1: Spark checkpoint
  ``<checkpoint>/_generations/<n+1>``, sink app id ``<app_id>.g<n+1>``, the
  state file ``<checkpoint>/_mssql_cdc_generation.json`` (the reference's
  and the CLI's format), whose rewrite is the recovery's commit point. A
  second loss within ``resnapshot_interval_days`` is a DataLossError.
  Whatever ``on_data_loss`` says, a checkpoint with a state file runs its
  live generation.
- ``snapshot_on_switch=True``: after the batch that first read a newer
  capture instance (its ``capture_instance_switched`` facts row), and at
  the start of every run (a run killed in between owes it), the table is
  snapshotted so that rows unchanged since carry the newer instance's
  columns: full reads it whole into bronze, chunked opens a chunked
  snapshot at the newer instance's start for ``backfill``.

Whether changes were purged is the library's retention guard
(``mcdc_source_plan_batch`` through ``_positions.Positions``), per capture
instance as the stream plans it; the table is read by the snapshot source
and every table written by Spark's Delta writer. What is recorded where
(facts rows, their txn app ids, the state file) is what the CLI records,
so either continues what the other left."""
from __future__ import annotations

import json
import logging
import os
import re
import uuid
from datetime import datetime, timezone
from typing import Any

from . import spark_tables as tables

log = logging.getLogger("mssql_cdc")

STATE_FILE = "_mssql_cdc_generation.json"
_LSN = re.compile(r"^0x[0-9A-F]{20}$")
_GENERATION_APP = r"(\.g[0-9]+)?"


# ---- the state file and the generations' names -----------------------------

def names(checkpoint: str, app_id: str, n: int) -> tuple[str, str]:
    """Generation n's Spark checkpoint and sink app id (n = 0: as given)."""
    if n == 0:
        return checkpoint, app_id
    return f"{checkpoint.rstrip('/') or '/'}/_generations/{n}", f"{app_id}.g{n}"


def _corrupt(checkpoint: str, what: str) -> ValueError:
    return ValueError(f"{os.path.join(checkpoint, STATE_FILE)} {what}: the generation state is "
                      "damaged. Restore it from a backup; or, if no re-snapshot ever ran for this "
                      "checkpoint, delete it (the stream is then in generation 0)")


def _offset_of(value: Any) -> dict[str, str] | None:
    if not isinstance(value, dict) or not _LSN.match(str(value.get("lsn", ""))):
        return None
    return {"lsn": value["lsn"], "commit_ts": str(value.get("commit_ts") or "")}


def read_state(checkpoint: str) -> dict[str, Any]:
    """The checkpoint's generation state ({"generation": 0} without a
    file), checked before it is used."""
    path = os.path.join(checkpoint, STATE_FILE)
    try:
        with open(path, "rb") as f:
            data = f.read(64 * 1024 + 1)
    except FileNotFoundError:
        return {"generation": 0}
    try:
        state = json.loads(data)
    except ValueError:
        raise _corrupt(checkpoint, "is not JSON") from None
    n = state.get("generation") if isinstance(state, dict) else None
    if len(data) > 64 * 1024 or not isinstance(n, int) or isinstance(n, bool) or n < 0:
        raise _corrupt(checkpoint, "is not a JSON object with a generation number")
    if n > 0 and _offset_of({"lsn": state.get("snapshot_lsn"),
                             "commit_ts": state.get("commit_ts")}) is None:
        raise _corrupt(checkpoint, "has no valid snapshot_lsn and commit_ts")
    if state.get("recovering") is not None and _offset_of(state["recovering"]) is None:
        raise _corrupt(checkpoint, 'has a "recovering" that is not an offset')
    for key in ("at", "failed_at"):
        if state.get(key) is not None:
            try:
                datetime.fromisoformat(str(state[key]).replace("Z", "+00:00"))
            except ValueError:
                raise _corrupt(checkpoint, f"has an {key} that is not a time") from None
    return state


def write_state(checkpoint: str, state: dict[str, Any]) -> None:
    """Replaces the state file whole (a reader sees the old or the new)."""
    os.makedirs(checkpoint, exist_ok=True)
    tmp = os.path.join(checkpoint, f".{STATE_FILE}.{uuid.uuid4().hex}.tmp")
    with open(tmp, "w") as f:
        json.dump({k: v for k, v in state.items() if v is not None}, f, separators=(",", ":"))
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, os.path.join(checkpoint, STATE_FILE))


def _now_aware() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _since(text: str | None) -> float | None:
    """Seconds since an aware time of the state file."""
    if not text:
        return None
    at = datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    if at.tzinfo is None:
        at = at.replace(tzinfo=timezone.utc)
    return (datetime.now(timezone.utc) - at).total_seconds()


def spark_position(spark_checkpoint: str) -> tuple[dict[str, str] | None, bool]:
    """The last offset a Spark checkpoint committed (line 3 of offsets/<n>
    for the highest n in commits/), and whether Spark left anything there
    (commits or its metadata file)."""
    commits = os.path.join(spark_checkpoint, "commits")
    done = sorted((int(n) for n in (os.listdir(commits) if os.path.isdir(commits) else [])
                   if n.isdigit()), reverse=True)
    used = bool(done) or os.path.exists(os.path.join(spark_checkpoint, "metadata"))
    if not done:
        return None, used
    path = os.path.join(spark_checkpoint, "offsets", str(done[0]))
    try:
        with open(path) as f:
            lines = f.read().splitlines()
    except FileNotFoundError:
        raise ValueError(f"{path} is missing though batch {done[0]} is committed: the Spark "
                         "checkpoint is damaged") from None
    if not lines or lines[0] != "v1":
        raise ValueError(f"{path} is Spark offset log version {lines[0] if lines else '?'!r}; "
                         "only v1 is understood: the position cannot be read")
    try:
        offset = _offset_of(json.loads(lines[2]))
    except (IndexError, ValueError):
        offset = None
    if offset is None:
        raise ValueError(f"{path}: its source offset is not this stream's {{lsn, commit_ts}}")
    return offset, used


# ---- facts rows -------------------------------------------------------------

def open_detail(mode: str, kind: str, generation: int, lost_from: str | None = None,
                lost_to: str | None = None, switch_batch_id: int | None = None) -> str:
    """A 'snapshot_open' row's detail, as the CLI writes it."""
    d: dict[str, Any] = {"mode": mode, "kind": kind, "generation": generation,
                         "lost_from_ts": lost_from or None, "lost_to_ts": lost_to or None}
    if switch_batch_id is not None:
        d["switch_batch_id"] = switch_batch_id
    return json.dumps(d, separators=(",", ":"))


def _ts(text: str | None) -> datetime | None:
    return datetime.fromisoformat(text) if text else None


def event_row(app_id: str, event: str, offset: dict[str, str], target: str, *,
              rows: int | None = 0, detail: str | None = None,
              lost_from: str | None = None, lost_to: str | None = None) -> dict[str, Any]:
    """A snapshot event's facts row (min = max = end = the snapshot's LSN)."""
    at = _ts(offset.get("commit_ts"))
    return {"app_id": app_id, "rows": rows, "min_lsn": offset["lsn"], "max_lsn": offset["lsn"],
            "end_lsn": offset["lsn"], "min_commit_ts": at, "max_commit_ts": at,
            "end_commit_ts": at, "event": event, "deletes": 0, "inserts": 0, "updates": 0,
            "detail": detail, "target": target, "lost_from_ts": _ts(lost_from),
            "lost_to_ts": _ts(lost_to)}


def stream_rows(spark, facts_table: str, app_id: str) -> list[dict[str, Any]]:
    """The snapshot and switch rows of app_id's stream (every generation)."""
    if not tables.exists(spark, facts_table):
        return []
    from pyspark.sql import functions as F
    mine = F.col("app_id").rlike("^" + re.escape(app_id) + _GENERATION_APP + "$")
    rows = (tables.read(spark, facts_table)
            .where(mine & F.col("event").isin("snapshot_open", "bootstrap", "resnapshot",
                                              "capture_instance_switched"))
            .select("app_id", "event", "batch_id", "min_lsn", "max_lsn", "min_commit_ts",
                    "lost_from_ts", "lost_to_ts", "detail", "rows").collect())
    out = []
    for r in rows:
        d = r.asDict()
        try:
            d["info"] = json.loads(d["detail"]) if d["detail"] else {}
        except ValueError:
            d["info"] = {}
        if not isinstance(d["info"], dict):
            d["info"] = {}
        out.append(d)
    return out


def done_max(rows: list[dict[str, Any]], sink: str | None = None) -> str | None:
    """The newest completion's LSN (bootstrap or resnapshot) of sink (None:
    of the stream)."""
    done = [r["max_lsn"] for r in rows if r["event"] in ("bootstrap", "resnapshot")
            and r["max_lsn"] and (sink is None or r["app_id"] == sink)]
    return max(done) if done else None


def is_chunked(row: dict[str, Any]) -> bool:
    """An open row of a chunked snapshot (a missing or unknown mode is
    chunked, as the reference reads it)."""
    return row["event"] == "snapshot_open" and row["info"].get("mode") != "full"


def open_chunked(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The stream's newest chunked open still open (no completion of the
    stream at or past its S)."""
    opened = [r for r in rows if is_chunked(r) and r["min_lsn"]]
    if not opened:
        return None
    top = max(opened, key=lambda r: r["min_lsn"])
    done = done_max(rows)
    return None if done is not None and done >= top["min_lsn"] else top


def open_standing(rows: list[dict[str, Any]], sink: str, lsn: str) -> dict[str, Any] | None:
    """The full 'snapshot_open' row a killed run of ``sink``'s re-snapshot
    wrote that stands for a new read stamped ``lsn``: sink's newest open,
    full, not completed, at or below ``lsn`` (the caller checks CDC cleanup
    has not passed it); else None. The completion at ``lsn`` closes it, so
    readers see one open of the generation, then its resnapshot row."""
    opened = [r for r in rows if r["event"] == "snapshot_open" and r["app_id"] == sink
              and r["min_lsn"]]
    if not opened:
        return None
    top = max(opened, key=lambda r: r["min_lsn"])
    done = done_max(rows, sink)
    if is_chunked(top) or top["min_lsn"] > lsn or (done is not None and done >= top["min_lsn"]):
        return None
    return top


def switch_owed(rows: list[dict[str, Any]], sink: str
                ) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """The snapshot on switch generation ``sink`` still owes: its newest
    capture_instance_switched row, unless an open of sink names that batch
    and is chunked or completed; and the newest full open of that batch
    that did not complete (its rows may be in bronze already)."""
    switches = [r for r in rows if r["event"] == "capture_instance_switched"
                and r["app_id"] == sink and r["batch_id"] is not None]
    if not switches:
        return None, None
    sw = max(switches, key=lambda r: r["batch_id"])
    done = done_max(rows, sink)
    full = None
    for r in rows:
        if r["event"] != "snapshot_open" or r["app_id"] != sink or \
                r["info"].get("switch_batch_id") != sw["batch_id"]:
            continue
        if is_chunked(r) or (done is not None and r["min_lsn"] and done >= r["min_lsn"]):
            return None, None
        if full is None or r["min_lsn"] > full["min_lsn"]:
            full = r
    return sw, full


# ---- the re-snapshot after data loss ------------------------------------------

def _purged_after(positions, lsn: str) -> bool:
    """Whether CDC cleanup purged changes right after ``lsn`` that a stream
    positioned there has not read: the library's retention guard (per
    capture instance, as the stream plans a batch) on the batch of the one
    LSN after it. Needs failOnDataLoss (on_data_loss="resnapshot" does)."""
    from ._positions import lsn_after
    from .errors import DataLossError
    try:
        positions.plan_batch(lsn, lsn_after(lsn), 1)
    except DataLossError:
        return True
    return False


def _snapshot_gone(positions, lsn: str) -> bool:
    """Whether CDC cleanup passed a snapshot's LSN (the changes right after
    it are gone: a stream cannot start there)."""
    return positions.initial_lsn("earliest") > lsn


def _generation_of(app_id: str, sink: str) -> int:
    return int(sink[len(app_id) + 2:]) if sink != app_id else 0


def iso_ms(value: datetime | None) -> str:
    """A facts row's time as an offset's commit_ts ("" for NULL)."""
    return value.isoformat(timespec="milliseconds") if value is not None else ""


def _first_position(cdc, target: str, state: dict[str, Any],
                    bootstrap: bool) -> dict[str, str] | None:
    """Where generation n stood before its first batch: its snapshot
    (n > 0, or a bootstrap's), else an explicit startingLsn."""
    if state["generation"] > 0:
        return {"lsn": state["snapshot_lsn"], "commit_ts": state.get("commit_ts") or ""}
    if bootstrap:
        held = cdc._held_snapshot(target)
        return cdc._offset(held) if held else None
    lowered = {str(k).lower(): v for k, v in cdc.options.items()}
    given = str(lowered.get("startinglsn") or "").strip()
    if given[:2].lower() == "0x" and re.fullmatch(r"[0-9A-Fa-f]{20}", given[2:]):
        return {"lsn": "0x" + given[2:].upper(), "commit_ts": ""}
    return None


def recover(cdc, target: str, app_id: str, checkpoint: str, facts_table: str,
            state: dict[str, Any], *, chunked: bool, bootstrap: bool, interval_days: float,
            checked: set[str] | None = None) -> dict[str, Any]:
    """The state of the generation to stream: ``state``'s, or generation
    n+1's after a re-snapshot when CDC cleanup purged changes after the
    position generation n reached (mcdc_generation_recover's steps)."""
    from ._positions import Positions, lsn_after
    from .errors import error_for
    n = int(state["generation"])
    spark_checkpoint, sink = names(checkpoint, app_id, n)
    # 1. the live generation's position
    if state.get("recovering") is not None:
        start = _offset_of(state["recovering"])
    else:
        start, used = spark_position(spark_checkpoint)
        if start is None and not used:
            from .spark_stream import _last_batch
            last = _last_batch(cdc.spark, facts_table, sink)
            if last is not None:
                raise ValueError(
                    f"{facts_table} holds batch {last} of {sink}, but its Spark checkpoint "
                    f"{spark_checkpoint} has no committed batch: the checkpoint was deleted, or "
                    "Python and Spark resolve its path differently. Restore it, or start with "
                    "a new app_id and checkpoint")
        if start is None:
            start = _first_position(cdc, target, state, bootstrap)
    if start is None:
        return state
    positions = Positions(cdc.source_options())
    try:
        if positions.max_lsn() <= start["lsn"] or not _purged_after(positions, start["lsn"]):
            return state  # nothing to read yet, or nothing lost
        low = lsn_after(positions.initial_lsn("earliest"))
        lost_to = positions.commit_ts(low)
        lost_from = start.get("commit_ts") or None
        next_sink = names(checkpoint, app_id, n + 1)[1]
        rows = stream_rows(cdc.spark, facts_table, app_id)
        # a re-snapshot row of a later generation than n+1: this state file is older
        later = [r["app_id"] for r in rows if r["event"] == "resnapshot"
                 and _generation_of(app_id, r["app_id"]) > n + 1]
        if later:
            raise ValueError(f"{facts_table} holds the re-snapshot of {later[0]}, but the "
                             f"generation state of checkpoint {checkpoint} says generation {n}: "
                             "the state file is older than the facts (restored from a backup?). "
                             "Restore the newer one")
        # 2. a snapshot a cut-short recovery took already: newer than the position, not purged
        reuse: dict[str, str] | None = None
        if chunked:
            opened = [r for r in rows if is_chunked(r) and r["app_id"] == next_sink]
            if opened:
                top = max(opened, key=lambda r: r["min_lsn"])
                reuse = {"lsn": top["min_lsn"], "commit_ts": iso_ms(top["min_commit_ts"])}
        else:
            held = cdc._held_snapshot(target)
            if held and held > start["lsn"] and not _snapshot_gone(positions, held):
                reuse = cdc._offset(held)
        what = (f"capture instance {cdc._ci()}: CDC no longer holds the changes after "
                f"{start['lsn']} that the stream has not read (min_lsn is {low}): cleanup "
                "purged them")
        # the anti-loop rule: a second loss soon after the last re-snapshot (or a failed one)
        last = state.get("failed_at") or (state.get("at") if n > 0 else None)
        since = _since(last)
        if reuse is None and since is not None and since < interval_days * 86400:
            raise error_for(-9, f"{what}, and the last re-snapshot (or a failed one) was at "
                                f"{last}, less than resnapshot_interval_days={interval_days:g} "
                                "ago. The stream does not keep up with the CDC retention, or "
                                "stops for longer than it: fix that, then run to_delta with a "
                                "smaller resnapshot_interval_days to re-snapshot now")
        log.warning("mssql_cdc: %s. Re-snapshotting %s (%s) into generation %d, app id %s",
                    what, target, "chunked" if chunked else "full", n + 1, next_sink)
        # 3. a cut-short recovery resumes from what it found
        current = {**state, "recovering": start}
        write_state(checkpoint, current)
        # 4. the next generation's snapshot
        if chunked:
            snap = reuse or cdc._open_chunked(target, app_id, facts_table, sink=next_sink,
                                              generation=n + 1, kind="resnapshot",
                                              lost_from=lost_from, lost_to=lost_to)
        else:
            count: int | None = None  # a snapshot taken before: NULL rows in its row
            snap = reuse
            if snap is None:
                lsn = positions.max_lsn()
                snap = {"lsn": lsn, "commit_ts": positions.commit_ts(lsn)}
                # a run killed after its open row (and before its rows): that row stands
                prev = open_standing(rows, next_sink, lsn)
                if prev is not None and not _snapshot_gone(positions, prev["min_lsn"]):
                    log.info("mssql_cdc: re-snapshot of generation %d: the snapshot_open row a "
                             "killed run wrote at %s stands for this one (stamped %s)", n + 1,
                             prev["min_lsn"], lsn)
                else:
                    tables.write_facts(cdc.spark, facts_table, [event_row(
                        next_sink, "snapshot_open", snap, target,
                        detail=open_detail("full", "resnapshot", n + 1, lost_from, lost_to),
                        lost_from=lost_from, lost_to=lost_to)], None, 0, checked)
                count = cdc.reading_newest(rows)._read_full(target, lsn, app_id, checked)
            if _snapshot_gone(positions, snap["lsn"]):
                write_state(checkpoint, {**current, "failed_at": _now_aware()})
                raise error_for(-9, f"{what}. The re-snapshot at {snap['lsn']} took longer "
                                    "than the CDC retention, so the changes after it are gone "
                                    "too: keep CDC's retention longer, read faster "
                                    "(numPartitions), or use snapshot='chunked'; then run "
                                    "to_delta with resnapshot_interval_days=0")
            tables.write_facts(cdc.spark, facts_table, [event_row(
                next_sink, "resnapshot", snap, target, rows=count, lost_from=lost_from,
                lost_to=lost_to)], f"{app_id}#events", n + 1, checked)
        # 5. the commit point
        new = {"generation": n + 1, "snapshot_lsn": snap["lsn"],
               "commit_ts": snap.get("commit_ts") or "", "at": _now_aware()}
        write_state(checkpoint, new)
        log.info("mssql_cdc: %s streams generation %d (app id %s) from %s", target, n + 1,
                 next_sink, snap["lsn"])
        return new
    finally:
        positions.close()


# ---- the snapshot on switch -----------------------------------------------------

def snapshot_on_switch(cdc, target: str, app_id: str, sink: str, generation: int,
                       facts_table: str, chunked: bool, checked: set[str] | None = None) -> bool:
    """Takes the snapshot the generation's newest capture instance switch
    still owes (none: False). Full reads the whole table into bronze
    ('snapshot_open' with switch_batch_id, the rows, a 'bootstrap' row;
    rows bronze holds already at an earlier open's LSN are not read
    again); chunked opens one at the newer instance's start S for backfill,
    superseding one still open."""
    rows = stream_rows(cdc.spark, facts_table, app_id)
    sw, full = switch_owed(rows, sink)
    if sw is None:
        return False
    batch = int(sw["batch_id"])
    log.info("mssql_cdc: snapshot on switch: batch %d read a capture instance switch at %s; %s",
             batch, sw["min_lsn"],
             "opening a chunked snapshot there" if chunked else "reading the whole table")
    if chunked:
        top = open_chunked(rows)
        if top is not None and top["min_lsn"] < sw["min_lsn"]:
            log.warning("mssql_cdc: snapshot on switch supersedes the chunked snapshot opened at "
                        "%s (app id %s), which had not completed: it is abandoned, and backfill "
                        "reads the one opened at %s from now on", top["min_lsn"], top["app_id"],
                        sw["min_lsn"])
        cdc._open_chunked(target, app_id, facts_table, sink=sink, generation=generation,
                          at={"lsn": sw["min_lsn"], "commit_ts": iso_ms(sw["min_commit_ts"])},
                          switch_batch_id=batch)
        return True
    count: int | None = None  # bronze held its rows: NULL rows in the row
    if full is not None and cdc._bronze_holds(target, full["min_lsn"]):
        snap = {"lsn": full["min_lsn"], "commit_ts": iso_ms(full["min_commit_ts"])}
    else:
        snap = cdc._offset(cdc._max_lsn())
        tables.write_facts(cdc.spark, facts_table, [event_row(
            sink, "snapshot_open", snap, target,
            detail=open_detail("full", "bootstrap", generation, switch_batch_id=batch))],
            f"{app_id}#snapopen.{snap['lsn']}", 0, checked)
        count = cdc.reading_newest(rows)._read_full(target, snap["lsn"], app_id, checked)
    tables.write_facts(cdc.spark, facts_table, [event_row(sink, "bootstrap", snap, target,
                                                          rows=count)],
                       f"{app_id}#snapdone.{snap['lsn']}", 0, checked)
    log.info("mssql_cdc: snapshot on switch: %s %s the table at %s after batch %d (%d rows); "
             "downstream rebuilds from it", target, "held" if count is None else "read",
             snap["lsn"], batch, count or 0)
    return True


def newest_instance(rows: list[dict[str, Any]]) -> str | None:
    """The capture instance the stream's newest capture_instance_switched
    row switched to (its detail's text: "<old> -> <new>[; ...]"); None
    before any switch."""
    switches = [r for r in rows if r["event"] == "capture_instance_switched" and r["min_lsn"]]
    if not switches:
        return None
    top = max(switches, key=lambda r: r["min_lsn"])
    m = re.match(r"\s*\S+ -> ([^;\s]+)", str(top["info"].get("text") or top["detail"] or ""))
    return m.group(1) if m else None


def switch_hook(options: dict[str, Any], target: str, app_id: str, sink: str, generation: int,
                facts_table: str, chunked: bool):
    """The sink's ``on_switch``: the snapshot on switch on the session the
    batch runs on (picklable: Spark Connect runs the sink in a worker)."""
    options = dict(options)

    def on_switch(spark) -> None:
        from .spark_stream import CdcStream
        snapshot_on_switch(CdcStream(spark, options), target, app_id, sink, generation,
                           facts_table, chunked)
    return on_switch


# ---- one snapshot mode while one is open ------------------------------------------

def mode_lock(cdc, target: str, app_id: str, facts_table: str, mode: str) -> None:
    """Refuses a run in ``mode`` ("full" or "chunked") while the stream has
    a snapshot of the other mode open (reference §2.4.5): a chunked open
    counts until a completion of the stream reaches its S; a full one only
    while a run may still be reading it (not next to a chunked open of its
    generation, nor once CDC cleanup passed its S). ValueError saying how
    to finish it; nothing is written."""
    rows = stream_rows(cdc.spark, facts_table, app_id)
    done = done_max(rows)
    found = []
    for r in rows:
        if r["event"] != "snapshot_open" or not r["max_lsn"] or \
                (done is not None and r["max_lsn"] <= done):
            continue
        m = "chunked" if is_chunked(r) else "full"
        if m == mode or (m == "full" and any(is_chunked(k) and k["app_id"] == r["app_id"]
                                             for k in rows)):
            continue
        found.append((m, r))
    if not found:
        return
    from ._positions import Positions
    positions = Positions(cdc.source_options())
    try:
        found = [(m, r) for m, r in found
                 if m == "chunked" or not _snapshot_gone(positions, r["max_lsn"])]
    finally:
        positions.close()
    if not found:
        return
    m, top = max(found, key=lambda x: x[1]["max_lsn"])
    how = ("run backfill() until it reports done, or run to_delta with snapshot='chunked'"
           if m == "chunked" else
           "run to_delta again with snapshot='full', which reads the table again (if no run "
           f"is reading it any more, it also stops counting once CDC cleanup passes "
           f"{top['max_lsn']})")
    raise ValueError(f"{target} has a {m} snapshot open at {top['max_lsn']} (generation "
                     f"{top['info'].get('generation', '?')}, sink {top['app_id']}) that has not "
                     f"completed: no {mode} snapshot is taken until it does. To finish it, {how}. "
                     "Then either mode may be used. Nothing was written")
