"""A question-answering model of transformers answers here as transformers' pipeline answers (issue 54, item 2).

An `AlbertForQuestionAnswering` made with transformers (every parameter random, saved by
`save_pretrained`, the release's 30k-clean.model as spiece.model) comes in through the one loader
(`AlbertSpanLabeler.from_preset`, whose task.json records transformers' answer rule) and goes out
as the SQuAD export (`albert_tf.serving.question_answering.export_squad`, the source's rule): its
`serve_text` gives the answer text, its character span and its score of transformers'
question-answering pipeline on the same files, on 20 (question, context) pairs. The same model as a
Hub repository (the loopback stand-in) goes out by one command, `albert-export --preset hf://...`,
with the answers of the Python export and of the pipeline at its defaults; the offline decoder of a
fine-tuning run's evaluation (`finetune.squad.postprocess.postprocess_hf`) gives the same n-best lists.

transformers 5 removed that pipeline (`REMOVED_TASKS["question-answering"]`) but keeps its decoding,
`select_starts_ends`, in document_question_answering.py; `_pipeline` below is v4's
`QuestionAnsweringPipeline` on a fast tokenizer (pipelines/question_answering.py, v4.57: the pair
tokenized question first, `p_mask` the non-context tokens but [CLS], `select_starts_ends`, the span
widened to whole words by `token_to_word` / `word_to_chars`, the null answer appended with
`handle_impossible_answer` and the answers sorted by score). The contexts fit one window: windows
of longer ones are cut differently (albert_tf/serving/question_answering.py's docstring).
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
import torch
import transformers
from transformers.pipelines.document_question_answering import select_starts_ends

from albert_tf.cli import export as export_cli
from albert_tf.data.windows import FeatureSettings
from albert_tf.models.span_labeler import AlbertSpanLabeler
from albert_tf.presets.hf_heads import answer_rule
from albert_tf.presets.model_source import load_saved_model, open_source
from albert_tf.serving.question_answering import HF_DEFAULTS, export_squad, word_pieces
from albert_tf.serving.task_exports import run_info
from albert_tf.tokenizers.tokenizer import AlbertTokenizer
from finetune.squad import features, postprocess
from finetune.squad.readers import Example
from tests.albert_tf import release_replicas as replicas
from tests.albert_tf.presets.test_hf_heads import _hf_model, cache  # noqa: F401  (the cache fixture)
from tests.albert_tf.serving.test_hf_pipelines import CONFIG, SPM
from tests.helpers import console_script

# The pipeline's default max_answer_len, which albert-export takes for a model of transformers.
MAX_SEQ_LENGTH, MAX_ANSWER_LEN = 96, HF_DEFAULTS["max_answer_length"]
PAIRS = [
    ("Who wrote the book?", "The book was written by Jane Austen in 1813."),
    ("Where is the tower?", "The Eiffel Tower stands in Paris, on the Champ de Mars."),
    ("When did it open?", "The bridge opened to traffic in May 1937 after four years of work."),
    ("What colour is the sky?", "On a clear day the sky is blue;  at sunset it turns red."),
    ("How many legs has a spider?", "A spider has eight legs and, usually, eight eyes."),
    ("Who painted it?", "It was painted by a young artist from Delft, whose name is lost."),
    ("What does the cat eat?", "Our cat eats fish, rice and the occasional moth."),
    ("Which river flows there?", "The Thames flows through London to the North Sea."),
    ("What is water made of?", "Water is made of hydrogen and oxygen atoms."),
    ("Who won the race?", "After a long chase, the youngest runner won the race by a metre."),
    ("Why was he late?", "He was late because the train stopped twice between stations."),
    ("What instrument does she play?", "She plays the cello in a string quartet every Sunday."),
    ("How old is the tree?", "Scientists think the oak is about four hundred years old."),
    ("Where do penguins live?", "Most penguins live in the southern hemisphere, many in Antarctica."),
    ("What is the capital?", "Canberra, not Sydney, is the capital of Australia."),
    ("Who discovered penicillin?", "Penicillin was discovered by Alexander Fleming in 1928."),
    ("What did they build?", "The villagers built a stone wall to keep the sheep in."),
    ("How far is the moon?", "The moon is roughly 384,400 kilometres from the Earth."),
    ("What language is spoken?", "In Quebec most people speak French at home."),
    ("When does the shop close?", "The shop closes at six o'clock, except on Fridays."),
]


def _pipeline(folder) -> list[dict]:
    """transformers v4's question-answering pipeline (the module docstring), top_k=1, per pair:
    its answer (`span`) and its answer with `handle_impossible_answer` (`with_null`, whose score is
    the null one where that wins)."""
    tokenizer = transformers.AlbertTokenizer.from_pretrained(folder)
    pieces = AlbertTokenizer(str(SPM))
    model = transformers.AlbertForQuestionAnswering.from_pretrained(folder).eval()
    answers = []
    for question, context in PAIRS:
        encoding = tokenizer(question, context, truncation="only_second", max_length=MAX_SEQ_LENGTH,
                             return_token_type_ids=True, return_overflowing_tokens=True, return_offsets_mapping=True)
        assert len(encoding["input_ids"]) == 1, "the context fits one window"
        ids = np.array(encoding["input_ids"])
        # transformers' pieces are the release's on these texts (not after a user-defined piece inside
        # a word: "well-meaning" is "▁meaning" there, "meaning" in SentencePiece), so the logits agree.
        segments = np.array([-1 if s is None else s for s in encoding.sequence_ids(0)])
        assert [ids[0][segments == 0].tolist(), ids[0][segments == 1].tolist()] == [
            pieces.encode(question), pieces.encode(context)], (question, context)
        p_mask = np.array([[token != 1 for token in encoding.sequence_ids(0)]], np.int64)
        p_mask[ids == tokenizer.cls_token_id] = 0
        with torch.no_grad():
            out = model(input_ids=torch.tensor(ids), attention_mask=torch.tensor(encoding["attention_mask"]),
                        token_type_ids=torch.tensor(encoding["token_type_ids"]))
        # With handle_impossible_answer the spans are the same; the null score is computed besides.
        (s,), (e,), (score,), null = select_starts_ends(
            out.start_logits.numpy(), out.end_logits.numpy(), p_mask, np.array(encoding["attention_mask"]),
            top_k=1, handle_impossible_answer=True, max_answer_len=MAX_ANSWER_LEN)
        start = encoding.word_to_chars(encoding.token_to_word(0, int(s)), sequence_index=1).start
        end = encoding.word_to_chars(encoding.token_to_word(0, int(e)), sequence_index=1).end
        span = {"score": float(score), "start": start, "end": end, "answer": context[start:end]}
        null_answer = {"score": null, "start": 0, "end": 0, "answer": ""}
        answers.append({"span": span, "with_null": sorted([span, null_answer], key=lambda a: a["score"], reverse=True)[0],
                        "null": null, "widened": (start, end) != (encoding["offset_mapping"][0][s][0],
                                                                  encoding["offset_mapping"][0][e][1])})
    return answers


@pytest.fixture(scope="module")
def hf_qa(tmp_path_factory):
    """A transformers AlbertForQuestionAnswering's folder, the pipeline's answers on PAIRS (at its
    default max_answer_len) and the Python export's (`export_squad` by the source's rule, with the
    null answer) `serve_text` outputs on them."""
    folder = tmp_path_factory.mktemp("hf_qa")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ALBERT_TF_HOME", str(folder / "cache"))
        _hf_model("AlbertForQuestionAnswering", folder / "hf", config=CONFIG, vocab=SPM)
        theirs = _pipeline(folder / "hf")
        source = open_source(str(folder / "hf"))
        assert answer_rule(run_info(source)) == "huggingface"
        model = AlbertSpanLabeler.from_preset(source)
        export_squad(model, folder / "export", source.vocabulary(), FeatureSettings(MAX_SEQ_LENGTH), version_2=False,
                     max_answer_length=MAX_ANSWER_LEN, answer_rule=answer_rule(run_info(source)),
                     handle_impossible_answer=True)
    ours = load_saved_model(str(folder / "export")).signatures["serve_text"](**_texts())
    return folder / "hf", model, theirs, {k: v.numpy() for k, v in ours.items()}


def _texts() -> dict:
    """serve_text's inputs of PAIRS."""
    questions, contexts = zip(*PAIRS)
    return {"question": tf.constant(questions), "context": tf.constant(contexts)}


def test_question_answering_answers_equal_the_pipelines(hf_qa):
    _, _, theirs, ours = hf_qa
    for i, (pair, answer) in enumerate(zip(PAIRS, theirs)):
        with_null, span = answer["with_null"], answer["span"]
        assert ours["answer_text"][i].decode() == with_null["answer"], pair
        assert (ours["char_start"][i], ours["char_end"][i]) == (with_null["start"], with_null["end"]), pair
        np.testing.assert_allclose(ours["score"][i], with_null["score"], rtol=1e-4, atol=1e-7, err_msg=str(pair))
        # Without the null rule the pipeline answers the best span: the first of the n-best list.
        assert ours["top_k_text"][i][0].decode() == span["answer"], pair
        assert (ours["top_k_char_start"][i][0], ours["top_k_char_end"][i][0]) == (span["start"], span["end"]), pair
    np.testing.assert_allclose(ours["no_answer_probability"], [a["null"] for a in theirs], rtol=1e-4, atol=1e-7)
    # Not one answer for all; some widened from a piece inside a word to the whole word; some null.
    assert len({a["span"]["answer"] for a in theirs}) == len(PAIRS)
    assert any(a["widened"] for a in theirs)
    assert 0 < sum(a["with_null"]["answer"] == "" for a in theirs) < len(PAIRS)


def test_albert_export_of_a_hub_question_answerer_answers_as_the_python_export(hf_qa, tmp_path, monkeypatch, capsys):
    """One command, `albert-export --preset hf://<an AlbertForQuestionAnswering>`, writes the SQuAD
    SavedModel answering by transformers' rule (what the source records) at the pipeline's defaults
    (max_answer_len 15, no null answer): the Python export's n-best lists, and the pipeline's
    answers; the offline decoder of a run's evaluation by the same rule gives the same lists."""
    folder, model, theirs, python = hf_qa
    repo = "someone/albert-tiny-squad"
    server = replicas.LoopbackServer()
    server.repos[repo] = replicas.hub_task_files(folder)
    replicas.point_the_hub_at(monkeypatch, server, tmp_path / "hub")
    try:
        code, out, err = console_script(export_cli.run, [
            "albert-export", "--preset", f"hf://{repo}", "--max_seq_length", MAX_SEQ_LENGTH,
            "--serving_version", 1, "--output_dir", tmp_path / "serving"], monkeypatch, capsys)
    finally:
        server.stop()
    assert code == 0, err
    assert f"wrote the AlbertSpanLabeler SavedModel (float32) to {tmp_path / 'serving' / '1'}" in out
    assert (tmp_path / "serving" / "1" / "assets.extra" / "tf_serving_warmup_requests").is_file()

    served = {k: v.numpy() for k, v in load_saved_model(str(tmp_path / "serving" / "1")).signatures["serve_text"](
        **_texts()).items()}
    assert sorted(served) == sorted(python)
    for name in ("top_k_text", "top_k_char_start", "top_k_char_end", "top_k_probability", "probability",
                 "no_answer_probability"):  # what the null answer leaves alone
        if python[name].dtype.kind == "f":
            np.testing.assert_allclose(served[name], python[name], rtol=1e-6, atol=1e-7, err_msg=name)
        else:
            np.testing.assert_array_equal(served[name], python[name], err_msg=name)
    # No null answer: the first of the n-best list, the pipeline's answer and score.
    np.testing.assert_array_equal(served["answer_text"], python["top_k_text"][:, 0])
    np.testing.assert_array_equal(served["char_start"], python["top_k_char_start"][:, 0])
    assert [t.decode() for t in served["answer_text"]] == [a["span"]["answer"] for a in theirs]
    np.testing.assert_allclose(served["score"], [a["span"]["score"] for a in theirs], rtol=1e-4, atol=1e-7)

    # The offline decoder of a fine-tuning run's evaluation, by the same rule: the served n-best lists.
    examples = [Example(str(i), "", question, context) for i, (question, context) in enumerate(PAIRS)]
    tokenizer = AlbertTokenizer(str(folder / "spiece.model"))
    records = features.stack_records(features.convert_examples(examples, tokenizer, FeatureSettings(MAX_SEQ_LENGTH)))
    logits = model({k: records[k] for k in ("input_ids", "input_mask", "segment_ids")})
    offline = postprocess.postprocess_hf(examples, records, logits["start_logits"].numpy(),
                                         logits["end_logits"].numpy(), word_pieces(tokenizer.model_proto),
                                         max_answer_length=MAX_ANSWER_LEN)
    assert [offline.answers[e.qas_id] for e in examples] == [t.decode() for t in served["answer_text"]]
    for i, example in enumerate(examples):
        nbest = offline.nbest[example.qas_id][:served["top_k_text"].shape[1]]
        assert [c["text"] for c in nbest] == [t.decode() for t in served["top_k_text"][i][:len(nbest)]], example
        assert [(c["char_start"], c["char_end"]) for c in nbest] == list(zip(
            served["top_k_char_start"][i][:len(nbest)], served["top_k_char_end"][i][:len(nbest)]))
        np.testing.assert_allclose([c["probability"] for c in nbest], served["top_k_probability"][i][:len(nbest)],
                                   rtol=1e-4, atol=1e-6)


def test_a_squad_run_decodes_and_records_the_rule_it_is_given():
    from finetune.squad.task import SquadTask

    task = SquadTask(answer_rule="huggingface", max_answer_length=MAX_ANSWER_LEN)
    assert answer_rule(task.run_info()) == "huggingface"  # what its export and albert-export of the run read
    assert {"input_ids", "p_mask"} <= set(task.prediction_features)  # postprocess_hf's words and windows
    assert answer_rule(SquadTask().run_info()) == "release"
    with pytest.raises(ValueError, match="not v2.0's beam"):
        SquadTask(version_2_with_negative=True, answer_rule="huggingface")
    with pytest.raises(ValueError, match="answer_rule must be one of release, huggingface, got 'hf'"):
        SquadTask(answer_rule="hf")


def test_a_squad_run_from_a_hugging_face_question_answerer_answers_by_its_rule(hf_qa, tmp_path):
    """A one-step albert-finetune-squad run from the Hugging Face folder (a learning rate of 1e-9:
    the model's answers stay the pipeline's), without --answer_rule, answers by transformers' rule
    (what the source records: `postprocess_hf` on the run's model) and records it in its task.json;
    with --answer_rule=release it answers by the release's (`postprocess_v1`: start + end logit,
    pieces unwidened)."""
    import json

    from finetune.squad import cli as squad_cli

    folder, _, theirs, _ = hf_qa
    data = tmp_path / "pairs.json"
    paragraphs = [{"context": context, "qas": [{"id": str(i), "question": question,
                                                "answers": [{"text": context[:3], "answer_start": 0}]}]}
                  for i, (question, context) in enumerate(PAIRS)]
    data.write_text(json.dumps({"version": "1.1", "data": [{"title": "pairs", "paragraphs": paragraphs}]}))
    examples = [Example(str(i), "", question, context) for i, (question, context) in enumerate(PAIRS)]
    tokenizer = AlbertTokenizer(str(folder / "spiece.model"))
    records = features.stack_records(features.convert_examples(examples, tokenizer, FeatureSettings(MAX_SEQ_LENGTH)))

    def run(name, *flags):
        out = tmp_path / name
        summary = squad_cli.finetune([
            "albert-finetune-squad", f"--preset={folder}", f"--train_file={data}", f"--predict_file={data}",
            "--do_train", "--do_predict", "--num_train_steps=1", "--num_warmup_steps=0", "--learning_rate=1e-9",
            "--train_batch_size=4", "--steps_per_loop=1", "--nojit_compile", "--noexport", "--noprogress_bar",
            f"--max_seq_length={MAX_SEQ_LENGTH}", f"--max_answer_length={MAX_ANSWER_LEN}", f"--output_dir={out}",
            *flags])
        predictions = json.loads((out / "predictions.json").read_text())
        logits = summary["model"]({k: records[k] for k in ("input_ids", "input_mask", "segment_ids")})
        return ([predictions[e.qas_id] for e in examples], json.loads((out / "task.json").read_text()),
                (logits["start_logits"].numpy(), logits["end_logits"].numpy()))

    by_source, recorded, logits = run("source")
    assert recorded["answer_rule"] == "huggingface"  # what albert-export of the run answers by
    hf = postprocess.postprocess_hf(examples, records, *logits, word_pieces(tokenizer.model_proto),
                                    max_answer_length=MAX_ANSWER_LEN)
    assert by_source == [hf.answers[e.qas_id] for e in examples]
    assert by_source == [a["span"]["answer"] for a in theirs]  # the pipeline's answers
    # Predicting again from the run's folder alone: the rule its task.json records. --noexport as in
    # the runs above: a run without an export would write one, which nothing here reads.
    (tmp_path / "source" / "predictions.json").unlink()
    squad_cli.finetune(["albert-finetune-squad", f"--predict_file={data}", "--do_predict", "--noprogress_bar",
                        "--noexport",
                        f"--max_seq_length={MAX_SEQ_LENGTH}", f"--max_answer_length={MAX_ANSWER_LEN}",
                        f"--output_dir={tmp_path / 'source'}"])
    again = json.loads((tmp_path / "source" / "predictions.json").read_text())
    assert [again[e.qas_id] for e in examples] == by_source

    by_release, recorded, logits = run("release", "--answer_rule=release")
    assert recorded["answer_rule"] == "release"
    release = postprocess.postprocess_v1(examples, records, *logits, max_answer_length=MAX_ANSWER_LEN)
    assert by_release == [release.answers[e.qas_id] for e in examples]
    assert by_release != by_source  # the two rules differ on these pairs
