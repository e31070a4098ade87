"""The graph tokenizer's character offsets equal the Python tokenizer's, id for id and span for span."""

import json

import pytest
import tensorflow as tf

from albert_tf.tokenizers.graph_tokenizer import AlbertGraphTokenizer
from albert_tf.tokenizers.tokenizer import AlbertTokenizer

EDGE_CASES = [
    "  Héllo   World, in  2012,\tthe café \ufb01 \u201cquoted\u201d x  ",
    "",
    " \n\t ",
    "ΑΣ b ½ 6½ Ærø",  # a final sigma, NFKD expansions split across pieces
    "a",
    "Ca\u0301fe\u0301\u00a0\u2003bar",  # combining marks, no-break and em spaces
]


@pytest.fixture(scope="module")
def tokenizers(small_data_dir):
    path = small_data_dir / "albert" / "30k-clean.model"
    return AlbertTokenizer(path), AlbertGraphTokenizer(path.read_bytes())


def _check(tokenizers, texts, graph_fn):
    python, _ = tokenizers
    ids, starts, ends = graph_fn(tf.constant(texts))
    for i, text in enumerate(texts):
        got = (ids[i].numpy().tolist(), starts[i].numpy().tolist(), ends[i].numpy().tolist())
        assert got == tuple(python.encode_with_offsets(text)), text[:60]


def test_edge_cases(tokenizers):
    _check(tokenizers, EDGE_CASES, tokenizers[1].tokenize_with_offsets)


def test_real_contexts_inside_a_tf_function(tokenizers, small_data_dir):
    with open(small_data_dir / "squad" / "dev-v2.0.article0.json", encoding="utf-8") as f:
        contexts = [p["context"] for a in json.load(f)["data"] for p in a["paragraphs"]]
    graph = tokenizers[1]
    fn = tf.function(graph.tokenize_with_offsets, input_signature=[tf.TensorSpec([None], tf.string)])
    _check(tokenizers, contexts, fn)
    # The ids are the ones `tokenize` gives.
    assert fn(tf.constant(contexts[:3]))[0].to_list() == graph.tokenize(tf.constant(contexts[:3])).to_list()
