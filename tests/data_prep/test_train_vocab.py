"""albert-train-vocab: ALBERT special pieces, normalised input, deterministic training."""

import pathlib

import pytest
import sentencepiece as spm

from albert_tf.tokenizers.tokenizer import AlbertTokenizer, normalize_text
from data_prep.train_vocab import train_vocab

FIXTURES = pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "data_prep"


def _committed_vocab() -> pathlib.Path:
    """The committed tiny vocabulary as the installed SentencePiece trainer makes it.

    tiny_vocab.model/.vocab were made with sentencepiece 0.2.3; 0.2.1 (which the test extra installs
    beside Apache Beam, see pyproject.toml) trains the same corpus into other scores and piece order.
    """
    for path in (FIXTURES / f"tiny_vocab.sentencepiece-{spm.__version__}.vocab", FIXTURES / "tiny_vocab.vocab"):
        if path.exists() and (path.name != "tiny_vocab.vocab" or spm.__version__ == "0.2.3"):
            return path
    pytest.skip(f"no tiny vocabulary committed for sentencepiece {spm.__version__} (0.2.1 and 0.2.3 are)")


def test_training_the_tiny_vocabulary_reproduces_the_committed_one(tmp_path):
    expected = _committed_vocab()
    model = train_vocab(
        [str(FIXTURES / "tiny_corpus.txt")],
        str(tmp_path / "tiny"),
        vocab_size=300,
        hard_vocab_limit=False,
        normalization_rule_name="identity",
        num_threads=1,
    )
    assert (tmp_path / "tiny.vocab").read_text() == expected.read_text()
    tokenizer = AlbertTokenizer(model)
    assert tokenizer.vocab_size == 300
    assert tokenizer.convert_ids_to_tokens(range(5)) == ["<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]"]
    assert all(tokenizer.is_control(i) for i in (2, 3, 4))


def test_the_vocabulary_is_learnt_from_normalised_text(tmp_path):
    corpus = tmp_path / "accents.txt"
    corpus.write_text("\n".join(["Élan CAFÉ naïve ``quote''"] * 50 + ["plain words here and there"] * 50))
    model = train_vocab([str(corpus)], str(tmp_path / "v"), vocab_size=40, hard_vocab_limit=False, num_threads=1)
    pieces = [line.split("\t")[0] for line in (tmp_path / "v.vocab").read_text().splitlines()]
    characters = set("".join(pieces[5:]))  # past <pad> <unk> [CLS] [SEP] [MASK]
    assert not characters & set("ÉÀéïCAF")  # accents and capitals were normalised away
    assert "`" in characters  # `` is kept, as the release's preprocess_text keeps it
    ids = spm.SentencePieceProcessor(model_file=model).encode(normalize_text("Élan café"))
    assert 1 not in ids  # no <unk>: every normalised character is covered


def test_a_vocabulary_too_large_for_the_corpus_fails_clearly(tmp_path):
    corpus = tmp_path / "small.txt"
    corpus.write_text("a few words only\n" * 10)
    with pytest.raises(RuntimeError, match="Vocabulary size too high"):
        train_vocab([str(corpus)], str(tmp_path / "v"), vocab_size=5000, num_threads=1)


def test_a_refused_vocabulary_leaves_no_model_file(tmp_path, monkeypatch):
    # Written under a partial prefix and renamed only once checked: no .model to be taken for a
    # finished vocabulary (albert_tf.utils.atomic's rule).
    import albert_tf.tokenizers.tokenizer

    def refuse(model_file, do_lower_case=True):
        raise ValueError(f"{model_file} refused")

    monkeypatch.setattr(albert_tf.tokenizers.tokenizer, "AlbertTokenizer", refuse)
    with pytest.raises(ValueError, match=r"v\.incomplete-\d+\.model refused"):
        train_vocab([str(FIXTURES / "tiny_corpus.txt")], str(tmp_path / "v"), vocab_size=100, hard_vocab_limit=False,
                    num_threads=1)
    assert list(tmp_path.iterdir()) == []


def test_the_model_prefix_folder_is_checked_naming_the_flag(tmp_path, capsys):
    from albert_tf.cli.entry_point import report_errors
    from data_prep import train_vocab as tool

    (tmp_path / "a_file").write_text("x")
    tool.FLAGS.unparse_flags()
    try:
        # The input matches nothing too: the output is checked first.
        tool.FLAGS(["albert-train-vocab", f"--input_file={tmp_path}/none-*.txt",
                    f"--model_prefix={tmp_path / 'a_file' / 'vocab' / 'spiece'}"])
        with pytest.raises(SystemExit) as exited:  # as the console script reports it
            report_errors(tool.main, value_errors_are_users=True)([])
        assert exited.value.code == 2
    finally:
        tool.FLAGS.unparse_flags()
    assert capsys.readouterr().err.splitlines() == [
        f"error: --model_prefix {tmp_path / 'a_file' / 'vocab'} cannot be created (a part of the path is a file)"]


def test_the_same_training_gives_the_same_bytes_wherever_it_is_saved(tmp_path):
    # Trained under a partial prefix, the model would record that name (it holds its trainer's
    # settings) and its bytes would change with the process id; data prep records the model's
    # sha256. Compared as bytes: sentencepiece_model_pb2 only imports beside protobuf 7.36 or later
    # from sentencepiece 0.2.2 on, and this tool does without it.
    corpus = [str(FIXTURES / "tiny_corpus.txt")]
    models = [
        pathlib.Path(train_vocab(corpus, str(tmp_path / folder / "v"), vocab_size=100, hard_vocab_limit=False,
                                 num_threads=1)).read_bytes()
        for folder in ("a", "somewhere_else")
    ]
    assert models[0] == models[1] and b"incomplete" not in models[0] and str(tmp_path).encode() not in models[0]
    assert sorted(p.name for p in (tmp_path / "a").iterdir()) == ["v.model", "v.vocab"]
    assert spm.SentencePieceProcessor(model_proto=models[0]).get_piece_size() == 100
