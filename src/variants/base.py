"""The variant type: one displayed option list for a question, with its map back to the original options."""
from __future__ import annotations

import random
import string
from dataclasses import dataclass

NOTA = -1  # slot shows "None of the above"
FILLER = -2  # slot shows a non-semantic filler option
NOTA_TEXT = "None of the above"
LETTERS = string.ascii_uppercase


@dataclass(frozen=True)
class Variant:
    """A displayed option list. `option_order[slot]` is the original option index shown there (or NOTA/FILLER)."""

    question_id: str
    kind: str  # generator kind, e.g. "nota_shuffled"
    variant_id: str  # unique within the question, e.g. "nota_shuffled_2"
    option_order: tuple[int, ...]
    option_texts: tuple[str, ...]  # text shown in each slot
    correct_slot: int  # slot of the right answer (an original option, or NOTA when NOTA is the answer)

    @property
    def n_options(self) -> int:
        return len(self.option_order)

    @property
    def correct_label(self) -> str:
        return LETTERS[self.correct_slot]


def rng_for(seed: int, question_id: str, purpose: str) -> random.Random:
    """Deterministic stream per (seed, question, purpose); str seeds hash with sha512, independent of PYTHONHASHSEED."""
    return random.Random(f"{seed}|{question_id}|{purpose}")


def shuffled(order: tuple[int, ...], rng: random.Random) -> tuple[int, ...]:
    """A random reordering that differs from `order` whenever that is possible (redraw on identity)."""
    if len(order) < 2:
        return order
    while True:
        out = list(order)
        rng.shuffle(out)
        if tuple(out) != order:
            return tuple(out)
