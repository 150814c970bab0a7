#!/usr/bin/env python3
"""Dependencies go one way: no module of src/ includes a module above it.

Reads every #include "..." of src/, finds the module of the included file
(src/<module>/ or include/, by its unique name) and checks it against the
table below. Ends with "deps: N passed, N failed" (files without and
includes with a violation) and lists each violation as
file:line: from-module -> to-module (header).

Usage: scripts/check-deps.py
"""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# The layering, one row per module: the modules it builds on directly. A
# module may include its own headers, the public header (include/), and
# whatever its row reaches, directly or through other rows. A module not in
# the table (a new directory) fails until it is given a row.
LAYERS = {
    "util": [],
    "lsn": ["util"],
    "storage": ["util"],
    # options hold the user's storage options too, and answer a storage
    # env from them (mcdc_opts_storage_env): they build on storage's types
    "options": ["util", "storage"],
    "batch": ["util"],
    "tds": ["util", "lsn", "options", "batch"],
    "parquet": ["util", "batch", "storage"],
    "delta": ["util", "batch", "parquet", "storage"],
    "source": ["tds", "batch", "lsn", "options", "util"],
    # lake's public table-rows call takes the user's options (their
    # storage options reach the table's store)
    "lake": ["delta", "parquet", "batch", "util", "options"],
    "pipeline": ["util", "lsn", "options", "storage", "batch", "tds", "parquet", "delta",
                 "source", "lake"],
    # silver (apply, the merge engine) builds on the pipeline's frame, facts
    # and verdict, and on the lake's tables; nothing builds on it.
    "silver": ["util", "lsn", "options", "storage", "batch", "tds", "parquet", "delta",
               "source", "lake", "pipeline"],
    # reconcile and repair build on silver (its keys, ranks, repair marks),
    # the snapshot reader and everything below it; nothing builds on them.
    "reconcile": ["util", "lsn", "options", "storage", "batch", "tds", "parquet", "delta",
                  "source", "lake", "pipeline", "silver"],
    "cli": [],  # the public header only
    # The simulator is built on the library's modules below the pipeline;
    # no module is built on it (no row names it).
    "sim": ["util", "lsn", "options", "storage", "batch", "tds", "parquet", "delta", "source",
            "lake"],
}
PUBLIC = "include"

# Includes that break the table today, each with why and who removes it.
# An entry that no longer matches any include fails: remove it.
KNOWN = {}


def closure(module):
    seen, todo = set(), list(LAYERS.get(module, []))
    while todo:
        m = todo.pop()
        if m not in seen:
            seen.add(m)
            todo += LAYERS.get(m, [])
    return seen


def index_files():
    """Every file name of src/ and include/ -> its module; duplicates."""
    where, dupes = {}, []
    for base, module_of in ((os.path.join(ROOT, "src"), None), (os.path.join(ROOT, "include"), PUBLIC)):
        for dirpath, _, files in os.walk(base):
            rel = os.path.relpath(dirpath, base)
            module = module_of or rel.split(os.sep)[0]
            for f in files:
                if not f.endswith((".h", ".c")):
                    continue
                if f in where and where[f][0] != module:
                    dupes.append(f"{f}: in {where[f][1]} and {os.path.join(dirpath, f)}")
                where[f] = (module, os.path.join(dirpath, f))
    return where, dupes


def main():
    where, dupes = index_files()
    violations, known_seen = [], set()
    files_ok = 0
    inc = re.compile(r'^\s*#\s*include\s*"([^"]+)"')
    for dirpath, _, files in sorted(os.walk(os.path.join(ROOT, "src"))):
        for f in sorted(files):
            if not f.endswith((".c", ".h")):
                continue
            path = os.path.join(dirpath, f)
            rel = os.path.relpath(path, ROOT)
            module = rel.split(os.sep)[1]
            bad_here = 0
            for n, line in enumerate(open(path, encoding="utf-8", errors="replace"), 1):
                m = inc.match(line)
                if not m:
                    continue
                name = os.path.basename(m.group(1))
                if name not in where:
                    violations.append(f"{rel}:{n}: {module} -> ? ({name}: no such file in src/ or include/)")
                    bad_here += 1
                    continue
                target = where[name][0]
                if module not in LAYERS:
                    violations.append(f"{rel}:{n}: {module} -> {target} ({name}): module "
                                      f"'{module}' has no row in LAYERS of scripts/check-deps.py")
                    bad_here += 1
                    continue
                if target in (module, PUBLIC) or target in closure(module):
                    continue
                if (rel, name) in KNOWN:
                    known_seen.add((rel, name))
                    print(f"known {rel}:{n}: {module} -> {target} ({name}): {KNOWN[(rel, name)]}")
                    continue
                violations.append(f"{rel}:{n}: {module} -> {target} ({name})")
                bad_here += 1
            files_ok += bad_here == 0
    for k in sorted(set(KNOWN) - known_seen):
        violations.append(f"{k[0]}: the known exception for {k[1]} no longer occurs: remove it "
                          "from KNOWN in scripts/check-deps.py")
    for d in dupes:
        violations.append(f"file name used twice (includes would be ambiguous): {d}")
    for v in violations:
        print(f"FAIL {v}")
    print(f"deps: {files_ok} passed, {len(violations)} failed")
    return 1 if violations else 0


sys.exit(main())
