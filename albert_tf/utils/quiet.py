"""TensorFlow's C++ start-up lines kept from the user: one place, for the library and the CLIs.

When TensorFlow loads, and when it first lists its devices, its C++ code writes straight to file
descriptor 2: "All log messages before absl::InitializeLog()", "Could not find cuda drivers",
the CPU-feature (oneDNN, AVX) notes, and "failed call to cuInit" on a machine without a GPU. Most
are written before TensorFlow reads TF_CPP_MIN_LOG_LEVEL, and cuInit's is an error-level line, so
the level alone cannot silence them: they are captured instead, and shown if the import fails.

Importing `albert_tf` calls `quiet_tensorflow()` (it loads no TensorFlow itself). A user who set
TF_CPP_MIN_LOG_LEVEL to 0 or 1 asked for TensorFlow's lines and gets them.

The same hook loads TensorFlow settled in this package's own processes (`settle_tensorflow_load`:
the console scripts, the test processes): Python's garbage collector is paused while TensorFlow and
Keras load (over 600,000 objects, which its full collections scan again and again: 1.5 s of an 8 s
import on the 2-core machine), and what they loaded is then frozen out of later collections
(`gc.freeze`), which also keeps a forked child from copying the pages those objects live on. Not
in a user's process that merely imports the library: freezing would take the user's objects out of
collection too.
"""

from __future__ import annotations

import contextlib
import gc
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


class _TensorFlowImport(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports `tensorflow`, whenever it is first needed: with its start-up lines captured and its
    devices listed then (the cuInit line) while they still are (`quiet`), and with the garbage
    collector paused while it loads and what it loaded frozen after (`settled`)."""

    module = "tensorflow"
    quiet = False
    settled = False

    def find_spec(self, fullname, path=None, target=None):
        if fullname != self.module:
            return None
        sys.meta_path.remove(self)  # once: the real finders do the work
        spec = importlib.util.find_spec(fullname)
        if spec is not None and spec.loader is not None:
            self._loader, spec.loader = spec.loader, self
        return spec

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        with _collector_paused_then_frozen() if self.settled else contextlib.nullcontext():
            with stderr_captured() if self.quiet else contextlib.nullcontext():
                self._loader.exec_module(module)
                if self.quiet:
                    module.config.list_physical_devices()


@contextlib.contextmanager
def _collector_paused_then_frozen():
    """No garbage collection for the duration; what exists at its end (the garbage made meanwhile too:
    a fixed cost, paid once) frozen out of later collections."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if collecting:
            gc.enable()


def _tensorflow_import() -> _TensorFlowImport | None:
    """The hook that will load TensorFlow, installed now if need be; None once TensorFlow is loaded."""
    if "tensorflow" in sys.modules:
        return None
    for finder in sys.meta_path:
        if isinstance(finder, _TensorFlowImport):
            return finder
    hook = _TensorFlowImport()
    sys.meta_path.insert(0, hook)
    return hook


def cpp_lines_kept():
    """Around TensorFlow's C++ code that writes notes straight to file descriptor 2: the start of
    its devices (the strategy: "failed call to cuInit" on a machine without a GPU), LiteRT's
    interpreter ("Created TensorFlow Lite XNNPACK delegate") and the LiteRT converter's quantizer
    ("fully_quantize: 0, inference_type: 6, ..."). Kept from the user unless --verbose; shown on failure."""
    return contextlib.nullcontext() if verbose() else stderr_captured()


def capture_tensorflow_start_up() -> None:
    """TensorFlow's start-up lines are captured when it loads (nothing if it is already loaded)."""
    hook = _tensorflow_import()
    if hook is not None:
        hook.quiet = True


def show_tensorflow_start_up() -> None:
    """TensorFlow's start-up lines are shown after all (a script's --verbose)."""
    hook = _tensorflow_import()
    if hook is not None:
        hook.quiet = False


def settle_tensorflow_load() -> None:
    """In a process of this package's own (a console script, a test process; not a user's, see the
    module's docstring): TensorFlow loads with the garbage collector paused, and what it loaded is
    frozen out of later collections (nothing if it is already loaded)."""
    hook = _tensorflow_import()
    if hook is not None:
        hook.settled = True


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
