"""A float copy of a GGUF model on disk, so that de-quantising (~30 s) happens once per file, not once per run.

Layout under the models cache root ($MCQ_CACHE_DIR/models, else ~/.cache/mcq-consistency/models):

    sha256.json            file hashes keyed by (real path, size, mtime): a 100 MB file is hashed once
    gguf/                  GGUF files that packages assemble from chunks (gemma3_270m)
    <sha256[:16]>/         save_pretrained output (safetensors + tokenizer) of the de-quantised model

    .<sha256[:16]>.tmp-<host>-<pid>-<random>/   a conversion in progress (or killed): see below

A conversion writes into a temporary sibling folder named after its host and process id and renames it
into place when whole, so a killed conversion never leaves a half-written cache that a later run would
trust. The next conversion (any process on the machine) removes the temporary folders and files whose owner
process is gone (`clean_stale_temps`), so no temporary weights stay on disk after a kill and a rerun; those
of another host (a shared cache folder) are removed once a day old.
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import tempfile
import time
from pathlib import Path

from src import owners

log = logging.getLogger(__name__)

_MARKER = "mcq_gguf_source.json"  # written last inside the temp folder: its presence means the copy is whole
# `.<name>.tmp-<host>-<pid>-<random>`; the old layout's `.<name>.tmp-<random>` has no owner (host and pid None)
_TEMP = re.compile(r"^\.(?P<name>.+?)\.tmp-(?:(?P<host>[A-Za-z0-9_.]+)-(?P<pid>\d+)-)?[A-Za-z0-9_]+$")
FOREIGN_STALE_S = 24 * 3600  # a temp of another host, or of no known owner, is removed once this old


def models_root() -> Path:
    base = os.environ.get("MCQ_CACHE_DIR")
    root = Path(base) if base else Path.home() / ".cache" / "mcq-consistency"
    return root.expanduser() / "models"


def file_sha256(path: str | os.PathLike) -> str:
    """sha256 of a file, remembered in `sha256.json` under (real path, size, mtime) so it is computed once."""
    path = Path(path).resolve()
    stat = path.stat()
    key = f"{path}|{stat.st_size}|{stat.st_mtime_ns}"
    index_file = models_root() / "sha256.json"
    index = _read_json(index_file)
    if key in index:
        return index[key]
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    sha = digest.hexdigest()
    index = _read_json(index_file)  # re-read: another process may have added entries meanwhile
    index[key] = sha
    _write_json_atomic(index_file, index)
    return sha


def float_copy_dir(gguf_path: str | os.PathLike) -> Path:
    return models_root() / file_sha256(gguf_path)[:16]


def ensure_float_copy(gguf_path: str | os.PathLike) -> Path:
    """The folder holding the float32 safetensors copy of `gguf_path` (and its tokenizer), converting it if absent."""
    gguf_path = Path(gguf_path).resolve()
    clean_stale_temps()  # what a killed conversion left (its process is gone)
    target = float_copy_dir(gguf_path)
    if (target / _MARKER).exists():
        return target
    if target.exists():  # no marker: left by an older, interrupted layout; never trusted
        shutil.rmtree(target, ignore_errors=True)

    started = time.perf_counter()
    log.info("converting %s to float32 once; cached at %s", gguf_path.name, target)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=_temp_prefix(target.name), dir=target.parent))
    try:
        _convert(gguf_path, tmp)
        _write_json_atomic(tmp / _MARKER, {"gguf_file": gguf_path.name, "sha256": file_sha256(gguf_path),
                                           "converted_s": round(time.perf_counter() - started, 1)})
        try:
            os.rename(tmp, target)
        except OSError:  # another process finished first: its copy is as good as ours
            if not (target / _MARKER).exists():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def _convert(gguf_path: Path, out_dir: Path) -> None:
    """De-quantise `gguf_path` into `out_dir` (float32 safetensors and the tokenizer)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(gguf_path.parent, gguf_file=gguf_path.name)
    model = AutoModelForCausalLM.from_pretrained(gguf_path.parent, gguf_file=gguf_path.name, dtype=torch.float32)
    # save_pretrained refuses a quantizer-loaded model; the weights are already plain float32 tensors.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.save_pretrained(out_dir, safe_serialization=True)
    tokenizer.save_pretrained(out_dir)


_host = owners.host  # (kept under these names for the temp-name rule below)
_alive = owners.pid_alive


def _temp_prefix(name: str) -> str:
    """`.<name>.tmp-<host>-<pid>-`: whose temporary folder or file this is, for `clean_stale_temps`."""
    return f".{name}.tmp-{_host()}-{os.getpid()}-"


def clean_stale_temps(root: Path | None = None) -> list[Path]:
    """Remove the temporary folders and files of conversions (and index writes) whose process is gone: those of
    this host whose pid no longer runs, and those of another host or of no known owner once a day old. Returns
    what it removed. A conversion in progress (its process alive) is left alone."""
    root = models_root() if root is None else root
    removed = []
    for folder in (root, root / "gguf"):
        try:
            entries = list(folder.iterdir())
        except OSError:
            continue
        for entry in entries:
            match = _TEMP.match(entry.name)
            if not match:
                continue
            if match["pid"] and match["host"] == _host():
                stale = not _alive(int(match["pid"]))
            else:
                try:
                    stale = time.time() - entry.lstat().st_mtime > FOREIGN_STALE_S
                except OSError:
                    continue
            if not stale:
                continue
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry, ignore_errors=True)
            else:
                entry.unlink(missing_ok=True)
            if not entry.exists():
                log.info("removed %s, left by an interrupted conversion", entry)
                removed.append(entry)
    return removed


def _read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def _write_json_atomic(path: Path, data: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=_temp_prefix(path.name), dir=path.parent)
    with os.fdopen(fd, "w") as fh:
        json.dump(data, fh, indent=1, sort_keys=True)
    os.replace(tmp, path)
