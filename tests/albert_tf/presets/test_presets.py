"""The model zoo: presets by folder, released name, URL (http on loopback, gs://-style through
tf.io.gfile) and hf://, into a cache that serves the second load; weights by name, one home.

No test leaves 127.0.0.1: a server started here serves a tiny checkpoint in the release's exact
tarball layout (TF1 variable names, albert_config.json, 30k-clean.model), made here.
"""

import contextlib
import hashlib
import http.server
import os
import pathlib
import re
import shutil
import socket
import subprocess
import tarfile
import threading
import time

import numpy as np
import pytest
import tensorflow as tf

from albert_tf import AlbertConfig, AlbertEncoder, AlbertPretrainer
from albert_tf.presets import convert
from albert_tf.checkpoints.names import encoder_weight_names, head_weight_names
from albert_tf.utils.errors import UserError
from albert_tf.models import AlbertClassifier
from albert_tf.presets import download, folder, loader, registry, sources
from albert_tf.checkpoints import weights
from tests.conftest import REPO_ROOT
from tests.helpers import ReservedPorts

TINY_VOCAB = REPO_ROOT / "tests" / "fixtures" / "data_prep" / "tiny_vocab.model"
CONFIG = AlbertConfig(vocab_size=300, embedding_size=16, hidden_size=32, num_hidden_layers=4,
                      num_attention_heads=4, intermediate_size=48, max_position_embeddings=64,
                      num_hidden_groups=2, inner_group_num=1)


# ---- a release tarball and a server for it --------------------------------------------------------


def _release_tarball(path: pathlib.Path, seed: int = 0) -> tuple[pathlib.Path, dict]:
    """A tarball laid out as the release's (albert_tiny/albert_config.json, 30k-clean.model,
    model.ckpt-best.*, optimizer slots and global_step too); returns it and our weights by name."""
    rng = np.random.default_rng(seed)
    ours = {n.ours: rng.normal(0, 0.2, n.shape).astype(np.float32)
            for n in encoder_weight_names(CONFIG, "tf1") + head_weight_names(CONFIG, "tf1")}
    slots = {"bert/pooler/dense/kernel/adam_m": np.zeros((32, 32), np.float32),
             "global_step": np.array(1000, np.int64)}
    folder_ = convert.write_tf1_release(path / "unpacked" / "albert_tiny", CONFIG, ours, TINY_VOCAB, slots)
    tarball = path / "albert_tiny.tar.gz"
    with tarfile.open(tarball, "w:gz") as tar:
        tar.add(folder_, arcname="albert_tiny")
    return tarball, ours


class _Server:
    """Serves files from memory on 127.0.0.1 with HTTP Range; can cut a response short or slow it."""

    def __init__(self):
        self.files: dict[str, bytes] = {}
        self.requests: list[tuple[str, str | None]] = []
        self.cut_after: int | None = None  # bytes of the next full response before the connection drops
        self.delay = 0.0
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                server.requests.append((self.path, self.headers.get("Range")))
                data = server.files.get(self.path)
                if data is None:
                    self.send_error(404)
                    return
                start = 0
                if self.headers.get("Range"):
                    start = int(self.headers["Range"].split("=")[1].split("-")[0])
                    self.send_response(206)
                    self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
                else:
                    self.send_response(200)
                body = data[start:]
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if server.cut_after is not None and not start:
                    body, server.cut_after = body[: server.cut_after], None
                for i in range(0, len(body), 4096):
                    self.wfile.write(body[i:i + 4096])
                    if server.delay:
                        time.sleep(server.delay)

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.httpd.server_port}/{name}"

    def downloads(self, name: str) -> int:
        return sum(1 for path, _ in self.requests if path == f"/{name}")

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    return _release_tarball(tmp_path_factory.mktemp("release"))


@pytest.fixture
def server():
    served = _Server()
    yield served
    served.stop()


@pytest.fixture
def cache(tmp_path, monkeypatch):
    home = tmp_path / "cache"
    monkeypatch.setenv("ALBERT_TF_HOME", str(home))
    return home


def _assert_weights(model, expected: dict):
    encoder, heads = weights.split(model)
    for name, variable in {**encoder, **heads}.items():
        np.testing.assert_array_equal(variable.numpy(), expected[name], err_msg=name)


def _cached_files(home: pathlib.Path) -> list[str]:
    return sorted(str(p.relative_to(home)) for p in home.rglob("*") if p.is_file() and p.suffix != ".lock")


# ---- one naming of weights ------------------------------------------------------------------------


@pytest.mark.parametrize("config", [CONFIG, AlbertConfig.named("albert_base_v2")], ids=["groups", "base"])
def test_names_from_the_config_are_the_built_models(config):
    model = AlbertPretrainer(config)
    encoder, heads = weights.split(model)
    for names, variables in ((encoder_weight_names(config, "tf1"), encoder), (head_weight_names(config, "hf"), heads)):
        assert {n.ours: n.shape for n in names} == {k: tuple(v.shape) for k, v in variables.items()}


# ---- sources -------------------------------------------------------------------------------------


def test_a_url_loads_as_albert_convert_and_the_second_load_is_the_cache(release, server, cache, tmp_path):
    tarball, ours = release
    server.files["/albert_tiny.tar.gz"] = tarball.read_bytes()
    url = server.url("albert_tiny.tar.gz")
    pretrainer = AlbertPretrainer.from_preset(url)
    _assert_weights(pretrainer, ours)
    converted = convert.convert_tf1(tarball.parent / "unpacked" / "albert_tiny", tmp_path / "converted")
    by_hand = AlbertPretrainer.from_preset(converted)
    for a, b in zip(pretrainer.weights, by_hand.weights, strict=True):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert server.downloads("albert_tiny.tar.gz") == 1
    # The cache keeps the converted preset, not the tarball; a second load asks the server nothing,
    # and an encoder loads from the pretrainer's preset.
    (cached,) = (cache / "presets").iterdir()
    assert sorted(p.name for p in cached.iterdir()) == sorted(p.name for p in pathlib.Path(converted).iterdir())
    assert not any((cache / "downloads").iterdir())
    encoder = AlbertEncoder.from_preset(url)
    np.testing.assert_array_equal(encoder.weights[0].numpy(), pretrainer.encoder.weights[0].numpy())
    assert server.downloads("albert_tiny.tar.gz") == 1


def test_a_pinned_sha256_is_checked_before_unpacking(release, server, cache):
    tarball, ours = release
    server.files["/albert_tiny.tar.gz"] = tarball.read_bytes()
    url = server.url("albert_tiny.tar.gz")
    wrong = "0" * 64
    with pytest.raises(UserError, match=f"sha256 .* is not the {wrong} asked for; the download was removed"):
        sources.resolve(f"{url}#sha256={wrong}")
    assert _cached_files(cache) == []  # nothing cached, nothing half-written
    right = hashlib.sha256(tarball.read_bytes()).hexdigest()
    _assert_weights(AlbertPretrainer.from_preset(f"{url}#sha256={right}"), ours)
    with pytest.raises(UserError, match="sha256=<64 hex digits>"):
        sources.resolve(f"{url}#md5=abc")


def test_a_download_cut_short_resumes_where_it_stopped(release, server, cache):
    tarball, ours = release
    data = tarball.read_bytes()
    server.files["/albert_tiny.tar.gz"] = data
    server.cut_after = len(data) // 3
    url = server.url("albert_tiny.tar.gz")
    with pytest.raises(UserError, match="could not download .* closed after"):
        sources.resolve(url)
    (partial,) = (cache / "downloads").glob("*.download")
    assert partial.stat().st_size == len(data) // 3
    assert not (cache / "presets").exists() or not any((cache / "presets").iterdir())
    _assert_weights(AlbertPretrainer.from_preset(url), ours)
    assert server.requests[-1] == ("/albert_tiny.tar.gz", f"bytes={len(data) // 3}-")


def test_two_processes_loading_at_once_share_one_download(release, server, cache, warm_python):
    tarball, _ = release
    server.files["/albert_tiny.tar.gz"] = tarball.read_bytes()
    server.delay = 0.02  # long enough that both processes ask while the first downloads
    url = server.url("albert_tiny.tar.gz")
    script = "import sys; from albert_tf.presets.sources import resolve; print(resolve(sys.argv[1], progress=False))"
    # Two processes (children of the warm Python: TensorFlow loaded already), this environment's cache.
    runs = [warm_python.popen(["-c", script, url], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for _ in range(2)]
    outputs = [run.communicate(timeout=240) for run in runs]
    assert [run.returncode for run in runs] == [0, 0], [err[-2000:] for _, err in outputs]
    assert outputs[0][0] == outputs[1][0] and folder.is_preset(outputs[0][0].strip())
    assert server.downloads("albert_tiny.tar.gz") == 1


def test_every_tool_takes_a_url_where_it_takes_a_model(release, server, cache):
    tarball, ours = release
    server.files["/albert_tiny.tar.gz"] = tarball.read_bytes()
    url = server.url("albert_tiny.tar.gz")
    for source in (loader.find_source(preset=url), loader.find_source(init_checkpoint=url)):  # fine-tuning
        assert (source.kind, source.config) == ("preset", CONFIG)
        assert pathlib.Path(source.spm_model_file).read_bytes() == TINY_VOCAB.read_bytes()
    classifier = AlbertClassifier(CONFIG, num_classes=2)
    loader.initialize_encoder(classifier, init_checkpoint=url)
    _assert_weights(classifier.encoder, {k: v for k, v in ours.items() if not k.startswith(("predictions", "seq_"))})
    pretrainer = AlbertPretrainer(CONFIG)  # albert-pretrain --preset / --init_checkpoint
    pretrainer.build()
    loader.initialize_pretrainer(pretrainer, url)
    _assert_weights(pretrainer, ours)
    _assert_weights(AlbertPretrainer.from_preset(url), ours)  # albert-export --preset
    assert server.downloads("albert_tiny.tar.gz") == 1


def test_offline_the_cache_serves_and_anything_else_fails_at_once(release, server, cache, monkeypatch):
    tarball, ours = release
    server.files["/albert_tiny.tar.gz"] = tarball.read_bytes()
    url = server.url("albert_tiny.tar.gz")
    sources.resolve(url, progress=False)
    server.stop()  # the server is gone: the cache serves
    _assert_weights(AlbertPretrainer.from_preset(url), ours)
    monkeypatch.setenv("ALBERT_TF_OFFLINE", "1")
    _assert_weights(AlbertPretrainer.from_preset(url), ours)
    with pytest.raises(UserError, match=r"ALBERT_TF_OFFLINE is set and .*albert_base_v2.tar.gz is not in the "
                                        r"cache .*; to use a local copy, pass its path"):
        sources.resolve("albert_base_v2")  # a released name: its URL, named, and no network touched
    assert not list((cache / "locks").iterdir())  # the failed download left no lock file (issue 53)


def test_no_network_fails_within_seconds_naming_the_url(cache, monkeypatch):
    with ReservedPorts(1) as dead:  # held for the whole request
        url = f"http://127.0.0.1:{dead.ports[0]}/albert_base_v2.tar.gz"
        with pytest.raises(UserError, match=f"could not download {url} .*; to use a local copy"):
            sources.resolve(url)
    # A server that accepts and never answers: the timeout, not a hang.
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(1)
    monkeypatch.setenv("ALBERT_TF_TIMEOUT", "1")
    with contextlib.closing(silent), pytest.raises(UserError, match="could not download .*(timed out|no answer)"):
        sources.resolve(f"http://127.0.0.1:{silent.getsockname()[1]}/x.tar.gz")


def test_a_cache_that_cannot_be_written_is_named_not_the_download(server, cache, tmp_path, monkeypatch, warm_python):
    server.files["/big.tar.gz"] = os.urandom(1 << 20)
    url = server.url("big.tar.gz")
    # ALBERT_TF_HOME below a file: the cache's fault, named, before any request.
    (tmp_path / "a_file").write_text("")
    monkeypatch.setenv("ALBERT_TF_HOME", str(tmp_path / "a_file" / "cache"))
    with pytest.raises(UserError, match=r"cannot write .*a_file/cache.* in the cache .*set ALBERT_TF_HOME"):
        sources.resolve(url, progress=False)
    assert server.requests == []
    # The disk refusing a write halfway (a file size limit stands in for a full disk).
    monkeypatch.setenv("ALBERT_TF_HOME", str(cache))
    script = ("import resource, signal; signal.signal(signal.SIGXFSZ, signal.SIG_IGN); "
              "resource.setrlimit(resource.RLIMIT_FSIZE, (256 * 1024, resource.RLIM_INFINITY)); "
              f"from albert_tf.presets import sources; sources.resolve({url!r}, progress=False)")
    result = warm_python.run(["-c", script], capture_output=True, text=True, timeout=120)  # a process of its own
    assert result.returncode != 0
    assert re.search(r"UserError: cannot write .*big.tar.gz.download in the cache \(.*File too large", result.stderr)
    assert "could not download" not in result.stderr


def test_a_corrupt_tarball_is_named_and_not_kept(release, server, cache):
    tarball, ours = release
    server.files["/albert_tiny.tar.gz"] = b"\x1f\x8b not a tarball at all" * 100
    url = server.url("albert_tiny.tar.gz")
    with pytest.raises(UserError, match="albert_tiny.tar.gz: not a readable tar archive .*rerun to download"):
        sources.resolve(url)
    assert _cached_files(cache) == []
    server.files["/albert_tiny.tar.gz"] = tarball.read_bytes()  # fixed upstream: the rerun downloads again
    _assert_weights(AlbertPretrainer.from_preset(url), ours)


def test_gfile_urls_and_local_copies(release, cache):
    tarball, ours = release
    # Any filesystem tf.io.gfile knows (gs://, ...): TensorFlow's in-memory one stands in for it.
    with tf.io.gfile.GFile("ram://bucket/albert_tiny.tar.gz", "wb") as f:
        f.write(tarball.read_bytes())
    _assert_weights(AlbertPretrainer.from_preset("ram://bucket/albert_tiny.tar.gz"), ours)
    # A copy on this machine: the tarball, or its unpacked folder.
    _assert_weights(AlbertPretrainer.from_preset(str(tarball)), ours)
    _assert_weights(AlbertPretrainer.from_preset(str(tarball.parent / "unpacked" / "albert_tiny")), ours)
    with pytest.raises(UserError, match="no such folder or file, nor a released name .*albert_base_v2"):
        sources.resolve("albert_bsae_v2")


def test_hugging_face_hub_source_through_its_local_cache(cache, tmp_path, monkeypatch):
    from tests.albert_tf import hf_reference

    reference = hf_reference.random_hf_pretrainer(CONFIG, seed=3)
    snapshot = tmp_path / "hub" / "models--albert--albert-tiny" / "snapshots" / ("a" * 40)
    reference.save_pretrained(snapshot)
    shutil.copyfile(TINY_VOCAB, snapshot / "spiece.model")
    (snapshot.parents[1] / "refs").mkdir()
    (snapshot.parents[1] / "refs" / "main").write_text("a" * 40)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    model = AlbertPretrainer.from_preset("hf://albert/albert-tiny")
    by_hand = AlbertPretrainer.from_preset(convert.convert_hf(snapshot, tmp_path / "converted"))
    for a, b in zip(model.weights, by_hand.weights, strict=True):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert np.std(model.encoder.weights[0].numpy()) > 0.001
    with pytest.raises(UserError, match="could not fetch hf://albert/missing"):
        sources.resolve("hf://albert/missing")
    # ALBERT_TF_OFFLINE=1 alone (the Hub's own switch off, its endpoint a closed port): the Hub's cache
    # answers, and the process's HF_HUB_OFFLINE is left as it was (it used to be set for good).
    monkeypatch.setenv("ALBERT_TF_HOME", str(tmp_path / "offline_cache"))
    monkeypatch.setenv("ALBERT_TF_OFFLINE", "1")
    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(huggingface_hub.constants, "ENDPOINT", "http://127.0.0.1:9")
    offline = AlbertPretrainer.from_preset("hf://albert/albert-tiny")
    for a, b in zip(offline.weights, by_hand.weights, strict=True):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert "HF_HUB_OFFLINE" not in os.environ


# ---- one home for weights ------------------------------------------------------------------------


def test_any_model_loads_the_part_of_any_preset_it_shares(tmp_path):
    classifier = AlbertClassifier(CONFIG, num_classes=3)
    classifier.build()
    saved = classifier.save_to_preset(tmp_path / "classifier", TINY_VOCAB)
    assert folder.read_task(saved) == {"class": "AlbertClassifier",
                                       "arguments": {"num_classes": 3, "dropout": classifier.dropout}}
    encoder = AlbertEncoder.from_preset(saved)  # an encoder from a classifier's preset
    for a, b in zip(encoder.weights, classifier.encoder.weights, strict=True):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    again = AlbertClassifier.from_preset(saved)  # the classifier whole, its arguments stored
    for a, b in zip(again.weights, classifier.weights, strict=True):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    fresh = AlbertClassifier.from_preset(encoder.save_to_preset(tmp_path / "encoder", TINY_VOCAB), num_classes=5)
    assert fresh.classifier.kernel.shape == (32, 5)  # a classifier from an encoder's preset: a new head
    other = AlbertClassifier.from_preset(saved, num_classes=5)  # another head size: keras-hub's new head
    assert other.classifier.kernel.shape == (32, 5)
    for a, b in zip(other.encoder.weights, classifier.encoder.weights, strict=True):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    with pytest.raises(UserError, match=r"holds an encoder, not an AlbertClassifier: give num_classes for a new head$"):
        AlbertClassifier.from_preset(tmp_path / "encoder")
    with pytest.raises(UserError, match="an AlbertClassifier without the heads of an AlbertPretrainer"):
        AlbertPretrainer.from_preset(saved)
    with pytest.raises(ValueError, match=r"that preset does not match the model: unexpected group_1_inner_group_0/"):
        weights.assign(weights.split(AlbertEncoder(CONFIG.replace(num_hidden_groups=1)))[0],
                       weights.read(pathlib.Path(saved) / folder.WEIGHTS), "that preset")
    with pytest.raises(ValueError, match=r"does not match the model: missing group_2_inner_group_0/"):
        weights.assign(weights.split(AlbertEncoder(CONFIG.replace(num_hidden_groups=4)))[0],
                       weights.read(pathlib.Path(saved) / folder.WEIGHTS), "that preset")


def test_an_export_carries_its_config_and_fine_tuning_needs_no_other_flag(tmp_path):
    from albert_tf.serving.export import export_encoder

    encoder = AlbertEncoder(CONFIG)
    encoder.build()
    export_dir = export_encoder(encoder, tmp_path / "saved", TINY_VOCAB, max_seq_length=16)
    source = loader.find_source(str(export_dir))  # no albert_config_file
    assert (source.kind, source.config) == ("saved_model", CONFIG)
    assert source.spm_model_file.endswith(".model")
    classifier = AlbertClassifier(CONFIG, num_classes=2)  # its encoder from the SavedModel
    loader.initialize_encoder(classifier, init_checkpoint=str(export_dir))
    for a, b in zip(classifier.encoder.weights, encoder.weights, strict=True):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    with pytest.raises(ValueError, match=rf"^a SavedModel of albert-export: {export_dir} does not match the model: "
                                         r"missing group_2_inner_group_0/"):
        loader.load_weights(AlbertEncoder(CONFIG.replace(num_hidden_groups=4)), loader.open_source(str(export_dir)),
                            heads=False)


def test_the_registry_lists_every_release(capsys):
    english = [f"albert_{s}_v{v}" for v in (1, 2) for s in ("base", "large", "xlarge", "xxlarge")]
    assert set(registry.RELEASES) == set(english) | {f"albert_{s}_zh" for s in ("base", "large", "xlarge", "xxlarge")}
    for name in english:
        release = registry.RELEASES[name]
        assert release.url == f"https://storage.googleapis.com/albert_models/{name}.tar.gz"
        assert release.hf_repo == "albert/" + name.replace("_", "-")
    with pytest.raises(UserError, match="albert_base_zh has a wordpiece vocabulary"):
        sources.resolve("albert_base_zh")
    from albert_tf.cli.presets import release_table

    (row,) = release_table(["albert_base_v2"])
    assert (row["encoder"], row["heads"]) == (11_683_584, 130_226)
    assert row["source"].startswith(registry.RELEASES["albert_base_v2"].url)


def test_locks_wait_for_each_other(tmp_path):
    lock = str(tmp_path / "x.lock")
    order = []
    held = threading.Event()

    def hold():
        with download.locked(lock):
            order.append("first in")
            held.set()
            time.sleep(0.5)  # the time a lock that does not wait has to let the second in
            order.append("first out")

    thread = threading.Thread(target=hold)
    thread.start()
    assert held.wait(60)  # the first holds the lock before the second asks, however late its thread ran
    with download.locked(lock):
        order.append("second in")
    thread.join()
    assert order == ["first in", "first out", "second in"]


def test_split_checksum():
    assert download.split_checksum("https://x/a.tar.gz") == ("https://x/a.tar.gz", None)
    assert download.split_checksum("https://x/a.tar.gz#sha256=" + "AB" * 32) == ("https://x/a.tar.gz", "ab" * 32)


def test_weights_files_round_trip(tmp_path):
    tensors = {"a/b/kernel": np.arange(6, dtype=np.float32).reshape(2, 3), "c": np.ones(2, np.float32)}
    weights.save(tmp_path / "w.h5", tensors)
    back = weights.read(tmp_path / "w.h5")
    assert sorted(back) == sorted(tensors)
    np.testing.assert_array_equal(back["a/b/kernel"], tensors["a/b/kernel"])
    (tmp_path / "bad.h5").write_bytes(b"not hdf5")
    with pytest.raises(UserError, match="bad.h5: not a readable weights file"):
        weights.read(tmp_path / "bad.h5")
