"""The pipeline's worker process on the DirectRunner: Beam's own SDK harness, lighter.

`--direct_running_mode=multi_processing` starts each worker as `python -m
apache_beam.runners.worker.sdk_worker_main`, and importing it imports `apache_beam/__init__`, which
imports every connector Beam ships: two of them pull in large libraries that this pipeline never
uses, pyarrow (Parquet and Arrow batches, 43 MB resident) and pymongo (MongoDB, 28 MB). Beam imports
both inside `try: ... except ImportError`, so this module marks them as not installed and then runs
the same harness: a worker starts at about 95 MB instead of 130 MB. `beam_pipeline.py` starts its
DirectRunner workers with it; on Dataflow, Flink or Spark the runner's own harness runs (a worker
image without pyarrow and pymongo saves the same there).

    python -m data_prep.beam.worker    # what the DirectRunner runs; the runner sets its environment
"""

from __future__ import annotations

import logging
import os
import sys

# Connectors this pipeline does not use; Beam's guarded imports skip them.
UNUSED_MODULES = ("pyarrow", "pymongo")


def hide_unused_modules() -> None:
    """Makes `import pyarrow` and `import pymongo` fail in this process, as if not installed."""
    for name in UNUSED_MODULES:
        sys.modules.setdefault(name, None)  # None in sys.modules: `import name` raises ImportError
    # Beam notes the missing MongoDB client as a warning at import: expected here.
    logging.getLogger("apache_beam.io.mongodbio").setLevel(logging.ERROR)


def quiet_unless_verbose() -> None:
    """Sends this worker's stderr (Beam's start-up log, a retried bundle's traceback) to /dev/null
    unless the launcher was given --verbose (ALBERT_TF_VERBOSE=1): the launcher reports the
    worker's error itself, once, as one line, and the traceback of a bug of ours with it."""
    from albert_tf.utils.quiet import verbose

    if not verbose():
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 2)
        os.close(devnull)


def main(argv: list[str]) -> None:
    quiet_unless_verbose()
    hide_unused_modules()
    from apache_beam.runners.worker import sdk_worker_main

    sdk_worker_main.main(argv)


if __name__ == "__main__":
    main(sys.argv)
