"""Reading the corpus as documents: both input formats, file boundaries, sentence splitting."""

import bz2
import gzip
import lzma

import pytest

from data_prep.documents import BadInputError, InputStats, iter_documents, split_sentences


def test_sentence_per_line_documents_end_at_blank_lines_and_at_file_ends(tmp_path):
    first, second = tmp_path / "a.txt", tmp_path / "b.txt"
    first.write_text("One.\nTwo.\n\n\n  \nThree.\n")
    second.write_text("Four.\n\nFive.\nSix.")  # no final newline
    stats = InputStats()
    documents = list(iter_documents([str(first), str(second)], stats=stats))
    assert documents == [["One.", "Two."], ["Three."], ["Four."], ["Five.", "Six."]]
    assert (stats.documents, stats.lines) == (4, 10)


def test_document_per_line_splits_sentences(tmp_path):
    path = tmp_path / "docs.txt"
    path.write_text(
        "Mr. Smith went to Washington. He saw J. R. Ewing there! Did he? Yes.\n\nSecond doc without an end\n"
    )
    documents = list(iter_documents([str(path)], "document_per_line"))
    assert documents == [
        ["Mr. Smith went to Washington.", "He saw J. R. Ewing there!", "Did he?", "Yes."],
        ["Second doc without an end"],
    ]


def test_split_sentences_keeps_closing_quotes_and_decimals():
    assert split_sentences('He said "Stop." Then he left. Pi is 3.14 today.') == [
        'He said "Stop."',
        "Then he left.",
        "Pi is 3.14 today.",
    ]
    assert split_sentences("   ") == []


def test_on_the_real_wikitext_each_paragraph_line_is_a_document(small_data_dir):
    path = small_data_dir / "corpus" / "wikitext-2-raw" / "wiki.valid.raw"
    lines = path.read_text(encoding="utf-8").split("\n")
    non_blank = sum(1 for line in lines if line.strip())
    documents = list(iter_documents([str(path)], "document_per_line"))
    assert len(documents) == non_blank  # every non-blank line, headings included
    heading = documents[0]
    assert heading == ["= Homarus gammarus ="]
    paragraph = documents[1]  # six sentences; "H. americanus" is an initial, not a sentence end
    assert len(paragraph) == 6 and paragraph[1] == "It is closely related to the American lobster , H. americanus ."


def test_unknown_input_format_is_refused():
    with pytest.raises(ValueError, match="input_format must be one of"):
        list(iter_documents([], "xml"))


@pytest.mark.parametrize("suffix, compress", [(".gz", gzip.compress), (".bz2", bz2.compress), (".xz", lzma.compress)])
def test_compressed_files_read_as_their_text(tmp_path, suffix, compress):
    text = "Mr. Smith went to Washington. He saw J. R. Ewing there!\nSecond doc.\n"
    plain, packed = tmp_path / "docs.txt", tmp_path / f"docs.txt{suffix}"
    plain.write_text(text)
    packed.write_bytes(compress(text.encode()))
    expected = list(iter_documents([str(plain)], "document_per_line"))
    assert list(iter_documents([str(packed)], "document_per_line")) == expected
    assert len(expected) == 2


def test_a_corrupt_compressed_file_is_named(tmp_path):
    path = tmp_path / "docs.txt.xz"
    path.write_bytes(lzma.compress(b"One.\nTwo.\n")[:-8])  # truncated
    with pytest.raises(BadInputError, match=r"docs\.txt\.xz: not valid \.xz data"):
        list(iter_documents([str(path)]))
