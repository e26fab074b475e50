"""What a model is, by content: the part of a backend's identity that changes when the files it loads do, and
nothing else (not the path they are at).

One rule (`model_content`) for every backend and every source:

- a local folder: the files the loader reads, in parts that a rerun's line names: "weights" (`*.safetensors` and
  their index; `pytorch_model*.bin` where there is no safetensors), "model config" (`config.json`, remote code
  `*.py`), "tokenizer" (`tokenizer.json`, `tokenizer_config.json` less its chat template, vocabularies, ...),
  "chat template" (`chat_template.jinja`/`.json`, `additional_chat_templates/`, tokenizer_config.json's
  `chat_template`) and "generation config" (`generation_config.json`). Only the folder's own files count:
  `checkpoint-*/`, `optimizer.pt`, logs and model cards change nothing;
- a file (a GGUF, which holds its tokenizer and chat template): "weights", its sha256;
- a hub id: the commit of the snapshot used (git's own content hash), resolved once per process and revision.

A file is hashed once and remembered in `sha256.json` under the models cache by (real path, size, mtime_ns,
ctime_ns, inode): a copy whose times were put back (`cp -p`, `rsync -a`, `touch -r`, `os.utime`) has a new ctime,
which no program can set, so it is hashed again (tests/test_content_identity.py). Plain stdlib: the vllm backend
and the sweep's pre-check use it without torch.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from src.common import digests, owners
from src.common.paths import expand_path

log = logging.getLogger(__name__)

COMMIT = re.compile(r"[0-9a-f]{40}")
# the parts of a model folder, as the line that says what changed names them (tokenizer_config.json is split)
WEIGHTS, MODEL_CONFIG, TOKENIZER, CHAT_TEMPLATE, GENERATION_CONFIG = (
    "weights",
    "model config",
    "tokenizer",
    "chat template",
    "generation config",
)
TOKENIZER_FILES = frozenset(
    {
        "tokenizer.json",
        "tokenizer.model",
        "vocab.json",
        "vocab.txt",
        "merges.txt",
        "special_tokens_map.json",
        "added_tokens.json",
        "spiece.model",
        "sentencepiece.bpe.model",
    }
)
CHAT_TEMPLATE_FILES = frozenset({"chat_template.jinja", "chat_template.json"})


def models_root() -> Path:
    """$MCQ_CACHE_DIR/models, else ~/.cache/mcq-consistency/models."""
    return owners.cache_root() / "models"


def file_sha256(path: str | os.PathLike[str]) -> str:
    """sha256 of a file, remembered in `sha256.json` under (real path, size, mtime_ns, ctime_ns, inode, device): a
    file written again, even with its size and times put back, has a new ctime and is hashed again."""
    path = Path(path).resolve()
    stat = path.stat()
    key = f"{path}|{stat.st_size}|{stat.st_mtime_ns}|{stat.st_ctime_ns}|{stat.st_ino}|{stat.st_dev}"
    index_file = models_root() / "sha256.json"
    index = read_json(index_file)
    if key in index:
        return str(index[key])
    sha = digests.file_sha256(path)
    index = read_json(index_file)  # re-read: another process may have added entries meanwhile
    index[key] = sha
    write_json_atomic(index_file, index)
    return sha


def _digest(value: object) -> str:
    return digests.json_sha256(value)


def _part_of(name: str) -> str | None:
    """The part of a model folder a top-level file belongs to; None for a file no loader reads."""
    if name == "generation_config.json":
        return GENERATION_CONFIG
    if name in CHAT_TEMPLATE_FILES:
        return CHAT_TEMPLATE
    if name in TOKENIZER_FILES or name.endswith(".tiktoken"):
        return TOKENIZER
    if name.endswith(".safetensors") or name == "model.safetensors.index.json":
        return WEIGHTS
    if name == "config.json" or name.endswith(".py"):
        return MODEL_CONFIG
    return None


def folder_parts(folder: Path) -> dict[str, str]:
    """{part: sha256} of the files a model folder's loader reads (the module docstring); its path in none."""
    files: dict[str, list[list[str]]] = {}
    names = sorted(p.name for p in folder.iterdir() if p.is_file())
    has_safetensors = any(n.endswith(".safetensors") for n in names)
    for name in names:
        if name == "tokenizer_config.json":  # its chat template is a part of its own
            settings = read_json(folder / name)
            template = settings.pop("chat_template", None)
            files.setdefault(TOKENIZER, []).append([name, _digest(settings)])
            if template is not None:
                files.setdefault(CHAT_TEMPLATE, []).append([name, _digest(template)])
            continue
        part = _part_of(name)
        if part is None and not has_safetensors and name.startswith("pytorch_model") and ".bin" in name:
            part = WEIGHTS
        if part is not None:
            files.setdefault(part, []).append([name, file_sha256(folder / name)])
    templates = folder / "additional_chat_templates"
    if templates.is_dir():
        for path in sorted(p for p in templates.iterdir() if p.is_file()):
            files.setdefault(CHAT_TEMPLATE, []).append([f"{templates.name}/{path.name}", file_sha256(path)])
    return {part: _digest(entries) for part, entries in sorted(files.items())}


@dataclass(frozen=True)
class ModelContent:
    """A model by content: `parts` ({"weights": sha256, ...}, or {"commit": ...} for a hub id) and, for a hub id,
    its `repo`. `source` is where the files are (for lines and `changed`), never part of the identity."""

    parts: dict[str, str]
    source: str = field(compare=False)
    repo: str | None = None
    revision: str | None = field(default=None, compare=False)

    @property
    def digest(self) -> str:
        """sha256 of every part: what two copies of the same files share."""
        return _digest(self.parts)

    @property
    def commit(self) -> str | None:
        """A hub snapshot's resolved commit; None for local files, or where the commit is unknown."""
        commit = self.parts.get("commit", "")
        return commit if COMMIT.fullmatch(commit) else None

    def identity_fields(self, kind: str) -> str:
        """The backend identity's leading fields: `hf|weights=sha256:<digest>` for files, `hf:<repo>|commit=<c>`
        for a hub snapshot."""
        if self.repo is not None:
            return f"{kind}:{self.repo}|commit={self.commit}"
        return f"{kind}|weights=sha256:{self.digest}"

    def short_parts(self) -> dict[str, str]:
        """{part: 16 hex digits}: the `model_content` tag a rerun compares to name what changed."""
        return {part: value[:16] for part, value in self.parts.items()}

    def changed(self) -> list[str]:
        """The parts whose files differ now from when this was computed ([] for a hub snapshot: a commit is fixed)."""
        if self.repo is not None:
            return []
        try:
            now = model_content(self.source).parts
        except OSError:
            return [WEIGHTS]
        return [part for part in dict.fromkeys([*self.parts, *now]) if self.parts.get(part) != now.get(part)]


def model_content(source: str | os.PathLike[str], *, revision: str | None = None) -> ModelContent:
    """The content of what a backend loads from `source`: a local folder, a local file (a GGUF) or a hub id at
    `revision` (the module docstring). Written once, used by every backend (hf, GGUF, vllm)."""
    local = expand_path(source)
    if local.is_dir():
        return ModelContent(folder_parts(local), source=str(local.resolve()))
    if local.is_file():
        return ModelContent({WEIGHTS: file_sha256(local)}, source=str(local.resolve()))
    repo = str(source)
    return ModelContent({"commit": str(hub_commit(repo, revision))}, source=repo, repo=repo, revision=revision)


def folder_fingerprint(folder: str | os.PathLike[str]) -> str:
    """sha256 of what a model folder's loader reads (`model_content`), not of where it is."""
    return model_content(folder).digest


_COMMITS: dict[tuple[str, str | None], str | None] = {}


def hub_commit(repo_id: str, revision: str | None) -> str | None:
    """The commit of the hub snapshot `repo_id` at `revision` (a branch, tag or commit) resolves to: a commit given
    is itself; else the hub's answer (online) or the local hub cache's ref (offline, or the hub unreachable); None
    when neither knows it. Resolved once per process and (repo, revision), so the jobs of a sweep and the loading
    all use one snapshot, and two revisions of one repo are two (tests/test_content_identity.py)."""
    if revision and COMMIT.fullmatch(revision):
        return revision
    key = (repo_id, revision)
    if key not in _COMMITS:
        _COMMITS[key] = _online_commit(repo_id, revision) or _cached_commit(repo_id, revision)
    return _COMMITS[key]


def _online_commit(repo_id: str, revision: str | None) -> str | None:
    try:
        from huggingface_hub import HfApi
        from huggingface_hub.constants import HF_HUB_OFFLINE
    except ImportError:
        return None
    if HF_HUB_OFFLINE:
        return None
    try:
        return HfApi().model_info(repo_id, revision=revision, timeout=10).sha
    except Exception as err:  # noqa: BLE001 - unreachable, unknown or gated: the local cache may still know
        log.info("hub commit of %s@%s not resolved online (%s)", repo_id, revision or "main", type(err).__name__)
        return None


def _cached_commit(repo_id: str, revision: str | None) -> str | None:
    try:
        from huggingface_hub.constants import HF_HUB_CACHE
    except ImportError:
        return None
    ref = Path(HF_HUB_CACHE) / f"models--{repo_id.replace('/', '--')}" / "refs" / (revision or "main")
    try:
        commit = ref.read_text().strip()
    except OSError:
        return None
    return commit if COMMIT.fullmatch(commit) else None


def read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def write_json_atomic(path: Path, data: Mapping[str, Any]) -> None:
    """Written under a temporary name and renamed into place: a reader sees the old file or the new one, whole."""
    owners.write_whole(
        path, lambda tmp: tmp.write_text(json.dumps(data, indent=1, sort_keys=True)), "an interrupted index write"
    )
