"""`python -m tests.data_prep.paused_generation ARGS...`: `albert-create-pretraining-data ARGS...`
whose worker processes each stop partway through their input, for a test to kill the parent while
every worker is known to be midway (tests/data_prep/test_create_pretraining_data.py's SIGKILL test).

The folder named by PAUSED_ENV gets one empty file per worker, named by its pid, once the worker
has read its first document; the worker then waits until a file `go` is there, and goes on. The
workers are children of a fork server (data_prep.shards._worker_context), which imports this module
(its preload, widened here) and so runs the document reader patched below; the parent does not.
"""

import os
import pathlib
import runpy
import sys
import time

PAUSED_ENV = "ALBERT_TEST_PAUSED_DIR"


def _pausing_workers() -> None:
    from data_prep import shards

    documents = shards.iter_documents

    def pausing(*args, **kwargs):
        paused = pathlib.Path(os.environ[PAUSED_ENV])
        for number, document in enumerate(documents(*args, **kwargs)):
            if number == 1:
                (paused / str(os.getpid())).write_text("")
                while not (paused / "go").exists():
                    time.sleep(0.01)
            yield document

    shards.iter_documents = pausing


def _main(argv: list[str]) -> None:
    from data_prep import shards

    worker_context = shards._worker_context

    def with_this_module():
        context = worker_context()
        if context.get_start_method() == "forkserver":
            context.set_forkserver_preload([shards.__name__, __spec__.name])
        return context  # (spawned workers import this module as __mp_main__)

    shards._worker_context = with_this_module
    sys.argv = ["albert-create-pretraining-data", *argv]
    runpy.run_module("data_prep.create_pretraining_data", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    _main(sys.argv[1:])
elif os.environ.get(PAUSED_ENV):  # a worker's fork server, or a spawned worker (not a test importing PAUSED_ENV)
    _pausing_workers()
