"""The default benchmark: easy questions generated from the seed, no files needed.

Fifteen kinds, balanced in shuffled rounds. Five are easy for a small model scoring option texts
(category membership "Which of these is a colour?", opposites, one-digit sums against far-off
distractors): they give the default run a real signal. Ten are harder, with the usual slips as
distractors (off by one, off by ten, swapped digits, a wrong conversion factor, the neighbour in
a list): arithmetic (addition, subtraction, multiplication), number sequences and unit conversions
with 4 options; largest/smallest of five numbers and the day, month or letter that comes next
with 5 options. Measured with SmolLM2-135M and cloze scoring, the easy kinds are answered right
about 9 times in 10 and the hard ones near chance. Options are distinct; the answer position is
balanced over positions (shuffled decks); question texts are distinct where the kind allows.

Option `n_questions` (default 100). Ids `synthetic/<seed>/<n>`, subject = the kind.

>>> [q.question for q in synthetic_questions(2, seed=0)] == [q.question for q in synthetic_questions(2, seed=0)]
True
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from src.common.errors import UserError
from src.core.questions import Question

from .validate import checked_question

DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)
UNITS = (  # (big unit, small unit, small units per big one)
    ("metres", "centimetres", 100),
    ("kilometres", "metres", 1000),
    ("hours", "minutes", 60),
    ("minutes", "seconds", 60),
    ("days", "hours", 24),
    ("weeks", "days", 7),
    ("years", "months", 12),
    ("kilograms", "grams", 1000),
)
FEWSHOT_SEED = 1_000_003  # far from the seeds runs use, so examples are not the test questions
Kind = Callable[[random.Random], tuple[str, str, list[str]]]  # rng -> (question, answer, distractor candidates)


def _swapped(n: int) -> int:
    """The last two digits swapped (52 -> 25): the classic copying slip."""
    digits = str(n)
    return int(digits[:-2] + digits[-1] + digits[-2]) if n >= 10 else n


def _numeric(answer: int, slips: list[int]) -> tuple[str, list[str]]:
    return str(answer), [str(s) for s in slips + [answer + 2, answer - 2, answer + 3] if s >= 0]


def addition(rng: random.Random) -> tuple[str, str, list[str]]:
    a, b = rng.randint(2, 60), rng.randint(2, 60)
    answer, slips = _numeric(a + b, [a + b + 1, a + b - 1, a + b + 10, a + b - 10, _swapped(a + b)])
    return f"What is {a} + {b}?", answer, slips


def subtraction(rng: random.Random) -> tuple[str, str, list[str]]:
    a = rng.randint(20, 99)
    b = rng.randint(2, a - 5)
    d = a - b
    answer, slips = _numeric(d, [d + 1, d - 1, d + 10, d - 10, _swapped(d), a + b])
    return f"What is {a} - {b}?", answer, slips


def multiplication(rng: random.Random) -> tuple[str, str, list[str]]:
    a, b = rng.randint(2, 12), rng.randint(2, 12)
    p = a * b
    answer, slips = _numeric(p, [p + a, p - a, p + b, p - b, a + b, p + 1, p + 10])
    return f"What is {a} times {b}?", answer, slips


def sequence(rng: random.Random) -> tuple[str, str, list[str]]:
    start, step = rng.randint(1, 30), rng.randint(2, 9)
    terms = [start + step * i for i in range(4)]
    nxt = terms[-1] + step
    answer, slips = _numeric(nxt, [nxt + 1, nxt - 1, nxt + step, nxt + 10, terms[-1] + 1])
    return f"What number comes next: {', '.join(map(str, terms))}, ...?", answer, slips


def unit_conversion(rng: random.Random) -> tuple[str, str, list[str]]:
    big, small, factor = rng.choice(UNITS)
    n = rng.randint(2, 9)
    wrong_factors = sorted({f for _, _, f in UNITS if f != factor})
    answer, slips = _numeric(n * factor, [n * f for f in wrong_factors] + [(n + 1) * factor, (n - 1) * factor])
    rng.shuffle(slips)  # the wrong-factor slips would otherwise always be the smallest ones
    return f"How many {small} are in {n} {big}?", answer, slips


def _extreme(largest: bool) -> Kind:
    def kind(rng: random.Random) -> tuple[str, str, list[str]]:
        numbers = rng.sample(range(1, 100), 5)
        target = max(numbers) if largest else min(numbers)
        word = "largest" if largest else "smallest"
        return (
            f"Which number is the {word}: {', '.join(map(str, numbers))}?",
            str(target),
            [str(x) for x in numbers if x != target],
        )

    kind.__name__ = "largest" if largest else "smallest"
    return kind


def _next_in(items: tuple[str, ...], noun: str, name: str) -> Kind:
    def kind(rng: random.Random) -> tuple[str, str, list[str]]:
        i = rng.randrange(len(items) - 1 if noun == "letter" else len(items))
        answer = items[(i + 1) % len(items)]
        near = [items[(i + k) % len(items)] for k in (0, 2, -1, 3, -2, 4)]
        suffix = " in the alphabet" if noun == "letter" else ""
        return f"Which {noun} comes after {items[i]}{suffix}?", answer, [x for x in near if x != answer]

    kind.__name__ = name
    return kind


CATEGORIES = {
    "colour": ("red", "blue", "green", "yellow", "black", "white", "purple", "brown"),
    "fruit": ("apple", "banana", "grape", "cherry", "lemon", "mango", "peach", "pear"),
    "animal": ("dog", "cat", "horse", "cow", "lion", "tiger", "sheep", "rabbit"),
}
OBJECTS = ("table", "chair", "spoon", "window", "hammer", "pencil", "bottle", "door", "seven", "twelve")
OPPOSITES = (
    ("hot", "cold"),
    ("big", "small"),
    ("up", "down"),
    ("day", "night"),
    ("fast", "slow"),
    ("happy", "sad"),
    ("open", "closed"),
    ("wet", "dry"),
    ("early", "late"),
    ("light", "dark"),
    ("full", "empty"),
    ("hard", "soft"),
    ("high", "low"),
    ("long", "short"),
    ("loud", "quiet"),
)


def _category(name: str) -> Kind:
    """ "Which of these is a colour?": one member against things from other categories."""

    def kind(rng: random.Random) -> tuple[str, str, list[str]]:
        others = [x for other, items in CATEGORIES.items() if other != name for x in items] + list(OBJECTS)
        article = "an" if name[0] in "aeiou" else "a"
        return f"Which of these is {article} {name}?", rng.choice(CATEGORIES[name]), rng.sample(others, 8)

    kind.__name__ = name
    return kind


def opposite(rng: random.Random) -> tuple[str, str, list[str]]:
    word, answer = rng.choice(OPPOSITES) if rng.random() < 0.5 else rng.choice(OPPOSITES)[::-1]
    others = [w for pair in OPPOSITES for w in pair if w not in (word, answer)]
    return f"What is the opposite of {word}?", answer, rng.sample(others, 6)


def small_addition(rng: random.Random) -> tuple[str, str, list[str]]:
    """One-digit sums against distractors far from the answer: arithmetic a small model can do."""
    a, b = rng.randint(1, 9), rng.randint(1, 9)
    return (
        f"What is {a} + {b}?",
        str(a + b),
        [str(x) for x in rng.sample([x for x in range(2, 99) if abs(x - a - b) > 5], 6)],
    )


KINDS: dict[str, tuple[Kind, int]] = {  # name -> (generator, number of options)
    "colour": (_category("colour"), 4),
    "fruit": (_category("fruit"), 4),
    "animal": (_category("animal"), 5),
    "opposite": (opposite, 4),
    "small_addition": (small_addition, 5),
    "addition": (addition, 4),
    "subtraction": (subtraction, 4),
    "multiplication": (multiplication, 4),
    "sequence": (sequence, 4),
    "unit_conversion": (unit_conversion, 4),
    "largest": (_extreme(True), 5),
    "smallest": (_extreme(False), 5),
    "next_day": (_next_in(DAYS, "day", "next_day"), 5),
    "next_month": (_next_in(MONTHS, "month", "next_month"), 5),
    "next_letter": (_next_in(tuple("ABCDEFGHIJKLMNOPQRSTUVWXYZ"), "letter", "next_letter"), 5),
}


def synthetic_questions(n: int, *, seed: int, id_prefix: str | None = None, split: str = "test") -> list[Question]:
    """`n` questions, the same for the same seed."""
    rng = random.Random(seed)
    prefix = id_prefix or f"synthetic/{seed}"
    decks: dict[int, list[int]] = {}
    kinds: list[str] = []
    seen: set[str] = set()
    questions = []
    for index in range(n):
        for attempt in range(50):  # redraw a repeated question text (days and months run out first)
            if not kinds:
                kinds = list(KINDS)
                rng.shuffle(kinds)
            kind = kinds.pop() if attempt == 0 else rng.choice(list(KINDS))
            text, answer, candidates = KINDS[kind][0](rng)
            if text not in seen:
                break
        seen.add(text)
        n_options = KINDS[kind][1]
        distractors = list(dict.fromkeys(c for c in candidates if c != answer))
        pool = distractors[: max(n_options + 1, len(distractors) // 2 + 1)]  # the likeliest slips
        wrong = rng.sample(pool, n_options - 1) if len(pool) >= n_options - 1 else distractors[: n_options - 1]
        if not decks.get(n_options):
            decks[n_options] = rng.sample(range(n_options), n_options)
        position = decks[n_options].pop()
        options = wrong[:position] + [answer] + wrong[position:]
        questions.append(
            checked_question(
                f"synthetic benchmark (seed {seed}, question {index})",
                id=f"{prefix}/{index}",
                question=text,
                options=options,
                answer=position,
                subject=kind,
                split=split,
                metadata={"kind": kind},
                allow_duplicate_options=False,
            )
        )
    return questions


def load_synthetic(
    *, path: str | None, data_dir: str, split: str | None, seed: int, options: dict[str, Any]
) -> list[Question]:
    n = options.get("n_questions", 100)
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise UserError(f"config key benchmark.n_questions: {n!r} is not a positive whole number; set e.g. 100")
    return synthetic_questions(n, seed=seed, split=split or "test")


def synthetic_fewshot(*, path: str | None, data_dir: str, subject: str | None) -> list[Question]:
    """A fixed pool of examples, optionally one kind (`subject`)."""
    if subject is not None and subject not in KINDS:
        raise UserError(f"synthetic has no subject {subject!r}; choose one of {', '.join(KINDS)}")
    pool = synthetic_questions(100, seed=FEWSHOT_SEED, id_prefix="synthetic/fewshot", split="train")
    return [q for q in pool if subject is None or q.subject == subject]
