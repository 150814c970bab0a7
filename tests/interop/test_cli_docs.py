"""Every source option the code knows is documented in `mssql-cdc stream
--help` and in the README (the reference keeps the same rule)."""
import os
import re
import subprocess

from conftest import CLI, ROOT


def known_options():
    src = open(os.path.join(ROOT, "src", "options", "mcdc_options.c")).read()
    names = re.findall(r'^\s*\{"([A-Za-z]+)", K_', src, re.M)
    assert len(names) >= 15
    return names


def test_every_option_is_in_the_help_and_the_readme():
    help_text = subprocess.run([CLI, "stream", "--help"], capture_output=True, text=True).stdout
    readme = open(os.path.join(ROOT, "README.md")).read()
    for name in known_options():
        assert name in help_text, f"{name} missing from mssql-cdc stream --help"
        assert name in readme, f"{name} missing from README.md"


def test_every_command_has_help():
    for cmd in (["--help"], ["stream", "--help"], ["finalization", "--help"],
                ["table-rows", "--help"], ["apply", "--help"], ["reconcile", "--help"],
                ["repair", "--help"], ["start-many", "--help"]):
        p = subprocess.run([CLI, *cmd], capture_output=True, text=True)
        assert p.returncode == 0 and "usage" in p.stdout, cmd
