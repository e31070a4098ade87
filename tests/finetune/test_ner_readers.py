"""CoNLL readers and tag schemes: BIO, IOB1 and BIOES read and converted to BIO (entities kept
word for word), -DOCSTART- and blank lines, the label set of the training file, and bad lines as
one line naming file and line."""

import pytest

from albert_tf.data.tagging import entities
from albert_tf.utils.errors import UserError
from finetune.ner import readers

# One sentence in the three schemes (CoNLL-2003's example sentence with a second person added, so that
# two adjacent PER entities make IOB1's B- appear; IOB1 as the original files hold it).
WORDS = ["U.N.", "official", "Ekeus", "Smith", "heads", "for", "Baghdad", "."]
BIO = ["B-ORG", "O", "B-PER", "B-PER", "O", "O", "B-LOC", "O"]
IOB1 = ["I-ORG", "O", "I-PER", "B-PER", "O", "O", "I-LOC", "O"]
BIOES = ["S-ORG", "O", "S-PER", "S-PER", "O", "O", "S-LOC", "O"]


def _write(path, words, tags, separator="\t"):
    rows = "".join(f"{w}{separator}NNP{separator}{t}\n" for w, t in zip(words, tags))
    path.write_text("-DOCSTART- -X- -X- O\n\n" + rows + "\n\n" + f"Paris{separator}NNP{separator}B-LOC\n")
    return path


@pytest.mark.parametrize("scheme, tags, separator", [("bio", BIO, "\t"), ("iob1", IOB1, " "), ("bioes", BIOES, "\t")])
def test_every_scheme_reads_as_the_same_bio_tags(tmp_path, scheme, tags, separator):
    sentences = readers.read_conll(_write(tmp_path / "x.conll", WORDS, tags, separator), scheme)
    assert [s.words for s in sentences] == [tuple(WORDS), ("Paris",)]
    assert [s.tags for s in sentences] == [tuple(BIO), ("B-LOC",)]
    assert [s.line for s in sentences] == [3, 13]
    assert entities(sentences[0].tags) == [("ORG", 0, 1), ("PER", 2, 3), ("PER", 3, 4), ("LOC", 6, 7)]


def test_multi_word_entities_convert():
    assert readers.to_bio(["B-PER", "I-PER", "E-PER", "O", "S-LOC", "B-LOC", "E-LOC"], "bioes") == \
        ["B-PER", "I-PER", "I-PER", "O", "B-LOC", "B-LOC", "I-LOC"]
    assert readers.to_bio(["U-PER", "B-LOC", "L-LOC"], "bioes") == ["B-PER", "B-LOC", "I-LOC"]  # BILOU
    assert readers.to_bio(["I-PER", "I-PER", "B-PER", "I-LOC", "O", "I-LOC"], "iob1") == \
        ["B-PER", "I-PER", "B-PER", "B-LOC", "O", "B-LOC"]


def test_labels_of_the_training_file_and_a_type_seen_only_in_dev(small_data_dir):
    wnut = small_data_dir / "ner" / "wnut17"
    train = readers.read_conll(wnut / "wnut17train.conll")
    types = ["corporation", "creative-work", "group", "location", "person", "product"]  # WNUT-17's six
    assert readers.labels_of(train) == ["O"] + [f"{p}-{t}" for t in types for p in "BI"]
    # The first five training sentences hold no creative work and no product: the dev file's first
    # line with either is named.
    labels = readers.labels_of(train[:5])
    assert labels == ["O"] + [f"{p}-{t}" for t in ("corporation", "group", "location", "person") for p in "BI"]
    lines = (wnut / "emerging.dev.conll").read_text(encoding="utf-8").splitlines()
    line = next(i for i, text in enumerate(lines, 1) if text.split() and text.split()[-1][2:] in
                ("creative-work", "product"))
    dev = readers.read_conll(wnut / "emerging.dev.conll")
    with pytest.raises(UserError) as error:
        readers.check_tags(dev, labels, wnut / "emerging.dev.conll", "the training file")
    assert str(error.value) == (
        f"{wnut / 'emerging.dev.conll'}:{line}: type {lines[line - 1].split()[-1][2:]!r} is not among the labels "
        "(corporation, group, location, person, of the training file): a type the model never learnt cannot be scored")


@pytest.mark.parametrize("text, scheme, message", [
    ("EU\tB-ORG\nrejects\n", "bio", r":2: 'rejects' has no tag: a line holds a token and its tag"),
    ("EU\tS-ORG\n", "bio", r":1: tag 'S-ORG' is not a BIO tag \(O, or B/I-<type>\); is --tag_scheme right\?"),
    ("EU\tB-\n", "iob1", r":1: tag 'B-' is not a IOB1 tag"),
    ("EU\tBX-ORG\n", "bioes", r":1: tag 'BX-ORG' is not a BIOES tag"),
])
def test_a_bad_line_is_one_error_naming_file_and_line(tmp_path, text, scheme, message):
    path = tmp_path / "bad.conll"
    path.write_text(text)
    with pytest.raises(UserError, match=f"^{path}{message}"):
        readers.read_conll(path, scheme)


def test_not_utf8_and_untagged_predict_files(tmp_path):
    path = tmp_path / "latin1.conll"
    path.write_bytes("Zoë\tO\n".encode("latin-1"))
    with pytest.raises(UserError, match=rf"^{path}:1: not UTF-8"):
        readers.read_conll(path)
    path.write_text("Ada\nlives\tO\n")
    assert readers.read_conll(path, tagged=False)[0].tags == ("O", "O")
