"""What a model's weights are, by content: the part of a backend's identity that changes when the weights do.

- a file (a GGUF): its sha256;
- a local folder: a fingerprint of its files (each file's sha256, with its path inside the folder), so that new
  weights saved to the same folder (`.../last`, a checkpoint overwritten) are another model;
- a hub id: the commit of the snapshot used, resolved once per process.

A file is hashed once and remembered in `sha256.json` under the models cache by (real path, size, mtime), so a
16 GB folder is read once; a changed file (new size or mtime) is hashed again. Plain stdlib: the vllm backend and
the sweep's pre-check use it without torch.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import tempfile
from pathlib import Path

from src.common import owners

log = logging.getLogger(__name__)

COMMIT = re.compile(r"[0-9a-f]{40}")
# files of a model folder that never change what it computes: its card, licences, git's and the hub's own folders
IGNORED_FILES = re.compile(r"(^|/)\.|(^|/)(README|LICEN[CS]E|NOTICE|USE_POLICY)[^/]*$", re.IGNORECASE)


def models_root() -> Path:
    """$MCQ_CACHE_DIR/models, else ~/.cache/mcq-consistency/models."""
    base = os.environ.get("MCQ_CACHE_DIR")
    root = Path(base) if base else Path.home() / ".cache" / "mcq-consistency"
    return root.expanduser() / "models"


def file_sha256(path: str | os.PathLike) -> str:
    """sha256 of a file, remembered in `sha256.json` under (real path, size, mtime) so it is computed once."""
    path = Path(path).resolve()
    stat = path.stat()
    key = f"{path}|{stat.st_size}|{stat.st_mtime_ns}"
    index_file = models_root() / "sha256.json"
    index = read_json(index_file)
    if key in index:
        return index[key]
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    sha = digest.hexdigest()
    index = read_json(index_file)  # re-read: another process may have added entries meanwhile
    index[key] = sha
    write_json_atomic(index_file, index)
    return sha


def folder_fingerprint(folder: str | os.PathLike) -> str:
    """sha256 over (path inside the folder, file sha256) of every file of a model folder (weights, config,
    tokenizer), hidden files and READMEs left out (tests/test_content_identity.py)."""
    root = Path(folder).resolve()
    parts = []
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        inside = path.relative_to(root).as_posix()
        if not IGNORED_FILES.search(inside):
            parts.append([inside, file_sha256(path)])
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()


_COMMITS: dict[tuple[str, str | None], str | None] = {}


def hub_commit(repo_id: str, revision: str | None) -> str | None:
    """The commit of the hub snapshot `repo_id` at `revision` (a branch, tag or commit) resolves to: a commit given
    is itself; else the hub's answer (online) or the local hub cache's ref (offline, or the hub unreachable); None
    when neither knows it. Resolved once per process, so the jobs of a sweep and the loading all use one snapshot."""
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


def read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def write_json_atomic(path: Path, data: dict) -> None:
    """Written under a temporary name and renamed into place: a reader sees the old file or the new one, whole."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=owners.temp_prefix(path.name), dir=path.parent)
    with os.fdopen(fd, "w") as fh:
        json.dump(data, fh, indent=1, sort_keys=True)
    os.replace(tmp, path)
