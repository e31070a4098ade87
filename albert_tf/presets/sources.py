"""From what a user names to a preset folder on this machine: `resolve(source)`.

A source is
- a preset folder (config.json, model.weights.h5, spiece.model): used as it is;
- a released checkpoint's name (`albert_base_v2`; `registry.RELEASES`): its tarball downloaded from
  where the release's README links it; always the release, even where a folder of that name is in
  the working directory (given as a path, `./albert_base_v2`, that folder loads);
- a URL of a tarball in the release's layout (http, https, gs:// or any scheme tf.io.gfile
  knows), with an optional `#sha256=<hex>` checked before anything is unpacked;
- `hf://<org>/<repo>`: a Hugging Face Hub repository of an ALBERT (huggingface_hub, the `hf` extra);
- a local copy of a release: its tarball, or the unpacked folder (albert_config.json, 30k-clean.model,
  model.ckpt-best.*);
- a Hugging Face folder (config.json, model.safetensors or pytorch_model.bin, spiece.model).

Everything but a preset folder is converted once into the cache (`download.home()`/presets/<key>),
under a lock, written aside and renamed when whole: a second load is a folder lookup, with no
download and no conversion, offline too.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import shutil
import tarfile
import tempfile
import urllib.parse
import zlib

from albert_tf.presets.convert import (HF_CONFIG, HF_PYTORCH, HF_SAFETENSORS, HF_VOCAB, TF1_CHECKPOINT,
                                      TF1_CONFIG, TF1_VOCAB, convert_hf, convert_tf1)
from albert_tf.utils.errors import UserError, reason
from albert_tf.utils.files import is_url
from albert_tf.presets import download, folder, registry

HF_SCHEME = "hf://"


def resolve(source: str | os.PathLike, progress: bool = True) -> str:
    """The local preset folder of `source` (see the module docstring), downloaded and converted into
    the cache where needed."""
    source = os.fspath(source)
    if source in registry.RELEASES:
        release = registry.RELEASES[source]
        if os.path.exists(source):
            # A released name is always the release: a folder of that name here is taken only as a path.
            from absl import logging

            logging.warning("%s is a released name: loading the release, not the %s here (give ./%s to load "
                            "that)", source, "folder" if os.path.isdir(source) else "file", source)
        if release.vocabulary != "sentencepiece":
            raise UserError(f"{source} has a {release.vocabulary} vocabulary ({release.url}); this package's "
                            "tokenizers read SentencePiece models only")
        return _cached(source, lambda target: _from_tarball(release.url, release.sha256, target, progress))
    if folder.is_preset(source):
        return source
    if not is_url(source) and os.path.exists(source):
        return _local_copy(source)
    if source.startswith(HF_SCHEME):
        repo = source[len(HF_SCHEME):].strip("/")
        return _cached("hf-" + repo.replace("/", "--"), lambda target: _from_hub(repo, target))
    if is_url(source):
        url, sha256 = download.split_checksum(source)
        return _cached(_url_key(url, sha256), lambda target: _from_tarball(url, sha256, target, progress))
    known = ", ".join(sorted(n for n, r in registry.RELEASES.items() if r.vocabulary == "sentencepiece"))
    raise UserError(f"{source}: no such folder or file, nor a released name ({known}), a URL or "
                    "hf://<repo> (albert-presets lists the names)")


def _url_key(url: str, sha256: str | None) -> str:
    name = os.path.basename(urllib.parse.urlparse(url).path) or "download"
    for suffix in (".tar.gz", ".tgz", ".tar"):
        name = name[: -len(suffix)] if name.endswith(suffix) else name
    return f"{name}-{hashlib.sha256((url + (sha256 or '')).encode()).hexdigest()[:12]}"


def _cached(key: str, make) -> str:
    """The cached preset `key`, made by `make(target_folder)` under the key's lock if absent."""
    target = os.path.join(download.home(), "presets", key)
    if folder.is_preset(target):
        return target
    with download.locked(os.path.join(download.home(), "locks", key + ".lock")):
        if folder.is_preset(target):  # another process made it while this one waited
            return target
        os.makedirs(os.path.join(download.home(), "tmp"), exist_ok=True)
        work = tempfile.mkdtemp(prefix=f"{key}.", dir=os.path.join(download.home(), "tmp"))
        try:
            made = os.path.join(work, "preset")
            make(made)
            if os.path.exists(target):  # not a preset (no albert_config.json: left incomplete): replaced
                shutil.rmtree(target)
            os.makedirs(os.path.dirname(target), exist_ok=True)
            os.replace(made, target)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return target


def _from_tarball(url: str, sha256: str | None, target: str, progress: bool) -> None:
    name = os.path.basename(urllib.parse.urlparse(url).path) or "download"
    downloaded = download.fetch(url, os.path.join(download.home(), "downloads", _url_key(url, sha256) + "-" + name),
                                sha256, progress)
    try:
        _convert_tarball(downloaded, target, url)
    except (UserError, ValueError, OSError) as error:
        os.remove(downloaded)  # a rerun downloads it again, once the server has the right file
        raise UserError(f"{reason(error)}; the download was removed, rerun to download it again") from None
    except BaseException:
        os.remove(downloaded)
        raise
    os.remove(downloaded)  # the converted preset is what is kept


def _convert_tarball(archive: str, target: str, source: str) -> None:
    unpacked = os.path.join(os.path.dirname(target), "unpacked")
    _unpack(archive, unpacked, source)
    release = _release_folder(unpacked, source)
    shown = os.path.relpath(release, unpacked)
    _check_release(release, source, shown)
    try:
        convert_tf1(release, target)
    except (ValueError, OSError) as error:  # named as inside the tarball: the unpacked copy is gone
        raise UserError(f"{source}: {reason(error).replace(release, shown)}") from None


# What a loader reads from an unpacked release (google-research/albert's export_checkpoints.py): its
# config, vocabulary and TF1 checkpoint. Anything else a tarball holds (a TF-Hub module beside the
# checkpoint: saved_model.pb, tfhub_module.pb, fingerprint.pb, variables/, assets/; google-research/
# albert issue 71) is not unpacked. A bound on what is unpacked, far over the largest release
# (xxlarge: about 0.9 GB of weights), refuses a bomb before it fills the disk.
_RELEASE_FILES = (TF1_CONFIG, TF1_VOCAB, "vocab_chinese.txt", "checkpoint")
MAX_UNPACKED_BYTES = 4 << 30


def _is_release_member(name: str) -> bool:
    """A file the conversion reads: at the release folder's level (not inside a TF-Hub module's
    variables/ or assets/), its config, vocabulary or a TF1 checkpoint's file."""
    parts = name.split("/")
    if any(part in ("variables", "assets") for part in parts[:-1]):
        return False
    return parts[-1] in _RELEASE_FILES or parts[-1].startswith(TF1_CHECKPOINT + ".")


def _unpack(archive: str, into: str, source: str, max_bytes: int | None = None) -> None:
    max_bytes = MAX_UNPACKED_BYTES if max_bytes is None else max_bytes
    total = 0
    try:
        with tarfile.open(archive, "r:*") as tar:
            for member in tar:  # one member at a time: a bomb is refused before it is unpacked
                if not (member.isfile() and _is_release_member(member.name)):
                    continue  # folders are made as files need them; links are never followed
                total += member.size
                if total > max_bytes:
                    raise UserError(f"{source}: unpacks to more than {max_bytes} bytes, far over any release")
                tar.extract(member, into, filter="data")  # no absolute paths, no links out, no devices
    except (tarfile.TarError, EOFError, zlib.error, gzip.BadGzipFile) as error:
        raise UserError(f"{source}: not a readable tar archive ({reason(error)})") from None
    except OSError as error:  # writing what it unpacks (a full disk), which names no file
        raise download.cache_write_error(into, error) from None


def _release_folder(unpacked: str, source: str) -> str:
    """The folder of an unpacked release that holds albert_config.json (the release: albert_base/)."""
    found = [root for root, _, files in os.walk(unpacked) if TF1_CONFIG in files]
    if len(found) != 1:
        raise UserError(f"{source}: not in the release's layout (a folder with {TF1_CONFIG}, 30k-clean.model "
                        f"and model.ckpt-best.*): {len(found)} folders with {TF1_CONFIG}")
    return found[0]


def _check_release(path: str, source: str, shown: str) -> None:
    """A release's folder must hold its SentencePiece model: the Chinese ones hold a WordPiece
    vocabulary instead, refused here by any address (`shown`: the folder as the user knows it)."""
    if os.path.isfile(os.path.join(path, TF1_VOCAB)):
        return
    wordpiece = sorted(n for n in os.listdir(path) if n.startswith("vocab") and n.endswith(".txt"))
    if wordpiece:
        raise UserError(f"{source}: {shown}/{wordpiece[0]} is a WordPiece vocabulary and there is no "
                        f"{TF1_VOCAB}; this package's tokenizers read SentencePiece models only")
    raise UserError(f"{source}: no {shown}/{TF1_VOCAB}, the release's SentencePiece model")


def _local_copy(path: str) -> str:
    """A release's tarball or unpacked folder on this machine, converted into the cache."""
    path = os.path.abspath(path)
    if os.path.isdir(path) and _is_hf_folder(path):
        stamp = max(os.path.getmtime(os.path.join(path, n)) for n in os.listdir(path))
        key = f"hf-local-{os.path.basename(path)}-{hashlib.sha256(f'{path}:{stamp}'.encode()).hexdigest()[:12]}"
        return _cached(key, lambda target: convert_hf(path, target))
    if os.path.isdir(path):
        if not os.path.isfile(os.path.join(path, TF1_CONFIG)):
            raise UserError(f"{path} is not a preset folder (no {folder.CONFIG} and {folder.WEIGHTS}), nor a "
                            f"release's folder (no {TF1_CONFIG})")
        _check_release(path, path, path)
        stamp = max(os.path.getmtime(os.path.join(path, n)) for n in os.listdir(path))
        key = f"local-{os.path.basename(path)}-{hashlib.sha256(f'{path}:{stamp}'.encode()).hexdigest()[:12]}"

        def make(target):
            convert_tf1(path, target)

        return _cached(key, make)
    stat = os.stat(path)
    key = _url_key("file://" + path, f"{stat.st_size}:{stat.st_mtime}")
    return _cached(key, lambda target: _convert_tarball(path, target, path))


def _snapshot(huggingface_hub, repo: str) -> str:
    """The repository's files a conversion reads, fetched within ALBERT_TF_TIMEOUT a request as every
    download here is; huggingface_hub's warnings said once each, and only when the fetch succeeds
    (a failure is its one line)."""
    import logging as python_logging
    import warnings

    from huggingface_hub import constants

    class Keep(python_logging.Handler):  # huggingface_hub's log lines, held until the fetch is known good
        def __init__(self):
            super().__init__(python_logging.WARNING)
            self.lines = []

        def emit(self, record):
            self.lines.append(record.getMessage())

    hub_logger, kept = python_logging.getLogger("huggingface_hub"), Keep()
    propagate = hub_logger.propagate
    hub_logger.addHandler(kept)
    hub_logger.propagate = False

    files = [HF_CONFIG, HF_VOCAB]
    # ALBERT_TF_OFFLINE: the Hub's cache only, for this call (the process's HF_HUB_OFFLINE is the user's).
    offline = download.offline()
    timeout = download.timeout()
    # The downloads take HF_HUB_DOWNLOAD_TIMEOUT and etag_timeout, but the repository's listing
    # (repo_info, list_repo_tree) asks the shared client with `timeout=None`, no limit at all: a Hub
    # that never answers would hold the call forever. A request hook bounds every request.
    session = huggingface_hub.get_session()
    saved, hooks = constants.HF_HUB_DOWNLOAD_TIMEOUT, session.event_hooks

    def bounded(request):
        request.extensions["timeout"] = dict.fromkeys(("connect", "read", "write", "pool"), timeout)

    constants.HF_HUB_DOWNLOAD_TIMEOUT = timeout
    session.event_hooks = {**hooks, "request": [*hooks["request"], bounded]}
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            local = huggingface_hub.snapshot_download(repo, allow_patterns=files + [HF_SAFETENSORS],
                                                      etag_timeout=timeout, local_files_only=offline)
            if not os.path.isfile(os.path.join(local, HF_SAFETENSORS)):
                local = huggingface_hub.snapshot_download(repo, allow_patterns=files + [HF_PYTORCH],
                                                          etag_timeout=timeout, local_files_only=offline)
    except Exception as error:  # the Hub client's errors have no common base of their own
        raise UserError(f"could not fetch hf://{repo} ({reason(error)}); {download.HINT}") from None
    finally:
        constants.HF_HUB_DOWNLOAD_TIMEOUT, session.event_hooks = saved, hooks
        hub_logger.removeHandler(kept)
        hub_logger.propagate = propagate
    if _is_hf_folder(local):  # else the caller's one line says what the repository lacks
        from absl import logging

        for message in dict.fromkeys([str(w.message).strip() for w in caught] + kept.lines):
            logging.warning("hf://%s: %s", repo, message.splitlines()[0])
    return local


def _is_hf_folder(path: str) -> bool:
    """A Hugging Face model folder (`save_pretrained`'s): config.json beside its weights."""
    return os.path.isfile(os.path.join(path, HF_CONFIG)) and any(
        os.path.isfile(os.path.join(path, name)) for name in (HF_SAFETENSORS, HF_PYTORCH))


def _from_hub(repo: str, target: str) -> None:
    """A Hub repository in Hugging Face's layout (config.json, model.safetensors or pytorch_model.bin,
    spiece.model), through huggingface_hub (which honours HF_HUB_OFFLINE, HF_ENDPOINT, its cache)."""
    try:
        import huggingface_hub
    except ImportError:
        raise UserError(f"hf://{repo} needs huggingface_hub: pip install 'albert_tf[hf]'") from None
    local = _snapshot(huggingface_hub, repo)
    if not _is_hf_folder(local):
        held = sorted(os.listdir(local)) if os.path.isdir(local) else []
        raise UserError(f"hf://{repo} holds no ALBERT model in Hugging Face's layout ({HF_CONFIG} and {HF_SAFETENSORS} "
                        f"or {HF_PYTORCH}; fetched {', '.join(held) if held else 'nothing'})")
    # The release's own repositories: their v1 config.json says "gelu", which in transformers is the
    # exact GELU, but the weights were trained (and released) with the tanh form (docs/presets.md).
    released = any(r.hf_repo == repo for r in registry.RELEASES.values())
    convert_hf(local, target, exact_gelu_as_tanh=released)
