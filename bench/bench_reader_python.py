"""The Python drivers on the reader's query (bench-reader's peers).

usage: bench_reader_python.py PORT PASSWORD DATABASE CAPTURE_INSTANCE

Reads every change row of the capture instance, joined to
cdc.lsn_time_mapping and ordered as the reader orders them, with pymssql,
python-tds and Microsoft's mssql-python (row fetch, and its Arrow fetch where
the package has it). Prints `name: value` lines, among them
python_fastest_rows_per_s. Not a test: nothing is asserted.
"""
import sys
import time

PORT, PASSWORD, DB, CI = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]


def query(conn_cursor):
    conn_cursor.execute(
        "SELECT TOP (1) * FROM cdc.[" + CI + "_CT]")
    cols = [d[0] for d in conn_cursor.description]
    conn_cursor.fetchall()
    captured = [c for c in cols if not c.startswith("__$")]
    sel = ", ".join(f"c.[{c}]" for c in captured)
    return (f"SELECT CONVERT(varchar(22), c.__$start_lsn, 1), CONVERT(varchar(22), c.__$seqval, 1), "
            f"c.__$operation, c.__$command_id, CAST(m.tran_end_time AS datetime2(3)), {sel} "
            f"FROM cdc.[{CI}_CT] AS c INNER JOIN cdc.lsn_time_mapping AS m "
            f"ON m.start_lsn = c.__$start_lsn "
            f"ORDER BY c.__$start_lsn, c.__$command_id, c.__$seqval, c.__$operation")


def timed(name, fn):
    try:
        t0, c0 = time.perf_counter(), time.process_time()
        rows = fn()
        secs = time.perf_counter() - t0
        cpu = time.process_time() - c0
    except Exception as e:  # a driver that cannot connect is reported, not fatal
        print(f"{name}_error: {type(e).__name__}: {str(e)[:120]}")
        return None
    print(f"{name}_rows: {rows}")
    print(f"{name}_seconds: {secs:.3f}")
    print(f"{name}_rows_per_s: {rows / secs:.0f}")
    # The driver's own CPU (the simulator runs in another process): what the
    # client costs per row, whatever the server's speed.
    print(f"{name}_cpu_seconds: {cpu:.3f}")
    print(f"{name}_rows_per_cpu_s: {rows / cpu:.0f}")
    cpu_rates[name] = rows / cpu
    return rows / secs


def fetch_all(conn):
    """Runs the reader's query on a DB-API connection, fetching 10,000 rows at
    a time; returns the row count."""
    cur = conn.cursor()
    cur.execute(query(cur))
    n = 0
    while True:
        rows = cur.fetchmany(10000)
        if not rows:
            break
        n += len(rows)
    conn.close()
    return n


def via_pymssql():
    import pymssql
    return fetch_all(pymssql.connect(server="127.0.0.1", port=PORT, user="sa", password=PASSWORD,
                                     database=DB, tds_version="7.4"))


def via_pytds():
    import pytds
    return fetch_all(pytds.connect(server="127.0.0.1", port=int(PORT), user="sa",
                                   password=PASSWORD, database=DB))


def mssql_python_conn():
    import mssql_python
    return mssql_python.connect(f"Server=127.0.0.1,{PORT};Database={DB};UID=sa;PWD={PASSWORD};"
                                "Encrypt=no")


def via_mssql_python():
    return fetch_all(mssql_python_conn())


def via_mssql_python_arrow():
    c = mssql_python_conn()
    cur = c.cursor()
    if not hasattr(cur, "arrow_batch"):
        raise RuntimeError("this mssql-python has no Arrow fetch")
    sql = query(cur)
    cur.execute(sql)
    n = 0
    while True:
        b = cur.arrow_batch(10000)
        if b is None or b.num_rows == 0:
            break
        n += b.num_rows
    c.close()
    return n


rates = {}
cpu_rates = {}
for name, fn in (("pymssql", via_pymssql), ("python_tds", via_pytds),
                 ("mssql_python", via_mssql_python), ("mssql_python_arrow", via_mssql_python_arrow)):
    r = timed(name, fn)
    if r:
        rates[name] = r
if rates:
    best = max(rates, key=rates.get)
    print(f"python_fastest_driver: {best}")
    print(f"python_fastest_rows_per_s: {rates[best]:.0f}")
    best_cpu = max(cpu_rates, key=cpu_rates.get)
    print(f"python_fastest_cpu_driver: {best_cpu}")
    print(f"python_fastest_rows_per_cpu_s: {cpu_rates[best_cpu]:.0f}")
