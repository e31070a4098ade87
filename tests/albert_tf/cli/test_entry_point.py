"""Every console script ends a user's mistake with one line and an exit code (albert_tf.cli.entry_point)."""

import errno
import sys

import pytest
from absl import flags

from albert_tf.utils import quiet
from albert_tf.cli import entry_point
from albert_tf.utils.errors import FlagError, UserError

pytestmark = pytest.mark.faults  # python -m pytest -q -m faults: the fault and bad-input tests


def _run(main, argv, monkeypatch, env=None):
    """Runs `main` through run_main as a console script would; returns (exit code, stderr lines)."""
    flag_values = flags.FlagValues()
    flags.DEFINE_string("input_file", None, "a file", flag_values=flag_values)
    monkeypatch.setattr(sys, "argv", ["tool", *argv])
    monkeypatch.setattr(quiet, "_verbose_flag", [False])
    for key, value in (env or {}).items():
        monkeypatch.setenv(key, value)
    with pytest.raises(SystemExit) as exited:
        entry_point.run_main(main, flag_values, "tool: a test tool")
    return exited.value.code


def _raises(error):
    def main(argv):
        raise error

    return main


@pytest.mark.parametrize(
    "error, code, line",
    [
        (UserError("data.txt, line 3: not UTF-8"), 1, "error: data.txt, line 3: not UTF-8"),
        (FlagError("--learning_rate must be positive, got 0.0"), 2, "error: --learning_rate must be positive, got 0.0"),
        (FileNotFoundError(errno.ENOENT, "No such file or directory", "/no/such.txt"), 1,
         "error: No such file or directory: /no/such.txt"),
        (OSError(errno.ENOSPC, "No space left on device", "/full/out.json"), 1,
         "error: no space left on the device writing /full/out.json: free some space and rerun (finished work is kept)"),
        (KeyboardInterrupt(), 130, "error: interrupted"),
    ],
)
def test_a_user_error_is_one_line_and_an_exit_code(error, code, line, monkeypatch, capsys):
    assert _run(_raises(error), [], monkeypatch) == code
    assert capsys.readouterr().err.splitlines() == [line]


def test_verbose_adds_the_traceback(monkeypatch, capsys):
    assert _run(_raises(UserError("bad file")), ["--verbose"], monkeypatch) == 1
    err = capsys.readouterr().err
    assert "Traceback (most recent call last)" in err and err.splitlines()[-1] == "error: bad file"
    assert _run(_raises(UserError("bad file")), [], monkeypatch, env={quiet.VERBOSE_ENV: "1"}) == 1
    assert "Traceback" in capsys.readouterr().err


def test_a_bug_of_ours_keeps_its_traceback(monkeypatch):
    with pytest.raises(ZeroDivisionError):
        _run(_raises(ZeroDivisionError("division by zero")), [], monkeypatch)


def test_a_tensorflow_file_error_names_the_file(monkeypatch, capsys):
    import tensorflow as tf

    def main(argv):
        tf.io.gfile.GFile("/no/such/file.tfrecord").read()

    assert _run(main, [], monkeypatch) == 1
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith("error: ") and "/no/such/file.tfrecord" in line


def test_an_unknown_flag_exits_2(monkeypatch, capsys):
    assert _run(_raises(AssertionError("not reached")), ["--no_such_flag=1"], monkeypatch) == 2
    assert capsys.readouterr().err.splitlines() == ["error: Unknown command line flag 'no_such_flag' (see --help)"]
