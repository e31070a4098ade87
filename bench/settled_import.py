"""What loading TensorFlow settled saves a console script (albert_tf.utils.quiet.settle_tensorflow_load:
the garbage collector paused while TensorFlow loads, what it loaded frozen after), side by side with
the same process loading it as Python does by default (python bench/settled_import.py [--repeats 5]).

Each figure is one new Python, started in turn with one of the other kind (which goes first
alternates), and measured from inside: its CPU seconds (user + system), the seconds Python's collector ran
(`gc.callbacks`), its peak resident memory. Two workloads:
- `import`: a console script's start (albert_tf.cli.entry_point imported), then `import tensorflow`;
- `glue run`: albert-finetune-glue on the tests' MRPC sample, a tiny model (tests/fixtures), four
  steps and the evaluation, no XLA: a short tool run, where start-up and tracing are most of it.
"default" is the same process with the hook's `settled` turned off before TensorFlow loads.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

import harness

CHILD = """
import gc, json, resource, sys, time
spent = [0.0, 0.0]
def collector(phase, info):
    if phase == "start":
        spent[1] = time.process_time()
    else:
        spent[0] += time.process_time() - spent[1]
gc.callbacks.append(collector)
sys.argv = {argv!r}
import albert_tf.cli.entry_point
from albert_tf.utils.quiet import _TensorFlowImport
for finder in sys.meta_path:
    if isinstance(finder, _TensorFlowImport):
        finder.settled = {settled!r}
{work}
usage = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({{"cpu": usage.ru_utime + usage.ru_stime, "gc": spent[0], "rss_mb": usage.ru_maxrss / 1024}}))
"""
IMPORT = "import tensorflow"
GLUE_RUN = ("from finetune.glue.cli import finetune\n"
            "finetune(sys.argv)")


def glue_argv(folder: str) -> list[str]:
    from tests.pretrained_runs import TINY_CONFIG, TINY_VOCAB  # the tests' tiny model and vocabulary

    os.makedirs(folder)
    config = f"{folder}/config.json"
    with open(config, "w") as f:
        json.dump(TINY_CONFIG, f)
    glue = harness.REPO / "tests" / "fixtures" / "data" / "glue"
    return ["albert-finetune-glue", "--task=MRPC", f"--data_dir={glue}", f"--output_dir={folder}/run",
            f"--albert_config_file={config}", f"--spm_model_file={TINY_VOCAB}", "--max_seq_length=32",
            "--do_train", "--do_eval", "--num_train_steps=4", "--train_batch_size=8", "--eval_batch_size=32",
            "--nojit_compile", "--noprogress_bar", "--noexport"]


def measure(work: str, argv: list[str], settled: bool) -> dict:
    code = CHILD.format(argv=argv, settled=settled, work=work)
    result = subprocess.run([sys.executable, "-c", code], cwd=harness.REPO, capture_output=True, text=True,
                            check=False)  # the entry point sets TensorFlow's log level, as in a script
    if result.returncode != 0:
        sys.exit(f"error: the {'settled' if settled else 'default'} child failed: {result.stderr[-2000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    harness.add_repeats(parser, default=5)
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for name, work, argv in (("import", IMPORT, ["albert-import"]), ("glue run", GLUE_RUN, None)):
            found = {True: [], False: []}
            for repeat in range(args.repeats):
                order = [True, False] if repeat % 2 else [False, True]
                for settled in order:
                    run_argv = argv or glue_argv(f"{folder}/{name.replace(' ', '_')}-{repeat}-{settled}")
                    found[settled].append(measure(work, run_argv, settled))
            medians = {s: harness.medians({k: [f[k] for f in found[s]] for k in ("cpu", "gc", "rss_mb")})
                       for s in found}
            for settled in (False, True):
                m = medians[settled]
                rows.append([name, "settled" if settled else "default", f"{m['cpu']:.2f}", f"{m['gc']:.2f}",
                             f"{m['rss_mb']:.0f}", f"{m['cpu'] / medians[False]['cpu']:.2f}"])
    harness.print_table(["workload", "load", "CPU s", "of it GC s", "peak RSS MB", "CPU vs default"], rows)


if __name__ == "__main__":
    main()
