"""The GLUE task registry and TSV readers, on the real files of ../shared/data/glue.

The official row counts and label distributions are those published for GLUE (listed in
../shared/data/SOURCES.md). Tasks whose files are not in the shared folder (MNLI, QQP, AX, the test
splits) are checked on a few hand-written rows in their layouts.
"""

import collections

import pytest

from finetune.glue import definitions as tasks, readers

# task, split, rows, label counts (None for STS-B's scores)
OFFICIAL_SPLITS = [
    ("CoLA", "train", 8551, {"1": 6023, "0": 2528}),
    ("CoLA", "dev", 1043, {"1": 721, "0": 322}),
    ("SST-2", "train", 67349, {"1": 37569, "0": 29780}),
    ("SST-2", "dev", 872, {"1": 444, "0": 428}),
    ("MRPC", "train", 3668, {"1": 2474, "0": 1194}),
    ("MRPC", "dev", 408, {"1": 279, "0": 129}),
    ("RTE", "train", 2490, None),
    ("RTE", "dev", 277, {"entailment": 146, "not_entailment": 131}),
    ("STS-B", "train", 5749, None),
    ("STS-B", "dev", 1500, None),
    ("WNLI", "train", 635, None),
    ("WNLI", "dev", 71, {"1": 31, "0": 40}),
    ("QNLI", "dev", 5463, {"entailment": 2702, "not_entailment": 2761}),
]


@pytest.fixture(scope="module")
def glue_dir(data_dir):
    return data_dir / "glue"


@pytest.fixture(scope="module")
def small_glue_dir(small_data_dir):
    """Whole dev splits (QNLI's first rows), the first rows of train: enough for all but the counts."""
    return small_data_dir / "glue"


@pytest.mark.parametrize("task_name,split,rows,label_counts", OFFICIAL_SPLITS)
def test_official_row_counts(glue_dir, task_name, split, rows, label_counts):
    result = readers.read_examples(task_name, glue_dir, split)
    assert len(result.examples) == rows
    assert result.skipped == []
    assert result.path == glue_dir / task_name / f"{split}.tsv"
    task = tasks.get_task(task_name)
    if task.is_regression:
        scores = [e.label for e in result.examples]
        assert min(scores) == 0.0 and max(scores) == 5.0
    elif label_counts is not None:
        assert collections.Counter(e.label for e in result.examples) == label_counts
    # Every example of a pair task has its second sentence, and none of a single-sentence task.
    single = task.layout(split).text_b is None
    assert all((e.text_b is None) == single for e in result.examples)
    assert len({e.guid for e in result.examples}) == rows


def test_every_present_task_file_is_covered(glue_dir):
    """A GLUE file added to the shared folder must join OFFICIAL_SPLITS with its counts."""
    present = {(p.parent.name, p.stem) for p in glue_dir.glob("*/*.tsv")}
    assert present == {(task, split) for task, split, _, _ in OFFICIAL_SPLITS}


def test_fields_land_in_the_right_places(small_glue_dir):
    mrpc = readers.read_examples("MRPC", small_glue_dir, "dev").examples[0]
    # The header's byte-order mark must not leak into anything; Quality is the label.
    assert mrpc == readers.Example(
        guid="dev-0",
        text_a="He said the foodservice pie business doesn't fit the company's long-term growth "
        "strategy.",
        text_b='"The foodservice pie business does not fit our long-term growth strategy.',
        label="1",
    )
    stsb = readers.read_examples("STS-B", small_glue_dir, "dev").examples[1]
    assert (stsb.guid, stsb.label) == ("dev-1", 4.75)
    assert stsb.text_a == "A young child is riding a horse."
    # CoLA dev ends without a newline: its last row is still whole.
    cola = readers.read_examples("CoLA", small_glue_dir, "dev").examples
    assert (cola[-1].guid, cola[-1].text_a, cola[-1].label) == (
        "dev-1042",
        "John talked to Bill about himself.",
        "1",
    )
    # Quotes are text, not quoting: this SST-2 row ends with a lone apostrophe.
    sst = readers.read_examples("SST-2", small_glue_dir, "dev").examples[-1].text_a
    assert sst.endswith("could not be improved upon . ' ")


def test_task_folder_as_data_dir(small_glue_dir):
    assert len(readers.read_examples("rte", small_glue_dir / "RTE", "dev").examples) == 277
    # RTE and QNLI share a layout: a folder of another task must not be read as this one.
    with pytest.raises(FileNotFoundError, match=r"GLUE task QNLI: no dev file"):
        readers.read_examples("QNLI", small_glue_dir / "RTE", "dev")


def test_missing_files_are_a_clear_error(small_glue_dir, tmp_path):
    with pytest.raises(FileNotFoundError, match=r"GLUE task QQP: no dev file .*QQP/dev\.tsv"):
        readers.read_examples("QQP", small_glue_dir, "dev")
    with pytest.raises(FileNotFoundError, match=r"GLUE task QNLI: no train file"):
        readers.read_examples("QNLI", small_glue_dir, "train")
    with pytest.raises(FileNotFoundError, match="does not exist"):
        readers.read_examples("RTE", tmp_path / "nowhere", "dev")
    with pytest.raises(ValueError, match="MNLI has no split 'dev'; its splits are: train, dev_m"):
        readers.read_examples("MNLI", small_glue_dir, "dev")


def test_unknown_task_lists_every_task():
    with pytest.raises(ValueError) as error:
        tasks.get_task("SQuAD")
    assert str(error.value) == (
        "unknown GLUE task 'SQuAD'; the tasks are: "
        "CoLA, SST-2, MRPC, STS-B, QQP, MNLI, QNLI, RTE, WNLI, AX"
    )
    with pytest.raises(ValueError, match="the tasks are: CoLA, SST-2"):
        readers.read_examples("MNLI-x", "/tmp", "train")


def test_registry():
    assert tasks.get_task("sst2") is tasks.TASKS["SST-2"]
    assert tasks.get_task("sts_b") is tasks.TASKS["STS-B"]
    assert tasks.get_task("diagnostic") is tasks.TASKS["AX"]
    assert tasks.TASKS["STS-B"].num_labels == 1 and tasks.TASKS["STS-B"].is_regression
    assert tasks.TASKS["MNLI"].labels == ("contradiction", "entailment", "neutral")
    assert tasks.TASKS["MNLI"].label_id("neutral") == 2
    assert tasks.TASKS["MNLI"].eval_splits == ("dev_matched", "dev_mismatched")
    assert tasks.TASKS["QNLI"].labels == ("entailment", "not_entailment")
    assert tasks.TASKS["AX"].eval_splits == () and not tasks.TASKS["AX"].has_train
    submission_files = {
        tasks.TASKS[name].splits[split].submission_file
        for name in tasks.TASK_NAMES
        for split in tasks.TASKS[name].predict_splits
    }
    assert submission_files == {
        "CoLA.tsv", "SST-2.tsv", "MRPC.tsv", "STS-B.tsv", "QQP.tsv", "MNLI-m.tsv",
        "MNLI-mm.tsv", "QNLI.tsv", "RTE.tsv", "WNLI.tsv", "AX.tsv",
    }  # fmt: skip
    metrics = {name: task.metrics for name, task in tasks.TASKS.items()}
    assert metrics["CoLA"] == ("matthews_corr",)
    assert metrics["MRPC"] == metrics["QQP"] == ("accuracy", "f1")
    assert metrics["STS-B"] == ("pearson", "spearman")
    with pytest.raises(ValueError, match="no label 'maybe'; its labels are: 0, 1"):
        tasks.TASKS["CoLA"].label_id("maybe")


def _copy_with_lines(source, target, insert):
    """Copies `source` to `target` so that its 1-based line n is `insert[n]`."""
    lines = source.read_text(encoding="utf-8").splitlines(keepends=True)
    for number in sorted(insert):
        lines.insert(number - 1, insert[number] + "\n")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text("".join(lines), encoding="utf-8")


def test_malformed_rows_reported_with_file_and_line(small_glue_dir, tmp_path):
    rte = tmp_path / "RTE" / "dev.tsv"
    _copy_with_lines(
        small_glue_dir / "RTE" / "dev.tsv",
        rte,
        {10: "900\tA sentence with no second sentence.\tentailment", 50: "901\ta\tb\tmaybe"},
    )
    with pytest.raises(readers.MalformedRowError) as error:
        readers.read_examples("RTE", tmp_path, "dev")
    assert str(error.value).startswith(
        f"{rte}:10: expected 4 tab-separated fields, found 3 (skip_bad_rows"
    )
    assert error.value.bad_row == readers.BadRow(
        str(rte), 10, "expected 4 tab-separated fields, found 3"
    )

    result = readers.read_examples("RTE", tmp_path, "dev", skip_bad_rows=True)
    assert len(result.examples) == 277
    assert [(b.line, b.reason) for b in result.skipped] == [
        (10, "expected 4 tab-separated fields, found 3"),
        (50, "unknown label 'maybe'; RTE labels are: entailment, not_entailment"),
    ]
    assert str(result.skipped[1]) == (
        f"{rte}:50: unknown label 'maybe'; RTE labels are: entailment, not_entailment"
    )
    # Rows are numbered by their index column, so the rows around the skipped ones keep their ids.
    guids = [e.guid for e in result.examples]
    assert guids[:9] == [f"dev-{i}" for i in range(9)] and guids[-1] == "dev-276"


def test_bad_labels_in_cola_and_stsb(small_glue_dir, tmp_path):
    # CoLA has no header, so line n is data row n - 1.
    _copy_with_lines(small_glue_dir / "CoLA" / "dev.tsv", tmp_path / "CoLA" / "dev.tsv",
                     {1: "gj04\t2\t\tA label that is not 0 or 1."})  # fmt: skip
    result = readers.read_examples("CoLA", tmp_path, "dev", skip_bad_rows=True)
    assert len(result.examples) == 1043
    assert [(b.line, b.reason) for b in result.skipped] == [
        (1, "unknown label '2'; CoLA labels are: 0, 1")
    ]

    row = "\t".join(["9", "main-news", "x", "2012", "0001", "none", "none", "a", "b"])
    _copy_with_lines(small_glue_dir / "STS-B" / "dev.tsv", tmp_path / "STS-B" / "dev.tsv",
                     {3: row + "\t5.5", 4: row + "\thigh", 5: row + "\tnan"})  # fmt: skip
    result = readers.read_examples("STS-B", tmp_path, "dev", skip_bad_rows=True)
    assert len(result.examples) == 1500
    assert [(b.line, b.reason) for b in result.skipped] == [
        (3, "score '5.5' is outside STS-B's range [0.0, 5.0]"),
        (4, "score 'high' is not a number"),
        (5, "score 'nan' is outside STS-B's range [0.0, 5.0]"),
    ]


def test_wrong_header_is_never_skipped(small_glue_dir, tmp_path):
    # MNLI's dev layout has 16 columns; a train file put in its place has 12.
    target = tmp_path / "MNLI" / "dev_matched.tsv"
    target.parent.mkdir()
    target.write_text("\t".join(["c"] * 12) + "\n", encoding="utf-8")
    with pytest.raises(readers.MalformedRowError, match=r"matched\.tsv:1: header has 12 fields"):
        readers.read_examples("MNLI", tmp_path, "dev_matched", skip_bad_rows=True)


def _write(path, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join("\t".join(row) + "\n" for row in rows), encoding="utf-8")


def test_layouts_of_tasks_not_in_the_shared_data(tmp_path):
    """MNLI, QQP, AX and the test splits, on rows written in the download script's layouts."""
    parses = ["(ROOT (S a))", "(ROOT (S b))", "(ROOT a)", "(ROOT b)"]
    mnli_head = ["index", "promptID", "pairID", "genre", "sentence1_binary_parse",
                 "sentence2_binary_parse", "sentence1_parse", "sentence2_parse", "sentence1",
                 "sentence2"]  # fmt: skip
    _write(tmp_path / "MNLI" / "train.tsv", [
        mnli_head + ["label1", "gold_label"],
        ["0", "31193", "31193n", "government", *parses, "Premise one.", "Hypothesis one.",
         "neutral", "neutral"],
    ])  # fmt: skip
    _write(tmp_path / "MNLI" / "dev_mismatched.tsv", [
        mnli_head + [f"label{i}" for i in range(1, 6)] + ["gold_label"],
        ["7", "63735", "63735n", "letters", *parses, "Premise two.", "Hypothesis two.",
         "contradiction", "neutral", "contradiction", "contradiction", "neutral", "contradiction"],
    ])  # fmt: skip
    _write(tmp_path / "MNLI" / "test_matched.tsv", [
        mnli_head, ["3", "31493", "31493", "travel", *parses, "Premise three.", "Hypothesis three."]
    ])  # fmt: skip
    _write(tmp_path / "QQP" / "train.tsv", [
        ["id", "qid1", "qid2", "question1", "question2", "is_duplicate"],
        ["133273", "213221", "213222", "How is the weather?", "Is it raining?", "0"],
        ["402555", "536040", "536041", "How do I learn?", "What is the best way to learn?", "1"],
    ])  # fmt: skip
    _write(tmp_path / "QQP" / "test.tsv", [["id", "question1", "question2"], ["0", "Why?", "How?"]])
    _write(tmp_path / "diagnostic" / "diagnostic.tsv", [
        ["index", "sentence1", "sentence2"], ["0", "The cat sat.", "The cat did not sit."]
    ])  # fmt: skip
    _write(tmp_path / "CoLA" / "test.tsv", [["index", "sentence"], ["0", "Bill whistled past."]])
    _write(tmp_path / "MRPC" / "test.tsv", [
        ["index", "#1 ID", "#2 ID", "#1 String", "#2 String"],
        ["0", "1089874", "1089925", "A.", "B."],
    ])  # fmt: skip

    def read(task, split):
        return readers.read_examples(task, tmp_path, split).examples

    assert read("MNLI", "train") == [
        readers.Example("train-0", "Premise one.", "Hypothesis one.", "neutral")
    ]
    assert read("MNLI", "dev_mismatched") == [
        readers.Example("dev_mismatched-7", "Premise two.", "Hypothesis two.", "contradiction")
    ]
    assert read("MNLI", "test_matched") == [
        readers.Example("test_matched-3", "Premise three.", "Hypothesis three.", None)
    ]
    assert [(e.guid, e.label) for e in read("QQP", "train")] == [
        ("train-133273", "0"), ("train-402555", "1")
    ]  # fmt: skip
    assert read("QQP", "test") == [readers.Example("test-0", "Why?", "How?", None)]
    assert read("AX", "test") == [
        readers.Example("test-0", "The cat sat.", "The cat did not sit.", None)
    ]
    assert read("CoLA", "test") == [readers.Example("test-0", "Bill whistled past.", None, None)]
    assert read("MRPC", "test") == [readers.Example("test-0", "A.", "B.", None)]
