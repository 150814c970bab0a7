"""A writer for the snapshot tests, and the rebuild they check against the source.

Workload: a background thread that runs small transactions of inserts, updates,
deletes and key updates (an UPDATE of the key columns) against one table of the
simulator through pymssql, each followed by `EXEC sim.run_capture` so capture
keeps up. It is the table's only writer, so it knows which keys exist; the
same seed gives the same sequence of transactions.

Rebuild (docs/rebuild.md): the rows of the newest snapshot S, then the changes
with _start_lsn after S in commit order, the latest image per key, deleted keys
dropped. With the facts table, only a snapshot that is complete counts: a
whole one always (its rows are one commit), a chunked one (rows with _chunk)
once a bootstrap or resnapshot facts row has max_lsn >= S. It is computed
twice, in Python and by DuckDB over the Delta tables, and both must equal the
source table read through pymssql, row for row, every column.
"""
import datetime as dt
import decimal
import os
import random
import threading
import time
from collections import Counter

import pyarrow as pa
from deltalake import DeltaTable

DB = "shop"
CAPTURE = "EXEC sim.run_capture @ignore_latency = 1;"


# ---- tables -------------------------------------------------------------------------

class Spec:
    """One test table: its columns, the keys rows are told apart by (the
    rebuild's), and how the workload makes rows, changes and key moves."""

    name = ""
    columns = ()          # (name, SQL type, arrow type)
    keys = ()             # the rebuild's key columns
    folded = ()           # key columns compared ignoring case (the default collation)
    primary_key = ()      # the table's primary key (none: a heap without a unique index)
    snapshot_keys = None  # the --snapshotKeys a chunked snapshot needs, if any

    @property
    def capture_instance(self):
        return "dbo_" + self.name

    @property
    def column_names(self):
        return [c[0] for c in self.columns]

    def create_sql(self):
        cols = [f"{n} {t}" for n, t, _ in self.columns]
        if self.primary_key:
            cols.append(f"PRIMARY KEY ({', '.join(self.primary_key)})")
        return f"CREATE TABLE dbo.{self.name} ({', '.join(cols)});"

    def arrow_schema(self):
        return pa.schema([(c[0], c[2]) for c in self.columns])

    def fold(self, key):
        """The key as SQL Server compares it (case-insensitive text)."""
        return tuple(v.lower() if c in self.folded and isinstance(v, str) else v
                     for c, v in zip(self.keys, key))

    def key_of(self, row):
        return tuple(row[c] for c in self.keys)

    def fresh_key(self, rng, present):
        """A key no present row has (a deleted one may come back)."""
        while True:
            k = self.random_key(rng)
            if self.fold(k) not in present:
                return k

    def random_key(self, rng):
        raise NotImplementedError

    def new_row(self, rng, key):
        raise NotImplementedError

    def changes(self, rng):
        """New values for some non-key columns."""
        raise NotImplementedError

    def move(self, rng, key, present):
        """A key update: the columns it sets and the row's key afterwards."""
        raise NotImplementedError

    def bulk_update(self, rng):
        """A statement changing non-key columns of several rows."""
        raise NotImplementedError


WORDS = ["alpha", "Bravo", "caf\u00e9", "stra\u00dfe", "\u4e2d\u6587", "", "x'y", "delta-rs",
         "\u00c5ngstr\u00f6m", "zulu"]


def _text(rng, n=24):
    s = " ".join(rng.choice(WORDS) for _ in range(rng.randint(0, 3)))
    return s[:n]


def _amount(rng, scale, digits=8):
    v = rng.randint(-10 ** digits, 10 ** digits)
    return decimal.Decimal(v).scaleb(-scale)


def _when(rng):
    return dt.datetime(2024, 1, 1) + dt.timedelta(seconds=rng.randint(0, 86400 * 700),
                                                  microseconds=rng.randint(0, 999999))


def _blob(rng, n):
    return bytes(rng.randrange(256) for _ in range(rng.randint(0, n)))


class Items(Spec):
    """An integer primary key (negative ones too) and the usual types: nvarchar,
    decimal, datetime2, a mostly NULL column, varbinary."""

    name = "items"
    columns = (("id", "INT NOT NULL", pa.int32()),
               ("name", "NVARCHAR(40) NOT NULL", pa.string()),
               ("amount", "DECIMAL(18,4) NULL", pa.decimal128(18, 4)),
               ("at", "DATETIME2(6) NULL", pa.timestamp("us")),
               ("note", "NVARCHAR(20) NULL", pa.string()),
               ("blob", "VARBINARY(32) NULL", pa.binary()))
    keys = primary_key = ("id",)

    def __init__(self, key_space=4000):
        self.key_space = key_space

    def random_key(self, rng):
        return (rng.randint(-self.key_space // 10, self.key_space),)

    def new_row(self, rng, key):
        return {"id": key[0], "name": _text(rng, 40), "amount": _amount(rng, 4),
                "at": _when(rng) if rng.random() < 0.9 else None,
                "note": _text(rng, 20) if rng.random() < 0.2 else None,
                "blob": _blob(rng, 32) if rng.random() < 0.7 else None}

    def changes(self, rng):
        pick = rng.sample(["name", "amount", "at", "note", "blob"], rng.randint(1, 3))
        row = self.new_row(rng, (0,))
        return {c: row[c] for c in pick}

    def move(self, rng, key, present):
        k = self.fresh_key(rng, present)
        return {"id": k[0]}, k

    def bulk_update(self, rng):
        return (f"UPDATE dbo.{self.name} SET amount = amount + 1 "
                f"WHERE id % 151 = {rng.randrange(151)};")


REGIONS = ["apac", "EU", "us", "Z\u00fcrich", "K\u00f6ln", "latam"]


def _recase(rng, s):
    """The same text as the collation sees it, its ASCII letters in another case."""
    return "".join((c.upper() if rng.random() < 0.5 else c.lower()) if c.isascii() else c
                   for c in s)


class Regional(Spec):
    """A composite (region nvarchar, id int) primary key under the default
    case-insensitive collation: rows arrive with the region in any case, and a
    key update may change only its case (the same key to SQL Server)."""

    name = "regional"
    columns = (("region", "NVARCHAR(12) NOT NULL", pa.string()),
               ("id", "INT NOT NULL", pa.int32()),
               ("qty", "INT NULL", pa.int32()),
               ("label", "NVARCHAR(30) NULL", pa.string()),
               ("at", "DATETIME2(6) NULL", pa.timestamp("us")),
               ("blob", "VARBINARY(16) NULL", pa.binary()))
    keys = primary_key = ("region", "id")
    folded = ("region",)

    def __init__(self, ids_per_region=400):
        self.ids = ids_per_region

    def random_key(self, rng):
        return (_recase(rng, rng.choice(REGIONS)), rng.randint(1, self.ids))

    def new_row(self, rng, key):
        return {"region": key[0], "id": key[1],
                "qty": rng.randint(-5, 500) if rng.random() < 0.8 else None,
                "label": _text(rng, 30) if rng.random() < 0.6 else None,
                "at": _when(rng), "blob": _blob(rng, 16) if rng.random() < 0.5 else None}

    def changes(self, rng):
        row = self.new_row(rng, ("", 0))
        return {c: row[c] for c in rng.sample(["qty", "label", "at", "blob"], rng.randint(1, 2))}

    def move(self, rng, key, present):
        if rng.random() < 0.3:  # the region's case only: the same row
            k = (_recase(rng, key[0]), key[1])
        else:
            k = self.fresh_key(rng, present)
        return {"region": k[0], "id": k[1]}, k

    def bulk_update(self, rng):
        return (f"UPDATE dbo.{self.name} SET qty = coalesce(qty, 0) + 1 "
                f"WHERE region = N'{_recase(rng, rng.choice(REGIONS))}' "
                f"AND id % 23 = {rng.randrange(23)};")


class Events(Spec):
    """No unique index at all: rows are told apart by rid (the workload keeps
    it unique and never changes it), and a chunked snapshot is cut on grp
    (--snapshotKeys, not unique: many rows share a value); the workload's "key
    update" moves rows to another grp, from one chunk to another."""

    name = "events"
    columns = (("rid", "INT NOT NULL", pa.int32()),
               ("grp", "INT NOT NULL", pa.int32()),
               ("payload", "NVARCHAR(30) NULL", pa.string()),
               ("amount", "DECIMAL(12,2) NULL", pa.decimal128(12, 2)),
               ("blob", "VARBINARY(16) NULL", pa.binary()))
    keys = ("rid",)
    snapshot_keys = ("grp",)

    def __init__(self, key_space=6000, groups=60):
        self.key_space = key_space
        self.groups = groups

    def random_key(self, rng):
        return (rng.randint(1, self.key_space),)

    def new_row(self, rng, key):
        return {"rid": key[0], "grp": rng.randrange(self.groups),
                "payload": _text(rng, 30) if rng.random() < 0.7 else None,
                "amount": _amount(rng, 2, 6),
                "blob": _blob(rng, 16) if rng.random() < 0.3 else None}

    def changes(self, rng):
        row = self.new_row(rng, (0,))
        return {c: row[c] for c in rng.sample(["payload", "amount", "blob"], rng.randint(1, 2))}

    def move(self, rng, key, present):
        return {"grp": rng.randrange(self.groups)}, key

    def bulk_update(self, rng):
        return (f"UPDATE dbo.{self.name} SET amount = amount - 1 "
                f"WHERE grp = {rng.randrange(self.groups)};")


def literal(v):
    if v is None:
        return "NULL"
    if isinstance(v, bool):
        return "1" if v else "0"
    if isinstance(v, (int, decimal.Decimal)):
        return str(v)
    if isinstance(v, bytes):
        return "0x" + v.hex().upper()
    if isinstance(v, dt.datetime):
        return "'" + v.strftime("%Y-%m-%d %H:%M:%S.%f") + "'"
    return "N'" + str(v).replace("'", "''") + "'"


def where(spec, key):
    return " AND ".join(f"{c} = {literal(v)}" for c, v in zip(spec.keys, key))


def insert_sql(spec, rows):
    names = spec.column_names
    values = ",".join("(" + ", ".join(literal(r[c]) for c in names) + ")" for r in rows)
    return f"INSERT INTO dbo.{spec.name} ({', '.join(names)}) VALUES {values};"


def set_sql(values):
    return ", ".join(f"{c} = {literal(v)}" for c, v in values.items())


# ---- the database -------------------------------------------------------------------

def make_db(sim, *specs, enable_db=True):
    """The database and its tables, without CDC on them (enable_cdc does
    that, so a test can load rows only a snapshot will see first)."""
    sim.run(f"CREATE DATABASE {DB};")
    for spec in specs:
        sim.run(spec.create_sql(), database=DB)
    if enable_db:
        sim.run("EXEC sys.sp_cdc_enable_db;", database=DB)


def enable_cdc(sim, spec):
    sim.run(f"EXEC sys.sp_cdc_enable_table @source_schema = N'dbo', @source_name = N'{spec.name}', "
            f"@role_name = NULL; {CAPTURE}", database=DB)


def max_lsn(sim):
    return sim.run("SELECT CONVERT(varchar(22), sys.fn_cdc_get_max_lsn(), 1)", database=DB)[0][0]


def settle(sim):
    """Capture has read every commit so far."""
    sim.run(CAPTURE, database=DB)


def purge_all(sim, spec):
    """CDC cleanup up to max_lsn: every change captured so far is gone."""
    sim.run(f"""{CAPTURE}
DECLARE @m binary(10) = sys.fn_cdc_get_max_lsn();
EXEC sys.sp_cdc_cleanup_change_table @capture_instance = N'{spec.capture_instance}',
     @low_water_mark = @m, @threshold = 100000;""", database=DB)


def source_rows(sim, spec):
    """The table as SQL Server holds it now, in key order."""
    rows = sim.run(f"SELECT {', '.join(spec.column_names)} FROM dbo.{spec.name}", database=DB)
    keyed = [tuple(r) for r in rows]
    idx = [spec.column_names.index(k) for k in spec.keys]
    return sorted(keyed, key=lambda r: _order(spec.fold(tuple(r[i] for i in idx))))


def _order(key):
    return tuple((v is None, v) for v in key)


def parquet_copy(sim, spec, path):
    """A copy of the table the way a user would have one: the rows read
    through pymssql, written with pyarrow as one Parquet file under path."""
    import pyarrow.parquet as pq
    rows = sim.run(f"SELECT {', '.join(spec.column_names)} FROM dbo.{spec.name}", database=DB)
    schema = spec.arrow_schema()
    table = pa.table({c: pa.array([r[i] for r in rows], type=schema.field(c).type)
                      for i, c in enumerate(spec.column_names)}, schema=schema)
    os.makedirs(path, exist_ok=True)
    pq.write_table(table, os.path.join(path, "part-0.parquet"))
    return len(rows)


# ---- the workload -------------------------------------------------------------------

class Workload:
    """Small transactions against spec's table from a background thread.

    preload() inserts rows synchronously (before CDC, only a snapshot has
    them); start()/stop() run the thread; ops counts what was committed."""

    def __init__(self, sim, spec, seed=1, pace=0.002, ops_per_tx=(1, 3)):
        self.sim, self.spec = sim, spec
        self.rng = random.Random(seed)
        self.pace = pace
        self.ops_per_tx = ops_per_tx
        self.present = {}  # folded key -> the key as stored
        self.ops = Counter()
        self.errors = []
        self._stop = threading.Event()
        self._thread = None
        self._conn = None

    @property
    def transactions(self):
        return self.ops["transactions"]

    def preload(self, n, capture=True):
        rows = []
        for _ in range(n):
            k = self.spec.fresh_key(self.rng, self.present)
            self.present[self.spec.fold(k)] = k
            rows.append(self.spec.new_row(self.rng, k))
        for lo in range(0, n, 400):
            self.sim.run(insert_sql(self.spec, rows[lo:lo + 400]) + (CAPTURE if capture else ""),
                         database=DB)
        return n

    def _transaction(self):
        """One transaction's statements (kind, SQL) and the keys present after
        it, which become the workload's once it has committed."""
        spec, rng = self.spec, self.rng
        parts, after = [], dict(self.present)
        for _ in range(rng.randint(*self.ops_per_tx)):
            r = rng.random()
            if r < 0.3 or not after:
                k = spec.fresh_key(rng, after)
                parts.append(("insert", insert_sql(spec, [spec.new_row(rng, k)])))
                after[spec.fold(k)] = k
            elif r < 0.62:
                k = rng.choice(list(after.values()))
                parts.append(("update", f"UPDATE dbo.{spec.name} SET {set_sql(spec.changes(rng))} "
                                        f"WHERE {where(spec, k)};"))
            elif r < 0.82:
                k = after.pop(spec.fold(rng.choice(list(after.values()))))
                parts.append(("delete", f"DELETE FROM dbo.{spec.name} WHERE {where(spec, k)};"))
            elif r < 0.97:
                k = rng.choice(list(after.values()))
                rest = {f: v for f, v in after.items() if f != spec.fold(k)}
                values, k2 = spec.move(rng, k, rest)
                parts.append(("key_update", f"UPDATE dbo.{spec.name} SET {set_sql(values)} "
                                            f"WHERE {where(spec, k)};"))
                del after[spec.fold(k)]
                after[spec.fold(k2)] = k2
            else:
                parts.append(("bulk_update", spec.bulk_update(rng)))
        return parts, after

    def step(self):
        """One transaction, committed and captured."""
        parts, after = self._transaction()
        sql = "BEGIN TRAN;\n" + "\n".join(s for _, s in parts) + "\nCOMMIT;\n" + CAPTURE
        try:
            if self._conn is None:
                self._conn = self.sim.connect(DB)
            cur = self._conn.cursor()
            cur.execute(sql)
            while cur.nextset():
                pass
        except Exception as e:  # noqa: BLE001 - a refused transaction is recorded, then resynced
            self.errors.append(f"{type(e).__name__}: {e}"[:300])
            self._reconnect_and_resync()
            return False
        self.present = after
        self.ops["transactions"] += 1
        for kind, _ in parts:
            self.ops[kind] += 1
        return True

    def _reconnect_and_resync(self):
        try:
            if self._conn is not None:
                self._conn.close()
        except Exception:  # noqa: BLE001 - the connection may be gone already
            pass
        self._conn = None
        rows = self.sim.run(f"SELECT {', '.join(self.spec.keys)} FROM dbo.{self.spec.name}",
                            database=DB)
        self.present = {self.spec.fold(tuple(r)): tuple(r) for r in rows}

    def _run(self):
        while not self._stop.is_set():
            self.step()
            if len(self.errors) > 20 and len(self.errors) > self.transactions:
                return  # stop() reports it
            self._stop.wait(self.pace)

    def start(self):
        assert self._thread is None, "the workload runs already"
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="workload", daemon=True)
        self._thread.start()
        return self

    def stop(self):
        """Stops the thread; capture has read every commit when it returns."""
        if self._thread is not None:
            self._stop.set()
            self._thread.join(60)
            assert not self._thread.is_alive(), "the workload did not stop"
            self._thread = None
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        settle(self.sim)
        assert not (len(self.errors) > 20 and len(self.errors) > self.transactions), \
            f"the workload's transactions failed: {self.errors[:5]}"
        return self.ops

    def wait_for(self, transactions, timeout=30):
        """Until at least this many more transactions have committed."""
        goal = self.transactions + transactions
        deadline = time.monotonic() + timeout
        while self.transactions < goal:
            assert self._thread is not None and self._thread.is_alive(), \
                f"the workload stopped: {self.errors[-3:]}"
            assert time.monotonic() < deadline, f"the workload is stuck: {self.errors[-3:]}"
            time.sleep(0.02)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


# ---- rebuild ------------------------------------------------------------------------

def delta_rows(path, columns=None):
    """A Delta table's rows as dicts ([] when there is no table yet), read by
    delta-rs' own engine (a table of many small commits reads several times
    faster than through its pyarrow dataset)."""
    from deltalake import QueryBuilder
    if not os.path.exists(os.path.join(path, "_delta_log")):
        return []
    cols = ", ".join('"' + c + '"' for c in columns) if columns else "*"
    got = QueryBuilder().register("t", DeltaTable(path)).execute(f"SELECT {cols} FROM t")
    return pa.table(got.read_all()).to_pylist()


def completed_snapshots(bronze_rows, facts_rows):
    """The snapshot LSNs downstream may rebuild from: whole snapshots (and
    seeds) always, chunked ones once a completion row reaches them."""
    snaps = {}
    for r in bronze_rows:
        if r["_operation"] == 0:
            s = r["_snapshot"] or r["_start_lsn"]
            snaps[s] = snaps.get(s, False) or r.get("_chunk") is not None
    if facts_rows is None:
        assert not any(snaps.values()), \
            "bronze holds chunked snapshot rows: the rebuild needs the facts table"
        return set(snaps)
    ends = [f["max_lsn"] for f in facts_rows
            if f["event"] in ("bootstrap", "resnapshot") and f["max_lsn"]]
    return {s for s, chunked in snaps.items() if not chunked or any(e >= s for e in ends)}


def _commit_order(r):
    return (r["_start_lsn"], -1 if r["_command_id"] is None else r["_command_id"],
            r["_seqval"] or "", r["_operation"])


def rebuild(spec, bronze, facts=None):
    """The rule of docs/rebuild.md in Python: rows of the newest (complete)
    snapshot S, then the changes after S, the latest image per key."""
    rows = delta_rows(bronze)
    done = completed_snapshots(rows, delta_rows(facts) if facts else None)
    s = max(done) if done else None
    live = [r for r in rows
            if (r["_operation"] == 0 and s is not None and (r["_snapshot"] or r["_start_lsn"]) == s)
            or (r["_operation"] in (1, 2, 4) and (s is None or r["_start_lsn"] > s))]
    state = {}
    for r in sorted(live, key=_commit_order):
        k = spec.fold(spec.key_of(r))
        if r["_operation"] == 1:
            state.pop(k, None)
        else:
            state[k] = r
    return [tuple(state[k][c] for c in spec.column_names)
            for k in sorted(state, key=_order)]


def rebuild_duckdb(spec, bronze, facts=None):
    """The same rule as one DuckDB query over the Delta tables, written apart
    from rebuild() so that the rule is checked twice."""
    from conftest import duckdb_with_delta
    con = duckdb_with_delta()
    if not os.path.exists(os.path.join(bronze, "_delta_log")):
        return []
    complete = "NOT chunked"
    if facts and os.path.exists(os.path.join(facts, "_delta_log")):
        complete += (f" OR EXISTS (SELECT 1 FROM delta_scan('{facts}') f "
                     "WHERE f.event IN ('bootstrap', 'resnapshot') AND f.max_lsn >= snaps.lsn)")
    def q(c):
        return '"' + c + '"'

    key = ", ".join(f"lower({q(k)})" if k in spec.folded else q(k) for k in spec.keys)
    sql = f"""
WITH b AS (SELECT * FROM delta_scan('{bronze}')),
     snaps AS (SELECT coalesce(_snapshot, _start_lsn) AS lsn, bool_or(_chunk IS NOT NULL) AS chunked
                 FROM b WHERE _operation = 0 GROUP BY 1),
     s AS (SELECT max(lsn) AS lsn FROM snaps WHERE {complete}),
     live AS (
       SELECT b.* FROM b, s
        WHERE (b._operation = 0 AND coalesce(b._snapshot, b._start_lsn) = s.lsn)
           OR (b._operation IN (1, 2, 4) AND (s.lsn IS NULL OR b._start_lsn > s.lsn))),
     ranked AS (
       SELECT *, row_number() OVER (
                   PARTITION BY {key}
                   ORDER BY _start_lsn DESC, _command_id DESC NULLS LAST,
                            _seqval DESC NULLS LAST, _operation DESC) AS rn
         FROM live)
SELECT {', '.join(map(q, spec.column_names))} FROM ranked WHERE rn = 1 AND _operation <> 1
ORDER BY {key}"""
    got = [tuple(r) for r in con.execute(sql).fetchall()]
    idx = [spec.column_names.index(k) for k in spec.keys]
    return sorted(got, key=lambda r: _order(spec.fold(tuple(r[i] for i in idx))))


def _diff(spec, want, got, label, bronze):
    idx = [spec.column_names.index(k) for k in spec.keys]

    def keyed(rows):
        return {spec.fold(tuple(r[i] for i in idx)): r for r in rows}

    w, g = keyed(want), keyed(got)
    missing = sorted(set(w) - set(g), key=_order)
    extra = sorted(set(g) - set(w), key=_order)
    differ = sorted((k for k in set(w) & set(g) if w[k] != g[k]), key=_order)
    lines = [f"{label} differs from the source: {len(want)} rows in the source, {len(got)} "
             f"rebuilt; {len(missing)} missing, {len(extra)} extra, {len(differ)} differ"]
    for k in missing[:8]:
        lines.append(f"  missing {k}: source {w[k]}")
    for k in extra[:8]:
        lines.append(f"  extra   {k}: rebuilt {g[k]}")
    for k in differ[:8]:
        cols = [f"{c}: source {a!r} rebuilt {b!r}"
                for c, a, b in zip(spec.column_names, w[k], g[k]) if a != b]
        lines.append(f"  differ  {k}: " + "; ".join(cols))
    sample = (missing + extra + differ)[:3]
    if sample:
        rows = delta_rows(bronze)
        for k in sample:
            hist = sorted((r for r in rows if spec.fold(spec.key_of(r)) == k), key=_commit_order)
            lines.append(f"  bronze rows of {k}:")
            for r in hist[:12]:
                lines.append("    op {_operation} lsn {_start_lsn} seq {_seqval} snap {_snapshot} "
                             "chunk {_chunk} batch {_batch_id}".format(**r))
    return "\n".join(lines)


def assert_rebuild_equals_source(sim, spec, bronze, facts=None):
    """The table rebuilt from bronze (twice: Python and DuckDB) equals the
    source read through pymssql, row for row, every column."""
    want = source_rows(sim, spec)
    got = rebuild(spec, bronze, facts)
    assert got == want, _diff(spec, want, got, "the Python rebuild", bronze)
    duck = rebuild_duckdb(spec, bronze, facts)
    assert duck == want, _diff(spec, want, duck, "the DuckDB rebuild", bronze)
    return len(want)
