"""The tiny committed corpus and vocabulary give exactly the committed instances.

Regenerate the expected file only after a deliberate change of the algorithm, and say why in the
commit: `python -m tests.data_prep.test_golden`.
"""

import json
import pathlib
import tempfile

import tensorflow as tf

from albert_tf.data.features import pretraining_feature_spec
from data_prep.instances import InstanceOptions
from data_prep.shards import GenerationConfig, run_generation

FIXTURES = pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "data_prep"
EXPECTED = FIXTURES / "tiny_expected.json"
OPTIONS = InstanceOptions(max_seq_length=32, max_predictions_per_seq=5, short_seq_prob=0.2)


def _config() -> GenerationConfig:
    return GenerationConfig(
        input_files=(str(FIXTURES / "tiny_corpus.txt"),),
        spm_model_file=str(FIXTURES / "tiny_vocab.model"),
        options=OPTIONS,
        dupe_factor=2,
        random_seed=12345,
        num_output_shards=2,
    )


def _records(output_dir: pathlib.Path) -> dict:
    """Each shard's records, padding removed, as plain lists."""
    spec = pretraining_feature_spec(OPTIONS.max_seq_length, OPTIONS.max_predictions_per_seq)
    shards = {}
    for path in sorted(output_dir.glob("pretrain-*.tfrecord")):
        records = []
        for serialized in tf.data.TFRecordDataset(str(path)):
            parsed = {k: v.numpy().tolist() for k, v in tf.io.parse_single_example(serialized, spec).items()}
            length, predictions = sum(parsed["input_mask"]), int(sum(parsed["masked_lm_weights"]))
            records.append(
                {
                    "input_ids": parsed["input_ids"][:length],
                    "segment_ids": parsed["segment_ids"][:length],
                    "token_boundary": parsed["token_boundary"][:length],
                    "masked_lm_positions": parsed["masked_lm_positions"][:predictions],
                    "masked_lm_ids": parsed["masked_lm_ids"][:predictions],
                    "next_sentence_label": parsed["next_sentence_labels"][0],
                }
            )
        shards[path.name] = records
    return shards


def test_tiny_corpus_gives_the_committed_instances(tmp_path):
    result = run_generation(_config(), str(tmp_path), num_workers=1, progress=False)
    expected = json.loads(EXPECTED.read_text())
    got = _records(tmp_path)
    assert list(got) == list(expected["shards"])
    for name in expected["shards"]:
        assert len(got[name]) == len(expected["shards"][name]), name
        for index, (g, e) in enumerate(zip(got[name], expected["shards"][name])):
            assert g == e, f"{name} record {index} differs"
    assert result["counts"]["instances"] == expected["instances"] == sum(len(r) for r in got.values())


def write_expected() -> None:
    with tempfile.TemporaryDirectory() as directory:
        result = run_generation(_config(), directory, num_workers=1, progress=False)
        shards = _records(pathlib.Path(directory))
    lines = ['{"instances": %d, "shards": {' % result["counts"]["instances"]]
    for n, (name, records) in enumerate(shards.items()):
        lines.append(f'  "{name}": [')
        lines += [f"    {json.dumps(r)}{',' if i < len(records) - 1 else ''}" for i, r in enumerate(records)]
        lines.append("  ]" + ("," if n < len(shards) - 1 else ""))
    lines.append("}}")
    EXPECTED.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    write_expected()
