"""Readers of the official SQuAD JSON: the real files of ../shared/data/squad and bad ones."""

import json

import pytest

from finetune.squad import readers

# file, version 2, questions, unanswerable, gold answers
OFFICIAL_FILES = [
    ("dev-v1.1.json", False, 10570, 0, 34726),
    ("train-v1.1.first11articles.json", False, 3807, 0, 3807),
    ("dev-v2.0.first16articles.json", True, 6078, 3168, 13220 - 0),
]


@pytest.mark.parametrize("name,v2,questions,impossible,answers", OFFICIAL_FILES)
def test_official_files(data_dir, name, v2, questions, impossible, answers):
    examples = readers.read_squad(data_dir / "squad" / name, version_2_with_negative=v2)
    assert len(examples) == questions
    assert len({e.qas_id for e in examples}) == questions
    assert sum(e.is_impossible for e in examples) == impossible
    # v2.0's unanswerable questions carry plausible answers instead of answers.
    assert sum(len(e.answers) + len(e.plausible_answers) for e in examples) == answers
    for e in examples:
        for a in e.answers + e.plausible_answers:
            assert e.context[a.start : a.end] == a.text
        assert (e.train_answer is None) == e.is_impossible


def test_v2_needs_the_flag(data_dir):
    with pytest.raises(readers.SquadFormatError, match=r"is_impossible.*--version_2_with_negative") as info:
        readers.read_squad(data_dir / "squad" / "dev-v2.0.first16articles.json")
    assert "dev-v2.0.first16articles.json: article 'Normans', question 'c42edddd0f45b968cc4c512e5'" in str(info.value)


def _write(tmp_path, document, name="bad.json"):
    path = tmp_path / name
    path.write_text(document if isinstance(document, str) else json.dumps(document))
    return path


def _file(qa):
    return {"version": "1.1", "data": [{"title": "Rome", "paragraphs": [{"context": "Rome is in Italy.", "qas": [qa]}]}]}


def test_answer_start_that_misses_the_text_is_named(tmp_path):
    qa = {"id": "q7", "question": "Where?", "answers": [{"text": "Italy", "answer_start": 10}]}
    with pytest.raises(readers.SquadFormatError) as info:
        readers.read_squad(_write(tmp_path, _file(qa)))
    message = str(info.value)
    assert "\n" not in message
    assert "bad.json: article 'Rome', question 'q7': answers[0] answer_start 10 points at ' Ital'" in message
    assert "'Italy'" in message


def test_malformed_json_names_the_position(tmp_path):
    with pytest.raises(readers.SquadFormatError, match=r"bad.json: not valid JSON: .* at line 2 column"):
        readers.read_squad(_write(tmp_path, '{"data": [\n  {"title": }]}'))


@pytest.mark.parametrize(
    "qa,reason",
    [
        ({"question": "Where?", "answers": []}, "question 0 has no 'id' string"),
        ({"id": "q1", "answers": []}, "question 'q1': no 'question' string"),
        ({"id": "q1", "question": "Where?", "answers": []}, "has no answer and is not marked is_impossible"),
        ({"id": "q1", "question": "Where?", "answers": [{"text": "Rome"}]}, "no integer 'answer_start'"),
    ],
)
def test_missing_fields(tmp_path, qa, reason):
    with pytest.raises(readers.SquadFormatError, match=reason):
        readers.read_squad(_write(tmp_path, _file(qa)))


def test_v2_example_fields(tmp_path):
    qa = {
        "id": "q2", "question": "Where is Paris?", "answers": [], "is_impossible": True,
        "plausible_answers": [{"text": "Italy", "answer_start": 11}],
    }
    (example,) = readers.read_squad(_write(tmp_path, _file(qa)), version_2_with_negative=True)
    assert example.is_impossible and example.answers == ()
    assert example.plausible_answers == (readers.Answer("Italy", 11),)
    assert example.title == "Rome" and example.train_answer is None
