"""albert_tf.utils' rules for files: atomic writes (atomic), globs (patterns), compression, output folders
(output_dirs) and run-folder locks (locks)."""

import gzip
import pathlib
import os
import subprocess
import sys

import pytest

from albert_tf.utils import atomic, compression, locks, output_dirs, patterns
from albert_tf.utils.errors import FlagError, UserError
from tests.helpers import as_another_user, world_readable_folder


def test_a_file_is_written_aside_and_renamed_and_a_failure_keeps_the_old_one(tmp_path):
    path = tmp_path / "result.json"
    atomic.write_json(path, {"b": 1, "a": [1, 2]})
    assert path.read_text() == '{\n  "a": [\n    1,\n    2\n  ],\n  "b": 1\n}\n'
    with pytest.raises(RuntimeError, match="disk on fire"):
        with atomic.atomic_open(path, "w") as f:
            f.write("half of a new fi")
            assert sorted(os.listdir(tmp_path)) == ["result.json", f"result.json.incomplete-{os.getpid()}"]
            raise RuntimeError("disk on fire")
    assert os.listdir(tmp_path) == ["result.json"]  # no partial file left, the old one whole
    assert path.read_text().startswith('{\n  "a"')


def test_a_partial_file_is_renamed_on_commit_and_removed_on_discard(tmp_path):
    kept = atomic.PartialFile(str(tmp_path / "a.tfrecord"))
    kept.file.write(b"records")
    dropped = atomic.PartialFile(str(tmp_path / "b.tfrecord"))
    assert sorted(os.listdir(tmp_path)) == [f"a.tfrecord.incomplete-{os.getpid()}", f"b.tfrecord.incomplete-{os.getpid()}"]
    assert all(atomic.is_partial(name) for name in os.listdir(tmp_path))
    kept.commit()
    dropped.discard()
    assert os.listdir(tmp_path) == ["a.tfrecord"] and (tmp_path / "a.tfrecord").read_bytes() == b"records"
    assert not atomic.is_partial("a.tfrecord")


def test_the_partial_files_of_a_killed_run_are_removed(tmp_path):
    for name in ("a.tfrecord.incomplete-123", "b.json.incomplete-9", "done.tfrecord"):
        (tmp_path / name).write_bytes(b"x")
    removed = atomic.remove_partials(str(tmp_path))
    assert sorted(os.path.basename(p) for p in removed) == ["a.tfrecord.incomplete-123", "b.json.incomplete-9"]
    assert os.listdir(tmp_path) == ["done.tfrecord"]


def test_globs_are_sorted_in_the_order_given_without_folders(tmp_path):
    for name in ("b.txt", "a.txt", "c.gz"):
        (tmp_path / name).write_text("x")
    (tmp_path / "d.txt").mkdir()  # a folder is no match
    a, b, c = (str(tmp_path / n) for n in ("a.txt", "b.txt", "c.gz"))
    assert patterns.expand_patterns(f"{tmp_path}/*.gz, {tmp_path}/*.txt") == [c, a, b]
    assert patterns.expand_patterns([f"{tmp_path}/*.txt", b]) == [a, b]  # a file named twice is read once
    assert patterns.expand_patterns([f"{tmp_path}/*.txt", b], keep_repeats=True) == [a, b, b]
    with pytest.raises(UserError, match=r"^input pattern '.*/\*\.tfrecord' matches no file$"):
        patterns.expand_patterns(f"{tmp_path}/*.txt,{tmp_path}/*.tfrecord")
    with pytest.raises(UserError, match="^no input file given$"):
        patterns.expand_patterns(" , ")


def test_compression_is_read_from_the_name(tmp_path):
    assert [compression.compression_of(n) for n in ("a.txt", "a.GZ", "a.gzip", "a.bz2", "a.xz", "a.tfrecord")] == [
        "none", "gzip", "gzip", "bz2", "xz", "none"]
    assert compression.tfrecord_compression("x.tfrecord.gzip") == "GZIP" and compression.tfrecord_compression("x.tfrecord") == ""
    with pytest.raises(UserError, match=r"x\.tfrecord\.xz: a TFRecord file may be gzip-compressed \(\.gz\) or not"):
        compression.tfrecord_compression("x.tfrecord.xz")
    assert compression.compression_suffix("gzip") == ".gz" and compression.compression_suffix("none") == ""
    path = tmp_path / "a.txt.gzip"
    path.write_bytes(gzip.compress(b"line one\nline two\n"))
    with open(path, "rb") as raw, compression.open_decompressed(raw, path) as f:
        assert f.read() == b"line one\nline two\n"


def test_an_output_dir_is_created_or_refused_in_one_line_naming_the_flag(tmp_path):
    output_dirs.prepare_output_dir(tmp_path / "new" / "run")
    assert os.listdir(tmp_path / "new" / "run") == []  # created, and the write test leaves nothing
    (tmp_path / "file").write_text("x")
    with pytest.raises(FlagError, match=f"^--output_dir {tmp_path / 'file'} is a file, not a folder$"):
        output_dirs.prepare_output_dir(tmp_path / "file")
    # Works as root too: no permission bit is involved.
    with pytest.raises(FlagError, match=f"^--export_dir {tmp_path / 'file' / 'run'} cannot be created "
                                        r"\(a part of the path is a file\)$"):
        output_dirs.prepare_output_dir(tmp_path / "file" / "run", flag="export_dir")
    output_dirs.prepare_output_dir(tmp_path / "later" / "run", create=False)  # checked, not made
    assert not (tmp_path / "later").exists()


def test_a_read_only_output_dir_is_refused_naming_the_flag():
    with world_readable_folder() as top:
        parent = top / "shared"
        parent.mkdir()
        parent.chmod(0o555)  # the child may enter `shared` but write nothing in it
        assert as_another_user(lambda: output_dirs.prepare_output_dir(parent)) == (
            f"--output_dir {parent} is not writable (Permission denied)")
        assert as_another_user(lambda: output_dirs.prepare_output_dir(parent / "run", create=False)) == (
            f"--output_dir {parent / 'run'} cannot be created (Permission denied: {parent} is not writable)")
        assert os.listdir(parent) == []


def test_local_files_need_no_tensorflow(tmp_path):
    # The data-prep workers and the Beam pipeline use these modules and must stay light (issue 22).
    code = ("import sys; from albert_tf.utils import atomic, compression, files, locks, output_dirs, patterns; "
            "patterns.expand_patterns(sys.argv[1]); atomic.write_json(sys.argv[1], {}); "
            "output_dirs.prepare_output_dir(sys.argv[2]); print('tensorflow' in sys.modules)")
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    (tmp_path / "a.json").write_text("{}")
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path / "a.json"), str(tmp_path / "out")],
                          check=True, cwd=repo, capture_output=True, text=True)
    assert done.stdout.strip() == "False" and (tmp_path / "out").is_dir()


def test_a_folder_is_written_aside_and_replaces_the_old_one_only_when_complete(tmp_path):
    target = tmp_path / "export"
    partial = f"export.incomplete-{os.getpid()}"
    with atomic.atomic_folder(target) as folder:
        os.makedirs(folder)
        (tmp_path / partial / "model.bin").write_text("one")
        assert sorted(os.listdir(tmp_path)) == [partial]  # nothing at the target until complete
    assert os.listdir(tmp_path) == ["export"] and (target / "model.bin").read_text() == "one"
    # Without replace, a folder holding files is refused and untouched.
    with pytest.raises(UserError, match=f"^{target} is not empty: write into a new or empty folder$"):
        with atomic.atomic_folder(target):
            pass
    # With replace, a failed write keeps the old folder whole; a complete one replaces it.
    with pytest.raises(RuntimeError, match="converter failed"):
        with atomic.atomic_folder(target, replace=True) as folder:
            os.makedirs(folder)
            raise RuntimeError("converter failed")
    assert os.listdir(tmp_path) == ["export"] and os.listdir(target) == ["model.bin"]
    with atomic.atomic_folder(target, replace=True) as folder:
        os.makedirs(folder)
        (tmp_path / partial / "other.bin").write_text("two")
    assert os.listdir(tmp_path) == ["export"] and os.listdir(target) == ["other.bin"]


@pytest.mark.faults
def test_a_killed_exports_partial_files_do_not_block_the_rerun_and_are_cleared(tmp_path):
    """Issue 40: export and conversion refused a folder holding a killed run's partial files."""
    target = tmp_path / "out"
    target.mkdir()
    dead = 2 ** 22 + 12345  # above the default pid_max: no such process
    (target / f"model.tflite.incomplete-{dead}").write_bytes(b"half")
    (target / locks.LOCK_FILE).write_text("{}")
    (tmp_path / f"out.incomplete-{dead}").mkdir()  # a killed run's folder written aside
    (tmp_path / f"out.incomplete-{dead}" / "saved_model.pb").write_bytes(b"half")
    (tmp_path / f"out.old.incomplete-{dead}").mkdir()
    (tmp_path / "outside.incomplete-1").write_bytes(b"not ours")  # another target's: kept
    output_dirs.prepare_output_dir(target, create=False, empty=True)  # not refused as "not empty"
    with atomic.atomic_folder(target) as folder:
        os.makedirs(folder)
        (pathlib.Path(folder) / "model.tflite").write_bytes(b"whole")
    assert sorted(os.listdir(tmp_path)) == ["out", "outside.incomplete-1"]
    assert sorted(os.listdir(target)) == [locks.LOCK_FILE, "model.tflite"]
