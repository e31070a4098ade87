"""Serving cost of in-graph tokenization: `serve_text` against `serving_default` on the same model.

Exports albert base (random weights) with the released 30k-clean.model inside, reloads it as a
server would (tf.saved_model.load, signatures only), and times batch 1 (latency) and batch 32
(throughput) at sequence length 128 on raw text and on the same text tokenized beforehand in
Python. The two kinds of call alternate within each repeat, so load from other processes hits both
alike; the table gives medians. Goal: tokenization adds under 10% at batch 32.

    python bench/serving.py [--repeats 10] [--batch_sizes 1,32] [--preset albert_base_v2]
"""

import os
import pathlib
import statistics
import tempfile
import time

from absl import app, flags

REPO = pathlib.Path(__file__).resolve().parents[1]

FLAGS = flags.FLAGS
flags.DEFINE_string("preset", "albert_base_v2", "Named config (albert_tf.PRESETS) to export with random weights.")
flags.DEFINE_string("spm_model_file", str(REPO.parent / "shared" / "data" / "albert" / "30k-clean.model"),
                    "SentencePiece model to put inside the SavedModel.")
CORPUS = REPO.parent / "shared" / "data" / "corpus" / "wikitext-2-raw" / "wiki.valid.raw"
flags.DEFINE_string("corpus_file", str(CORPUS),
                    "Text whose paragraphs are served (long enough to fill the sequence).")
flags.DEFINE_integer("seq_length", 128, "max_seq_length of serve_text.")
flags.DEFINE_list("batch_sizes", ["1", "32"], "Batch sizes to time.")
flags.DEFINE_integer("repeats", 10, "Timed repeats per batch size (after 2 warm-up calls).")
flags.DEFINE_bool("pairs", False, "Serve sentence pairs instead of single segments.")


def _texts(path: str, count: int, pairs: bool) -> list[list[str]]:
    with open(path, encoding="utf-8") as f:
        paragraphs = [line.strip() for line in f if len(line.split()) > 110 and not line.startswith(" =")]
    if len(paragraphs) < 2 * count:
        paragraphs = (paragraphs * (2 * count // max(len(paragraphs), 1) + 1))
    if pairs:
        return [[paragraphs[2 * i], paragraphs[2 * i + 1]] for i in range(count)]
    return [[paragraphs[i]] for i in range(count)]


def _median_ms(times):
    return 1000 * statistics.median(times)


def main(argv):
    del argv
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import numpy as np
    import tensorflow as tf
    import tensorflow_text  # noqa: F401

    from albert_tf import AlbertConfig, AlbertEncoder
    from albert_tf.export import export_encoder
    from albert_tf.tokenizer import AlbertTokenizer

    config = AlbertConfig.from_preset(FLAGS.preset)
    encoder = AlbertEncoder(config)
    encoder.build()
    export_dir = tempfile.mkdtemp(prefix="albert_serving_bench_")
    started = time.perf_counter()
    export_encoder(encoder, export_dir, FLAGS.spm_model_file, FLAGS.seq_length)
    export_s = time.perf_counter() - started
    del encoder

    loaded = tf.saved_model.load(export_dir)
    serve_text = loaded.signatures["serve_text"]
    serve_ids = loaded.signatures["serving_default"]
    tokenize = loaded.signatures["tokenize"]
    python_tokenizer = AlbertTokenizer(FLAGS.spm_model_file)

    rows = []
    for batch_size in map(int, FLAGS.batch_sizes):
        texts = _texts(FLAGS.corpus_file, batch_size, FLAGS.pairs)
        text = tf.constant(texts)
        packed = [
            python_tokenizer.pack(*[python_tokenizer.encode(t) for t in row], max_seq_length=FLAGS.seq_length)
            for row in texts
        ]
        ids = {k: tf.constant(np.array([p[k] for p in packed], np.int32)) for k in packed[0]}
        real_tokens = int(ids["input_mask"].numpy().sum())
        # Same inputs both ways, so the difference is the tokenization.
        np.testing.assert_array_equal(tokenize(text=text)["input_ids"].numpy(), ids["input_ids"].numpy())

        calls = {
            "serve_text": lambda: serve_text(text=text)["pooled_output"].numpy(),
            "serving_default": lambda: serve_ids(**ids)["pooled_output"].numpy(),
            "tokenize only": lambda: tokenize(text=text)["input_ids"].numpy(),
        }
        times = {name: [] for name in calls}
        for repeat in range(FLAGS.repeats + 2):
            for name, call in calls.items():
                started = time.perf_counter()
                call()
                if repeat >= 2:
                    times[name].append(time.perf_counter() - started)
        text_ms, ids_ms = _median_ms(times["serve_text"]), _median_ms(times["serving_default"])
        # Each repeat's two calls ran back to back under about the same load: pair them.
        paired = statistics.median(t / i - 1 for t, i in zip(times["serve_text"], times["serving_default"]))
        rows.append((batch_size, real_tokens, text_ms, ids_ms, paired, _median_ms(times["tokenize only"])))

    print(f"{FLAGS.preset}, sequence {FLAGS.seq_length}, {'pairs' if FLAGS.pairs else 'single segments'}, "
          f"{FLAGS.repeats} repeats (medians), {os.cpu_count()} CPUs; export took {export_s:.0f} s")
    print()
    # "tokenize / model" is the robust figure on a shared machine: the difference of two medians of
    # long calls moves with other processes' load by more than the tokenization costs.
    print("| batch | real tokens | serve_text ms | serving_default ms | difference of medians "
          "| paired difference | tokenize alone ms | tokenize / model | serve_text seq/s | serving_default seq/s |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for batch_size, tokens, text_ms, ids_ms, paired, tok_ms in rows:
        print(f"| {batch_size} | {tokens} | {text_ms:.1f} | {ids_ms:.1f} | {100 * (text_ms - ids_ms) / ids_ms:+.1f}% | "
              f"{100 * paired:+.1f}% | {tok_ms:.2f} | {100 * tok_ms / ids_ms:.2f}% | "
              f"{1000 * batch_size / text_ms:.2f} | "
              f"{1000 * batch_size / ids_ms:.2f} |")


if __name__ == "__main__":
    app.run(main)
