"""From what a user names to a preset folder on this machine: `resolve(source)`.

A source is
- a preset folder (config.json, model.weights.h5, spiece.model): used as it is;
- a released checkpoint's name (`albert_base_v2`; `registry.RELEASES`): its tarball downloaded from
  where the release's README links it;
- a URL of a tarball in the release's layout (http, https, gs:// or any scheme tf.io.gfile
  knows), with an optional `#sha256=<hex>` checked before anything is unpacked;
- `hf://<org>/<repo>`: a Hugging Face Hub repository of an ALBERT (huggingface_hub, the `hf` extra);
- a local copy of a release: its tarball, or the unpacked folder (albert_config.json, 30k-clean.model,
  model.ckpt-best.*).

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

from albert_tf.convert import TF1_CONFIG, convert_hf, convert_tf1
from albert_tf.errors import UserError, reason
from albert_tf.presets import download, folder, registry

HF_SCHEME = "hf://"


def is_remote(source: str) -> bool:
    return "://" in source


def resolve(source: str | os.PathLike, progress: bool = True) -> str:
    """The local preset folder of `source` (see the module docstring), downloaded and converted into
    the cache where needed."""
    source = os.fspath(source)
    if folder.is_preset(source):
        return source
    if not is_remote(source) and os.path.exists(source):
        return _local_copy(source)
    if source in registry.RELEASES:
        release = registry.RELEASES[source]
        if release.vocabulary != "sentencepiece":
            raise UserError(f"{source} has a {release.vocabulary} vocabulary ({release.url}); this package's "
                            "tokenizers read SentencePiece models only")
        return _cached(source, lambda target: _from_tarball(release.url, release.sha256, target, progress))
    if source.startswith(HF_SCHEME):
        repo = source[len(HF_SCHEME):].strip("/")
        return _cached("hf-" + repo.replace("/", "--"), lambda target: _from_hub(repo, target))
    if is_remote(source):
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
            if os.path.exists(target):  # a folder left incomplete by an older version: replaced
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
    unpacked = os.path.join(os.path.dirname(target), "unpacked")
    try:
        _unpack(downloaded, unpacked, url)
    except UserError as error:
        os.remove(downloaded)  # a rerun downloads it again
        raise UserError(f"{error}; the download was removed, rerun to download it again") from None
    convert_tf1(_release_folder(unpacked, url), target)
    os.remove(downloaded)  # the converted preset is what is kept


def _unpack(archive: str, into: str, source: str) -> None:
    try:
        with tarfile.open(archive, "r:*") as tar:
            tar.extractall(into, filter="data")  # no absolute paths, no links out, no devices
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


def _local_copy(path: str) -> str:
    """A release's tarball or unpacked folder on this machine, converted into the cache."""
    path = os.path.abspath(path)
    if os.path.isdir(path):
        if not os.path.isfile(os.path.join(path, TF1_CONFIG)):
            raise UserError(f"{path} is not a preset folder (no {folder.CONFIG} and {folder.WEIGHTS}), nor a "
                            f"release's folder (no {TF1_CONFIG})")
        stamp = max(os.path.getmtime(os.path.join(path, n)) for n in os.listdir(path))
        key = f"local-{os.path.basename(path)}-{hashlib.sha256(f'{path}:{stamp}'.encode()).hexdigest()[:12]}"

        def make(target):
            convert_tf1(path, target)

        return _cached(key, make)
    stat = os.stat(path)
    key = _url_key("file://" + path, f"{stat.st_size}:{stat.st_mtime}")

    def make(target):
        unpacked = os.path.join(os.path.dirname(target), "unpacked")
        _unpack(path, unpacked, path)
        convert_tf1(_release_folder(unpacked, path), target)

    return _cached(key, make)


def _from_hub(repo: str, target: str) -> None:
    """A Hub repository in Hugging Face's layout (config.json, model.safetensors or pytorch_model.bin,
    spiece.model), through huggingface_hub (which honours HF_HUB_OFFLINE, HF_ENDPOINT, its cache)."""
    try:
        import huggingface_hub
    except ImportError:
        raise UserError(f"hf://{repo} needs huggingface_hub: pip install 'albert_tf[hf]'") from None
    if download.offline():
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
    files = ["config.json", "spiece.model"]
    try:
        local = huggingface_hub.snapshot_download(repo, allow_patterns=files + ["model.safetensors"])
        if not os.path.isfile(os.path.join(local, "model.safetensors")):
            local = huggingface_hub.snapshot_download(repo, allow_patterns=files + ["pytorch_model.bin"])
    except Exception as error:  # the Hub client's errors have no common base of their own
        raise UserError(f"could not fetch hf://{repo} ({reason(error)}); {download.HINT}") from None
    convert_hf(local, target)
