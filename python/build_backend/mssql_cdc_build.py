"""The package's build backend (PEP 517), in the tree so that building
needs nothing from a package index: the wheel is a zip of src/mssql_cdc
and its metadata, made with the standard library alone.

A wheel that carries libmssqlcdc (``make python-lib`` copied it into
src/mssql_cdc) is tagged for this platform (py3-none-linux_<arch>; the
library is loaded with ctypes, so any Python 3 of the platform takes it);
one without it is pure (py3-none-any) and loads the library from elsewhere
(see the package README)."""
from __future__ import annotations

import base64
import hashlib
import io
import os
import sysconfig
import re
import tarfile
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = "mssql_cdc"


def _project() -> dict:
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        data = f.read()
    try:
        import tomllib
    except ImportError:  # Python 3.10: the [project] table's strings and lists are enough
        table = data.decode().split("[project]", 1)[1].split("\n[", 1)[0]
        out: dict = {}
        for key, value in re.findall(r'^([\w-]+)\s*=\s*(".*?"|\[.*?\])\s*$', table, re.M | re.S):
            out[key] = (re.findall(r'"(.*?)"', value) if value.startswith("[")
                        else value.strip('"'))
        return out
    return tomllib.loads(data.decode())["project"]


def _dist_name(project: dict) -> str:
    return project["name"].replace("-", "_")


def _metadata(project: dict) -> str:
    lines = ["Metadata-Version: 2.1", f"Name: {project['name']}",
             f"Version: {project['version']}", f"Summary: {project.get('description', '')}",
             f"Requires-Python: {project.get('requires-python', '>=3')}"]
    lines += [f"Requires-Dist: {d}" for d in project.get("dependencies", [])]
    readme = os.path.join(ROOT, project.get("readme", "README.md"))
    body = ""
    if os.path.exists(readme):
        lines.append("Description-Content-Type: text/markdown")
        with open(readme, encoding="utf-8") as f:
            body = "\n" + f.read()
    return "\n".join(lines) + "\n" + body


def _package_files() -> list[tuple[str, str]]:
    """(path on disk, path in the wheel) of the package's files."""
    src = os.path.join(ROOT, "src", PACKAGE)
    out = []
    for dirpath, dirnames, filenames in os.walk(src):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for name in sorted(filenames):
            if name.endswith((".pyc", ".pyo")):
                continue
            path = os.path.join(dirpath, name)
            out.append((path, os.path.relpath(path, os.path.join(ROOT, "src"))))
    return out


def _tag(files: list[tuple[str, str]]) -> tuple[str, bool]:
    if any(".so" in os.path.basename(arc) for _, arc in files):
        plat = sysconfig.get_platform().replace("-", "_").replace(".", "_")
        return f"py3-none-{plat}", False
    return "py3-none-any", True


def _record_line(arc: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{arc},sha256={digest},{len(data)}"


def _write_wheel(wheel_directory: str, entries: list[tuple[str, bytes]], tag: str,
                 purelib: bool) -> str:
    project = _project()
    name, version = _dist_name(project), project["version"]
    info = f"{name}-{version}.dist-info"
    entries = list(entries)
    entries.append((f"{info}/METADATA", _metadata(project).encode()))
    entries.append((f"{info}/WHEEL", (f"Wheel-Version: 1.0\nGenerator: mssql_cdc_build\n"
                                      f"Root-Is-Purelib: {'true' if purelib else 'false'}\n"
                                      f"Tag: {tag}\n").encode()))
    entries.append((f"{info}/top_level.txt", f"{PACKAGE}\n".encode()))
    record = [_record_line(arc, data) for arc, data in entries] + [f"{info}/RECORD,,"]
    entries.append((f"{info}/RECORD", ("\n".join(record) + "\n").encode()))
    filename = f"{name}-{version}-{tag}.whl"
    with zipfile.ZipFile(os.path.join(wheel_directory, filename), "w",
                         zipfile.ZIP_DEFLATED) as z:
        for arc, data in entries:
            zi = zipfile.ZipInfo(arc, date_time=(2026, 1, 1, 0, 0, 0))
            zi.external_attr = (0o755 if arc.endswith(".so") or ".so." in arc else 0o644) << 16
            zi.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(zi, data)
    return filename


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    files = _package_files()
    tag, purelib = _tag(files)
    entries = []
    for path, arc in files:
        with open(path, "rb") as f:
            entries.append((arc, f.read()))
    return _write_wheel(wheel_directory, entries, tag, purelib)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    # a .pth naming src/: the package runs from the tree (and finds the
    # tree's build/ library as its development fallback)
    pth = (os.path.join(ROOT, "src") + "\n").encode()
    return _write_wheel(wheel_directory, [(f"_{PACKAGE}_editable.pth", pth)], "py3-none-any",
                        True)


def build_sdist(sdist_directory, config_settings=None):
    project = _project()
    base = f"{_dist_name(project)}-{project['version']}"
    filename = f"{base}.tar.gz"
    with tarfile.open(os.path.join(sdist_directory, filename), "w:gz") as t:
        for rel in ("pyproject.toml", "README.md", "build_backend/mssql_cdc_build.py"):
            path = os.path.join(ROOT, rel)
            if os.path.exists(path):
                t.add(path, f"{base}/{rel}")
        for path, arc in _package_files():
            t.add(path, f"{base}/src/{arc}")
        info = tarfile.TarInfo(f"{base}/PKG-INFO")
        data = _metadata(project).encode()
        info.size = len(data)
        t.addfile(info, io.BytesIO(data))
    return filename
