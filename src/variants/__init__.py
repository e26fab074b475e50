"""Variant set registry: config `variants.name` -> generator of displayed option lists per question.

Generators are pure and seeded by (seed, question id); they never change the question text.
`make_variants` gives every variant of a set; `plan_variants` applies docs/metrics.md's validity rules under the
`option_refs` policy (keep_rules | exclude | ignore) and says how many variants it left out, by reason
(src/variants/rules.py): options that refer to others ("All of the above", "Both A and B"), NOTA beside a
none-like option, duplicate option texts.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from src.common.errors import UserError
from src.core.questions import Question
from src.core.variant import FILLER, LETTERS, NOTA, NOTA_TEXT, ORIGINAL, TF_LABELS, Variant

from .cora import cora_variants, make_variant
from .permutations import PERM_SETS, one_set, permutation_variants
from .references import OptionRef, duplicate_option_groups, has_option_refs, option_refs
from .revas import revas_misleading, revas_multi_select, revas_nota, revas_option_count, revas_reorder, revas_true_false
from .rules import EXCLUDE, POLICIES, REASONS, REFS_EXCLUDED, Rules


def original_variants(question: Question, *, seed: int, rules: Rules | None = None) -> list[Variant]:
    """Just the options as the file orders them."""
    return [make_variant(question, ORIGINAL, ORIGINAL, tuple(range(question.n_options)))]


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


def _generate(cfg: Mapping[str, Any], question: Question, seed: int, **extra: Any) -> list[Variant]:
    options = {k: v for k, v in cfg.items() if k != "name"}
    name = cfg["name"]
    if name not in VARIANT_SETS:
        raise UserError(
            f"config key variants: unknown variant set {name!r}; choose one of {', '.join(sorted(VARIANT_SETS))}"
        )
    if "rules" in options:
        raise UserError(f"config key variants ({name}): unexpected keyword argument 'rules'; remove the unknown option")
    try:
        return VARIANT_SETS[name](question, seed=seed, **options, **extra)
    except TypeError as err:
        raise UserError(f"config key variants ({name}): {err}; remove the unknown option") from None


def make_variants(cfg: Mapping[str, Any], question: Question, *, seed: int) -> list[Variant]:
    """Variants of one question for the `variants` config node ({name: ..., **generator options})."""
    return _generate(cfg, question, seed)


@dataclass(frozen=True)
class VariantPlan:
    """The variants made for one question and how many were left out, by reason (`option_refs`, `has_nota`,
    `duplicate_options`, `refs_excluded`; each becomes the run metric `n_excluded_<reason>`)."""

    variants: list[Variant]
    excluded: dict[str, int]


def plan_variants(
    cfg: Mapping[str, Any], question: Question, *, seed: int, option_refs: str = POLICIES[0]
) -> VariantPlan:
    """The variants of `question` that docs/metrics.md's validity rules allow, under the `option_refs` policy.

    - `keep_rules`: a reference option keeps its slot ("... of the above" the last one(s), "Both A and B" its
      own), shuffles or permutation sets move only the free options, and a letter reference names the same
      options under the same labels in every variant; NOTA is never added beside a none-like option; a variant that
      cannot keep these is not made.
    - `exclude`: a question with an option that refers to others gets no variant at all (`refs_excluded`).
    - `ignore`: the references are not looked at (make_variants' variants).
    Under every policy a variant that would show two options with one text is not made (`original` is).

    >>> q = Question(id="q", question="?", options=("a", "b", "c", "None of the above"), answer=1)
    >>> plan = plan_variants({"name": "cora"}, q, seed=0)
    >>> len(plan.variants), plan.excluded
    (6, {'has_nota': 12, 'option_refs': 2})
    >>> plan_variants({"name": "cora"}, q, seed=0, option_refs="exclude")
    VariantPlan(variants=[], excluded={'refs_excluded': 20})
    """
    if option_refs not in POLICIES:
        raise UserError(f"config key option_refs: unknown policy {option_refs!r}; choose keep_rules, exclude or ignore")
    if option_refs == EXCLUDE and has_option_refs(question):
        n = len(_generate(cfg, question, seed))
        return VariantPlan([], {REFS_EXCLUDED: n} if n else {})
    rules = Rules(question, keep_refs=option_refs != "ignore")
    variants = _generate(cfg, question, seed, rules=rules)
    return VariantPlan(variants, {reason: n for reason, n in rules.excluded.items() if n})


__all__ = [
    "FILLER",
    "LETTERS",
    "NOTA",
    "NOTA_TEXT",
    "POLICIES",
    "REASONS",
    "TF_LABELS",
    "VARIANT_SETS",
    "OptionRef",
    "Variant",
    "VariantPlan",
    "duplicate_option_groups",
    "has_option_refs",
    "make_variants",
    "option_refs",
    "plan_variants",
]
