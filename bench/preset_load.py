"""Loading a model by URL against loading its preset folder: the cache's cost.

Makes a tarball in the release's layout (TF1 names, albert_config.json, 30k-clean.model) of a model
of `--size` with random weights, serves it on 127.0.0.1, and times in one process:
- `first`: the first load by URL (download, unpack, convert into a fresh cache, build, load);
- `folder`: `from_preset(<the cached preset folder>)`, the folder loaded directly;
- `cached`: `from_preset(<url>)` again, which the cache serves (no download, no conversion).
`folder` and `cached` alternate within each repeat, each going first every other repeat, so that
load on the machine hits both alike; the
table gives medians and the ratio cached / folder. Goal: at most 1.2.

    python bench/preset_load.py [--size albert_base_v2] [--model encoder] [--repeats 7]
"""

import argparse
import http.server
import os
import pathlib
import statistics
import tempfile
import threading
import time

import harness

harness.quiet_tensorflow("3")

import keras  # noqa: E402
import numpy as np  # noqa: E402

from albert_tf import AlbertConfig, AlbertEncoder, AlbertPretrainer  # noqa: E402
from albert_tf.checkpoints.names import encoder_weight_names, head_weight_names  # noqa: E402
from albert_tf.presets.convert import write_tf1_release  # noqa: E402

VOCAB = harness.REPO / "tests" / "fixtures" / "data_prep" / "tiny_vocab.model"


def release_tarball(config: AlbertConfig, folder: pathlib.Path) -> pathlib.Path:
    import tarfile

    rng = np.random.default_rng(0)
    names = encoder_weight_names(config, "tf1") + head_weight_names(config, "tf1")
    release = write_tf1_release(folder / "albert_bench", config,
                                {n.ours: rng.normal(0, 0.02, n.shape).astype(np.float32) for n in names}, VOCAB)
    tarball = folder / "albert_bench.tar.gz"
    with tarfile.open(tarball, "w:gz") as tar:
        tar.add(release, arcname="albert_bench")
    return tarball


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", default="albert_base_v2", help="AlbertConfig.named size of the model")
    parser.add_argument("--model", choices=("encoder", "pretrainer"), default="encoder")
    harness.add_repeats(parser, 7)
    args = parser.parse_args()
    model_class = AlbertEncoder if args.model == "encoder" else AlbertPretrainer
    # The tiny vocabulary's pieces index any table; the released size keeps its 30,000 rows.
    config = AlbertConfig.named(args.size)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        tarball = release_tarball(config, tmp / "release")
        os.environ["ALBERT_TF_HOME"] = str(tmp / "cache")
        size_mb = tarball.stat().st_size / 1e6

        class Quiet(http.server.SimpleHTTPRequestHandler):
            def __init__(self, *a, **k):
                super().__init__(*a, directory=str(tarball.parent), **k)

            def log_message(self, *args):
                pass

        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        url = f"http://127.0.0.1:{server.server_port}/{tarball.name}"
        from albert_tf.presets.sources import resolve

        start = time.perf_counter()
        model_class.from_preset(url)
        first = time.perf_counter() - start
        folder = resolve(url, progress=False)
        times = {"folder": [], "cached": []}
        pair = [("folder", folder), ("cached", url)]
        for repeat in range(args.repeats):
            for name, source in pair if repeat % 2 == 0 else pair[::-1]:  # neither always goes first
                keras.backend.clear_session()
                start = time.perf_counter()
                model_class.from_preset(source)
                times[name].append(time.perf_counter() - start)
        server.shutdown()
    folder_s, cached_s = statistics.median(times["folder"]), statistics.median(times["cached"])
    print(f"{args.model} of {args.size}, {args.repeats} repeats, medians (tarball {size_mb:.1f} MB)")
    harness.print_table(["load", "seconds"], [
        ["first load by URL (download, unpack, convert, load)", f"{first:.2f}"],
        ["preset folder, directly", f"{folder_s:.3f}"], ["by URL again, from the cache", f"{cached_s:.3f}"],
        ["cached / folder", f"{cached_s / folder_s:.3f}"]])


if __name__ == "__main__":
    main()
