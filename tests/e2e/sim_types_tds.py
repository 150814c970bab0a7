"""hierarchyid, geography, geometry, xml and sql_variant over TDS against the
real mssql-cdc-sim, decoded by python-tds and pymssql (FreeTDS).

usage: sim_types_tds.py PORT PASSWORD (run by sim_schema.sh). The values
arrive in SQL Server's encodings: sql_variant as SSVARIANT with its base
type (python-tds gives back an int, a Decimal, a str, a datetime...), the
CLR types as UDT (0xF0) with their serialized bytes (SRID + MS-SSCLRT
layout; hierarchyid's compact binary), xml as XMLTYPE text; the text and
WKB forms a reader asks for (ToString, STAsText, STAsBinary, STSrid, CAST
to nvarchar) come back as strings, bytes and ints. Ends with
"N passed, N failed".
"""
import datetime
import decimal
import struct
import sys

import pymssql
import pytds

from sim_check import Checks

PORT, PASSWORD = int(sys.argv[1]), sys.argv[2]
C = Checks("types")
check = C.check

POINT = struct.pack("<iBBdd", 4326, 1, 0x0C, 47.65, -122.35)  # geography::Point(47.65, -122.35, 4326)
LINE = struct.pack("<iBBdddd", 0, 1, 0x14, 0, 0, 3, 4)        # LINESTRING (0 0, 3 4), SRID 0


def setup():
    c = pymssql.connect(server="127.0.0.1", port=PORT, user="sa", password=PASSWORD, autocommit=True)
    cur = c.cursor()
    cur.execute("CREATE DATABASE types")
    cur.execute("USE types")
    cur.execute("CREATE TABLE dbo.t (id int NOT NULL PRIMARY KEY, h hierarchyid NULL, g geography NULL,"
                " m geometry NULL, x xml NULL, v sql_variant NULL)")
    cur.execute("INSERT INTO dbo.t VALUES (1, '/1/2/', geography::Point(47.65, -122.35, 4326),"
                " geometry::STGeomFromText('LINESTRING (0 0, 3 4)', 0), '<a   b=''1''/>', CAST(42 AS int))")
    cur.execute("INSERT INTO dbo.t VALUES (2, NULL, NULL, NULL, NULL, CAST(12.50 AS decimal(6,2)))")
    cur.execute("INSERT INTO dbo.t (id, v) VALUES (3, N'h\u00e9llo')")
    cur.execute("INSERT INTO dbo.t (id, v) VALUES (4, CAST('2024-05-06 07:08:09.5' AS datetime2(1)))")
    cur.execute("INSERT INTO dbo.t (id, v) VALUES (5, CAST(0x0A0B AS varbinary(4)))")
    cur.execute("INSERT INTO dbo.t (id, v) VALUES (6, CAST(2.5 AS float))")
    c.close()


def pytds_values():
    with pytds.connect("127.0.0.1", "types", "sa", PASSWORD, port=PORT, autocommit=True) as c:
        cur = c.cursor()
        cur.execute("SELECT h, g, m, x, v FROM dbo.t WHERE id = 1")
        h, g, m, x, v = cur.fetchone()
        check("pytds: hierarchyid as UDT bytes (/1/2/ = 0x5B40)", h == b"\x5b\x40", repr(h))
        check("pytds: geography as UDT bytes, SRID then point (lat, long)", g == POINT, g.hex() if g else g)
        check("pytds: geometry line segment bytes", m == LINE, m.hex() if m else m)
        check("pytds: xml as text, as SQL Server serializes it", x == '<a b="1" />', repr(x))
        check("pytds: sql_variant of int comes back an int", v == 42 and isinstance(v, int), repr(v))
        cur.execute("SELECT v FROM dbo.t ORDER BY id")
        vs = [r[0] for r in cur.fetchall()]
        check("pytds: sql_variant decimal(6,2)", vs[1] == decimal.Decimal("12.50"), repr(vs[1]))
        check("pytds: sql_variant nvarchar", vs[2] == "h\u00e9llo", repr(vs[2]))
        check("pytds: sql_variant datetime2(1)", vs[3] == datetime.datetime(2024, 5, 6, 7, 8, 9, 500000), repr(vs[3]))
        check("pytds: sql_variant varbinary", vs[4] == b"\x0a\x0b", repr(vs[4]))
        check("pytds: sql_variant float", vs[5] == 2.5, repr(vs[5]))
        cur.execute("SELECT h.ToString(), g.STAsText(), g.STSrid, g.STAsBinary(), m.STAsText(), CAST(x AS nvarchar(max)),"
                    " SQL_VARIANT_PROPERTY(v, 'BaseType'), CAST(h AS varbinary(16)), g.Lat, g.Long FROM dbo.t WHERE id = 1")
        r = cur.fetchone()
        check("pytds: ToString", r[0] == "/1/2/", repr(r[0]))
        check("pytds: STAsText (long lat)", r[1] == "POINT (-122.35 47.65)", repr(r[1]))
        check("pytds: STSrid", r[2] == 4326, repr(r[2]))
        check("pytds: STAsBinary (WKB, little-endian, x = long)", r[3] == struct.pack("<BIdd", 1, 1, -122.35, 47.65),
              r[3].hex() if r[3] else r[3])
        check("pytds: geometry STAsText", r[4] == "LINESTRING (0 0, 3 4)", repr(r[4]))
        check("pytds: CAST(xml AS nvarchar(max))", r[5] == '<a b="1" />', repr(r[5]))
        check("pytds: SQL_VARIANT_PROPERTY BaseType (a sql_variant of nvarchar)", r[6] == "int", repr(r[6]))
        check("pytds: CAST(hierarchyid AS varbinary)", r[7] == b"\x5b\x40", repr(r[7]))
        check("pytds: Lat/Long floats", r[8] == 47.65 and r[9] == -122.35, repr(r[8:]))
        cur.execute("SELECT h, g, x, v FROM dbo.t WHERE id = 2")
        check("pytds: NULLs of each type", cur.fetchone() == (None, None, None, decimal.Decimal("12.50")))
        # bad values: SQL Server's errors
        try:
            cur.execute("SELECT hierarchyid::Parse('1/2')")
            check("pytds: a bad hierarchyid text refused", False, "no error")
        except pytds.Error as e:
            check("pytds: a bad hierarchyid text refused (6522, 24001)", "24001" in str(e), str(e))


def pymssql_values():
    c = pymssql.connect(server="127.0.0.1", port=PORT, user="sa", password=PASSWORD, database="types", autocommit=True)
    cur = c.cursor()
    cur.execute("SELECT h, g, m, x FROM dbo.t WHERE id = 1")
    h, g, m, x = cur.fetchone()
    check("pymssql: hierarchyid bytes", bytes(h) == b"\x5b\x40", repr(h))
    check("pymssql: geography bytes", bytes(g) == POINT, repr(g))
    check("pymssql: geometry bytes", bytes(m) == LINE, repr(m))
    check("pymssql: xml text", x == '<a b="1" />', repr(x))
    cur.execute("SELECT v FROM dbo.t WHERE id IN (1, 3) ORDER BY id")
    vs = [r[0] for r in cur.fetchall()]
    # db-lib hands a sql_variant's value bytes over: the int's 4 bytes, the
    # nvarchar converted to UTF-8 (so FreeTDS read the base type and its
    # collation from the value's header)
    check("pymssql: sql_variant values as FreeTDS decodes them", vs == [b"*\x00\x00\x00", "h\u00e9llo".encode()], repr(vs))
    cur.execute("SELECT node FROM (SELECT hierarchyid::Parse('/3/') AS node) d")
    check("pymssql: a hierarchyid expression", bytes(cur.fetchone()[0]) == b"\x78")
    c.close()


def mssql_python_values():
    # Microsoft's ODBC Driver 18 decodes the same bytes
    import mssql_python
    with mssql_python.connect(f"Server=127.0.0.1,{PORT};UID=sa;PWD={PASSWORD};Encrypt=no;Database=types") as c:
        cur = c.cursor()
        cur.execute("SELECT h, g, m, x FROM dbo.t WHERE id = 1")
        h, g, m, x = cur.fetchone()
        check("mssql-python: hierarchyid bytes", bytes(h) == b"\x5b\x40", repr(h))
        check("mssql-python: geography bytes", bytes(g) == POINT, repr(g))
        check("mssql-python: geometry bytes", bytes(m) == LINE, repr(m))
        check("mssql-python: xml text", x == '<a b="1" />', repr(x))
        cur.execute("SELECT v FROM dbo.t ORDER BY id")
        vs = [r[0] for r in cur.fetchall()]
        check("mssql-python: sql_variant int and nvarchar", vs[0] == 42 and vs[2] == "h\u00e9llo", repr(vs))
        check("mssql-python: sql_variant decimal", decimal.Decimal(str(vs[1])) == decimal.Decimal("12.50"), repr(vs[1]))


C.run(setup, pytds_values, pymssql_values, mssql_python_values)
