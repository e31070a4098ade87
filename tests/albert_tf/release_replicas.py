"""Tiny replicas of the released ALBERT checkpoints, in the real files' layouts, served on 127.0.0.1.

The weights are tiny and random; the file names, folders, config keys and tensor names are the
real ones, from public evidence (docs/presets.md cites each):

- the release tarballs `albert_{size}_v{1,2}.tar.gz` (google-research/albert README; its
  export_checkpoints.py, commit c81ab1c): one top folder named without the version (`albert_base/`),
  holding `albert_config.json` in the release's keys (with the legacy `net_structure_type`,
  `gap_size`, `num_memory_blocks`, `down_scale_factor`; xxlarge also `layers_to_keep: []`),
  `30k-clean.model`, `30k-clean.vocab`, `model.ckpt-best.{data-00000-of-00001,index,meta}` written
  by a TF1 `Saver`, and no `checkpoint` file; tensors `bert/...`, `cls/predictions/...`,
  `cls/seq_relationship/{output_weights [2, H], output_bias}` and `global_step`;
- the Hub repositories `albert/albert-{size}-v{1,2}` (huggingface.co file listings): `config.json` of
  an `AlbertForMaskedLM` with the legacy keys, `layer_norm_eps` and the bos/eos/pad ids (v1:
  `"hidden_act": "gelu"`, v2: `"gelu_new"`), `model.safetensors`, `pytorch_model.bin`,
  `spiece.model`, `tokenizer.json`, `tokenizer_config.json`, `tf_model.h5`; tensors of the encoder
  with its pooler and `predictions.*`, no `sop_classifier.*`, no `position_ids`. The files no
  loader reads (tf_model.h5, tokenizer.json, tokenizer_config.json) are listed with stand-in
  bytes: a loader that fetched them would fail its test.

The Hub is stood in for by its HTTP API as huggingface_hub calls it (HF_ENDPOINT): the revision
endpoint (`/api/models/<repo>/revision/<rev>`, its `sha`), the tree listing
(`/api/models/<repo>/tree/<sha>`) and `/<repo>/resolve/<sha>/<file>` with the `X-Repo-Commit` and
`ETag` headers.
"""

from __future__ import annotations

import hashlib
import http.server
import io
import json
import os
import pathlib
import tarfile
import threading
import urllib.parse

import numpy as np

from albert_tf.config import AlbertConfig
from tests.conftest import REPO_ROOT

TINY_VOCAB = REPO_ROOT / "tests" / "fixtures" / "data_prep" / "tiny_vocab.model"
SIZES = ("base", "large", "xlarge", "xxlarge")
ENGLISH = tuple(f"albert_{size}_v{version}" for version in (1, 2) for size in SIZES)

# Tiny stand-ins of each size, as the real ones differ: layers, width, heads (xlarge: heads of
# 2 x the others'), dropout 0.1 in v1 but xxlarge, 0 in v2. Vocabulary of the tiny SentencePiece
# model; 512 positions as released (the fine-tuning tasks use up to 512 tokens).
_SHAPES = {"base": (16, 1, 2), "large": (16, 2, 2), "xlarge": (32, 2, 2), "xxlarge": (32, 1, 4)}


def tiny_config(name: str) -> AlbertConfig:
    size, version = name.split("_")[1], name.split("_")[2]
    hidden, layers, heads = _SHAPES[size]
    dropout = 0.1 if version == "v1" and size != "xxlarge" else 0.0
    return AlbertConfig(vocab_size=300, embedding_size=8, hidden_size=hidden, num_hidden_layers=layers,
                        num_attention_heads=heads, intermediate_size=2 * hidden, hidden_dropout_prob=dropout,
                        attention_probs_dropout_prob=dropout, max_position_embeddings=512)


def release_config_json(name: str) -> dict:
    """albert_config.json as released: the config's keys (no `sharing`) and the legacy ones."""
    values = tiny_config(name).to_dict()
    del values["sharing"]
    values.update(net_structure_type=0, gap_size=0, num_memory_blocks=0, down_scale_factor=1)
    if "xxlarge" in name:
        values["layers_to_keep"] = []
    return values


def _vocab_lines(spm_model: pathlib.Path) -> str:
    import sentencepiece as spm

    processor = spm.SentencePieceProcessor(model_file=str(spm_model))
    return "".join(f"{processor.id_to_piece(i)}\t{processor.get_score(i)}\n" for i in range(processor.get_piece_size()))


def release_tensors(name: str, seed: int) -> dict[str, np.ndarray]:
    """The release checkpoint's tensors by their TF1 names (test_convert.tf1_shapes, written
    independently of albert_tf.checkpoints.names), random, and `global_step`."""
    from tests.albert_tf.presets.test_convert import tf1_shapes

    rng = np.random.default_rng(seed)
    tensors = {k: rng.normal(0, 0.2, shape).astype(np.float32) for k, shape in tf1_shapes(tiny_config(name)).items()}
    tensors["global_step"] = np.array(125000, np.int64)
    return tensors


def write_release_tarball(name: str, into: pathlib.Path, seed: int = 0, vocab: pathlib.Path = TINY_VOCAB) -> pathlib.Path:
    """`<name>.tar.gz` as released: `albert_<size>/` (no version) with the files listed above."""
    import tensorflow as tf

    top = "_".join(name.split("_")[:2])
    folder = into / name / top
    folder.mkdir(parents=True)
    (folder / "albert_config.json").write_text(json.dumps(release_config_json(name), indent=2))
    (folder / "30k-clean.model").write_bytes(vocab.read_bytes())
    (folder / "30k-clean.vocab").write_text(_vocab_lines(vocab))
    graph = tf.Graph()
    with graph.as_default():
        variables = [tf.compat.v1.get_variable(k, initializer=v) for k, v in release_tensors(name, seed).items()]
        saver = tf.compat.v1.train.Saver(variables)
        with tf.compat.v1.Session(graph=graph) as session:
            session.run(tf.compat.v1.global_variables_initializer())
            saver.save(session, str(folder / "model.ckpt-best"), write_meta_graph=True)
    (folder / "checkpoint").unlink()  # the release has none
    tarball = into / f"{name}.tar.gz"
    with tarfile.open(tarball, "w:gz") as tar:
        tar.add(folder, arcname=top)
    return tarball


# ---- the Hub ----------------------------------------------------------------------------------------


def hub_repo(name: str) -> str:
    size, version = name.split("_")[1], name.split("_")[2]
    return f"albert/albert-{size}-{version}"


def hub_files(name: str, seed: int = 0) -> dict[str, bytes]:
    """The files of the Hub repository of `name` (an AlbertForMaskedLM), by name."""
    import safetensors.torch
    import torch
    import transformers

    config = tiny_config(name)
    values = release_config_json(name)
    values.pop("layers_to_keep", None)
    hub_config = {**values, "architectures": ["AlbertForMaskedLM"], "model_type": "albert", "layer_norm_eps": 1e-12,
                  "classifier_dropout_prob": 0.1, "bos_token_id": 2, "eos_token_id": 3, "pad_token_id": 0,
                  "hidden_act": "gelu" if name.endswith("v1") else "gelu_new"}
    torch.manual_seed(seed)
    # The Hub's files were saved when AlbertForMaskedLM kept the pooler: its tensors are an
    # AlbertForPreTraining's without the sentence-order head.
    model = transformers.AlbertForPreTraining(transformers.AlbertConfig(**{**hub_config, "hidden_act": "gelu_new"}))
    with torch.no_grad():
        for key, p in model.named_parameters():
            p.copy_((1.0 if "LayerNorm" in key and key.endswith("weight") else 0.0) + 0.1 * torch.randn_like(p))
    # The decoder is tied to the word embeddings and predictions.bias: saved once, as
    # save_pretrained does.
    state = {k: v.detach().clone().contiguous() for k, v in model.state_dict().items()
             if not k.startswith(("predictions.decoder.", "sop_classifier.")) and "position_ids" not in k}
    assert "albert.pooler.weight" in state and config.vocab_size == 300
    buffer = io.BytesIO()
    torch.save(state, buffer)
    return {
        "config.json": json.dumps(hub_config, indent=2).encode(),
        "model.safetensors": safetensors.torch.save(state),
        "pytorch_model.bin": buffer.getvalue(),
        "spiece.model": TINY_VOCAB.read_bytes(),
        "tokenizer.json": b'{"stand-in": "not read by albert_tf"}',
        "tokenizer_config.json": b'{"do_lower_case": true, "keep_accents": false}',
        "tf_model.h5": b"stand-in: not read by albert_tf",
    }


def hub_task_files(saved: pathlib.Path) -> dict[str, bytes]:
    """The files of a Hub repository of a task model fine-tuned in PyTorch with transformers'
    Trainer, in the older layout (config.json, pytorch_model.bin without model.safetensors,
    spiece.model, special_tokens_map.json, tokenizer_config.json, training_args.bin; docs/presets.md
    says what of it was not re-checked), from a `save_pretrained` folder `saved` of a tiny
    transformers model; the files no loader reads hold stand-in bytes."""
    import safetensors.torch

    buffer = io.BytesIO()
    import torch

    torch.save(safetensors.torch.load_file(saved / "model.safetensors"), buffer)
    return {
        "config.json": (saved / "config.json").read_bytes(),
        "pytorch_model.bin": buffer.getvalue(),
        "spiece.model": (saved / "spiece.model").read_bytes(),
        "special_tokens_map.json": b'{"stand-in": "not read by albert_tf"}',
        "tokenizer_config.json": b'{"do_lower_case": true, "keep_accents": false}',
        "training_args.bin": b"stand-in: not read by albert_tf",
    }


class LoopbackServer:
    """Serves release tarballs (`/albert_models/<name>.tar.gz`, as storage.googleapis.com) and Hub
    repositories (the API above) from memory on 127.0.0.1; counts the requests of each path."""

    def __init__(self):
        self.files: dict[str, bytes] = {}
        self.repos: dict[str, dict[str, bytes]] = {}
        self.requests: list[str] = []
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_HEAD(self):
                self._answer(body=False)

            def do_GET(self):
                self._answer(body=True)

            def _answer(self, body: bool):
                path = urllib.parse.urlparse(self.path).path
                server.requests.append(path)
                found = server.route(path)
                if found is None:
                    self.send_response(404)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("X-Error-Code", "RepoNotFound" if "/api/" in path else "EntryNotFound")
                    self.send_header("Content-Length", "2")
                    self.end_headers()
                    if body:
                        self.wfile.write(b"{}")
                    return
                data, headers = found
                self.send_response(200)
                for key, value in headers.items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if body:
                    self.wfile.write(data)

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_port}"

    def url(self, name: str) -> str:
        return f"{self.endpoint}/albert_models/{name}.tar.gz"

    def count(self, suffix: str) -> int:
        return sum(1 for path in self.requests if path.endswith(suffix))

    def _sha(self, repo: str) -> str:
        return hashlib.sha1(repr(sorted((k, hashlib.sha1(v).hexdigest()) for k, v in self.repos[repo].items()))
                            .encode()).hexdigest()

    def route(self, path: str):
        if path in self.files:
            return self.files[path], {"Content-Type": "application/octet-stream"}
        parts = path.strip("/").split("/")
        if parts[:2] == ["api", "models"] and len(parts) >= 6:
            repo = "/".join(parts[2:4])
            if repo not in self.repos:
                return None
            if parts[4] == "revision":
                info = {"id": repo, "modelId": repo, "sha": self._sha(repo), "private": False,
                        "siblings": [{"rfilename": f} for f in sorted(self.repos[repo])]}
                return json.dumps(info).encode(), {"Content-Type": "application/json"}
            if parts[4] == "tree":
                entries = []
                for f, data in sorted(self.repos[repo].items()):
                    entry = {"type": "file", "path": f, "size": len(data), "oid": hashlib.sha1(data).hexdigest()}
                    if f.endswith((".safetensors", ".bin", ".h5")):  # stored in LFS on the Hub
                        entry["lfs"] = {"oid": hashlib.sha256(data).hexdigest(), "size": len(data), "pointerSize": 134}
                    entries.append(entry)
                return json.dumps(entries).encode(), {"Content-Type": "application/json"}
        if len(parts) >= 5 and parts[2] == "resolve":
            repo = "/".join(parts[:2])
            data = self.repos.get(repo, {}).get("/".join(parts[4:]))
            if data is None:
                return None
            return data, {"X-Repo-Commit": self._sha(repo), "ETag": f'"{hashlib.sha256(data).hexdigest()}"',
                          "Content-Type": "application/octet-stream"}
        return None

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def point_the_hub_at(patch, server, home):
    """huggingface_hub's endpoint and cache on the loopback stand-in (as tests/albert_tf/presets/test_releases.py)."""
    import huggingface_hub.constants

    patch.setenv("HF_ENDPOINT", server.endpoint)
    patch.setenv("HF_HUB_CACHE", str(home))
    patch.delenv("HF_HUB_OFFLINE", raising=False)
    patch.setattr(huggingface_hub.constants, "ENDPOINT", server.endpoint)
    patch.setattr(huggingface_hub.constants, "HUGGINGFACE_CO_URL_TEMPLATE",
                  server.endpoint + "/{repo_id}/resolve/{revision}/{filename}")
    patch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(home))
    patch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
