"""--max_eval_examples and --max_predict_examples (issue 30, item 7): every fine-tuning tool reads
only the first N examples of its evaluation and prediction splits, and scores those N, without a
hand-made data file."""

import json
import pathlib

import pytest

from albert_tf import AlbertConfig
from albert_tf.utils.errors import FlagError

TESTS = pathlib.Path(__file__).resolve().parents[1]
TINY_VOCAB = TESTS / "fixtures" / "data_prep" / "tiny_vocab.model"
CONFIG = AlbertConfig(vocab_size=300, embedding_size=16, hidden_size=32, num_hidden_layers=2,
                      num_attention_heads=2, intermediate_size=64, max_position_embeddings=64)
# One update, no XLA, no export: what is under test is what is read and scored.
SHORT = ["--do_train", "--num_train_steps=1", "--train_batch_size=4", "--max_train_examples=8",
         "--nojit_compile", "--noexport", "--noprogress_bar"]


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    path = tmp_path_factory.mktemp("config") / "albert_config.json"
    CONFIG.to_json_file(path)
    return [f"--albert_config_file={path}", f"--spm_model_file={TINY_VOCAB}"]


def test_glue_scores_and_predicts_the_first_examples(small_data_dir, source, tmp_path):
    from finetune.glue import cli

    glue = tmp_path / "glue" / "MRPC"
    glue.mkdir(parents=True)
    mrpc = small_data_dir / "glue" / "MRPC"
    for name in ("train.tsv", "dev.tsv"):
        (glue / name).symlink_to(mrpc / name)
    # A test split in the official layout (index, ids, two sentences), 20 rows.
    rows = (mrpc / "dev.tsv").read_text(encoding="utf-8-sig").splitlines()[1:21]
    (glue / "test.tsv").write_text("index\t#1 ID\t#2 ID\t#1 String\t#2 String\n" + "".join(
        f"{i}\t" + "\t".join(row.split("\t")[1:]) + "\n" for i, row in enumerate(rows)), encoding="utf-8")
    out = tmp_path / "out"
    summary = cli.finetune(["albert-finetune-glue", "--task=MRPC", f"--data_dir={glue.parent}", f"--output_dir={out}",
                            *source, *SHORT, "--max_seq_length=32", "--do_eval", "--do_predict",
                            "--max_eval_examples=5", "--max_predict_examples=3"])
    assert summary["eval"]["dev"]["examples"] == 5  # of 408
    results = json.loads((out / "eval_results.json").read_text())
    assert results["dev"]["examples"] == 5
    assert len((out / "dev_predictions.tsv").read_text().splitlines()) == 1 + 5  # header and rows
    assert str(out / "MRPC.tsv") in summary["predictions"]  # the submission file of test.tsv
    assert len((out / "MRPC.tsv").read_text().splitlines()) == 1 + 3  # header and the first 3 of 20


def test_a_limited_split_has_a_cache_of_its_own(small_data_dir, tmp_path):
    from albert_tf.tokenizers.tokenizer import AlbertTokenizer
    from finetune.glue.task import GlueTask

    tokenizer = AlbertTokenizer(str(TINY_VOCAB))
    limited = GlueTask("MRPC", small_data_dir / "glue", max_eval_examples=5)
    assert limited.features("dev", tokenizer, 32, tmp_path).num_examples == 5
    whole = GlueTask("MRPC", small_data_dir / "glue")
    assert whole.features("dev", tokenizer, 32, tmp_path).num_examples == 408  # not the cache of 5
    assert len(list(tmp_path.glob("*.tfrecord"))) == 2


def test_race_scores_and_predicts_the_first_questions(small_data_dir, source, tmp_path):
    from finetune.race import cli

    dev = small_data_dir / "race" / "dev"
    out = tmp_path / "out"
    summary = cli.finetune(["albert-finetune-race", f"--train_data={dev}", f"--eval_data={dev}",
                            f"--predict_data={dev}", f"--output_dir={out}", *source, *SHORT, "--max_seq_length=48",
                            "--max_qa_length=16", "--do_eval", "--do_predict", "--max_eval_examples=7",
                            "--max_predict_examples=2"])
    assert summary["eval"]["dev"]["num_questions"] == 7
    assert summary["eval"]["dev"]["examples"] == 7
    assert len((out / "predictions_dev.jsonl").read_text().splitlines()) == 7
    predicted = [json.loads(line) for line in (out / "predictions_test.jsonl").read_text().splitlines()]
    assert [p["id"] for p in predicted] == ["middle1011.txt-0", "middle1011.txt-1"]


def test_squad_answers_and_scores_the_first_questions(small_data_dir, tmp_path_factory, tmp_path):
    from finetune.squad import cli
    from finetune.squad.readers import read_squad
    from tests.finetune import squad_runs
    from tests.shared_builds import copy_of

    # A copy of a fine-tuned v1.1 run (tests/finetune/squad_runs.py's 30-step chain, shared with
    # test_squad_cli.py), predicting from its folder alone: no model or update of this test's own.
    squad = small_data_dir / "squad"
    out = copy_of(squad_runs.v1_chain(tmp_path_factory, small_data_dir) / "run", tmp_path / "out")
    summary = cli.finetune(["albert-finetune-squad", f"--predict_file={squad / 'dev-v1.1.articles1-2.json'}",
                            f"--output_dir={out}", *squad_runs.CHAIN_WINDOWS, "--nojit_compile", "--noexport",
                            "--noprogress_bar",
                            "--do_predict", "--max_predict_examples=6"])  # the release's --do_predict
    first = [e.qas_id for e in read_squad(squad / "dev-v1.1.articles1-2.json")[:6]]
    answers = json.loads((out / "predictions.json").read_text())
    assert list(answers) == first
    assert summary["eval"]["dev"]["examples"] == 6
    # The official metric over those 6 questions: each scores 0 or 100, so the mean is a multiple of 100/6.
    exact = summary["eval"]["dev"]["exact_match"]
    assert min(abs(exact - 100 * k / 6) for k in range(7)) < 1e-6


def test_a_limit_below_one_names_its_flag(small_data_dir, source, tmp_path):
    from finetune.race import cli

    with pytest.raises(FlagError, match=r"^--max_eval_examples must be positive, got 0$"):
        cli.finetune(["albert-finetune-race", f"--data_dir={small_data_dir / 'race'}", f"--output_dir={tmp_path / 'o'}",
                      *source, "--do_eval", "--max_eval_examples=0"])
    assert not (tmp_path / "o").exists()
