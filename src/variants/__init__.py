"""Variant set registry: config `variants.name` -> generator of displayed option lists per question.

Generators are pure and seeded by (seed, question id); they never change the question text.
"""
from __future__ import annotations

from typing import Any, Callable, Mapping

from ..errors import UserError
from ..questions import Question
from .base import FILLER, FORMATS, LETTERS, NOTA, NOTA_TEXT, TF_LABELS, Variant
from .cora import cora_variants, make_variant
from .permutations import PERM_SETS, one_set, permutation_variants
from .revas import (revas_misleading, revas_multi_select, revas_nota, revas_option_count, revas_reorder,
                    revas_true_false)


def original_variants(question: Question, *, seed: int) -> list[Variant]:
    """Just the options as the file orders them."""
    return [make_variant(question, "original", "original", tuple(range(question.n_options)))]


VARIANT_SETS: dict[str, Callable[..., list[Variant]]] = {
    "original": original_variants,
    "cora": cora_variants,
    "cora_same_size": lambda q, *, seed, **kw: cora_variants(q, seed=seed, same_size_only=True, **kw),
    "revas_reorder": revas_reorder,
    "revas_option_count": revas_option_count,
    "revas_nota": revas_nota,
    "revas_true_false": revas_true_false,
    "revas_multi_select": revas_multi_select,
    "revas_misleading": revas_misleading,
    **{f"perm_{name}": one_set(name) for name in PERM_SETS},
    "perm_all": permutation_variants,
}


def make_variants(cfg: Mapping[str, Any], question: Question, *, seed: int) -> list[Variant]:
    """Variants of one question for the `variants` config node ({name: ..., **generator options})."""
    options = {k: v for k, v in cfg.items() if k != "name"}
    name = cfg["name"]
    if name not in VARIANT_SETS:
        raise UserError(f"config key variants: unknown variant set {name!r}; choose one of {', '.join(sorted(VARIANT_SETS))}")
    try:
        return VARIANT_SETS[name](question, seed=seed, **options)
    except TypeError as err:
        raise UserError(f"config key variants ({name}): {err}; remove the unknown option") from None


__all__ = ["FILLER", "FORMATS", "LETTERS", "NOTA", "NOTA_TEXT", "TF_LABELS", "VARIANT_SETS", "Variant", "make_variants"]
