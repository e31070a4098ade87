"""The released ALBERT checkpoints by name: where each is downloaded from, and its size.

The names are the release's tarball names. Each downloads from where the release's README links it
(the TF1 tarballs on storage.googleapis.com) and is converted once into the cache; the Hugging Face
Hub holds the English ones too (`hf://albert/albert-base-v2`, the second source, through
huggingface_hub). No public source gives the tarballs' or the Hub files' sha256, so no name is
pinned (`sha256` None); a user pins a download with `<url>#sha256=<hex>` (docs/presets.md).

The Chinese checkpoints carry a WordPiece vocabulary (`vocab_chinese.txt`), not SentencePiece:
their encoder loads, but the package's tokenizers cannot read their vocabulary, so they are listed
and refused with that reason.
"""

from __future__ import annotations

import dataclasses

RELEASE_URL = "https://storage.googleapis.com/albert_models/{name}.tar.gz"


@dataclasses.dataclass(frozen=True)
class Release:
    """A released checkpoint: its name, size (`AlbertConfig.named`), tarball URL, Hub repository and
    pinned sha256 of the tarball (None: none public)."""

    name: str
    size: str
    url: str
    hf_repo: str | None = None
    sha256: str | None = None
    vocabulary: str = "sentencepiece"
    vocab_size: int = 30000

    @property
    def sources(self) -> str:
        return self.url + (f" (or hf://{self.hf_repo})" if self.hf_repo else "")


def _english(size: str, version: int) -> Release:
    name = f"albert_{size}_v{version}"
    return Release(name, name, RELEASE_URL.format(name=name), hf_repo=f"albert/albert-{size}-v{version}")


def _chinese(size: str) -> Release:
    name = f"albert_{size}_zh"
    return Release(name, f"albert_{size}_v1", RELEASE_URL.format(name=name), vocabulary="wordpiece",
                   vocab_size=21128)


RELEASES: dict[str, Release] = {
    r.name: r
    for r in [
        *(_english(size, version) for version in (1, 2) for size in ("base", "large", "xlarge", "xxlarge")),
        *(_chinese(size) for size in ("base", "large", "xlarge", "xxlarge")),
    ]
}
