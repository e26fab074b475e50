"""Backends: build one from its `model` config node. Heavy libraries are imported only for the backend chosen."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from src.backends.base import Backend, LabelScores, OptionScores, Request, SamplingParams
from src.common.errors import UserError

__all__ = ["Backend", "LabelScores", "OptionScores", "Request", "SamplingParams", "load_backend"]

BACKENDS = ("hf", "vllm", "openai", "simulated")
_HF_PACKAGES = {"torch", "transformers", "accelerate", "safetensors", "tokenizers", "tqdm", "gguf", "huggingface_hub"}


def load_backend(model_cfg: Mapping[str, Any], *, chat: bool) -> Backend:
    """The backend that `model_cfg["backend"]` names, built from the rest of the node.

    `chat` (from the prompt config) asks the backend to wrap prompts in the model's chat template.
    """
    kind = model_cfg.get("backend")
    if kind == "hf":
        try:
            from src.backends.hf import HFBackend, HFSettings  # local: loads torch, transformers (slow import)
        except ModuleNotFoundError as err:
            if err.name and err.name.split(".")[0] in _HF_PACKAGES:
                raise UserError(
                    f"model.backend=hf needs {err.name}: pip install torch transformers accelerate gguf "
                    f"(CPU-only torch: pip install torch --index-url https://download.pytorch.org/whl/cpu)"
                ) from None
            raise
        return HFBackend(HFSettings.from_config(model_cfg, chat=chat))
    if kind == "vllm":
        from src.backends.vllm_backend import VLLMBackend, VLLMSettings  # local: optional; imports vllm on load

        return VLLMBackend(VLLMSettings.from_config(model_cfg, chat=chat))
    if kind == "openai":
        from src.backends.openai_backend import OpenAIBackend, OpenAISettings  # local: loaded when chosen

        return OpenAIBackend(OpenAISettings.from_config(model_cfg, chat=chat))
    if kind == "simulated":
        from src.backends.simulated import SimulatedBackend, SimulatedSettings  # local: loads pandas (slow import)

        return SimulatedBackend(SimulatedSettings.from_config(model_cfg))
    raise UserError(f"model.backend={kind!r} is not a backend; choose one of {', '.join(BACKENDS)}")
