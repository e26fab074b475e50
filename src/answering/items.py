"""The two nouns of answering: an `Item` to ask and the `Answer` of one repetition. Their own module, below both
the trial loop (src/answering/trials.py) and adaptive repetitions (src/answering/adaptive.py), so that the loop,
which hands its rounds to the adaptive one, and the adaptive one, which works on items and answers, do not import
each other.

A job's items are `PlannedItems`: which variants of which questions are known when the job is planned, each prompt is
rendered when first read, by the answering pipeline's producer thread (src/answering/pipeline.py), beside the
backend's work.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import overload

from src.answer_formats import FORMATS
from src.backends.base import Request
from src.backends.oracle import KnownAnswer
from src.core.questions import Question
from src.core.variant import Variant, trial_key


@dataclass(frozen=True)
class Item:
    """One prompt to ask: a variant of a question, rendered."""

    question: Question
    variant: Variant
    request: Request


@dataclass(frozen=True)
class Answer:
    """One repetition's outcome for an item, before it becomes a record row."""

    raw_output: str
    slot: int | None  # displayed slot chosen; None = INVALID
    label_probs: tuple[float, ...] | None = None
    label_mass: float | None = None
    option_loglik: tuple[float, ...] | None = None
    option_loglik_norm: tuple[float, ...] | None = None
    answer_dist: tuple[float, ...] | None = None  # exact first-token sampling: labels then INVALID
    cache_hit: bool = False
    slots: tuple[int, ...] | None = None  # multi_select: every displayed slot named; None = INVALID
    parse_rule: str | None = None  # the rule that decided `slot` (src/core/parsing.py), or the scoring's own rule
    truncated: bool | None = None  # generated text cut by max_new_tokens; None when unknown or not generated
    decision_margin: float | None = None  # a ranking's decision: how far the chosen score lies above the next one


class PlannedItems(Sequence[Item]):
    """A job's items, planned: `plan[i]` is item i's (question, variant), `render(i)` its request, made once, when
    item i is first read (from any thread: a request is a pure function of its plan, so two threads that render
    the same item render the same request)."""

    def __init__(self, plan: Sequence[tuple[Question, Variant]], render: Callable[[int], Request]) -> None:
        self.plan, self.render = plan, render
        self._made: list[Item | None] = [None] * len(plan)

    def __len__(self) -> int:
        return len(self.plan)

    @overload
    def __getitem__(self, index: int) -> Item: ...

    @overload
    def __getitem__(self, index: slice) -> list[Item]: ...

    def __getitem__(self, index: int | slice) -> Item | list[Item]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        index = index + len(self) if index < 0 else index
        made = self._made[index]
        if made is None:
            question, variant = self.plan[index]
            made = self._made[index] = Item(question, variant, self.render(index))
        return made


class ItemsAt(Sequence[Item]):
    """The items of `items` at `indices`, read from it when read (a planned job's stay unrendered until then)."""

    def __init__(self, items: Sequence[Item], indices: Sequence[int]) -> None:
        self.items, self.indices = items, indices

    def __len__(self) -> int:
        return len(self.indices)

    @overload
    def __getitem__(self, index: int) -> Item: ...

    @overload
    def __getitem__(self, index: slice) -> list[Item]: ...

    def __getitem__(self, index: int | slice) -> Item | list[Item]:
        if isinstance(index, slice):
            return [self.items[i] for i in self.indices[index]]
        return self.items[self.indices[index]]

    def variant(self, index: int) -> Variant:
        return variant_at(self.items, self.indices[index])


def variant_at(items: Sequence[Item], index: int) -> Variant:
    """Item `index`'s variant, without rendering its prompt where the items are planned."""
    if isinstance(items, PlannedItems):
        return items.plan[index][1]
    if isinstance(items, ItemsAt):
        return items.variant(index)
    return items[index].variant


def answer_key(items: Sequence[Item]) -> dict[str, KnownAnswer]:
    """The right answers of `items` by trial key (`Request.key`), from their variants: what the answering loop tells an
    oracle backend before asking it (src/backends/oracle.py), and tells no other backend. Planned items are read from
    their plan (`trial_key`, the key their requests will carry), so none is rendered for it. Two items of one key are
    one trial (question ids are unique in a benchmark, variant ids in a question): different answers are a bug."""
    if isinstance(items, PlannedItems):
        pairs = [(trial_key(q.id, v.variant_id), v) for q, v in items.plan]
    else:
        pairs = [(it.request.key, it.variant) for it in items]
    key: dict[str, KnownAnswer] = {}
    for trial, variant in pairs:
        known = KnownAnswer(variant.correct_slot, FORMATS[variant.fmt].names_a_set)
        if key.setdefault(trial, known) != known:
            raise ValueError(f"trial {trial} is asked with two right answers, {key[trial]} and {known}")
    return key
