"""The RACE readers on the release's own files (../shared/data/race/dev/middle) and on broken ones."""

import collections
import json
import shutil

import pytest

from finetune.race import readers


@pytest.fixture(scope="module")
def middle_dir(small_data_dir):
    return small_data_dir / "race" / "dev" / "middle"


def test_counts_of_the_middle_dev_split(data_dir):
    questions = readers.read_questions(data_dir / "race" / "dev" / "middle")
    assert len(questions) == 1436
    assert len(readers.passages(questions)) == 368
    assert collections.Counter(q.answer for q in questions) == {"A": 311, "B": 384, "C": 386, "D": 355}
    assert {q.level for q in questions} == {"middle"}
    assert len({q.qid for q in questions}) == 1436
    assert all(len(q.options) == 4 for q in questions)


def test_split_folder_single_file_and_levels_agree(middle_dir, tmp_path):
    split = middle_dir.parent  # holds middle/ only
    assert [q.qid for q in readers.read_questions(split)] == [q.qid for q in readers.read_questions(middle_dir)]
    with pytest.raises(FileNotFoundError, match="no folder of the levels asked for"):
        readers.read_questions(split, levels=("high",))
    one = readers.read_questions(middle_dir / "1011.txt")
    assert [q.qid for q in one] == [f"middle1011.txt-{i}" for i in range(5)]
    assert one[0].question == "John Denver is a great  _  singer."
    assert one[0].options == ("English", "Japanese", "American", "Chinese")
    assert (one[0].answer, one[0].label, one[0].level) == ("C", 2, "middle")

    # Both levels: middle first, then high, files in name order within each.
    for level, name in (("middle", "1011.txt"), ("high", "1011.txt"), ("high", "0002.txt")):
        (tmp_path / level).mkdir(exist_ok=True)
        data = json.loads((middle_dir / "1011.txt").read_text())
        data["id"] = level + name
        (tmp_path / level / name).write_text(json.dumps(data))
    both = readers.read_questions(tmp_path)
    assert [q.qid.split("-")[0] for q in both][::5] == ["middle1011.txt", "high0002.txt", "high1011.txt"]
    assert collections.Counter(q.level for q in both) == {"middle": 5, "high": 10}
    assert len(readers.read_questions(tmp_path, levels=("high",))) == 10
    assert readers.read_questions(tmp_path / "high" / "0002.txt")[0].level == "high"


def _passage(**changes):
    data = {
        "article": "Tom has a red ball.",
        "questions": ["What colour is the ball?", "Tom has a _ ball."],
        "options": [["red", "blue", "green", "black"], ["red", "big", "small", "new"]],
        "answers": ["A", "A"],
        "id": "middle9.txt",
    }
    data.update(changes)
    return data


BAD_FILES = [
    ("not_json.txt", "{'article': 'single quotes'", r"not_json\.txt: not JSON \(Expecting property name"),
    ("missing.txt", {k: v for k, v in _passage().items() if k != "answers"},
     r"missing\.txt: missing key answers$"),
    ("letter.txt", _passage(answers=["A", "E"]), r"letter\.txt: question 1: answer 'E' is not one of A, B, C, D$"),
    ("three.txt", _passage(options=[["a", "b", "c", "d"], ["a", "b", "c"]]),
     r"three\.txt: question 1: 3 options, expected 4$"),
    ("lengths.txt", _passage(answers=["A"]), r"lengths\.txt: 2 questions, 2 option lists and 1 answers"),
    ("list.txt", [1, 2], r"list\.txt: not a RACE passage: a JSON list"),
]


@pytest.mark.parametrize("name,content,message", BAD_FILES, ids=[b[0] for b in BAD_FILES])
def test_a_bad_file_is_named_with_its_question(tmp_path, name, content, message):
    level = tmp_path / "middle"
    level.mkdir()
    (level / "0001.txt").write_text(json.dumps(_passage()))
    (level / name).write_text(content if isinstance(content, str) else json.dumps(content))
    with pytest.raises(readers.BadRaceFile, match=message) as caught:
        readers.read_questions(tmp_path)
    assert caught.value.path == level / name
    assert "\n" not in str(caught.value)


def test_a_good_passage_of_hand_written_json(tmp_path):
    (tmp_path / "9.txt").write_text(json.dumps(_passage()))
    questions = readers.read_questions(tmp_path / "9.txt")
    assert [(q.qid, q.label, q.level) for q in questions] == [("middle9.txt-0", 0, "middle"), ("middle9.txt-1", 0, "middle")]


def test_not_utf8_and_empty_folders(tmp_path, middle_dir):
    (tmp_path / "latin.txt").write_bytes('{"article": "caf\xe9"}'.encode("latin-1"))
    with pytest.raises(readers.BadRaceFile, match=r"latin\.txt: not UTF-8 text"):
        readers.read_questions(tmp_path / "latin.txt")
    with pytest.raises(FileNotFoundError, match="does not exist"):
        readers.read_questions(tmp_path / "nowhere")
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(FileNotFoundError, match="holds no passage files"):
        readers.read_questions(empty)
    with pytest.raises(ValueError, match="levels must be some of"):
        readers.read_questions(middle_dir, levels=("college",))
    copy = tmp_path / "high"
    shutil.copytree(middle_dir, copy, ignore=lambda d, names: names[3:])
    with pytest.raises(FileNotFoundError, match="is the high level"):
        readers.read_questions(copy, levels=("middle",))
