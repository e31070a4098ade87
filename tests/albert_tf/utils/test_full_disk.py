"""A disk that refuses a write while weights are saved: one line naming the file, nothing left.

A file size limit (RLIMIT_FSIZE, with SIGXFSZ ignored, in a child process) stands in for a full
disk: the write fails as a full disk's does, in the middle of the file, with EFBIG ("File too large")
instead of ENOSPC. HDF5 written straight to such a disk crashed the process (exit 139) and left
`.run.lock` and `model.weights.h5.incomplete-<pid>` behind (issue 40 item 2).
"""

import json
import os
import resource
import signal
import subprocess
import sys

import numpy as np
import pytest

from albert_tf import AlbertConfig, AlbertEncoder
from albert_tf.presets import convert
from albert_tf.checkpoints.names import encoder_weight_names, head_weight_names
from albert_tf.presets import folder as preset_folder
from tests.conftest import REPO_ROOT

pytestmark = pytest.mark.faults

TINY_VOCAB = REPO_ROOT / "tests" / "fixtures" / "data_prep" / "tiny_vocab.model"
CONFIG = AlbertConfig(vocab_size=300, embedding_size=16, hidden_size=32, num_hidden_layers=2,
                      num_attention_heads=2, intermediate_size=48, max_position_embeddings=64)
LIMIT = 48 * 1024  # model.weights.h5 of CONFIG is about 90 KB, every other file under 8 KB


def _limited():
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write then fails with EFBIG, as a full disk's does
    resource.setrlimit(resource.RLIMIT_FSIZE, (LIMIT, resource.RLIM_INFINITY))


def _run(args, env):
    run = subprocess.run([sys.executable, *map(str, args)], capture_output=True, text=True, timeout=300,
                         preexec_fn=_limited, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", **env})
    return run.returncode, run.stderr.splitlines(), run.stdout


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    """A checkpoint in the release's layout (what albert-convert --source tf1 and from_preset read)."""
    rng = np.random.default_rng(0)
    weights = {n.ours: rng.normal(0, 0.2, n.shape).astype(np.float32)
               for n in encoder_weight_names(CONFIG, "tf1") + head_weight_names(CONFIG, "tf1")}
    return convert.write_tf1_release(tmp_path_factory.mktemp("release") / "albert_tiny", CONFIG, weights,
                                     TINY_VOCAB)


def test_albert_convert_on_a_full_disk_is_one_line_and_leaves_nothing(release, tmp_path, monkeypatch):
    out = tmp_path / "preset"
    code, lines, _ = _run(["-m", "albert_tf.cli.convert", "--source=tf1", f"--input={release}",
                           f"--output_dir={out}"], {})
    assert (code, lines) == (1, [f"error: File too large: {out / 'model.weights.h5'}"])
    assert not out.exists()  # no .run.lock, no model.weights.h5.incomplete-<pid>
    # Space freed: the same command runs.
    from albert_tf.cli import convert as convert_cli
    from albert_tf.utils import quiet

    monkeypatch.setattr(sys, "argv", ["albert-convert", "--source=tf1", f"--input={release}", f"--output_dir={out}"])
    monkeypatch.setattr(quiet, "_verbose_flag", [False])
    with pytest.raises(SystemExit) as exited:
        convert_cli.run()
    assert exited.value.code in (None, 0)
    assert sorted(os.listdir(out)) == ["config.json", "model.weights.h5", "spiece.model", "task.json",
                                       "task.weights.h5"]


def test_conversion_into_the_cache_and_save_to_preset_on_a_full_disk(release, tmp_path, monkeypatch):
    cache, saved = tmp_path / "cache", tmp_path / "saved"
    script = f"""
import json
from albert_tf import AlbertConfig, AlbertEncoder
encoder = AlbertEncoder(AlbertConfig.from_dict({CONFIG.to_dict()!r}))
encoder.build()
errors = []
for step in (lambda: AlbertEncoder.from_preset({str(release)!r}),
             lambda: encoder.save_to_preset({str(saved)!r}, {str(TINY_VOCAB)!r})):
    try:
        step()
    except OSError as error:
        errors.append(str(error))
print(json.dumps(errors))
"""
    code, _, stdout = _run(["-c", script], {"ALBERT_TF_HOME": str(cache)})
    errors = json.loads(stdout.splitlines()[-1])
    assert code == 0 and len(errors) == 2
    tmp = cache / "tmp"
    assert errors[0].startswith(f"[Errno 27] File too large: '{tmp}/local-albert_tiny-")
    assert errors[0].endswith("/preset/model.weights.h5'")
    assert errors[1] == f"[Errno 27] File too large: '{saved / 'model.weights.h5'}'"
    assert os.listdir(tmp) == [] and not (cache / "presets").exists() and not saved.exists()
    # Space freed: both work.
    monkeypatch.setenv("ALBERT_TF_HOME", str(cache))
    encoder = AlbertEncoder.from_preset(str(release))
    assert [p.name for p in (cache / "presets").iterdir() if preset_folder.is_preset(p)] != []
    encoder.save_to_preset(saved, TINY_VOCAB)
    assert sorted(os.listdir(saved)) == ["config.json", "model.weights.h5", "spiece.model"]


def test_a_full_disk_is_the_one_line_of_a_full_disk_naming_the_weights_file(tmp_path, monkeypatch):
    """ENOSPC, which a write reports without the file's name: the path is put back."""
    import contextlib
    import errno

    from albert_tf.utils import atomic
    from albert_tf.utils.errors import one_line
    from albert_tf.checkpoints import weights

    class Full:
        def write(self, data):
            raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(atomic, "atomic_open", lambda path, mode: contextlib.nullcontext(Full()))
    path = tmp_path / "model.weights.h5"
    with pytest.raises(OSError) as error:
        weights.save(path, {"w": np.ones([4], np.float32)})
    assert one_line(error.value) == (
        f"no space left on the device writing {path}: free some space and rerun (finished work is kept)", 1)
    assert list(tmp_path.iterdir()) == []


def test_unpacking_a_release_into_a_full_cache_names_the_folder(release, tmp_path):
    """Issue 40: a full cache disk while a tarball was unpacked said `[Errno 27] File too large`, no path."""
    import re
    import tarfile

    tarball = tmp_path / "albert_tiny.tar.gz"
    with tarfile.open(tarball, "w:gz") as tar:
        tar.add(release, arcname="albert_tiny")
    cache = tmp_path / "cache"
    script = f"""
from albert_tf.presets import sources
try:
    sources.resolve({str(tarball)!r}, progress=False)
except ValueError as error:
    print(error)
"""
    code, _, stdout = _run(["-c", script], {"ALBERT_TF_HOME": str(cache)})
    assert code == 0 and re.fullmatch(
        rf"cannot write {re.escape(str(cache))}/tmp/albert_tiny-\w+\.\w+/unpacked in the cache \(\[Errno 27\] File "
        rf"too large\); free space or set ALBERT_TF_HOME to a writable folder \(now {re.escape(str(cache))}\)",
        stdout.splitlines()[-1]), stdout
    assert os.listdir(cache / "tmp") == [] and not (cache / "presets").exists()
