"""docs/metrics.md's validity rules applied while variants are built: options that refer to other options,
NOTA beside a none-like option, duplicate option texts. Every variant left out is counted with a reason.

A generator gets a `Rules` for its question and asks it three things about a displayed list (slot values:
original indices, NOTA, FILLER):

- `arrange(values)`: the list rearranged so that every reference option ("... of the above", "Both A and C
  are correct") sits at its distance from the end (its own slot in a list of the question's size, the last
  slot for the usual last option; fillers go before it) and the options a displayed letter reference names
  keep their labels; None when that is impossible;
- `check(values, ...)`: why the list may not be shown (a reason) or None;
- `free_slots(values)`: the slots a reorder may permute: every slot but the anchored and named ones.

`Rules.off(question)` (no rules) arranges nothing, frees every slot and allows everything, so every
generator gives exactly its variants of before. Reasons are the `n_excluded_<reason>` metric names.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence

from src.core.questions import Question
from src.core.variant import FILLER, NOTA, ORIGINAL

from .references import ABOVE, LETTERS, NEGATIVE, PLAIN, duplicate_option_groups, option_refs

OPTION_REFS = "option_refs"  # a reference could not be honoured
HAS_NOTA = "has_nota"  # NOTA would join an option that already says "none"
DUPLICATES = "duplicate_options"  # the variant would show two options with the same text
REFS_EXCLUDED = "refs_excluded"  # policy exclude: the whole question is left out
REASONS = (OPTION_REFS, HAS_NOTA, DUPLICATES, REFS_EXCLUDED)
POLICIES = ("keep_rules", "exclude", "ignore")  # option_refs=...: what plan_variants does with option references
EXCLUDE = "exclude"


class Rules:
    """The rules for one question; `excluded` counts the variants left out, by reason."""

    def __init__(self, question: Question, *, keep_refs: bool = True, check_duplicates: bool = True):
        self.question = question
        n = question.n_options
        self.refs = option_refs(question) if keep_refs else (PLAIN,) * n
        self.active = any(r.kind for r in self.refs)
        self.none_like = any(r.none_like for r in self.refs)
        self.duplicates = duplicate_option_groups(question) if check_duplicates else []
        block = {i for i, r in enumerate(self.refs) if r.kind == ABOVE}
        # "... of the above" with an ordinary option after it: no other order keeps what it says
        self.broken = any(
            r.kind == ABOVE and r.positional and any(j not in block for j in range(i + 1, n))
            for i, r in enumerate(self.refs)
        )
        self.excluded: Counter[str] = Counter()

    @classmethod
    def off(cls, question: Question) -> Rules:
        return cls(question, keep_refs=False, check_duplicates=False)

    @property
    def idle(self) -> bool:
        """Nothing to honour: the generators' plain behaviour."""
        return not self.active and not self.duplicates and not self.none_like

    def skip(self, reason: str, count: int = 1) -> None:
        if count > 0:
            self.excluded[reason] += count

    # --- what a displayed list must keep ------------------------------------------------------------

    def _anchor(self, value: int, size: int) -> int:
        """Slot of block reference `value` in a list of `size` slots: its distance from the end is kept."""
        return size - (self.question.n_options - value)

    def fixed(self, values: Sequence[int]) -> dict[int, int]:
        """{original option: slot it must hold} for the references and named options shown in `values`.

        A reference never moves (a reader who met "Both A and C" in slot D meets it there in every
        variant): it keeps its distance from the end, so its own slot in a list of the question's size. The
        options a letter reference names keep their labels; one that names itself ("Neither A nor B" in slot
        A) keeps its label too."""
        if not self.active:
            return {}
        shown = {v for v in values if v >= 0}
        out: dict[int, int] = {}
        for v in shown:
            r = self.refs[v]
            if r.kind == ABOVE:
                out[v] = self._anchor(v, len(values))
            elif r.kind == LETTERS:
                for j in r.refs:
                    if j in shown:
                        out[j] = j
                out.setdefault(v, self._anchor(v, len(values)))
        return out

    def arrange(self, values: Sequence[int]) -> tuple[int, ...] | None:
        """Positions into `values` in display order: fixed options at their slots, the others in the order
        given. None when two fixed options want one slot or a slot does not exist. Off: the identity."""
        size = len(values)
        fixed = self.fixed(values)
        if not fixed:
            return tuple(range(size))
        slots: list[int | None] = [None] * size
        for pos, v in enumerate(values):
            if v >= 0 and v in fixed:
                slot = fixed[v]
                if not 0 <= slot < size or slots[slot] is not None:
                    return None
                slots[slot] = pos
        rest = iter(pos for pos, v in enumerate(values) if not (v >= 0 and v in fixed))
        return tuple(pos if pos is not None else next(rest) for pos in slots)

    def free_slots(self, values: Sequence[int]) -> list[int]:
        """Slots a reorder may permute (every slot when nothing is fixed)."""
        taken = set(self.fixed(values).values())
        return [slot for slot in range(len(values)) if slot not in taken]

    def check(self, values: Sequence[int], *, kind: str, answer_value: int | None = None) -> str | None:
        """Why the displayed list `values` may not be shown, or None. `original` is always shown."""
        if kind == ORIGINAL:
            return None
        if self.none_like and NOTA in values:
            return HAS_NOTA
        if self.active and self._refs_broken(values, answer_value):
            return OPTION_REFS
        for group in self.duplicates:
            if sum(v in group for v in values) > 1:
                return DUPLICATES
        return None

    def _refs_broken(self, values: Sequence[int], answer_value: int | None) -> bool:
        shown = [v for v in values if v >= 0]
        if self.broken and any(self.refs[v].kind for v in shown):
            return True
        fixed = self.fixed(values)
        for slot, v in enumerate(values):
            if v < 0:
                continue
            r = self.refs[v]
            if r.kind == ABOVE:
                if not r.refs <= set(shown) or fixed[v] != slot:
                    return True
                for other_slot, w in enumerate(values):
                    if w >= 0 and (w in r.refs or self.refs[w].kind == ABOVE):
                        if r.positional and w in r.refs and other_slot > slot:
                            return True
                        continue
                    if w != FILLER:
                        return True  # NOTA or an option it does not speak of
                    truth_kept = r.quantifier in NEGATIVE or (r.quantifier in ("all", "any") and v != answer_value)
                    if not truth_kept:
                        return True  # a filler among "All of the above" (the answer) or "Both of these"
            elif r.kind == LETTERS:
                if fixed[v] != slot or any(j not in values or values.index(j) != j for j in r.refs):
                    return True
        return False

    # --- what an answer means -----------------------------------------------------------------------

    def answer_refers(self) -> bool:
        """The right option is itself a reference: dropping or replacing it changes what the others mean."""
        return self.active and self.refs[self.question.answer].kind is not None

    def implied_right(self, option: int) -> bool:
        """`option` is made right by the right option ("All of the above", "Both A and B" name it)."""
        r = self.refs[self.question.answer] if self.active else PLAIN
        return r.kind is not None and r.quantifier not in NEGATIVE and option in r.refs

    def duplicates_answer(self, option: int) -> bool:
        """`option` has the right option's text (a second copy of the answer)."""
        a = self.question.answer
        return option != a and any(option in g and a in g for g in self.duplicates)


def free_orders(size: int, free: Sequence[int], orders_of_free: Sequence[Sequence[int]]) -> list[tuple[int, ...]]:
    """Positions in display order: each order of the free slots applied, the other slots left in place.

    >>> free_orders(4, [0, 2, 3], [(0, 1, 2), (2, 0, 1)])
    [(0, 1, 2, 3), (3, 1, 0, 2)]
    """
    out = []
    for order in orders_of_free:
        positions = list(range(size))
        for slot, j in zip(free, order):
            positions[slot] = free[j]
        out.append(tuple(positions))
    return out


def capped(k: int, n_free: int, size: int) -> int:
    """How many distinct orders of `n_free` free slots can be made when k are wanted (k itself when all are free)."""
    return k if n_free == size else min(k, math.factorial(n_free))


__all__ = [
    "DUPLICATES",
    "HAS_NOTA",
    "OPTION_REFS",
    "POLICIES",
    "REASONS",
    "REFS_EXCLUDED",
    "Rules",
    "capped",
    "free_orders",
]
