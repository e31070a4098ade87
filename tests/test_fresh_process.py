"""The fresh process the serving tests share (a warm Python without this package, conftest's
`fresh_process`) runs a script as `python SCRIPT ARG...` would, and fails the test of a script that
fails."""

import pytest


def test_scripts_run_with_their_argv_without_this_package_and_failures_fail(fresh_process, tmp_path):
    script = tmp_path / "report.py"
    script.write_text("import os, sys\n"
                      "print(sys.argv[1:], os.getcwd() != sys.argv[1], "
                      "sorted(m for m in sys.modules if m.split('.')[0] in ('albert_tf', 'finetune', 'data_prep', 'tests')))\n")
    assert fresh_process.script(script, tmp_path, 7) == f"[{str(tmp_path)!r}, '7'] True []\n"
    broken = tmp_path / "broken.py"
    broken.write_text("raise ValueError('boom')\n")
    with pytest.raises(AssertionError, match="ValueError: boom"):
        fresh_process.script(broken)
    exits = tmp_path / "exits.py"
    exits.write_text("import sys\nsys.exit(3)\n")
    with pytest.raises(AssertionError, match="exit status 3"):
        fresh_process.script(exits)
    assert fresh_process.script(script, "again", 8).startswith("['again', '8'] True []")  # still serving
