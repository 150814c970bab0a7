#!/usr/bin/env python3
"""Table data goes through the storage seam only (make test).

Greps src/ outside src/storage/ (the seam and its backends) and src/sim/ (the
simulator's own SQLite files) for calls that touch files: opening, creating,
stat-ing, reading or writing at an offset, syncing, renaming, linking,
deleting, making or listing directories. A call found here that the allow-list
below does not name is a file access that bypasses the storage, so it would
not work on an object store and escapes the storage's fault injection: route
it through src/storage/mcdc_storage.h, or, if it is not table data, add it to
the allow-list with the reason.

Comments and string literals are ignored. Prints one line per offender and
ends with "storage-io: N passed, N failed" for tests/run_all.sh.
"""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SKIP_DIRS = ("src/storage/", "src/sim/")

CALLS = (
    "open", "openat", "creat", "fopen", "fdopen", "freopen", "tmpfile", "mkstemp",
    "mkdtemp", "mkdir", "mkdirat", "opendir", "fdopendir", "scandir", "nftw", "ftw",
    "pread", "pwrite", "preadv", "pwritev", "stat", "fstat", "lstat", "fstatat", "statx",
    "access", "faccessat", "fsync", "fdatasync", "truncate", "ftruncate", "unlink",
    "unlinkat", "remove", "rmdir", "rename", "renameat", "renameat2", "link", "linkat",
    "symlink", "symlinkat",
)
# A call: the name not preceded by an identifier character, '.', or '->'
# (members such as s->ops->open_writer are not libc calls).
CALL_RE = re.compile(r"(?<![\w.>])(" + "|".join(CALLS) + r")\s*\(")

# The legitimate uses that are not table data: (file, call, text the line must
# contain, why). A new call in one of these files is still flagged unless it
# matches an entry.
ALLOW = [
    ("src/util/mcdc_util.c", "fopen", '"/dev/urandom"',
     "entropy for uuid4 (file names, physical column names); not a table file"),
    ("src/options/mcdc_options.c", "open", "open(path, O_RDONLY",
     "the --options-file the user names (connection string and source options)"),
    ("src/options/mcdc_options.c", "fstat", "fstat(fd, &st)",
     "refusing an options file that is a directory, a device or too large"),
    ("src/tds/mcdc_driver_native.c", "open", "open(rec,",
     "test fixtures (record_path) record the server's packets to a file"),
    ("src/cli/cmd_repair.c", "fopen", 'fopen(path, "r")',
     "the --keys-file the user names (key objects, one a line); not a table file"),
    ("src/cli/cli_metrics.c", "fopen", 'fopen(cfg->ready_file, "w")',
     "start-many's --ready-file: the metrics listener's port, for tests; not a table file"),
    ("src/cli/cli_serve_config.c", "fopen", 'fopen(path, "r")',
     "serve's --config file (INI: the service's settings and tables); not a table file"),
    ("src/cli/cli_serve_config.c", "fopen", 'fopen(file->value, "r")',
     "serve's connectionString_file: a secret the config names; not a table file"),
    ("src/cli/cli_serve_config.c", "fstat", "fstat(fileno(f), &st)",
     "refusing a connectionString_file others may read"),
    ("src/cli/cli_serve_config.c", "stat", "stat(p->c->path, &st)",
     "refusing a config file others may read that holds a connection string"),
    ("src/cli/cli_serve_schedule.c", "fdopen", 'fdopen(fd[0], "r")',
     "the output of serve's scheduled apply/reconcile child, through a pipe, to its log"),
]


def strip_comments_and_strings(text):
    """The text with comments and string/char literals blanked (newlines
    kept, so line numbers stay); the literal's quotes stay so that allow-list
    texts can still name a path by its opening quote."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(c + " " * (min(j, n) - i - 1) + (c if j < n else ""))
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def main():
    offenders = []
    used = set()
    for dirpath, dirs, files in os.walk(os.path.join(ROOT, "src")):
        dirs.sort()
        for name in sorted(files):
            if not name.endswith((".c", ".h")):
                continue
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, ROOT).replace(os.sep, "/")
            if rel.startswith(SKIP_DIRS):
                continue
            with open(path, encoding="utf-8", errors="replace") as f:
                raw = f.read()
            raw_lines = raw.split("\n")
            code_lines = strip_comments_and_strings(raw).split("\n")
            for no, line in enumerate(code_lines, 1):
                for m in CALL_RE.finditer(line):
                    call = m.group(1)
                    src = raw_lines[no - 1]
                    hit = [k for k, (f_, c_, text, _) in enumerate(ALLOW)
                           if f_ == rel and c_ == call and text in src]
                    if hit:
                        used.add(hit[0])
                        continue
                    offenders.append(f"{rel}:{no}: {call}(): {src.strip()}")
    stale = [f"allow-list entry no longer matches: {a[0]} {a[1]}() \"{a[2]}\""
             for k, a in enumerate(ALLOW) if k not in used]
    for o in offenders:
        print(f"storage-io: file access outside src/storage: {o}")
    for s in stale:
        print(f"storage-io: {s}")
    if offenders:
        print("storage-io: table data must go through src/storage/mcdc_storage.h; a file "
              "that is not table data goes on the allow-list of scripts/check_storage_io.py "
              "with its reason")
    failed = 1 if offenders or stale else 0
    print(f"storage-io: {1 - failed} passed, {failed} failed")
    return failed


if __name__ == "__main__":
    sys.exit(main())
