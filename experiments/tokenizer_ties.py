"""What does deciding ties as the release did cost `AlbertTokenizer`, and how many texts does it change?

`AlbertTokenizer.encode_batch` on GLUE sentences and on corpus lines (what the pretraining-data
tool encodes), run side by side in one run: as shipped (texts where the installed sentencepiece may
leave the release searched again with `ReleaseViterbi`, then the digit-comma re-split) and with the
tie step left out (the installed sentencepiece's pieces). Prints
texts per second, medians of --repeats interleaved runs, and their ratio; the time per text of
what follows SentencePiece (tie step and re-split, or the re-split alone) on the same ids, the
figure that noise on a shared machine blurs least; and how many texts took the slow path (a run of
tied pieces, searched again) and how many changed.

    python experiments/tokenizer_ties.py [--data_dir ../shared/data] [--texts 20000] [--repeats 7]
"""

from __future__ import annotations

import argparse
import os
import pathlib
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench"))
import harness  # noqa: E402  (bench/harness.py: the checkout's paths, the data folder, quiet TensorFlow)

from albert_tf.tokenizers.tokenizer import AlbertTokenizer  # noqa: E402
from finetune.glue.readers import read_examples  # noqa: E402


class SentencepieceOrder(AlbertTokenizer):
    """The tokenizer without the tie step: the digit-comma re-split alone, as before it."""

    def _resplit(self, ids, normalized):
        table = self._id_resplits
        if table.keys().isdisjoint(ids):
            return ids
        return [i for piece_id in ids for i in table.get(piece_id, (piece_id,))]


def glue_sentences(data_dir: pathlib.Path, count: int) -> list[str]:
    texts = []
    for task_dir in sorted((data_dir / "glue").iterdir()):
        for split_file in sorted(task_dir.glob("*.tsv")):
            examples = read_examples(task_dir.name, data_dir / "glue", split_file.stem).examples
            texts += [t for e in examples for t in (e.text_a, e.text_b) if t]
    return texts[:: max(1, len(texts) // count)][:count]


def corpus_lines(data_dir: pathlib.Path, count: int) -> list[str]:
    lines = []
    for path in sorted((data_dir / "corpus").glob("*/*")):
        lines += [ln for ln in path.read_bytes().decode("utf-8", "replace").split("\n") if ln.strip()]
    return lines[:: max(1, len(lines) // count)][:count]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data_dir", type=pathlib.Path, default=harness.data_dir())
    parser.add_argument("--texts", type=int, default=20000)
    harness.add_repeats(parser, 7)
    args = parser.parse_args()
    model = args.data_dir / "albert" / "30k-clean.model"
    release, installed = AlbertTokenizer(model), SentencepieceOrder(model)
    print(
        f"{'texts':<20} {'release order /s':>17} {'sentencepiece order /s':>23} {'ratio':>6}"
        f" {'after SP, us/text':>18} {'slow path':>10} {'changed':>8}"
    )
    sets = (("GLUE", glue_sentences(args.data_dir, args.texts)), ("corpus lines", corpus_lines(args.data_dir, args.texts)))
    for name, texts in sets:
        normalized = [release.normalize(t) for t in texts]
        raw = release._sp.Encode(normalized, out_type=int, num_threads=1)
        times = {release: [], installed: []}
        step_times = {release: [], installed: []}
        for repeat in range(args.repeats):
            for tokenizer in (release, installed)[:: 1 if repeat % 2 else -1]:
                begin = time.perf_counter()
                tokenizer.encode_batch(texts, num_threads=1)
                times[tokenizer].append(time.perf_counter() - begin)
                begin = time.perf_counter()
                for ids, text in zip(raw, normalized):
                    tokenizer._resplit(ids, text)
                step_times[tokenizer].append(time.perf_counter() - begin)
        ours, theirs = (len(texts) / statistics.median(times[t]) for t in (release, installed))
        step = " / ".join(f"{statistics.median(step_times[t]) / len(texts) * 1e6:.2f}" for t in (release, installed))
        slow = sum(release._may_leave_release(ids, release._tie_prone_ids, release._id_runs) for ids in raw)
        changed = sum(a != b for a, b in zip(release.encode_batch(texts, 1), installed.encode_batch(texts, 1)))
        print(
            f"{name + f' ({len(texts)})':<20} {ours:>17,.0f} {theirs:>23,.0f} {ours / theirs:>6.3f}"
            f" {step:>18} {slow:>10} {changed:>8}"
        )


if __name__ == "__main__":
    main()
