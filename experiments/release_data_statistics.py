"""Are our pretraining data's statistics the release's? Each beside the release's, on its reference corpus.

Runs the local generator on ../shared/reference/release-pretraining-data/corpus.txt with the flags
of that folder's README (max_seq_length 128, 20 predictions, masked_lm_prob 0.15, ngram 3,
short_seq_prob 0.1, dupe_factor 2, SOP) for several seeds, computes every statistic of
release-statistics.json with the README's definitions, and prints each beside the spread (min..max)
of the release's seven seeds. The same definitions are first applied to the release's own records
(release-seed12345.tfrecord) and must give its seed-12345 entry: that checks the definitions.

    python experiments/release_data_statistics.py [--seeds 1,2,3,4,5,6,12345] [--num_workers 2]

A statistic marked `fix` differs by a documented default: the same table line is then also given
with the flag that restores the release's behaviour (--nostrict_sop for the SOP label balance).
A script, not a test; the machine it ran on was shared with other jobs (times are not reported).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench"))
import harness  # noqa: E402  (bench/harness.py: the checkout's paths, the data folder, quiet TensorFlow)

REFERENCE = harness.reference_dir() / "release-pretraining-data"
SPM_MODEL = harness.spm_model()
SEQ, PREDICTIONS, DUPE = 128, 20, 2
UNDERLINE = "\u2581"


def read_records(paths: list[str]) -> dict[str, np.ndarray]:
    """Every record's features as [N, length] int arrays."""
    import tensorflow as tf

    from albert_tf.data.features import pretraining_feature_spec

    spec = pretraining_feature_spec(SEQ, PREDICTIONS)
    columns: dict[str, list] = {k: [] for k in spec}
    for batch in tf.data.TFRecordDataset(paths).batch(4096):
        parsed = tf.io.parse_example(batch, spec)
        for k in spec:
            columns[k].append(parsed[k].numpy())
    return {k: np.concatenate(v) for k, v in columns.items()}


def _quantiles(values) -> list[float]:
    values = np.asarray(values, np.float64)
    return [float(values.mean())] + [float(np.percentile(values, q)) for q in (10, 50, 90)]


def _length_shares(lengths: list[int]) -> list[float]:
    counts = np.bincount(np.minimum(np.asarray(lengths), 5), minlength=6)[1:]
    return (counts / counts.sum()).tolist()


def statistics(records: dict[str, np.ndarray], pieces: list[str], input_pieces: int) -> dict:
    """The statistics of release-statistics.json (definitions in the reference README)."""
    cls_id, sep_id, mask_id = 2, 3, 4
    starts_underline = np.array([p.startswith(UNDERLINE) for p in pieces])
    ids, mask = records["input_ids"], records["input_mask"].astype(bool)
    weights = records["masked_lm_weights"] > 0
    lengths = mask.sum(1)
    n = len(ids)
    originals = ids.copy()
    masked_shown, masked_orig = [], []
    runs = runs_word = runs_boundary = crossing = 0
    run_words, run_boundaries = [], []
    seg_a, seg_b = [], []
    special_replacements = label_special = 0
    real_pieces = boundary_ones = underline_pieces = boundary_not_underline = 0
    for r in range(n):
        length = lengths[r]
        positions = records["masked_lm_positions"][r][weights[r]]
        labels = records["masked_lm_ids"][r][weights[r]]
        originals[r, positions] = labels
        shown = ids[r, positions]
        masked_shown.append(shown)
        masked_orig.append(labels)
        special_replacements += int(((shown < 5) & (shown != mask_id) & (shown != labels)).sum())
        label_special += int(np.isin(labels, (cls_id, sep_id)).sum())
        tokens = originals[r, :length]
        special = (tokens == cls_id) | (tokens == sep_id)
        underline = starts_underline[tokens]
        after_special = np.concatenate([[False], special[:-1]])
        word_start = underline | after_special
        boundary = records["token_boundary"][r, :length].astype(bool)
        segments = records["segment_ids"][r, :length]
        real = ~special
        real_pieces += int(real.sum())
        boundary_ones += int((boundary & real).sum())
        underline_pieces += int((underline & real).sum())
        boundary_not_underline += int((boundary & ~underline & real).sum())
        seg_a.append(int(((segments == 0) & real).sum()))
        seg_b.append(int(((segments == 1) & real).sum()))
        is_masked = np.zeros(length, bool)
        is_masked[positions] = True
        p = 0
        while p < length:
            if not is_masked[p]:
                p += 1
                continue
            q = p
            while q < length and is_masked[q]:
                q += 1
            runs += 1
            runs_word += bool(word_start[p])
            runs_boundary += bool(boundary[p])
            crossing += len(set(segments[p:q].tolist())) > 1
            # Words in a run: its word starts, at least 1 (a run inside one word).
            run_words.append(max(1, int(word_start[p:q].sum())))
            run_boundaries.append(max(1, int(boundary[p:q].sum())))
            p = q
    shown = np.concatenate(masked_shown)
    orig = np.concatenate(masked_orig)
    kinds = [(shown == mask_id).mean(), ((shown == orig) & (shown != mask_id)).mean()]
    kinds.append(1 - sum(kinds))
    predictions = weights.sum(1)
    return {
        "instances": n,
        "instances_per_1k_input_tokens_per_pass": n / DUPE / input_pieces * 1000,
        "seq_len_mean": float(lengths.mean()),
        "seq_len_p10": float(np.percentile(lengths, 10)),
        "seq_len_p50": float(np.percentile(lengths, 50)),
        "seq_len_p90": float(np.percentile(lengths, 90)),
        "share_len_lt_max": float((lengths < SEQ).mean()),
        "tokens_total": int(lengths.sum()),
        "masked_share_of_tokens": float(predictions.sum() / lengths.sum()),
        "masked_per_instance_mean": float(predictions.mean()),
        "share_instances_at_20_predictions": float((predictions == PREDICTIONS).mean()),
        "mask_kept_random": [float(k) for k in kinds],
        "random_replacements_special_ids(<5)": special_replacements,
        "masked_label_is_CLS_SEP": label_special,
        "runs": runs,
        "runs_start_at_word_start(\u2581 or after CLS/SEP)": runs_word / runs,
        "runs_start_at_token_boundary_feature": runs_boundary / runs,
        "run_len_words(\u2581)_1,2,3,4,5+": _length_shares(run_words),
        "run_len_words(token_boundary)_1,2,3,4,5+": _length_shares(run_boundaries),
        "runs_crossing_segments": crossing,
        "sop_label_share_1": float(records["next_sentence_labels"][:, 0].mean()),
        "segA_mean,p10,p50,p90": _quantiles(seg_a),
        "segB_mean,p10,p50,p90": _quantiles(seg_b),
        "segA_len1_share": float(np.mean(np.asarray(seg_a) == 1)),
        "segB_len1_share": float(np.mean(np.asarray(seg_b) == 1)),
        "token_boundary_share": boundary_ones / real_pieces,
        "share_pieces_starting_with_\u2581": underline_pieces / real_pieces,
        "token_boundary_ne_\u2581_share": boundary_not_underline / real_pieces,
    }


def flatten(stats: dict) -> dict[str, float]:
    """One number per table line: list-valued statistics become name[i]."""
    flat = {}
    for key, value in stats.items():
        if key in ("random_seed",):
            continue
        if isinstance(value, list):
            names = key.split("_")[-1].split(",") if "," in key else [str(i) for i in range(len(value))]
            if key == "mask_kept_random":
                names = ["mask", "kept", "random"]
            for name, v in zip(names, value):
                flat[f"{key}[{name}]"] = float(v)
        else:
            flat[key] = float(value)
    return flat


def generate(seed: int, output_dir: str, num_workers: int, strict_sop: bool) -> dict[str, np.ndarray]:
    from data_prep.instances import InstanceOptions
    from data_prep.shards import GenerationConfig, run_generation

    options = InstanceOptions(
        max_seq_length=SEQ, max_predictions_per_seq=PREDICTIONS, masked_lm_prob=0.15, ngram=3,
        favor_shorter_ngram=True, do_whole_word_mask=True, short_seq_prob=0.1,
        random_next_sentence=False, strict_sop=strict_sop,
    )
    config = GenerationConfig(
        input_files=(str(REFERENCE / "corpus.txt"),), spm_model_file=str(SPM_MODEL), options=options,
        dupe_factor=DUPE, random_seed=seed, num_output_shards=1,
    )
    run_generation(config, output_dir, num_workers=num_workers, progress=False)
    return read_records(sorted(str(p) for p in pathlib.Path(output_dir).glob("pretrain-*.tfrecord")))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="1,2,3,4,5,6,12345")
    parser.add_argument("--num_workers", type=int, default=2)
    parser.add_argument("--json_out", help="also write our per-seed statistics here")
    parser.add_argument("--from_json", help="print the table from a --json_out file instead of generating")
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]

    from albert_tf.tokenizers.tokenizer import AlbertTokenizer

    tokenizer = AlbertTokenizer(SPM_MODEL)
    pieces = tokenizer.convert_ids_to_tokens(range(tokenizer.vocab_size))
    lines = (REFERENCE / "corpus.txt").read_text(encoding="utf-8").splitlines()
    input_pieces = sum(len(ids) for ids in tokenizer.encode_batch([ln for ln in lines if ln.strip()]))
    release = json.loads((REFERENCE / "release-statistics.json").read_text())
    release_runs = [flatten(r) for r in release["runs"]]

    # The definitions, checked on the release's own records of seed 12345.
    own = flatten(statistics(read_records([str(REFERENCE / "release-seed12345.tfrecord")]), pieces, input_pieces))
    entry = flatten(next(r for r in release["runs"] if r["random_seed"] == 12345))
    off = {k: (own[k], entry[k]) for k in entry if not np.isclose(own[k], entry[k], rtol=1e-3, atol=1e-4)}
    print(f"input pieces: {input_pieces:,} (README: 407,359)")
    print("definitions on release-seed12345.tfrecord:", "all equal to its entry" if not off else f"differ {off}")

    if args.from_json:
        saved = json.loads(pathlib.Path(args.from_json).read_text())
        seeds, ours, ours_legacy = saved["seeds"], saved["ours"], saved["ours_nostrict_sop"]
    else:
        ours, ours_legacy = [], []
        for seed in seeds:
            for strict, sink in ((True, ours), (False, ours_legacy)):
                with tempfile.TemporaryDirectory() as directory:
                    records = generate(seed, directory, args.num_workers, strict)
                    sink.append(flatten(statistics(records, pieces, input_pieces)))
            print(f"seed {seed} done", file=sys.stderr)
    if args.json_out:
        pathlib.Path(args.json_out).write_text(
            json.dumps({"seeds": seeds, "ours": ours, "ours_nostrict_sop": ours_legacy}, indent=1)
        )

    print(f"\nMeans over {len(seeds)} seeds of ours ({', '.join(map(str, seeds))}) beside the release's "
          f"{len(release_runs)} seeds (min..max, mean); z: (ours - release) / standard error of the "
          "difference of the two means. `in`: our mean inside the release's min..max.\n")
    print("| statistic | release min..max (mean) | ours, default flags | z | in | ours, --nostrict_sop | z | in |")
    print("|---|---|---|---|---|---|---|---|")
    outside = {"default": [], "nostrict_sop": []}
    for key in release_runs[0]:
        theirs = np.array([r[key] for r in release_runs])
        lo, hi = theirs.min(), theirs.max()
        cells = []
        for label, runs in (("default", ours), ("nostrict_sop", ours_legacy)):
            values = np.array([r[key] for r in runs])
            se = np.sqrt(theirs.var(ddof=1) / len(theirs) + values.var(ddof=1) / len(values))
            z = (values.mean() - theirs.mean()) / se if se > 0 else 0.0
            inside = lo - 1e-12 <= values.mean() <= hi + 1e-12
            if not inside:
                outside[label].append(key)
            cells += [f"{values.mean():.4g}", f"{z:+.1f}", "yes" if inside else "**no**"]
        print(f"| {key} | {lo:.4g}..{hi:.4g} ({theirs.mean():.4g}) | " + " | ".join(cells) + " |")
    for label, keys in outside.items():
        print(f"\noutside the release's spread with {label} flags: {', '.join(keys) if keys else 'none'}")


if __name__ == "__main__":
    main()
