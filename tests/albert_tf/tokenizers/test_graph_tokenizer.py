"""AlbertGraphTokenizer gives the Python tokenizer's ids, in a graph and from a SavedModel."""

import pathlib
import random

import pytest
import tensorflow as tf

from albert_tf.tokenizers.graph_tokenizer import AlbertGraphTokenizer, graph_tables
from albert_tf.tokenizers.tokenizer import AlbertTokenizer

BATCH_LINES = 8192


@pytest.fixture(scope="module")
def model_path(small_data_dir):
    return small_data_dir / "albert" / "30k-clean.model"


@pytest.fixture(scope="module")
def tokenizers(model_path):
    return AlbertTokenizer(model_path), AlbertGraphTokenizer(model_path.read_bytes())


def _corpus_lines(data_dir):
    for path in sorted((data_dir / "corpus").glob("*/*")):
        raw = path.read_bytes()
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:  # two Gutenberg files are Latin-1: their accents test NFKD well
            text = raw.decode("latin-1")
        yield from text.split("\n")


def test_same_ids_as_python_on_every_corpus_line(data_dir, tokenizers):
    python_tokenizer, graph_tokenizer = tokenizers
    all_lines = list(_corpus_lines(data_dir))
    assert len(all_lines) > 230_000
    lines = list(dict.fromkeys(all_lines))  # every distinct line once: same coverage, less time
    tokenize = tf.function(graph_tokenizer.tokenize)
    mismatches = []
    for start in range(0, len(lines), BATCH_LINES):
        batch = lines[start : start + BATCH_LINES]
        expected = python_tokenizer.encode_batch(batch)
        got = tokenize(tf.constant(batch)).to_list()
        mismatches += [start + i for i, (e, g) in enumerate(zip(expected, got)) if e != g]
    assert mismatches == [], f"{len(mismatches)} lines differ, first: {lines[mismatches[0]]!r}"


def test_normalisation_edge_cases_match(tokenizers):
    python_tokenizer, graph_tokenizer = tokenizers
    texts = [
        "  Tabs\tand\u00a0no-break\u2003spaces\u3000 ",
        "``Quotes'' and '''three'''",
        "Ça va? Ångström, naïve, Øresund, ﬁne ½",
        "ΣΊΣΥΦΟΣ and İstanbul",
        "",
    ]
    got = graph_tokenizer.tokenize(tf.constant(texts)).to_list()
    assert got == python_tokenizer.encode_batch(texts)
    normalized = [t.decode() for t in graph_tokenizer.normalize(tf.constant(texts)).numpy()]
    assert normalized == [python_tokenizer.normalize(t) for t in texts]


def test_pack_matches_python_with_truncation(tokenizers):
    python_tokenizer, graph_tokenizer = tokenizers
    rng = random.Random(3)
    a = [[rng.randint(5, 29999) for _ in range(rng.randint(0, 20))] for _ in range(64)]
    b = [[rng.randint(5, 29999) for _ in range(rng.randint(0, 20))] for _ in range(64)]
    for max_seq_length in (5, 12, 45):
        packed = graph_tokenizer.pack(
            tf.ragged.constant(a, tf.int32), tf.ragged.constant(b, tf.int32), max_seq_length=max_seq_length
        )
        singles = graph_tokenizer.pack(tf.ragged.constant(a, tf.int32), max_seq_length=max_seq_length)
        for key in ("input_ids", "input_mask", "segment_ids"):
            assert packed[key].dtype == tf.int32 and packed[key].shape == (64, max_seq_length)
            assert packed[key].numpy().tolist() == [
                python_tokenizer.pack(x, y, max_seq_length=max_seq_length)[key] for x, y in zip(a, b)
            ]
            assert singles[key].numpy().tolist() == [
                python_tokenizer.pack(x, max_seq_length=max_seq_length)[key] for x in a
            ]


def test_text_pairs_end_to_end(tokenizers):
    python_tokenizer, graph_tokenizer = tokenizers
    first, second = ["Is this a question?", "Short"], ["Yes, it is one.", "A much longer second text " * 5]
    packed = graph_tokenizer(tf.constant(first), tf.constant(second), max_seq_length=16)
    expected = [
        python_tokenizer.pack(python_tokenizer.encode(x), python_tokenizer.encode(y), max_seq_length=16)["input_ids"]
        for x, y in zip(first, second)
    ]
    assert packed["input_ids"].numpy().tolist() == expected


def _sentencepiece_ops(concrete_function) -> int:
    """How many SentencePiece kernels a traced function runs (nested functions included)."""
    graph = concrete_function.graph.as_graph_def()
    nodes = [*graph.node, *(n for f in graph.library.function for n in f.node_def)]
    return sum(n.op.endswith("SentencepieceTokenize") for n in nodes)


def test_pack_rows_takes_single_texts_or_pairs_known_only_when_it_runs(tokenizers):
    """One traced function packs `[B, 1]` and `[B, 2]` batches as `__call__` does, with the
    segments of every row through one SentencePiece kernel: serve_text had a tf.cond over two
    packings, three tokenizers in all, whose ops made exports and a server's first call slow."""
    python_tokenizer, graph_tokenizer = tokenizers
    rng = random.Random(5)
    words = "the a of cat 2012, dog !!!! house running quickly über naïve".split()
    texts = [" ".join(rng.choice(words) for _ in range(rng.randint(0, 30))) for _ in range(40)]
    rows = tf.function(lambda t: graph_tokenizer.pack_rows(t, max_seq_length=24, length_buckets=(8, 16, 24)))
    traced = rows.get_concrete_function(tf.TensorSpec([None, None], tf.string))
    pairs = tf.function(lambda a, b: graph_tokenizer(a, b, max_seq_length=24))
    assert _sentencepiece_ops(traced) == 1
    assert _sentencepiece_ops(pairs.get_concrete_function(*[tf.TensorSpec([None], tf.string)] * 2)) == 1
    encoded = [python_tokenizer.encode(t) for t in texts]
    for width in (1, 2):
        batch = [texts[k : k + width] for k in range(0, 40, width)]
        packed = traced(tf.constant(batch))
        expected = [python_tokenizer.pack(*[encoded[k + j] for j in range(width)], max_seq_length=24)
                    for k in range(0, 40, width)]
        longest = max(sum(row["input_mask"]) for row in expected)
        assert packed["input_ids"].shape[1] == min(n for n in (8, 16, 24) if n >= longest)
        for key in ("input_ids", "input_mask", "segment_ids"):
            assert packed[key].numpy().tolist() == [row[key][: packed[key].shape[1]] for row in expected]
    empty = traced(tf.zeros([0, 2], tf.string))
    assert [v.shape.as_list() for v in empty.values()] == [[0, 8]] * 3


def test_round_trips_through_a_saved_model_with_the_model_as_an_asset(tmp_path, model_path, tokenizers):
    python_tokenizer, _ = tokenizers
    module = tf.Module()
    module.tokenizer = AlbertGraphTokenizer(str(model_path))
    assert module.tokenizer.model_asset is not None
    module.encode = tf.function(
        lambda texts: module.tokenizer(texts, max_seq_length=12)["input_ids"],
        input_signature=[tf.TensorSpec([None], tf.string)],
    )
    tf.saved_model.save(module, str(tmp_path / "saved"))
    assert (tmp_path / "saved" / "assets" / "30k-clean.model").exists()
    restored = tf.saved_model.load(str(tmp_path / "saved"))
    texts = ["Hello World, said the lobster.", "Naïve café"]
    expected = [python_tokenizer.pack(python_tokenizer.encode(t), max_seq_length=12)["input_ids"] for t in texts]
    assert restored.encode(tf.constant(texts)).numpy().tolist() == expected


def test_tokenizers_of_one_model_share_its_tables_but_not_their_tensors(tokenizers, model_path):
    """Issue 53: what the graph tokenizer draws from the vocabulary (the fast kernel's conversion
    of the model and the tie and re-split tables) is built once per model; each tokenizer still
    makes its own tensors, which belong to the graph or layer that holds it."""
    python_tokenizer, first = tokenizers
    before = graph_tables.cache_info()
    second = AlbertGraphTokenizer(model_path.read_bytes())
    assert graph_tables.cache_info().hits == before.hits + 1 and graph_tables.cache_info().misses == before.misses
    assert second._part_ids is not first._part_ids and second._sentencepiece._converted_model is not (
        first._sentencepiece._converted_model)
    tiny_path = pathlib.Path(__file__).resolve().parents[2] / "fixtures" / "data_prep" / "tiny_vocab.model"
    tiny = AlbertGraphTokenizer(tiny_path.read_bytes())
    # Another model has tables of its own (whether another test built them first or not).
    assert graph_tables(tiny_path.read_bytes()) is not graph_tables(model_path.read_bytes())
    assert graph_tables(tiny_path.read_bytes()).arrays["part_counts"].shape == (300,)
    with pytest.raises(ValueError):
        graph_tables(model_path.read_bytes()).arrays["part_ids"][0] = 1  # read-only
    texts = ["Emma Woodhouse, handsome, clever, and rich (she said 1,995 times).", "!!!! 80888 66666"]
    for graph_tokenizer, reference in ((second, python_tokenizer), (tiny, AlbertTokenizer(tiny_path))):
        assert graph_tokenizer.tokenize(tf.constant(texts)).to_list() == reference.encode_batch(texts)
    assert tiny.tokenize(tf.constant(texts)).to_list() != second.tokenize(tf.constant(texts)).to_list()


def test_refuses_bytes_that_are_not_a_model():
    with pytest.raises(ValueError, match="not a readable SentencePiece model"):
        AlbertGraphTokenizer(b"not a model")


# Every C0 control and DEL, alone, between words, at each end and repeated. The release's
# SentencePiece (nmt_nfkc) removes most of them, reads \t \n \v \f \r and \x1c-\x1f as spaces (as
# str.split does before it), and keeps NUL, which no piece holds: an <unk>.
CONTROL_TEXTS = [
    text
    for code in [*range(32), 127]
    for c in [chr(code)]
    for text in (c, f"A{c}B c{c}", f"{c}Hello World", f"x{c}{c}y", f"ΑΣ{c}b")
] + ["a\x00 " + "a long text that follows the NUL " * 8, "\x00The Normans were the people of Normandy."]


@pytest.mark.faults
def test_c0_controls_and_nul_give_the_python_ids_and_offsets(tokenizers):
    """Issue 40 item 1: tf.strings.lower ended a string at its first NUL, so `"a\\x00 <text>"` was
    served as `"a"` and a context starting with NUL held no token."""
    python_tokenizer, graph_tokenizer = tokenizers
    texts = tf.constant(CONTROL_TEXTS)
    assert graph_tokenizer.tokenize(texts).to_list() == python_tokenizer.encode_batch(CONTROL_TEXTS)
    assert [t.decode() for t in graph_tokenizer.normalize(texts).numpy()] == [
        python_tokenizer.normalize(t) for t in CONTROL_TEXTS]
    ids, starts, ends = tf.function(graph_tokenizer.tokenize_with_offsets)(texts)
    got = list(zip(ids.to_list(), starts.to_list(), ends.to_list()))
    assert got == [tuple(python_tokenizer.encode_with_offsets(t)) for t in CONTROL_TEXTS]
    assert len(got[-2][0]) > 30 and python_tokenizer.unk_id in got[-1][0]  # the text after NUL is read
