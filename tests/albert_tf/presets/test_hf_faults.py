"""hf:// faults, as a user or a broken repository would give them (issue 52, item 8): each one line
naming the file, nothing left in the cache, huggingface_hub's warnings said once, ALBERT_TF_TIMEOUT
applied. The Hub is the loopback stand-in of tests/albert_tf/release_replicas.py."""

from __future__ import annotations

import json
import socket
import threading

import pytest

from albert_tf import AlbertEncoder
from albert_tf.utils.errors import UserError
from tests.albert_tf import release_replicas as replicas

pytestmark = pytest.mark.faults
NAME = "albert_base_v2"


@pytest.fixture
def hub(tmp_path):
    server = replicas.LoopbackServer()
    patch = pytest.MonkeyPatch()
    patch.setenv("ALBERT_TF_HOME", str(tmp_path / "cache"))
    replicas.point_the_hub_at(patch, server, tmp_path / "hub")
    yield server, tmp_path / "cache"
    patch.undo()
    server.stop()


def _presets(cache):
    folder = cache / "presets"
    return sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []


def test_a_truncated_safetensors_file_is_named_in_one_line(hub):
    server, cache = hub
    files = replicas.hub_files(NAME)
    files["model.safetensors"] = files["model.safetensors"][:1000]
    server.repos["me/cut"] = files
    with pytest.raises(UserError) as raised:
        AlbertEncoder.from_preset("hf://me/cut")
    message = str(raised.value)
    assert "\n" not in message and "model.safetensors: not a readable safetensors file" in message
    assert _presets(cache) == []


def test_a_pytorch_file_that_is_not_a_zip_is_named_in_one_line(hub):
    server, cache = hub
    files = {k: v for k, v in replicas.hub_files(NAME).items() if k != "model.safetensors"}
    files["pytorch_model.bin"] = b"<html>not found</html>"
    server.repos["me/html"] = files
    with pytest.raises(UserError) as raised:
        AlbertEncoder.from_preset("hf://me/html")
    message = str(raised.value)
    assert "\n" not in message
    assert "pytorch_model.bin: not a PyTorch checkpoint (not a zip archive)" in message
    assert _presets(cache) == []


def test_an_unknown_activation_gets_no_advice_about_gelu(hub):
    server, _ = hub
    files = replicas.hub_files(NAME)
    config = json.loads(files["config.json"])
    config["hidden_act"] = "quick_gelu"
    files["config.json"] = json.dumps(config).encode()
    server.repos["me/swish"] = files
    with pytest.raises(ValueError) as raised:
        AlbertEncoder.from_preset("hf://me/swish")  # a name of the stand-in repository
    assert "hidden_act 'quick_gelu' is not an activation of ALBERT's layers" in str(raised.value)
    assert "GELU" not in str(raised.value)


def test_a_repository_without_a_model_is_one_line_and_no_warnings(hub, caplog):
    server, cache = hub
    server.repos["me/empty"] = {"README.md": b"# nothing here\n"}
    with caplog.at_level("WARNING"), pytest.raises(UserError) as raised:
        AlbertEncoder.from_preset("hf://me/empty")
    assert str(raised.value).startswith("hf://me/empty holds no ALBERT model in Hugging Face's layout")
    assert not [r for r in caplog.records if r.levelname == "WARNING"]
    assert _presets(cache) == []


def test_a_hub_that_never_answers_fails_within_albert_tf_timeout(tmp_path, monkeypatch):
    """A server that takes the connection and says nothing: the fetch fails with its one line,
    as a stalled tarball download does, instead of waiting on huggingface_hub's own minutes. The
    Hub's shared client is built first, with its own settings (no timeout), as any earlier Hub call
    of the process builds it: the repository listing goes through it, asking for no time limit."""
    import huggingface_hub

    huggingface_hub.close_session()
    assert huggingface_hub.get_session().timeout.read is None
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    held = []
    stop = threading.Event()

    def accept():
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(listener.accept()[0])
            except OSError:
                pass

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    server = type("Silent", (), {"endpoint": f"http://127.0.0.1:{listener.getsockname()[1]}"})()
    patch = pytest.MonkeyPatch()
    patch.setenv("ALBERT_TF_HOME", str(tmp_path / "cache"))
    patch.setenv("ALBERT_TF_TIMEOUT", "1")
    replicas.point_the_hub_at(patch, server, tmp_path / "hub")
    try:
        with pytest.raises(UserError, match=r"^could not fetch hf://me/silent \("):
            AlbertEncoder.from_preset("hf://me/silent")
    finally:
        patch.undo()
        stop.set()
        thread.join()
        for connection in held:
            connection.close()
        listener.close()
