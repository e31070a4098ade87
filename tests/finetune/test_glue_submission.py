"""GLUE submission files: official label strings, file names and row order."""

import pytest

from finetune.glue import readers, submission


def test_mnli_matched_file(tmp_path):
    # Columns follow MNLI's label order: contradiction, entailment, neutral.
    logits = [[0.1, 2.0, 0.3], [0.0, 0.0, 1.0], [3.0, 1.0, 2.0]]
    path = submission.write_submission("MNLI", "test_matched", logits, tmp_path, num_examples=3)
    assert path == tmp_path / "MNLI-m.tsv"
    assert path.read_text(encoding="utf-8") == (
        "index\tprediction\n0\tentailment\n1\tneutral\n2\tcontradiction\n"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["MNLI-m.tsv"]


def test_labels_and_scores_as_official_strings(tmp_path):
    assert submission.prediction_strings("QNLI", [[0.2, 0.8], [0.9, 0.1]]) == [
        "not_entailment",
        "entailment",
    ]
    assert submission.prediction_strings("CoLA", [[0.2, 0.8], [0.9, 0.1]]) == ["1", "0"]
    assert submission.prediction_strings("STS-B", [[3.14159], [0.0], [4.9996]]) == [
        "3.142",
        "0.000",
        "5.000",
    ]
    path = submission.write_submission("AX", "test", [[0.0, 0.0, 1.0]], tmp_path)
    assert path.name == "AX.tsv"
    assert path.read_text().splitlines() == ["index\tprediction", "0\tneutral"]


def test_bad_requests(tmp_path):
    with pytest.raises(ValueError, match="RTE dev is labelled and has no submission file; the "
                       "prediction splits are: test"):  # fmt: skip
        submission.write_submission("RTE", "dev", [[0.0, 1.0]], tmp_path)
    with pytest.raises(ValueError, match="RTE test has 3000 examples but 2 predictions were given"):
        submission.write_submission("RTE", "test", [[0.0, 1.0]] * 2, tmp_path, num_examples=3000)
    assert list(tmp_path.iterdir()) == []


def test_one_row_per_example_of_a_real_split(small_data_dir, tmp_path):
    # The RTE dev file stands in for a test file of the same layout (test labels are not public).
    examples = readers.read_examples("RTE", small_data_dir / "glue", "dev").examples
    outputs = [[1.0, 0.0] if e.label == "entailment" else [0.0, 1.0] for e in examples]
    path = submission.write_submission("RTE", "test", outputs, tmp_path, num_examples=len(examples))
    rows = [line.split("\t") for line in path.read_text(encoding="utf-8").splitlines()[1:]]
    assert [index for index, _ in rows] == [str(i) for i in range(277)]
    assert [label for _, label in rows] == [e.label for e in examples]
