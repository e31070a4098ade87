"""Child Pythons that start with TensorFlow already loaded: one process per test worker loads it,
then forks a child for each command instead of the test starting a new interpreter that spends
seconds loading TensorFlow (issue 41: about 5 s of CPU a child, 90 children in the suite).

The child is a real process (its own pid, signals, exit status, the caller's stdin, stdout and
stderr, environment and folder) that runs a command as `python ARGS...` would:
`-m MODULE ARG...`, `-c CODE ARG...`, `SCRIPT ARG...`, or a console script's name (`albert-pretrain
ARG...`, its entry point called as the installed script calls it). What it does not repeat is the
interpreter's start and the import of TensorFlow and of the package's libraries, so a test about
those (the quiet start-up, the installed scripts, the README's commands) starts a real process as
before.

    WarmPopen(args, ...)          subprocess.Popen's interface (the subset the tests use), args
                                  as after `python`: ["-m", "albert_tf.cli.pretrain", ...]
    run(args, ...)                subprocess.run's
    python tests/warm_python.py ARGS...
                                  a command line (bash) that runs ARGS in a warm child with its own
                                  stdin, stdout and stderr and exits as the child did
    command_folder(folder, tools) a folder of executables named as console scripts that run so,
                                  for a shell's or a script's PATH

The warm process (`serve`) is started by the session fixture `warm_python` (tests/conftest.py),
which names its socket in ALBERT_TEST_WARM_PYTHON. This module imports only the standard library
until it serves.
"""

from __future__ import annotations

import io
import json
import os
import pathlib
import selectors
import shlex
import signal
import socket
import subprocess
import sys
import threading

SOCKET_ENV = "ALBERT_TEST_WARM_PYTHON"
# "PACKAGE.*": the package's library modules, not those run as scripts (runpy would warn that a module run with
# `-m` was in sys.modules already) nor data_prep.beam (Apache Beam, an optional extra, is heavy to load). A child
# then does not load them again as it runs (all of them take 0.39 s of CPU once TensorFlow is loaded, measured on
# 2026-11-29; the suite forks about 90 children).
PRELOAD = ("albert_tf", "tensorflow", "keras", "tensorflow_text", "sentencepiece", "albert_tf.*", "finetune.*",
           "data_prep.*")
_NOT_PRELOADED = ("data_prep.beam",)
# What TensorFlow and Keras read once, as they load: a child whose environment holds other values at
# its end (its own, or what the command set before it would have loaded TensorFlow: albert-pretrain
# --strategy=multi_worker sets the log level to 3) did not run as a new process would, and fails.
# Values that load the same are the same (`as_loaded`): a caller's KERAS_BACKEND=tensorflow, or a
# CUDA_VISIBLE_DEVICES on a machine without NVIDIA devices, beside a child's environment without it.
LOAD_TIME_ENV = ("TF_CPP_MIN_LOG_LEVEL", "TF_ENABLE_ONEDNN_OPTS", "KERAS_BACKEND", "CUDA_VISIBLE_DEVICES")
MISMATCH_EXIT = 70
_loaded_with: dict[str, str | None] = {}
_MESSAGE_BYTES = 1 << 20
_FORWARDED = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2}
# Reset in a child to what a new process has.
_RESET = (signal.SIGTERM, signal.SIGCHLD, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2)

PIPE, DEVNULL = subprocess.PIPE, subprocess.DEVNULL


# ---- the warm process ----


def as_loaded(name: str, value: str | None) -> str | None:
    """What a process whose environment holds `value` of `name` (None: unset) loads TensorFlow or
    Keras with, for comparing two environments: Keras 3 takes the tensorflow backend when none is
    named; CUDA_VISIBLE_DEVICES chooses among NVIDIA devices, so where there are none (no
    /dev/nvidia<N>) every value loads the same."""
    import glob

    if name == "KERAS_BACKEND":
        return value or "tensorflow"
    if name == "CUDA_VISIBLE_DEVICES" and not glob.glob("/dev/nvidia[0-9]*"):
        return None
    return value


def load_time_env() -> dict[str, str]:
    """This process's values of LOAD_TIME_ENV (those set): what an environment a test makes from
    nothing carries, so that its child loads TensorFlow as the warm process did, whatever the
    caller's shell exported (TF_ENABLE_ONEDNN_OPTS=0, ...)."""
    return {name: os.environ[name] for name in LOAD_TIME_ENV if name in os.environ}


def serve(path: str, preload=PRELOAD) -> None:
    """Loads `preload`, then forks a child for each request on the unix socket `path`; tells each
    requester its child's pid and, when it ends, its exit status; a requester that hangs up has its
    child killed."""
    import gc
    import importlib

    # A fork server's collector, as CPython's gc.freeze documents: paused while the modules load, and
    # what they made frozen before the first fork, so that no child's collection scans those objects
    # or copies the pages they live on. (albert_tf.utils.quiet's settled load does this for TensorFlow
    # alone, and the fresh_process fixture's warm Python must not load the package to ask for it.)
    gc.disable()
    for name in preload:
        for module in _library_modules(name[:-2]) if name.endswith(".*") else [name]:
            importlib.import_module(module)
    gc.freeze()
    gc.enable()
    _loaded_with.update({name: os.environ.get(name) for name in LOAD_TIME_ENV})
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    listener.bind(path)
    listener.listen(64)
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ)
    children: dict[int, socket.socket] = {}
    print("ready", flush=True)
    while True:
        for key, _ in selector.select(timeout=0.05):
            if key.fileobj is listener:
                conn, _ = listener.accept()
                message, fds, _, _ = socket.recv_fds(conn, _MESSAGE_BYTES, 3)
                if not message:  # the fixture's goodbye
                    return
                # Signals sent to the child before it has set itself up wait until it has.
                signal.pthread_sigmask(signal.SIG_BLOCK, _FORWARDED)
                pid = os.fork()
                if pid == 0:
                    try:
                        listener.close()
                        conn.close()
                        for other in children.values():
                            other.close()
                        _child(json.loads(message), fds)
                    finally:
                        os._exit(70)  # not reached unless setting up the child failed
                signal.pthread_sigmask(signal.SIG_UNBLOCK, _FORWARDED)
                for fd in fds:
                    os.close(fd)
                children[pid] = conn
                selector.register(conn, selectors.EVENT_READ, pid)
                conn.send(f"{pid}".encode())
            elif not key.fileobj.recv(16):  # the requester is gone: so is its child
                _kill(key.data)
                selector.unregister(key.fileobj)
        while children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            conn = children.pop(pid)
            try:
                selector.unregister(conn)
            except KeyError:
                pass
            try:
                conn.send(f"{os.waitstatus_to_exitcode(status)}".encode())
            except OSError:
                pass
            conn.close()


def _library_modules(package: str) -> list[str]:
    """The modules of `package` that PRELOAD's "PACKAGE.*" names."""
    import importlib.util
    import pkgutil

    modules = []
    for module in pkgutil.walk_packages(importlib.import_module(package).__path__, f"{package}."):
        if module.name.startswith(_NOT_PRELOADED):
            continue
        source = pathlib.Path(importlib.util.find_spec(module.name).origin).read_text(encoding="utf-8")
        if module.ispkg or '__name__ == "__main__"' not in source:
            modules.append(module.name)
    return modules


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _child(request: dict, fds: list[int]) -> None:
    """In the forked child: the requester's stdio, folder and environment, then the command as
    `python ARGS...` runs it; exits with its status."""
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False), encoding="utf-8")
    sys.stdout = io.TextIOWrapper(io.BufferedWriter(io.FileIO(1, "w", closefd=False)), encoding="utf-8")
    sys.stderr = io.TextIOWrapper(io.BufferedWriter(io.FileIO(2, "w", closefd=False)), encoding="utf-8",
                                  errors="backslashreplace", line_buffering=True)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    os.umask(request["umask"])
    # Python's own start in the foreground: SIGPIPE and SIGXFSZ ignored (kept from the warm
    # process), SIGINT its KeyboardInterrupt (whether or not the caller ignores it), the rest the
    # system's default but where the requester ignores them (under nohup, SIGHUP), as a process it
    # started would inherit.
    for number in _RESET:
        signal.signal(number, signal.SIG_IGN if number in request["ignored"] else signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    code = 0
    try:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _FORWARDED)  # (blocked by the warm process to here)
        _run_command(request["args"])
    except SystemExit as exit_:
        code = _exit_code(exit_.code)
    except KeyboardInterrupt as error:
        _print_traceback(error)
        code = -signal.SIGINT
    except BaseException as error:
        _print_traceback(error)
        code = 1
    try:
        import atexit

        atexit._run_exitfuncs()  # what the interpreter runs at its exit
        changed = [f"{name}={os.environ.get(name)!r} (loaded with {value!r})" for name, value in _loaded_with.items()
                   if as_loaded(name, os.environ.get(name)) != as_loaded(name, value)]
        if changed:
            print(f"warm_python: this command ran with {', '.join(changed)}, which TensorFlow reads as it "
                  "loads: run it in a new process, or in a warm Python started with that environment",
                  file=sys.stderr)
            code = MISMATCH_EXIT
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
    if code < 0:  # ended by a signal, as Python is by an uncaught KeyboardInterrupt
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    os._exit(code)


def _print_traceback(error: BaseException) -> None:
    """The traceback Python would print, without this module's own frames."""
    import traceback

    tb = error.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename == __file__:
        tb = tb.tb_next
    traceback.print_exception(type(error), error, tb)


def _exit_code(code) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def _run_command(args: list[str]) -> None:
    import runpy

    extra = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if args[0] == "-m":
        sys.argv = [args[1], *args[2:]]
        sys.path[:0] = [os.getcwd(), *extra]
        runpy.run_module(args[1], run_name="__main__", alter_sys=True)
    elif args[0] == "-c":
        import types

        sys.argv = ["-c", *args[2:]]
        sys.path[:0] = ["", *extra]
        main = sys.modules["__main__"] = types.ModuleType("__main__")
        exec(compile(args[1], "<string>", "exec"), main.__dict__)
    elif args[0].endswith(".py"):
        sys.argv = list(args)
        sys.path[:0] = [str(pathlib.Path(args[0]).resolve().parent), *extra]
        runpy.run_path(args[0], run_name="__main__")
    else:  # a console script: its entry point, as the installed script calls it
        from importlib.metadata import entry_points

        (entry,) = entry_points(group="console_scripts", name=args[0])
        sys.argv = list(args)
        sys.path[:0] = extra
        sys.exit(entry.load()())


# ---- the test's side ----


class WarmPopen:
    """subprocess.Popen's interface for a warm child (the subset the tests use): `args` as after
    `python`; stdin/stdout/stderr None (this process's), PIPE, DEVNULL or a file; `text` for str."""

    def __init__(self, args, *, cwd=None, env=None, stdin=None, stdout=None, stderr=None, text=False, warm=None):
        self.args = [str(a) for a in args]
        self.returncode = None
        ends, self._theirs = [], []
        for number, (wanted, mode) in enumerate(((stdin, "w"), (stdout, "r"), (stderr, "r"))):
            ends.append(self._their_end(number, wanted, mode, text))
        self.stdin, self.stdout, self.stderr = ends
        self._conn = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._conn.connect(warm or os.environ[SOCKET_ENV])
        umask = os.umask(0)
        os.umask(umask)
        request = {"args": self.args, "cwd": os.path.abspath(cwd or os.getcwd()),
                   "env": dict(os.environ if env is None else env), "umask": umask,
                   # A new process keeps the signals its parent ignores (nohup's SIGHUP, ...).
                   "ignored": [int(n) for n in _RESET if signal.getsignal(n) == signal.SIG_IGN]}
        socket.send_fds(self._conn, [json.dumps(request).encode()], self._theirs)
        for fd in self._theirs:
            if fd > 2:
                os.close(fd)
        self.pid = int(self._conn.recv(64))

    def _their_end(self, number, wanted, mode, text):
        """The file descriptor the child gets as `number`, and this side's end of a pipe."""
        if wanted is None:
            self._theirs.append(number)
            return None
        if wanted == DEVNULL:
            self._theirs.append(os.open(os.devnull, os.O_RDWR))
            return None
        if wanted == PIPE:
            read, write = os.pipe()
            mine, theirs = (write, read) if mode == "w" else (read, write)
            self._theirs.append(theirs)
            return open(mine, mode + ("" if text else "b"), encoding="utf-8" if text else None)
        self._theirs.append(os.dup(wanted if isinstance(wanted, int) else wanted.fileno()))
        return None

    def poll(self):
        if self.returncode is None:
            ready, _, _ = _select(self._conn, 0)
            if ready:
                self._status()
        return self.returncode

    def wait(self, timeout=None):
        if self.returncode is None:
            ready, _, _ = _select(self._conn, timeout)
            if not ready:
                raise subprocess.TimeoutExpired(self.args, timeout)
            self._status()
        return self.returncode

    def _status(self):
        reply = self._conn.recv(64)
        self.returncode = int(reply) if reply else -signal.SIGKILL  # the warm process died
        self._conn.close()

    def communicate(self, input=None, timeout=None):
        """What the child wrote to the pipes, once it has ended (read as it writes)."""
        if self.stdin is not None:
            if input:
                self.stdin.write(input)
            self.stdin.close()
        results = {}
        readers = [threading.Thread(target=lambda n=n, f=f: results.__setitem__(n, f.read()), daemon=True)
                   for n, f in (("stdout", self.stdout), ("stderr", self.stderr)) if f is not None]
        for reader in readers:
            reader.start()
        self.wait(timeout)  # subprocess.TimeoutExpired past it, the child still running
        for reader in readers:
            reader.join()
        for f in (self.stdout, self.stderr):
            if f is not None:
                f.close()
        return results.get("stdout"), results.get("stderr")

    def send_signal(self, number):
        if self.returncode is None:
            os.kill(self.pid, number)

    def terminate(self):
        self.send_signal(signal.SIGTERM)

    def kill(self):
        self.send_signal(signal.SIGKILL)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.returncode is None:
            self.kill()
            self.wait()


def _select(conn, timeout):
    import select

    return select.select([conn], [], [], timeout)


def run(args, *, cwd=None, env=None, capture_output=False, text=False, timeout=None, input=None, warm=None):
    """subprocess.run's interface for a warm child; past `timeout` the child is killed and
    subprocess.TimeoutExpired raised."""
    pipe = PIPE if capture_output else None
    process = WarmPopen(args, cwd=cwd, env=env, stdin=PIPE if input is not None else DEVNULL, stdout=pipe,
                        stderr=pipe, text=text, warm=warm)
    try:
        out, err = process.communicate(input, timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        raise
    return subprocess.CompletedProcess(process.args, process.returncode, out, err)


def console_scripts() -> list[str]:
    """The package's console scripts (`albert-...`), as installed."""
    from importlib.metadata import entry_points

    return sorted(entry.name for entry in entry_points(group="console_scripts") if entry.name.startswith("albert-"))


def command_folder(folder: pathlib.Path, tools, extra_flags=None) -> pathlib.Path:
    """`folder`, made, holding an executable named as each console script in `tools` that runs it in
    a warm child as `python tests/warm_python.py TOOL ARGS...` does, with `extra_flags[tool]` after
    the command line's own flags. Put first on PATH (of an environment that names the socket:
    `WarmPython(shell=True)`), a shell's or a script's commands run warm, the shell's stdio, folder
    and environment theirs."""
    folder.mkdir(parents=True, exist_ok=True)
    for tool in tools:
        shim = folder / tool
        command = shlex.join([sys.executable, str(pathlib.Path(__file__).resolve()), tool])
        extra = shlex.join((extra_flags or {}).get(tool, []))
        shim.write_text(f'#!/bin/sh\nexec {command} "$@" {extra}\n')
        shim.chmod(0o755)
    return folder


class WarmPython:
    """A warm process (the `warm_python` fixture: one per test worker), started in `folder` with
    `env` (this process's environment if None: what TensorFlow reads as it loads) having imported
    `preload`, and its children: `popen` and `run` as subprocess's, `args` as after `python`, the
    children's environment `env` unless given another. With `shell`, its socket is named in this
    process's environment (ALBERT_TEST_WARM_PYTHON), for a command line's
    `python tests/warm_python.py ARGS...`."""

    def __init__(self, folder: pathlib.Path, env: dict | None = None, shell: bool = False, preload=PRELOAD):
        self.socket = str(folder / "warm.sock")
        self._folder = folder
        self._env = env
        self._shell = shell
        self._log = open(folder / "warm.stderr", "w")
        # The modules this process imports (a checkout other than the installed one included).
        self._process = subprocess.Popen(
            [sys.executable, __file__, "serve", self.socket, json.dumps(sys.path), json.dumps(list(preload))],
            cwd=folder, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=self._log, text=True, env=env)
        if self._process.stdout.readline().strip() != "ready":
            raise RuntimeError(f"the warm Python did not start: {(folder / 'warm.stderr').read_text()[-3000:]}")
        if shell:
            os.environ[SOCKET_ENV] = self.socket

    def popen(self, args, **kwargs) -> WarmPopen:
        kwargs.setdefault("env", self._env)
        return WarmPopen(args, warm=self.socket, **kwargs)

    def run(self, args, **kwargs) -> subprocess.CompletedProcess:
        kwargs.setdefault("env", self._env)
        return run(args, warm=self.socket, **kwargs)

    def script(self, path, *argv, timeout: float = 600) -> str:
        """What `python PATH ARGV...` printed, run in the warm process's folder (outside the
        repository); a script that fails or runs past `timeout` seconds (it is then killed) fails
        the test, with its stderr."""
        try:
            ran = self.run([path, *argv], cwd=self._folder, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"{path} did not end in {timeout} s") from None
        assert ran.returncode == 0, f"{path}: exit status {ran.returncode}\n{ran.stderr[-3000:]}"
        return ran.stdout

    def close(self):
        if self._shell:
            os.environ.pop(SOCKET_ENV, None)
        if self._process.poll() is None:
            conn = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            conn.connect(self.socket)
            conn.send(b"")
            conn.close()
            try:
                self._process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        self._log.close()


def _main(argv: list[str]) -> int:
    """`serve SOCKET`, or a command line run in a warm child that exits as the child did; signals
    this process gets (TERM, INT, HUP, USR1, USR2) are passed on to the child."""
    if argv[:1] == ["serve"]:
        sys.path[:] = json.loads(argv[2])  # the test process's; each command puts its own first
        serve(argv[1], json.loads(argv[3]))
        return 0
    child = WarmPopen(argv)
    for number in _FORWARDED:
        signal.signal(number, lambda n, _: child.send_signal(n))
    code = child.wait()
    if code < 0:
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    return code


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
