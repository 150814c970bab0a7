#!/usr/bin/env python3
"""The shared library's ABI: what libmssqlcdc.so exports is exactly what
include/mssqlcdc.h and include/mssqlcdc_testing.h declare MCDC_API, nothing
more (the internals the library is built from stay hidden:
-fvisibility=hidden), its SONAME carries the ABI major and the usual
symlinks point at it. Every config struct (mcdc_<name>_cfg) has an exported
mcdc_<name>_cfg_init, for bindings, which cannot see its _INIT macro.

Usage: scripts/check-abi.py [BUILD_DIR]   (default $MCDC_BUILD or build)
Prints the exported symbols and ends with "abi: N passed, N failed".
"""
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.path.join(ROOT, sys.argv[1] if len(sys.argv) > 1 else os.environ.get("MCDC_BUILD", "build"))
HEADER = os.path.join(ROOT, "include", "mssqlcdc.h")
HEADERS = (HEADER, os.path.join(ROOT, "include", "mssqlcdc_testing.h"))

passed = failed = 0


def check(ok, what, detail=()):
    global passed, failed
    if ok:
        passed += 1
        print(f"ok   {what}")
    else:
        failed += 1
        print(f"FAIL {what}")
        for line in detail:
            print(f"     {line}")


def uncommented(path):
    text = open(path).read()
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", " ", text)


def declared_api():
    """Names of the functions the headers mark MCDC_API (comments removed;
    a declaration may span lines)."""
    text = "\n".join(uncommented(h) for h in HEADERS)
    text = re.sub(r"^\s*#.*$", " ", text, flags=re.M)  # the macro's own definition
    names = []
    for decl in re.findall(r"\bMCDC_API\b([^;{]*?)\(", text):
        m = re.search(r"(\w+)\s*$", decl)
        if m:
            names.append(m.group(1))
    return names


def run(*cmd):
    return subprocess.run(cmd, capture_output=True, text=True, check=True).stdout


def version():
    m = re.search(r'#define MCDC_VERSION_STRING "([^"]+)"', open(HEADER).read())
    return m.group(1)


def main():
    ver = version()
    major = ver.split(".")[0]
    so = os.path.join(BUILD, f"libmssqlcdc.so.{ver}")
    if not os.path.exists(so):
        check(False, f"{so} is built", ["run make"])
        return
    dyn = run("readelf", "-d", so)
    m = re.search(r"\(SONAME\)\s+Library soname: \[([^\]]+)\]", dyn)
    check(m is not None and m.group(1) == f"libmssqlcdc.so.{major}",
          f"SONAME is libmssqlcdc.so.{major}", [m.group(1) if m else "no SONAME"])
    for link, target in ((f"libmssqlcdc.so.{major}", f"libmssqlcdc.so.{ver}"),
                         ("libmssqlcdc.so", f"libmssqlcdc.so.{major}")):
        p = os.path.join(BUILD, link)
        check(os.path.islink(p) and os.readlink(p) == target, f"{link} -> {target}",
              [os.readlink(p) if os.path.islink(p) else "missing or not a symlink"])

    declared = declared_api()
    dupes = sorted({n for n in declared if declared.count(n) > 1})
    check(len(declared) >= 20 and not dupes, f"the headers declare {len(declared)} MCDC_API functions",
          [f"declared twice: {', '.join(dupes)}"] if dupes else ["too few found: parser broken?"])
    exported = set()
    for line in run("nm", "-D", "--defined-only", so).splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] not in ("A",):  # A: version nodes, not symbols
            exported.add(parts[2])
    print("exported symbols:")
    for name in sorted(exported):
        print(f"  {name}")
    # each config's defaults as a function
    configs = sorted(set(re.findall(r"typedef struct (mcdc_\w+_cfg) \{", uncommented(HEADER))))
    no_init = [c for c in configs if f"{c}_init" not in declared]
    check(len(configs) >= 7 and not no_init,
          f"each of the {len(configs)} configs has an MCDC_API <config>_init",
          [f"no {c}_init" for c in no_init] or ["too few configs found: parser broken?"])
    missing = sorted(set(declared) - exported)
    extra = sorted(exported - set(declared))
    check(not missing, "every MCDC_API function is exported", [f"not exported: {n}" for n in missing])
    check(not extra, "nothing but MCDC_API functions is exported",
          [f"exported but not declared MCDC_API: {n}" for n in extra])

    # The internals are in the library, as local symbols only.
    local = set()
    for line in run("nm", "--defined-only", so).splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] in "tdbr" and parts[2].startswith("mcdc_"):
            local.add(parts[2])
    internals = ("mcdc_lsn_parse", "mcdc_malloc", "mcdc_changes_open", "mcdc_batch_export",
                 "mcdc_parse_ts_us")
    check(all(n in local for n in internals) and not (local & exported),
          f"{len(local)} internal mcdc_ functions are linked in and hidden",
          [f"not a local symbol: {n}" for n in internals if n not in local])
    # Nothing of the libraries it uses is copied in: they stay shared.
    undefined = [l.split()[-1] for l in run("nm", "-D", "--undefined-only", so).splitlines() if l.split()]
    check(not [u for u in undefined if u.startswith("mcdc_")],
          "no mcdc_ symbol is left to another object",
          [u for u in undefined if u.startswith("mcdc_")])
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", dyn)
    want = ("libsybdb", "libgnutls", "libjansson", "libzstd", "libsnappy", "liblz4", "libz")
    check(all(any(n.startswith(w + ".") for n in needed) for w in want),
          "it names the shared libraries it needs (linked with -z defs)", [", ".join(needed)])


main()
print(f"abi: {passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
