"""Serving cost of in-graph tokenization: `serve_text` against `serving_default` on the same model.

Exports albert base (random weights) with the released 30k-clean.model inside, reloads it as a
server would (tf.saved_model.load, signatures only), and times batch 1 (latency) and batch 32
(throughput) at sequence length 128 on raw text and on the same text tokenized beforehand in
Python. The two kinds of call alternate within each repeat, so load from other processes hits both
alike; the table gives medians. Goal: tokenization adds under 10% at batch 32.

    python bench/serving.py [--repeats 10] [--batch_sizes 1,32] [--size albert_base_v2]

With `--padding`, it times instead what bucketed padding saves: the same model exported twice
with `max_seq_length` 512, once padding every request to 512 (`length_buckets=[512]`, what
`serve_text` did before buckets) and once to the smallest bucket that holds the batch (16, 32,
..., 512), both called with the same short sentences (`--sentence_words`, 20 by default),
alternating within each repeat; the table gives medians and the ratio. Goal: at least 5x at batch 1.

    python bench/serving.py --padding [--seq_length 512] [--sentence_words 20] [--batch_sizes 1,32]

With `--cold`, it times what a new server pays once: the export, and in a new process per call
(`--repeats` of each, alternating) loading the SavedModel and its first `serve_text` call against
its first `serving_default` call on the same text tokenized beforehand (the model alone); the first
call is where TensorFlow optimises the signature's graph. Goal: serve_text's first call within
1 s of serving_default's.

    python bench/serving.py --cold [--size albert_base_v2] [--repeats 5]
"""

import os
import statistics
import tempfile
import time

from absl import app, flags

import harness

FLAGS = flags.FLAGS
flags.DEFINE_string("size", "albert_base_v2", "Named size (AlbertConfig.named) to export with random weights.")
flags.DEFINE_string("spm_model_file", str(harness.spm_model()),
                    "SentencePiece model to put inside the SavedModel.")
CORPUS = harness.data_dir() / "corpus" / "wikitext-2-raw" / "wiki.valid.raw"
flags.DEFINE_string("corpus_file", str(CORPUS),
                    "Text whose paragraphs are served (long enough to fill the sequence).")
flags.DEFINE_integer("seq_length", 128, "max_seq_length of serve_text.")
flags.DEFINE_list("batch_sizes", ["1", "32"], "Batch sizes to time.")
flags.DEFINE_integer("repeats", 10, "Timed repeats per batch size (after 2 warm-up calls).")
flags.DEFINE_bool("pairs", False, "Serve sentence pairs instead of single segments.")
flags.DEFINE_bool("padding", False, "Compare serve_text padded to --seq_length with bucketed padding.")
flags.DEFINE_integer("sentence_words", 20, "Words per sentence served with --padding.")
flags.DEFINE_bool("cold", False, "Time the export, the load and the first call of serve_text and serving_default.")

# Run in a new Python by --cold: loads the SavedModel, then times one first call (argv: folder, signature).
COLD_CALL = """
import json, sys, time
started = time.perf_counter()
import tensorflow as tf, tensorflow_text
imported = time.perf_counter()
model = tf.saved_model.load(sys.argv[1])
loaded = time.perf_counter()
text = tf.constant([["A first sentence to serve.", "And the second one of the pair."]])
if sys.argv[2] == "serve_text":
    call = lambda: model.signatures["serve_text"](text=text)
else:
    ids = model.signatures["tokenize"](text=text)
    call = lambda: model.signatures["serving_default"](**ids)
first = time.perf_counter()
call()
second = time.perf_counter()
call()
print(json.dumps({"load": loaded - imported, "first": second - first, "next": time.perf_counter() - second}))
"""


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


def _sentences(path: str, count: int, words: int) -> list[str]:
    """`count` sentences of exactly `words` words: the first words of corpus paragraphs."""
    with open(path, encoding="utf-8") as f:
        paragraphs = [line.split() for line in f if len(line.split()) > words and not line.startswith(" =")]
    return [" ".join(paragraphs[i % len(paragraphs)][:words]) for i in range(count)]


def padding_main():
    """Bucketed against padded-to-max_seq_length serve_text, one model, alternating calls."""
    import numpy as np
    import tensorflow as tf
    import tensorflow_text  # noqa: F401

    from albert_tf import AlbertConfig, AlbertEncoder
    from albert_tf.serving.export import export_encoder
    from albert_tf.tokenizers.length_buckets import bucket_lengths

    config = AlbertConfig.named(FLAGS.size)
    encoder = AlbertEncoder(config)
    encoder.build()
    root = tempfile.mkdtemp(prefix="albert_serving_padding_")
    variants = {"padded": [FLAGS.seq_length], "bucketed": None}
    loaded = {}
    for name, buckets in variants.items():
        path = export_encoder(encoder, os.path.join(root, name), FLAGS.spm_model_file, FLAGS.seq_length,
                              length_buckets=buckets)
        loaded[name] = tf.saved_model.load(path)
    del encoder
    rows = []
    for batch_size in map(int, FLAGS.batch_sizes):
        # A flat batch, as a TF Serving REST call sends it.
        text = tf.constant(_sentences(FLAGS.corpus_file, batch_size, FLAGS.sentence_words))
        fed = loaded["bucketed"].signatures["tokenize"](text=text)
        outputs = {name: m.signatures["serve_text"](text=text) for name, m in loaded.items()}
        difference = float(np.abs(outputs["bucketed"]["pooled_output"].numpy()
                                  - outputs["padded"]["pooled_output"].numpy()).max())
        times = {name: [] for name in loaded}
        for repeat in range(FLAGS.repeats + 2):
            for name, m in loaded.items():
                started = time.perf_counter()
                m.signatures["serve_text"](text=text)["pooled_output"].numpy()
                if repeat >= 2:
                    times[name].append(time.perf_counter() - started)
        paired = statistics.median(p / b for p, b in zip(times["padded"], times["bucketed"]))
        rows.append((batch_size, int(fed["input_mask"].numpy().sum(axis=1).max()), fed["input_ids"].shape[1],
                     _median_ms(times["padded"]), _median_ms(times["bucketed"]), paired, difference))
    print(f"{FLAGS.size}, serve_text, max_seq_length {FLAGS.seq_length} (buckets "
          f"{', '.join(map(str, bucket_lengths(FLAGS.seq_length)))}), sentences of {FLAGS.sentence_words} words, "
          f"{FLAGS.repeats} repeats (medians), {os.cpu_count()} CPUs")
    print()
    print("| batch | longest row | bucket | padded to max ms | bucketed ms | speed-up (medians) "
          "| speed-up (paired) | max pooled difference |")
    print("|---|---|---|---|---|---|---|---|")
    for batch_size, longest, bucket, padded_ms, bucketed_ms, paired, difference in rows:
        print(f"| {batch_size} | {longest} | {bucket} | {padded_ms:.1f} | {bucketed_ms:.1f} | "
              f"{padded_ms / bucketed_ms:.1f}x | {paired:.1f}x | {difference:.1e} |")


def cold_main():
    """The export, then per signature its load and first call in new processes, alternating."""
    import json
    import subprocess
    import sys

    from albert_tf import AlbertConfig, AlbertEncoder
    from albert_tf.serving.export import export_encoder

    encoder = AlbertEncoder(AlbertConfig.named(FLAGS.size))
    encoder.build()
    export_dir = os.path.join(tempfile.mkdtemp(prefix="albert_serving_cold_"), "export")
    started = time.perf_counter()
    export_encoder(encoder, export_dir, FLAGS.spm_model_file, FLAGS.seq_length)
    export_s = time.perf_counter() - started
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    runs = {"serve_text": [], "serving_default": []}
    for _ in range(FLAGS.repeats):
        for signature, times in runs.items():
            result = subprocess.run([sys.executable, "-c", COLD_CALL, export_dir, signature], env=env,
                                    capture_output=True, text=True, check=True)
            times.append(json.loads(result.stdout.strip().splitlines()[-1]))
    print(f"{FLAGS.size}, max_seq_length {FLAGS.seq_length}, a pair of sentences, {FLAGS.repeats} new processes "
          f"per signature (medians), {os.cpu_count()} CPUs; export took {export_s:.1f} s")
    print()
    print("| signature | load s | first call s | next call ms |")
    print("|---|---|---|---|")
    for signature, times in runs.items():
        load, first, after = (statistics.median(t[key] for t in times) for key in ("load", "first", "next"))
        print(f"| {signature} | {load:.2f} | {first:.2f} | {1000 * after:.1f} |")
    extra = statistics.median(a["first"] - b["first"] for a, b in zip(runs["serve_text"], runs["serving_default"]))
    print(f"\nserve_text's first call takes {extra:.2f} s more than serving_default's (median of paired runs)")


def main(argv):
    del argv
    harness.quiet_tensorflow("3")
    if FLAGS.padding:
        return padding_main()
    if FLAGS.cold:
        return cold_main()
    import numpy as np
    import tensorflow as tf
    import tensorflow_text  # noqa: F401

    from albert_tf import AlbertConfig, AlbertEncoder
    from albert_tf.serving.export import export_encoder
    from albert_tf.tokenizers.tokenizer import AlbertTokenizer

    config = AlbertConfig.named(FLAGS.size)
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

    print(f"{FLAGS.size}, sequence {FLAGS.seq_length}, {'pairs' if FLAGS.pairs else 'single segments'}, "
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
