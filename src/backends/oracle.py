"""Backends that answer from the answer key (the simulated one), and the key they are told.

A `Request` (src/backends/base.py) carries only what a model may be shown, so a real backend cannot read the right
answer. An `OracleBackend` is told the answer key apart, through `know`: the answering loop
(src/answering/trials.py `answer_items`) hands it the key of the items it is about to ask, built from their variants
(src/answering/items.py `answer_key`), and asks only a backend of this type. A backend that is not one has no such
method, so no answer can reach it.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass

from src.backends.base import Backend


@dataclass(frozen=True)
class KnownAnswer:
    """What an oracle knows of one trial and a real model is never told.

    >>> KnownAnswer(correct_slot=2, names_a_set=True)
    KnownAnswer(correct_slot=2, names_a_set=True)
    """

    correct_slot: int  # displayed slot of the right answer (the variant's `correct_slot`)
    names_a_set: bool = False  # the answer names a set of labels (multi_select)


class OracleBackend(Backend):
    """A backend that answers from the answer key: its answers depend on each trial's key and seed, not only on the
    prompt, so the response cache keeps them per trial (src/answering/cache.py `request_key`, `seeded`)."""

    @abstractmethod
    def know(self, answers: Mapping[str, KnownAnswer]) -> None:
        """The answer key of the trials about to be asked, by trial key (`Request.key`, "question_id/variant_id");
        it replaces the key told before (a reused backend's next job)."""
