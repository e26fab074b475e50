"""A float copy of a GGUF model on disk, so that de-quantising (~30 s) happens once per file, not once per run.

Layout under the models cache root ($MCQ_CACHE_DIR/models, else ~/.cache/mcq-consistency/models):

    sha256.json            file hashes keyed by (real path, size, mtime, ctime, inode): a 100 MB file is hashed once
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

import logging
import os
import shutil
import tempfile
import time
from pathlib import Path

from src.backends import weights
from src.common import owners, progress

log = logging.getLogger(__name__)

_MARKER = "mcq_gguf_source.json"  # written last inside the temp folder: its presence means the copy is whole
_TEMP = owners.TEMP_NAME  # the temporary-name rule of src/common/owners.py
FOREIGN_STALE_S = owners.FOREIGN_STALE_S


models_root = weights.models_root
file_sha256 = weights.file_sha256  # hashed once per (real path, size, mtime, ctime, inode): src/backends/weights.py


def float_copy_dir(gguf_path: str | os.PathLike[str]) -> Path:
    return models_root() / file_sha256(gguf_path)[:16]


def ensure_float_copy(gguf_path: str | os.PathLike[str]) -> Path:
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
    tmp = Path(tempfile.mkdtemp(prefix=owners.temp_prefix(target.name), dir=target.parent))
    try:
        with progress.direct_library_bars():  # transformers' conversion bar: a terminal's only
            _convert(gguf_path, tmp)
        _write_json_atomic(
            tmp / _MARKER,
            {
                "gguf_file": gguf_path.name,
                "sha256": file_sha256(gguf_path),
                "converted_s": round(time.perf_counter() - started, 1),
            },
        )
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
    model.hf_quantizer = None  # type: ignore[assignment]  # typed by nn.Module.__getattr__; transformers takes None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.save_pretrained(out_dir, safe_serialization=True)
    tokenizer.save_pretrained(out_dir)


def clean_stale_temps(root: Path | None = None) -> list[Path]:
    """Remove the temporary folders and files of conversions (and index writes) whose process is gone
    (`owners.clean_stale_temps`: dead pid on this host, or a day old from another host). Returns what it removed."""
    root = models_root() if root is None else root
    return owners.clean_stale_temps([root, root / "gguf"], "an interrupted conversion")


_read_json, _write_json_atomic = weights.read_json, weights.write_json_atomic
