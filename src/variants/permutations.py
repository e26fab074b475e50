"""The answer-fluctuation paper's permutation sets (section 3.2) of the original options; labels stay A.. .

Element 1 (position 0) of each set is its reference order m_1. Sets for A options:
original {identity} (1); oi {identity, reversed} (2); cyclic, the A rotations, identity first (A);
random2 / randomL, `random.Random(perm_seed).sample(all permutations, 2 or A)` (2, A); full, all A!
permutations in `itertools.permutations` order, identity first (A!). The random sets depend on A and
`perm_seed` only, so every question with A options gets the same permutations, as in the paper.

`perm_all` asks every distinct order of all sets once and records each order's memberships
(set, position), so shared orders (the identity is in four sets) are one prompt.
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Callable

from src.common.errors import UserError
from src.core.questions import Question
from src.core.variant import ORIGINAL, PERMUTATION, Variant

from .rules import OPTION_REFS, Rules, free_orders

PERM_SETS = ("original", "oi", "cyclic", "random2", "randomL", "full")
MAX_FULL_OPTIONS = 7  # 7! = 5040 prompts per question; 8! is 40320


def nth_permutation(n: int, index: int) -> tuple[int, ...]:
    """The `index`-th permutation of range(n) in lexicographic (= itertools.permutations) order.

    >>> nth_permutation(3, 0), nth_permutation(3, 5)
    ((0, 1, 2), (2, 1, 0))
    """
    pool, out = list(range(n)), []
    for size in range(n, 0, -1):
        block = math.factorial(size - 1)
        out.append(pool.pop(index // block))
        index %= block
    return tuple(out)


def random_permutations(n: int, size: int, *, perm_seed: int = 0) -> list[tuple[int, ...]]:
    """`random.Random(perm_seed).sample(list(itertools.permutations(range(n))), size)` without building the
    list: `sample` draws positions from the population's length only, so sampling range(n!) and unranking
    gives the same orders. `size` is capped at n!."""
    total = math.factorial(n)
    return [nth_permutation(n, i) for i in random.Random(perm_seed).sample(range(total), min(size, total))]


def _check_full(n: int, max_full_options: int, question_id: str) -> None:
    if n > max_full_options:
        raise UserError(
            f"config key variants.max_full_options: question {question_id} has {n} options, "
            f"{math.factorial(n)} orders; raise variants.max_full_options (now {max_full_options}) "
            f"or choose a smaller permutation set"
        )


def permutation_set(name: str, n: int, *, perm_seed: int = 0) -> list[tuple[int, ...]]:
    """The orders of set `name` for n options, reference order first (duplicates, possible only for n < 2, dropped).

    >>> permutation_set("cyclic", 3)
    [(0, 1, 2), (1, 2, 0), (2, 0, 1)]
    >>> permutation_set("oi", 4)
    [(0, 1, 2, 3), (3, 2, 1, 0)]
    """
    identity = tuple(range(n))
    if name == "original":
        orders = [identity]
    elif name == "oi":
        orders = [identity, identity[::-1]]
    elif name == "cyclic":
        orders = [identity[i:] + identity[:i] for i in range(n)]
    elif name == "random2":
        orders = random_permutations(n, 2, perm_seed=perm_seed)
    elif name == "randomL":
        orders = random_permutations(n, n, perm_seed=perm_seed)
    elif name == "full":
        orders = list(itertools.permutations(identity))
    else:
        raise UserError(
            f"config key variants.name: unknown permutation set {name!r}; choose one of {', '.join(PERM_SETS)}"
        )
    return list(dict.fromkeys(orders))


def _variant(question: Question, order: tuple[int, ...], memberships: tuple[tuple[str, int], ...]) -> Variant:
    identity = order == tuple(range(len(order)))
    return Variant(
        question.id,
        ORIGINAL if identity else PERMUTATION,
        "perm_" + "-".join(map(str, order)),
        order,
        tuple(question.options[i] for i in order),
        order.index(question.answer),
        memberships=memberships,
    )


def permutation_variants(
    question: Question,
    *,
    seed: int,
    sets: tuple[str, ...] = PERM_SETS,
    perm_seed: int = 0,
    max_full_options: int = MAX_FULL_OPTIONS,
    rules: Rules | None = None,
) -> list[Variant]:
    """One variant per distinct order over `sets`, with its (set, position) memberships. `seed` is unused:
    the sets are fixed by A and `perm_seed` (docs/metrics.md).

    With `rules` (src/variants/rules.py) each set is built over the F free options only (references and
    the options a letter reference names keep their slots): cyclic = the F rotations of the free
    options, random2/randomL = `random.Random(perm_seed).sample` of their permutations (2 or F), full = F!,
    reference order first as always. Orders the A-option sets have beyond these, and every order but the
    identity of a question with duplicate texts, are counted in `rules.excluded`.

    >>> q = Question(id="q", question="?", options=("a", "b", "c", "None of these"), answer=1)
    >>> r = Rules(q)
    >>> [v.option_order for v in permutation_variants(q, seed=0, sets=("cyclic",), rules=r)], dict(r.excluded)
    ([(0, 1, 2, 3), (1, 2, 0, 3), (2, 0, 1, 3)], {'option_refs': 1})
    """
    n = question.n_options
    if "full" in sets:
        _check_full(n, max_full_options, question.id)
    rules = Rules.off(question) if rules is None else rules
    identity = tuple(range(n))
    free = rules.free_slots(identity)
    if rules.broken and rules.active:
        free = []  # no other order keeps what its "... of the above" says
    members: dict[tuple[int, ...], list[tuple[str, int]]] = {}
    for name in sets:
        orders = free_orders(n, free, permutation_set(name, len(free), perm_seed=perm_seed)) if free else [identity]
        for pos, order in enumerate(orders):
            members.setdefault(order, []).append((name, pos))
    out = []
    for order, found in members.items():
        reason = rules.check(order, kind=ORIGINAL if order == identity else PERMUTATION, answer_value=question.answer)
        if reason is None:
            out.append(_variant(question, order, tuple(found)))
        else:
            rules.skip(reason)
    if not rules.idle:
        expected = len(
            permutation_variants(question, seed=seed, sets=sets, perm_seed=perm_seed, max_full_options=max_full_options)
        )
        rules.skip(OPTION_REFS, expected - len(members))
    return out


def one_set(name: str) -> Callable[..., list[Variant]]:
    """The generator of the single permutation set `name` (config `perm_<name>`)."""

    def generate(
        question: Question,
        *,
        seed: int,
        perm_seed: int = 0,
        max_full_options: int = MAX_FULL_OPTIONS,
        rules: Rules | None = None,
    ) -> list[Variant]:
        return permutation_variants(
            question, seed=seed, sets=(name,), perm_seed=perm_seed, max_full_options=max_full_options, rules=rules
        )

    generate.__name__ = f"perm_{name}"
    generate.__doc__ = f"The `{name}` permutation set of the original options (answer-fluctuation paper, section 3.2)."
    return generate
