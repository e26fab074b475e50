"""What the variant generators share beyond the variant type (src/core/variant.py): a shuffle that always moves."""

from __future__ import annotations

import random


def shuffled(order: tuple[int, ...], rng: random.Random) -> tuple[int, ...]:
    """A random reordering that differs from `order` whenever that is possible (redraw on identity)."""
    if len(order) < 2:
        return order
    while True:
        out = list(order)
        rng.shuffle(out)
        if tuple(out) != order:
            return tuple(out)
