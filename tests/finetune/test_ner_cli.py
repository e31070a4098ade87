"""albert-finetune-ner end to end: the chain learns a small CoNLL sample (real WNUT-17 sentences)
and serves it; bad input is one line and leaves nothing behind.

The chain: a tiny model from random weights fine-tuned on the 23 sentences (19 entities) of the
fixture's dev slice must tag those same sentences with entity F1 >= 0.9 (tagging every word "O"
scores 0, and the same model after 150 steps scored 0.19): only then do alignment, windows (32
tokens cut 5 of these sentences into several), labels, metrics and serving agree. The metrics of
eval_results.json are seqeval's on predictions_dev.conll, and the SavedModel, in a process without
this package, tags the sentences' raw text as that file does.
"""

import json
import textwrap

import pytest

from albert_tf.data.tagging import word_pieces
from albert_tf.tokenizers.tokenizer import AlbertTokenizer
from albert_tf.utils.errors import UserError
from finetune.ner import cli, readers
from tests.helpers import console_script

CONFIG = {"vocab_size": 30000, "embedding_size": 32, "hidden_size": 64, "num_hidden_layers": 2,
          "num_attention_heads": 2, "intermediate_size": 128, "max_position_embeddings": 32,
          "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}
TRAINING = ["--max_seq_length=32", "--doc_stride=8", "--learning_rate=1e-3", "--num_train_steps=300",
            "--num_warmup_steps=20", "--train_batch_size=16", "--steps_per_loop=100", "--progress_bar=false",
            "--nojit_compile"]  # 22 s -> 16 s, F1 1.0 as with XLA (which the SQuAD chains keep)

SERVE = textwrap.dedent(
    """
    import json, sys
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (the SentencePiece op)
    assert not any(m.startswith(("albert_tf", "finetune")) for m in sys.modules)
    texts = json.load(open(sys.argv[2]))
    out = tf.saved_model.load(sys.argv[1]).signatures["serve_text"](text=tf.constant(texts, tf.string))
    plain = lambda x: [plain(y) for y in x] if isinstance(x, list) else x.decode() if isinstance(x, bytes) else x
    print(json.dumps({k: plain(v.numpy().tolist()) for k, v in out.items()}))
    """
)


def _argv(tmp_path, small_data_dir, *flags):
    config = tmp_path / "albert_config.json"
    config.write_text(json.dumps(CONFIG))
    return ["albert-finetune-ner", f"--albert_config_file={config}",
            f"--spm_model_file={small_data_dir / 'albert' / '30k-clean.model'}", f"--output_dir={tmp_path / 'run'}",
            *flags]


def _read_predictions(path):
    sentences, current = [], []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line:
            current.append(line.split("\t"))
        else:
            sentences.append(current)
            current = []
    return sentences


@pytest.mark.slow
def test_chain_learns_a_conll_sample_and_serves_it(tmp_path, small_data_dir, fresh_process):
    seqeval = pytest.importorskip("seqeval.metrics")
    data = small_data_dir / "ner" / "wnut17" / "emerging.dev.conll"
    untagged = tmp_path / "untagged.conll"  # --predict_file may hold tokens alone
    untagged.write_text("".join(f"{line.split()[0]}\n" if line.split() else "\n"
                                for line in data.read_text(encoding="utf-8").splitlines()), encoding="utf-8")
    summary = cli.finetune(_argv(tmp_path, small_data_dir, f"--train_file={data}", f"--eval_file={data}",
                                 f"--predict_file={untagged}", "--do_train", "--do_eval", "--do_predict", *TRAINING))
    run = tmp_path / "run"
    results = json.loads((run / "eval_results.json").read_text())["dev"]
    print("NER chain:", {k: results[k] for k in ("precision", "recall", "f1", "accuracy")})
    assert results["entities"] == 19 and results["examples"] == 23
    assert results["f1"] >= 0.9
    sentences = readers.read_conll(data)
    written = _read_predictions(run / "predictions_dev.conll")
    assert [[w for w, _, _ in s] for s in written] == [list(s.words) for s in sentences]
    assert [[g for _, g, _ in s] for s in written] == [list(s.tags) for s in sentences]
    predicted = [[p for _, _, p in s] for s in written]
    assert results["f1"] == pytest.approx(seqeval.f1_score([list(s.tags) for s in sentences], predicted))
    assert [[line for line in s] for s in _read_predictions(run / "predictions_test.conll")] == [
        [[w, p] for w, _, p in s] for s in written]
    features = json.loads(next((run / "features").glob("NER-dev-*.json")).read_text())
    tokenizer = AlbertTokenizer(small_data_dir / "albert" / "30k-clean.model")
    longer = sum(len(word_pieces(tokenizer, s.words)[0]) > 30 for s in sentences)  # 30 pieces a window
    assert features["details"]["windowed_sentences"] == longer > 0
    # The SavedModel, in a process without this package, tags the raw text as the file does.
    texts = [" ".join(s.words) for s in sentences] + ["", "  Zoë\u00a0 in  "]
    (tmp_path / "texts.json").write_text(json.dumps(texts))
    (tmp_path / "serve.py").write_text(SERVE)
    served = json.loads(fresh_process.script(tmp_path / "serve.py", summary["export_dir"],
                                          tmp_path / "texts.json").splitlines()[-1])
    for row, tags in enumerate(predicted):
        assert served["tags"][row][: served["num_words"][row]] == tags
    for row, text in enumerate(texts):
        count = served["num_entities"][row]
        for k in range(count):
            start, end = served["entity_start"][row][k], served["entity_end"][row][k]
            assert served["entity_text"][row][k] == text[start:end] != ""
    assert served["num_words"][-2:] == [0, 2] and served["word_start"][-1][:2] == [2, 7]


@pytest.mark.faults
def test_a_type_seen_only_in_dev_is_one_line_and_leaves_no_run(tmp_path, small_data_dir, monkeypatch, capsys):
    wnut = small_data_dir / "ner" / "wnut17"
    # The first five training sentences (a real prefix of the file) hold no creative work or product.
    lines = (wnut / "wnut17train.conll").read_text(encoding="utf-8").splitlines(keepends=True)
    blanks = [i for i, line in enumerate(lines) if not line.strip()]
    train = tmp_path / "train5.conll"
    train.write_text("".join(lines[: blanks[4] + 1]), encoding="utf-8")
    dev = wnut / "emerging.dev.conll"
    dev_lines = dev.read_text(encoding="utf-8").splitlines()
    line = next(i for i, text in enumerate(dev_lines, 1) if text.split() and text.split()[-1][2:] in
                ("creative-work", "product"))
    kind = dev_lines[line - 1].split()[-1][2:]
    code, _, stderr = console_script(cli.run, _argv(tmp_path, small_data_dir, f"--train_file={train}",
                                                    f"--eval_file={dev}", "--do_train", "--do_eval", *TRAINING),
                                     monkeypatch, capsys)
    assert code == 1
    assert [l for l in stderr.splitlines() if l.startswith("error:")] == [
        f"error: {dev}:{line}: type {kind!r} is not among the labels (corporation, group, location, person, of the "
        "training file): a type the model never learnt cannot be scored"]
    assert not (tmp_path / "run").exists()
    # A flag that needs another is a usage error (exit code 2), before anything is read.
    with pytest.raises(UserError, match="^--do_eval needs --eval_file$") as error:
        cli.finetune(_argv(tmp_path, small_data_dir, f"--train_file={train}", "--do_train", "--do_eval"))
    assert error.value.exit_code == 2
    assert not (tmp_path / "run").exists()


@pytest.mark.faults
def test_a_run_folder_of_other_labels_is_refused(tmp_path, small_data_dir):
    from finetune.ner.task import NerTask

    train = small_data_dir / "ner" / "wnut17" / "wnut17train.conll"
    (tmp_path / "task.json").write_text(json.dumps({"task": "NER", "labels": ["O", "B-PER", "I-PER"]}))
    task = NerTask(train)
    with pytest.raises(UserError, match=rf"^output_dir {tmp_path} holds a NER run of other labels \(O, B-PER, I-PER, "
                                        r"not O, B-corporation, I-corporation, .*\); use a fresh output_dir$"):
        task.check_output_dir(str(tmp_path), write=True)
    assert json.loads((tmp_path / "task.json").read_text())["labels"] == ["O", "B-PER", "I-PER"]
    NerTask(train, labels=["PER"]).check_output_dir(str(tmp_path), write=True)  # its own labels: accepted
