"""The wheel's build hook (hatchling): puts libmssqlcdc, which make builds,
into the package as libmssqlcdc.so.<major> (the name mssql_cdc._native
loads) and tags the wheel py3-none-<platform>: the library is loaded with
ctypes, so any Python 3 of that platform takes the wheel, but only that
platform. `make python-wheel` then grafts the libraries it links into the
wheel with auditwheel.

The library is, in this order: the file MSSQL_CDC_LIBRARY_FILE names, the
source tree's build/libmssqlcdc.so.<major> (after `make`), or the copy
already in src/mssql_cdc/. None is an error saying to run make: a wheel
without it would install a package that cannot run. An editable install
(pip install -e) takes none: the package finds the tree's build/ itself."""
from __future__ import annotations

import os
import sysconfig

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

SONAME = "libmssqlcdc.so.1"


class LibraryHook(BuildHookInterface):
    PLUGIN_NAME = "custom"

    def _library(self) -> str:
        given = os.environ.get("MSSQL_CDC_LIBRARY_FILE")
        if given:
            if not os.path.isfile(given):
                raise FileNotFoundError(f"MSSQL_CDC_LIBRARY_FILE names {given}, which is not a file")
            return given
        for path in (os.path.join(self.root, os.pardir, "build", SONAME),
                     os.path.join(self.root, "src", "mssql_cdc", SONAME)):
            if os.path.isfile(path):
                return path
        raise FileNotFoundError(
            f"no {SONAME} to put in the wheel: run make in the repository first (it builds "
            f"build/{SONAME}), or set MSSQL_CDC_LIBRARY_FILE to the library's path")

    def initialize(self, version: str, build_data: dict) -> None:
        if self.target_name != "wheel" or version == "editable":
            return
        lib = os.path.realpath(self._library())
        build_data["force_include"][lib] = f"mssql_cdc/{SONAME}"
        build_data["pure_python"] = False
        platform = sysconfig.get_platform().replace("-", "_").replace(".", "_")
        build_data["tag"] = f"py3-none-{platform}"
