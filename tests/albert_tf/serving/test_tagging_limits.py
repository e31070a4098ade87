"""The entity tagger's `serve_text` (issue 52 items 1 and 2): its memory grows with the text, not
with the square of it, up to a stated longest text, refused in one line past it; texts shaped [B]
or [B, 1], any other shape refused in one line.

The memory is measured in a process of its own, without this package: the peak resident memory
(VmHWM, reset through /proc/self/clear_refs) while the SavedModel tags one text, above what the
process held before. Cutting the words' texts from the whole input once a word, and weighing every
window against every other, took 271 MB for 2,000 words and 1.08 GB for 4,000 on this model (the
square); joining the words' characters padded each word to the longest (5.7 GB for a 50,000-letter
word beside 15,000 short ones) and the tokenizer decided every run of repeated punctuation at every
unit of the longest run (4.6 GB for 30,000 "!" beside 20,000 "!!"). Now 11.6 MB for 2,000 words
(13.8 KB), 10.9 MB for 14,000 (97 KB), 13.9 MB and 11.7 MB for those two texts.
"""

import json

import keras
import pytest
import tensorflow as tf

from albert_tf import AlbertConfig, AlbertEncoder, AlbertEntityRecognizer
from albert_tf.serving.tagging import MAX_TEXT_BYTES
from albert_tf.utils.errors import UserError
from tests.conftest import SMALL_DATA_DIR
from tests.helpers import attention_score_einsums

pytestmark = pytest.mark.faults

SPM = SMALL_DATA_DIR / "albert" / "30k-clean.model"
CONFIG = AlbertConfig(vocab_size=30000, embedding_size=16, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                      intermediate_size=64, max_position_embeddings=32)
# The stated bound: a fixed 48 MB (what a first call of any length sets up) and 1 KB a byte of text.
FIXED_BYTES, BYTES_PER_BYTE = 48 << 20, 1024

MEASURE = """
import json, re, sys
import tensorflow as tf
import tensorflow_text  # noqa: F401  (the SentencePiece op)
assert not any(m.startswith(("albert_tf", "finetune")) for m in sys.modules)

def kb(key):
    return int(re.search(key + r":\\s+(\\d+) kB", open("/proc/self/status").read()).group(1))

serve = tf.saved_model.load(sys.argv[1]).signatures["serve_text"]
serve(text=tf.constant(["a warm-up of every op !!!! 8888", ""]))
found = []
for text in json.load(open(sys.argv[2])):
    open("/proc/self/clear_refs", "w").write("5")  # the peak is now the present
    before = kb("VmRSS")
    out = serve(text=tf.constant([text]))
    found.append({"bytes": len(text.encode()), "words": int(out["num_words"][0]),
                  "growth": (kb("VmHWM") - before) * 1024})
print(json.dumps(found))
"""


@pytest.fixture(scope="module")
def recognizer(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tagger")
    keras.utils.set_random_seed(0)
    AlbertEncoder(CONFIG).save_to_preset(folder / "encoder", SPM)
    # Windows of 14 pieces 4 apart: a long text is many windows, each piece in several.
    recognizer = AlbertEntityRecognizer.from_preset(folder / "encoder", labels=["person", "location"],
                                                    sequence_length=16, doc_stride=4)
    recognizer.export(folder / "export")
    return recognizer, folder / "export"


def test_the_export_holds_the_models_forward_pass_once(recognizer):
    # serve_text's windows and serving_default call one traced forward pass; each traced its own before.
    assert attention_score_einsums(recognizer[1]) == CONFIG.num_hidden_layers == 1


@pytest.fixture(scope="module")
def loaded(recognizer):
    return tf.saved_model.load(str(recognizer[1]))


def test_serve_text_memory_grows_with_the_text_within_a_stated_bound(recognizer, fresh_process, tmp_path):
    _, export = recognizer
    texts = [" ".join(f"Word{i % 97}" for i in range(words)) for words in (2_000, 14_000)]  # 13.8 KB and 97 KB
    # The texts that were the square of their size in other steps: a long word beside many short
    # ones (the joins of word texts padded each to the longest), and a long run of repeated
    # punctuation beside many short runs (the tokenizer's decision of such runs, every run at every
    # unit of the longest).
    texts += ["x" * 50_000 + " ab" * 15_000, "!" * 40_000 + " !!!!!!!" * 6_000]
    (tmp_path / "texts.json").write_text(json.dumps(texts))
    (tmp_path / "measure.py").write_text(MEASURE)
    found = json.loads(fresh_process.script(tmp_path / "measure.py", export, tmp_path / "texts.json").splitlines()[-1])
    assert [f["words"] for f in found] == [len(text.split()) for text in texts]
    assert max(f["bytes"] for f in found) <= MAX_TEXT_BYTES
    for f in found:
        assert f["growth"] <= FIXED_BYTES + BYTES_PER_BYTE * f["bytes"], found


def test_a_text_past_the_bound_is_refused_in_one_line_and_one_at_it_is_tagged(recognizer, loaded):
    model, serve = recognizer[0], loaded.signatures["serve_text"]
    assert int(loaded.max_text_bytes.numpy()) == MAX_TEXT_BYTES  # a server can read it
    fits = ("ab " * MAX_TEXT_BYTES)[:MAX_TEXT_BYTES]
    assert serve(text=tf.constant([fits]))["num_words"].numpy().tolist() == [len(fits.split())]
    with pytest.raises(tf.errors.InvalidArgumentError) as error:
        serve(text=tf.constant(["short", fits + "é"]))
    assert (f"[serve_text takes texts of at most {MAX_TEXT_BYTES:,} bytes (UTF-8), got one of "
            f"{MAX_TEXT_BYTES + 2} bytes (row 1): cut it in parts]") in error.value.message
    with pytest.raises(UserError, match=rf"^x\[1\] is {MAX_TEXT_BYTES + 2:,} bytes long \(UTF-8\): the tagger takes "
                                        rf"texts of at most {MAX_TEXT_BYTES:,}; cut it in parts$"):
        model.predict(["short", fits + "é"])


def test_serve_text_takes_a_batch_by_one_as_a_batch_and_refuses_other_shapes(loaded):
    serve = loaded.signatures["serve_text"]
    texts = ["Ada lives in Paris", "Bob", ""]
    flat, column = serve(text=tf.constant(texts)), serve(text=tf.constant([[t] for t in texts]))
    assert column["word_text"].shape == (3, 4)  # before: [1, 3, 3] for one row, a failure for two
    for key, value in flat.items():
        assert value.numpy().tolist() == column[key].numpy().tolist(), key
    for empty in (tf.zeros([0], tf.string), tf.zeros([0, 1], tf.string)):
        assert serve(text=empty)["num_words"].shape == (0,)
    for text, shape in ((tf.constant("Ada"), "[]"), (tf.constant([["Ada", "Bob"]]), "[1 2]"),
                        (tf.constant([[["Ada"]]]), "[1 1 1]")):
        with pytest.raises(tf.errors.InvalidArgumentError) as error:
            serve(text=text)
        assert (f"[serve_text takes text of shape [batch] or [batch, 1] (one text a row), got shape {shape}]"
                in error.value.message)
