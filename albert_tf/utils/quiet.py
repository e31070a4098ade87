"""TensorFlow's C++ start-up lines kept from the user: one place, for the library and the CLIs.

When TensorFlow loads, and when it first lists its devices, its C++ code writes straight to file
descriptor 2: "All log messages before absl::InitializeLog()", "Could not find cuda drivers",
the CPU-feature (oneDNN, AVX) notes, and "failed call to cuInit" on a machine without a GPU. Most
are written before TensorFlow reads TF_CPP_MIN_LOG_LEVEL, and cuInit's is an error-level line, so
the level alone cannot silence them: they are captured instead, and shown if the import fails.

Importing `albert_tf` calls `quiet_tensorflow()` (it loads no TensorFlow itself). A user who set
TF_CPP_MIN_LOG_LEVEL to 0 or 1 asked for TensorFlow's lines and gets them.
"""

from __future__ import annotations

import contextlib
import importlib.abc
import importlib.util
import os
import sys
import tempfile

LOG_LEVEL_ENV = "TF_CPP_MIN_LOG_LEVEL"
QUIET_LEVEL = "2"  # errors only: TensorFlow's INFO and WARNING lines are not shown
VERBOSE_ENV = "ALBERT_TF_VERBOSE"
_verbose_flag: list[bool] = [False]  # set by albert_tf.cli.entry_point.run_main from the parsed --verbose


def verbose() -> bool:
    """True when the running script was given --verbose, or ALBERT_TF_VERBOSE is set (not 0): the
    library's code (a Beam pipeline's workers) reads it here, beside the console scripts."""
    return _verbose_flag[0] or os.environ.get(VERBOSE_ENV, "0") not in ("", "0", "false", "False")


def set_verbose(value: bool) -> None:
    """Records the parsed --verbose of a script."""
    _verbose_flag[0] = bool(value)


@contextlib.contextmanager
def stderr_captured():
    """Sends what C++ code writes to file descriptor 2 into a temporary file for the duration; it
    is written back if the block fails."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as captured:
        os.dup2(captured.fileno(), 2)
        try:
            yield
        except BaseException:
            os.dup2(saved, 2)
            captured.seek(0)
            sys.stderr.write(captured.read().decode(errors="replace"))
            raise
        finally:
            os.dup2(saved, 2)
            os.close(saved)


class _QuietTensorFlowImport(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports `tensorflow`, whenever it is first needed, with its start-up lines captured, and
    lists its devices then (the cuInit line) while they still are."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname != "tensorflow":
            return None
        sys.meta_path.remove(self)  # once: the real finders do the work
        spec = importlib.util.find_spec(fullname)
        if spec is not None and spec.loader is not None:
            self._loader, spec.loader = spec.loader, self
        return spec

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        with stderr_captured():
            self._loader.exec_module(module)
            module.config.list_physical_devices()


def quiet_device_start():
    """Around the start of TensorFlow's devices (the strategy): its C++ lines ("failed call to
    cuInit" on a machine without a GPU) are kept from the user unless --verbose; shown on failure."""
    return contextlib.nullcontext() if verbose() else stderr_captured()


def capture_tensorflow_start_up() -> None:
    """TensorFlow's start-up lines are captured when it loads (nothing if it is already loaded)."""
    if "tensorflow" not in sys.modules and not any(isinstance(f, _QuietTensorFlowImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _QuietTensorFlowImport())


def show_tensorflow_start_up() -> None:
    """TensorFlow's start-up lines are shown after all (a script's --verbose)."""
    sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, _QuietTensorFlowImport)]


def user_wants_tensorflow_lines() -> bool:
    """True when the user set TF_CPP_MIN_LOG_LEVEL below errors-only (0: all, 1: warnings too)."""
    return os.environ.get(LOG_LEVEL_ENV, QUIET_LEVEL).strip() in ("0", "1")


def set_tensorflow_log_level(level: str = QUIET_LEVEL, override: bool = False) -> None:
    """TensorFlow's C++ log level (read once, when it loads): `level` unless the user set one, or
    `level` in any case with `override`."""
    if override:
        os.environ[LOG_LEVEL_ENV] = level
    else:
        os.environ.setdefault(LOG_LEVEL_ENV, level)


def quiet_tensorflow() -> None:
    """TensorFlow's C++ log level to errors unless the user has set one, and its start-up lines
    captured unless the user's level asks for them. Call before TensorFlow loads."""
    set_tensorflow_log_level()
    if not user_wants_tensorflow_lines():
        capture_tensorflow_start_up()
