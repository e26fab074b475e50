"""Hydra's and OmegaConf's composition errors as one line: the key as the user wrote it and the nearest valid one
(`config key temprature: unknown; did you mean temperature?`), in place of Hydra's several lines."""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Sequence

from src.common.errors import UserError

# The keys that point a model at weights of the user's own: a model config that ships its weights (a packaged GGUF,
# the simulated model) has none, and the nearest spelling (`model.chat`) is not what the user wants.
OWN_WEIGHTS_KEYS = ("model.path", "model.gguf_file")


def unknown_key(key: str, known: Sequence[str]) -> UserError:
    """One line for a key that is not in its node: the nearest known key, or the list of them."""
    if key in OWN_WEIGHTS_KEYS and "path" not in known:
        return UserError(
            f"config key {key}: the chosen model ships its own weights and takes no {key.partition('.')[2]}; "
            "for weights of your own choose the hf model: model=hf model.path=DIR_OR_HUB_ID "
            "(a GGUF inside DIR: add model.gguf_file=NAME)"
        )
    last = key.rpartition(".")[2]
    close = difflib.get_close_matches(last, list(known), n=1, cutoff=0.5)
    hint = (
        f"did you mean {key.rpartition('.')[0] + '.' if '.' in key else ''}{close[0]}?"
        if close
        else f"the keys here are {', '.join(known)}"
    )
    return UserError(f"config key {key}: unknown; {hint}")


_KEY_IN_MESSAGE = (
    re.compile(r"Key '([^']+)' (?:is )?not in"),
    re.compile(r"full_key: (\S+)"),
    re.compile(r"Could not override '([^']+)'"),
)


def one_line(err: Exception, overrides: Sequence[str], known_keys: Callable[[str], list[str]]) -> UserError:
    """A Hydra or OmegaConf composition error as one line naming the key as the user wrote it; `known_keys(node)`
    gives the keys of a node of the config (`src.config.compose.known_keys`), for the nearest one to an unknown key."""
    text = " ".join(f"{err} {err.__cause__ or ''}".split())
    key = next((m.group(1) for pattern in _KEY_IN_MESSAGE for m in [pattern.search(text)] if m), None)
    if key is None:
        return UserError(f"config overrides {' '.join(overrides)}: {text.split(' full_key:')[0]}")

    def written_key(override: str) -> str:
        return override.lstrip("+~").split("=", 1)[0]

    written = next(
        (
            o
            for o in reversed(overrides)  # the last one wins, as in Hydra
            if written_key(o) == key or written_key(o).endswith("." + key)
        ),
        None,
    )
    full = written_key(written) if written else key
    if " not in " in text:
        return unknown_key(full, known_keys(full.rpartition(".")[0]))
    reason = (err.__cause__ and " ".join(str(err.__cause__).split()) or text).split(" full_key:")[0]
    return UserError(
        f"config key {full}: {reason.split(' object_type=')[0]} (from {written or full}); give a value "
        f"of the key's type"
    )
