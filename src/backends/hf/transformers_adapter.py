"""The one module of src that names transformers' private API, with the versions it was checked with.

- `PretrainedConfig._attn_implementation`: the attention kernel a loaded model runs (`sdpa`, `eager`,
  `flash_attention_2`, ...). transformers has no public reader of it (its own docs and modelling code read this
  attribute); the packed path needs it because flash attention ignores the custom tree mask that prefix packing
  passes (src/backends/hf/packing.py), which would give wrong log-probabilities silently.

Importing this module checks the installed transformers against `SUPPORTED` and prints one `warning:` line when it
is outside (src/common/versions.py).
"""

from __future__ import annotations

from typing import Any

from src.common import versions

ADAPTER = "src/backends/hf/transformers_adapter.py"
SUPPORTED = ">=4.46,<6"  # pyproject.toml's lower bound; checked up to 5.24


def attention_implementation(config: Any, default: str = "sdpa") -> str:
    """The attention implementation a model with `config` runs (`default` where the config names none).

    >>> from types import SimpleNamespace
    >>> attention_implementation(SimpleNamespace(_attn_implementation="flash_attention_2"))
    'flash_attention_2'
    >>> attention_implementation(SimpleNamespace())
    'sdpa'
    """
    return getattr(config, "_attn_implementation", None) or default


versions.warn_if_outside("transformers", SUPPORTED, ADAPTER)
