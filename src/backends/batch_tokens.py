"""`model.max_batch_tokens`: the token budget of one forward pass of the HF backend, as a config value.

The rule for what a user may write lives here, without torch, so that the config check (src/config/checks.py)
refuses a bad value in one line before any compute, and the backend (src/backends/hf/budget.py) reads the same
value the same way.
"""

from __future__ import annotations

from typing import Any

from src.common.errors import UserError

AUTO = "auto"
# The CPU's default budget: tokens per forward pass measured fastest on the main job (docs/speed.md, "Batches
# sized by tokens"): one prefix-tree pack of model.pack_tokens (1024) per pass, as before budgets existed.
CPU_BATCH_TOKENS = 1024


def check_max_batch_tokens(value: Any) -> int | str | None:
    """The setting `model.max_batch_tokens` names: a positive number of tokens, "auto", or None (the device's
    default: auto on a GPU, CPU_BATCH_TOKENS on a CPU); anything else is one `UserError` line.

    >>> check_max_batch_tokens(4096), check_max_batch_tokens("auto"), check_max_batch_tokens(None)
    (4096, 'auto', None)
    >>> check_max_batch_tokens("lots")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    src.common.errors.UserError: config key model.max_batch_tokens: 'lots' is not a budget; give a positive ...
    """
    if value is None or value == AUTO:
        return None if value is None else AUTO
    if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
        return value
    raise UserError(
        f"config key model.max_batch_tokens: {value!r} is not a budget; give a positive number of tokens "
        f"per forward pass, auto (the largest that fits, halved on out-of-memory) or null (auto on a GPU, "
        f"{CPU_BATCH_TOKENS} on a CPU)"
    )
