"""Answer formats beside plain multiple choice (REVAS sections 3.4 and 4): their prompts and their parsers.

- `true_false`: one option shown, "Is this the correct answer?", answered Yes or No (labels TF_LABELS);
- `multi_select`: every option shown, "select all correct options", answered with a set of labels.

These prompts are zero-shot and fixed here (the paper's wording cannot be derived from the option text:
it rewrote "East" into "Is it true that the sun rises from the east?" by hand); the `prompt` config's
label style is kept. Parsers return slots as `src.parsing.parse_answer` does, None for INVALID.

>>> parse_yes_no("Yes, because ...")
0
>>> parse_label_set("A and C", ("A", "B", "C", "D"))
(0, 2)
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

from .backends.base import Request
from .prompts import LABEL_STYLES, DEFAULT_SUBJECT, PromptTemplate, labels_for
from .questions import Question
from .variants.base import TF_LABELS, Variant

TRUE_FALSE_TEMPLATE = (
    "Answer the following yes/no question about a multiple choice question.\n"
    "The first line of your response should be Yes or No, followed by a step-by-step explanation.\n\n"
    "Question: {question}\nProposed answer: {option}\nIs this the correct answer?\nAnswer:"
)
MULTI_SELECT_TEMPLATE = (
    "Answer the following multiple choice question. More than one option may be correct: select all correct options.\n"
    "The first line of your response should list the labels of all correct options, separated by commas "
    "(for example '{example}', without quotes), where each label is one of {letters}, "
    "followed by a step-by-step explanation.\n\n"
    "Question: {question}\nChoices:\n{choices}\nAnswer:"
)


@dataclass(frozen=True)
class FormatRequest(Request):
    """A Request that says its answer format; oracle backends read `fmt`, real backends see a plain Request."""

    fmt: str = "mcq"


def render_true_false(question: Question, variant: Variant) -> str:
    """The yes/no prompt about the one option `variant` shows.

    >>> q = Question(id="q", question="Where does the sun rise?", options=("East", "West"), answer=0)
    >>> from src.variants.revas import true_false_variants
    >>> print(render_true_false(q, true_false_variants(q)[1]).splitlines()[-3])
    Proposed answer: West
    """
    return TRUE_FALSE_TEMPLATE.format(question=question.question, option=variant.option_texts[0],
                                      subject=(question.subject or DEFAULT_SUBJECT).replace("_", " "))


def render_multi_select(template: PromptTemplate, question: Question, variant: Variant) -> str:
    """The select-all prompt, options shown in the config's label style."""
    labels = labels_for(variant.n_options, template.label_style)
    _, line = LABEL_STYLES[template.label_style]
    choices = "\n".join(line.format(label=label, text=text) for label, text in zip(labels, variant.option_texts))
    example = ", ".join(labels[::2][:2])
    return MULTI_SELECT_TEMPLATE.format(question=question.question, choices=choices, example=example,
                                        letters=", ".join(labels))


def request_for(template: PromptTemplate, question: Question, variant: Variant, *, seed: int) -> Request:
    """The backend request of a true_false or multi_select variant (labels Yes/No, or the option labels)."""
    if variant.fmt == "true_false":
        return FormatRequest(prompt=render_true_false(question, variant), labels=TF_LABELS, options=TF_LABELS,
                             seed=seed, correct_slot=variant.correct_slot, key=f"{question.id}/{variant.variant_id}",
                             fmt="true_false")
    if variant.fmt == "multi_select":
        return FormatRequest(prompt=render_multi_select(template, question, variant),
                             labels=labels_for(variant.n_options, template.label_style), options=variant.option_texts,
                             seed=seed, correct_slot=variant.correct_slot, key=f"{question.id}/{variant.variant_id}",
                             fmt="multi_select")
    raise ValueError(f"no special request for format {variant.fmt!r}")


def request_format(request: Request) -> str:
    return getattr(request, "fmt", "mcq")


# --- parsing ---------------------------------------------------------------------------------------------

_YES = frozenset({"yes", "true", "correct"})
_NO = frozenset({"no", "false", "incorrect"})
_WORD = re.compile(r"[A-Za-z]+")
_TF_FALLBACK = re.compile(r"(?i)\b(?:answer|verdict)\b[^.\n]{0,20}?\b(?:is|:)\s*[\*\"'“(]*\s*(yes|no|true|false)\b")


def parse_yes_no(raw: str) -> int | None:
    """0 for Yes, 1 for No, None when neither (or both) is given.

    The first word of the response decides ("Yes.", "**No**", "True", "Incorrect, because"); else a lone
    yes or no in the first line ("I think yes"); else an "answer is yes" phrase anywhere. "Yes or no",
    a refusal or an empty answer is INVALID.

    >>> [parse_yes_no(t) for t in ("Yes", "**No**.", "True", "I think yes.", "The answer is: no", "Yes or no", "Maybe", "")]
    [0, 1, 0, 0, 1, None, None, None]
    """
    if not raw or not raw.strip():
        return None
    first_line = next(line for line in raw.strip().splitlines() if line.strip())
    words = [w.lower() for w in _WORD.findall(first_line)]
    if words and words[0] in _YES | _NO:
        if len(words) >= 3 and words[1] == "or" and words[2] in _YES | _NO:
            return None  # "Yes or no"
        return 0 if words[0] in _YES else 1
    said = {0 if w == "yes" else 1 for w in words if w in ("yes", "no")}
    if len(said) == 1:
        return said.pop()
    if said:
        return None
    found = {0 if m.group(1).lower() in ("yes", "true") else 1 for m in _TF_FALLBACK.finditer(raw)}
    return found.pop() if len(found) == 1 else None


_SET_PREFIX = re.compile(
    r"^(?i:(?:the\s+)?(?:final\s+|correct\s+)?(?:answers?|options?|choices?)(?:\s+(?:is|are))?\s*[:\-–]?\s*)")
_SEPARATORS = re.compile(r"(?i)\s*(?:,|;|/|&|\+|\band\b|\s)\s*")
_HEDGE = re.compile(r"(?i)\bor\b")
_DECOR = "*()[]{}'\"“”‘’`.:!"


def parse_label_set(raw: str, labels: Sequence[str]) -> tuple[int, ...] | None:
    """The slots a select-all answer names, sorted; None when it names none or a label that was not shown.

    Reads the first line: "A, C", "A and C", "(A) (C)", "AC", "Options B and D are correct"; an
    answer prefix ("Answer:", "The correct options are") is skipped. Lowercase letters count only in a
    line made of nothing but labels ("a, c").

    >>> L = ("A", "B", "C", "D")
    >>> [parse_label_set(t, L) for t in ("A, C", "AC", "B", "Answer: (B) and (D).", "Options A and D are correct")]
    [(0, 2), (0, 2), (1,), (1, 3), (0, 3)]
    >>> [parse_label_set(t, L) for t in ("A, E", "A or C", "None of them", "")]
    [None, None, None, None]
    """
    if not raw or not raw.strip():
        return None
    index = {label.upper(): slot for slot, label in enumerate(labels)}
    numeric = all(label.isdigit() for label in labels)
    line = next(line for line in raw.strip().splitlines() if line.strip()).strip()
    line = _SET_PREFIX.sub("", line.strip(" *")).strip()
    parts = [p.strip(_DECOR) for p in _SEPARATORS.split(line) if p.strip(_DECOR)]
    if not parts or _HEDGE.search(line):
        return None  # "A or C" does not say which
    if all(p.upper() in index for p in parts):  # a line of labels only: "A, C", "a and c", "1, 3"
        return tuple(sorted({index[p.upper()] for p in parts}))
    compact = "".join(parts)
    if not numeric and len(parts) == 1 and compact.isupper() and all(ch in index for ch in compact) and len(set(compact)) == len(compact):
        return tuple(sorted(index[ch] for ch in compact))  # "AC"
    pattern = r"(?<![\w])(\d{1,2})(?![\w])" if numeric else r"(?<![A-Za-z])([A-Z])(?![A-Za-z])"
    # "I think ..." is the pronoun, not label I
    tokens = [m.group(1) for m in re.finditer(pattern, line) if not (m.group(1) == "I" and re.match(r" [a-z']", line[m.end():]))]
    if not tokens:
        return None
    if any(t.upper() not in index for t in tokens):
        return None
    return tuple(sorted({index[t.upper()] for t in tokens}))


def parse_for(fmt: str, raw: str, labels: Sequence[str]) -> tuple[int | None, tuple[int, ...] | None]:
    """(slot, slots) of a true_false or multi_select answer: slot is 0/1 for Yes/No; slots the named set."""
    if fmt == "true_false":
        return parse_yes_no(raw), None
    if fmt == "multi_select":
        slots = parse_label_set(raw, labels)
        return (slots[0] if slots is not None and len(slots) == 1 else None), slots
    raise ValueError(f"no parser for format {fmt!r}")
