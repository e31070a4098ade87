"""The README's commands on a clone that has no ../shared/data: the tests pass on the small data the
repository carries (those over the full data are skipped with the reason, or fail under
ALBERT_REQUIRE_DATA=1 as in CI), and every console script answers --help at once, with exit code
0 and without loading TensorFlow or printing any of its log lines.

The "clone" is the repository's tracked files (`git ls-files`, as they are in the working tree)
copied to a temporary folder whose parent holds no shared/ folder; the installed environment runs
it, with the clone first on the import path.
"""

import os
import pathlib
import re
import shutil
import subprocess
import sys
import tomllib

import pytest

from tests.conftest import REPO_ROOT

SCRIPTS = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["scripts"]
# What TensorFlow, XLA and absl's C++ logging print: "I0000 00:00:17... port.cc:153] ...",
# "WARNING: All log messages before absl::InitializeLog() ...", oneDNN and CUDA notices.
TF_LOG_LINE = re.compile(r"^[IWEF]\d{4} |absl::InitializeLog|oneDNN|cuda|tensorflow", re.IGNORECASE | re.MULTILINE)


@pytest.fixture(scope="module")
def clone(tmp_path_factory) -> pathlib.Path:
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=REPO_ROOT, capture_output=True)
    if listed.returncode != 0:
        pytest.skip("not a git checkout: nothing to clone")
    folder = tmp_path_factory.mktemp("fresh") / "albert_tf"
    for name in listed.stdout.decode().split("\0"):
        source = REPO_ROOT / name
        if name and source.is_file():
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, folder / name)
    assert not (folder.parent / "shared").exists()
    return folder


def _clean_env(**extra) -> dict:
    env = {k: v for k, v in os.environ.items()
           if k not in ("ALBERT_DATA_DIR", "ALBERT_REQUIRE_DATA", "TF_CPP_MIN_LOG_LEVEL", "PYTHONPATH")}
    env.update(extra)
    return env


def _run_in(folder, args, **env):
    return subprocess.run([sys.executable, *args], cwd=folder, env=_clean_env(**env),
                          capture_output=True, text=True, timeout=600)


@pytest.mark.parametrize("script", sorted(SCRIPTS))
def test_help_of_every_console_script_is_quiet_imports_no_tensorflow_and_exits_0(clone, script):
    """Each in a fresh process: the flags, the option dataclasses they come from, and the entry point
    load no TensorFlow (issue 39)."""
    module, function = SCRIPTS[script].split(":")
    code = (f"import sys\nsys.argv = [{script!r}, '--help']\nfrom {module} import {function}\n"
            f"try:\n    {function}()\nexcept SystemExit as exit:\n    status = exit.code\n"
            "print('loaded tensorflow' if 'tensorflow' in sys.modules else 'no tensorflow', file=sys.stderr)\n"
            "sys.exit(status)\n")
    result = _run_in(clone, ["-c", code])
    assert result.returncode == 0, result.stderr[-2000:]
    assert "--help" in result.stdout or "flags" in result.stdout.lower(), result.stdout[:500]
    assert result.stderr.strip() == "no tensorflow", result.stderr[-2000:]
    assert not TF_LOG_LINE.search(result.stdout), result.stdout[:2000]


def test_the_clone_imports_its_own_code(clone):
    result = _run_in(clone, ["-c", "import albert_tf, tests.conftest as c; print(albert_tf.__file__); print(c.REPO_ROOT)"])
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split() == [str(clone / "albert_tf" / "__init__.py"), str(clone)]


@pytest.mark.slow
def test_readme_test_command_passes_without_the_shared_data(clone):
    # The README's test command on a subset: files with tests over the small data and over the full.
    subset = ["tests/albert_tf/tokenizers/test_tokenizer.py", "tests/finetune/test_race_readers.py"]
    result = _run_in(clone, ["-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", *subset])
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-3000:]
    passed = int(re.search(r"(\d+) passed", output).group(1))
    skipped = int(re.search(r"(\d+) skipped", output).group(1))
    assert passed >= 10 and skipped == 1, output[-3000:]
    assert re.search(r"SKIPPED .*test_race_readers.py.*needs the full data at .*shared/data", output), output[-3000:]
    # CI sets ALBERT_REQUIRE_DATA=1: the same skip is then a failure.
    required = _run_in(clone, ["-m", "pytest", "-q", "-p", "no:cacheprovider", subset[1]], ALBERT_REQUIRE_DATA="1")
    assert required.returncode != 0
    assert "ALBERT_REQUIRE_DATA=1 requires it" in required.stdout + required.stderr
