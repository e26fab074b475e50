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
from .parsing import strip_reasoning
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
# Each parser returns (verdict, rule); the rules follow src/parsing.py: a decided answer's rule
# ("first_word", "yes_no_word", "label_list", "label_mentions", "answer_phrase", "boxed", "option_text",
# prefixed "reasoning_stripped+" after a removed <think> block) or an INVALID reason ("invalid_empty",
# "invalid_hedge", "invalid_out_of_range", "invalid_option_list", "invalid_unclosed_reasoning",
# "invalid_no_label", "truncated").

_YES = frozenset({"yes", "true", "correct", "right"})
_NO = frozenset({"no", "false", "incorrect", "wrong"})
_PREDICATES = {"true": 0, "correct": 0, "right": 0, "false": 1, "incorrect": 1, "wrong": 1}
_NEGATIONS = frozenset({"not", "t", "never"})  # "not correct", "isn't true" ("isn", "t")
_WORD = re.compile(r"[A-Za-z]+")
_TF_FALLBACK = re.compile(r"(?i)\b(?:answer|verdict)\b[^.\n]{0,20}?\b(?:is|:)\s*[\*\"'“(]*\s*(yes|no|true|false)\b")
_TF_BOXED = re.compile(r"(?i)\\boxed\s*\{\s*(?:\\text(?:bf)?\s*\{)?\s*(yes|no|true|false)\b")


def _answer_text(raw: str, truncated: bool) -> tuple[str | None, str, str]:
    """(text to parse or None, reasoning state, INVALID rule when None): empty and unfinished answers."""
    if not raw or not raw.strip():
        return None, "", "truncated" if truncated else "invalid_empty"
    text, state = strip_reasoning(raw)
    if state == "unclosed":
        return None, state, "truncated" if truncated else "invalid_unclosed_reasoning"
    if not text.strip():
        return None, state, "invalid_empty"
    return text.strip(), state, ""


def _ruled(verdict, rule: str, state: str):
    return verdict, (f"reasoning_stripped+{rule}" if state and verdict is not None else rule)


def parse_yes_no(raw: str) -> int | None:
    """0 for Yes, 1 for No, None when neither (or both) is given.

    The first word of the response decides ("Yes.", "**No**", "True", "Incorrect, because"); else a lone
    yes or no in the first line ("I think yes", "This is not correct"); else an "answer is yes" phrase or
    `\\boxed{Yes}` anywhere. Reasoning blocks are removed first. "Yes or no", a refusal or an empty
    answer is INVALID.

    >>> [parse_yes_no(t) for t in ("Yes", "**No**.", "True", "I think yes.", "The answer is: no", "Yes or no", "Maybe", "")]
    [0, 1, 0, 0, 1, None, None, None]
    """
    return parse_yes_no_with_rule(raw)[0]


def parse_yes_no_with_rule(raw: str, *, truncated: bool = False) -> tuple[int | None, str]:
    """`parse_yes_no`'s verdict and the rule that decided it; a cut answer keeps a complete first word.

    >>> parse_yes_no_with_rule("<think>no... wait</think>Yes, because"), parse_yes_no_with_rule("The proposed", truncated=True)
    ((0, 'reasoning_stripped+first_word'), (None, 'truncated'))
    """
    text, state, invalid = _answer_text(raw, truncated)
    if text is None:
        return None, invalid
    first_line = text.splitlines()[0]
    words = [w.lower() for w in _WORD.findall(first_line)]
    if words and words[0] in _YES | _NO:
        slot = 0 if words[0] in _YES else 1
        if len(words) >= 3 and words[1] in ("or", "and") and words[2] in (_NO if slot == 0 else _YES):
            return None, "invalid_hedge"  # "Yes or no", "Yes and no"
        if truncated and re.match(r"(?i)^[\W_]*[a-z]+[\W_]*(?:or|either)?[\W_]*$", text) and len(words) > 1:
            return None, "truncated"  # "Yes or" cut
        return _ruled(slot, "first_word", state)
    said = set()
    for k, w in enumerate(words):
        if w in ("yes", "no"):
            said.add(0 if w == "yes" else 1)
        elif w in _PREDICATES and k and words[k - 1] in _NEGATIONS | {"is", "was", "be", "s", "seems"}:
            said.add(_PREDICATES[w] ^ (words[k - 1] in _NEGATIONS))  # "it is true", "this is not correct"
    if len(said) == 1:
        return _ruled(said.pop(), "yes_no_word", state)
    if said:
        return None, "invalid_hedge"
    for pattern, rule in ((_TF_BOXED, "boxed"), (_TF_FALLBACK, "answer_phrase")):
        found = {0 if m.group(1).lower() in ("yes", "true") else 1 for m in pattern.finditer(text)}
        if len(found) == 1:
            return _ruled(found.pop(), rule, state)
        if found:
            return None, "invalid_conflict"
    return None, "truncated" if truncated else "invalid_no_label"


_SET_PREFIX = re.compile(
    r"^(?i:(?:the\s+)?(?:final\s+|correct\s+)?(?:answers?|options?|choices?)(?:\s+(?:is|are))?\s*[:\-–]?\s*)")
_SEPARATORS = re.compile(r"(?i)\s*(?:,|;|/|&|\+|\band\b|\s)\s*")
_HEDGE = re.compile(r"(?i)\bor\b")
_DECOR = "*()[]{}'\"“”‘’`.:!"
# A list item on its own line under a heading: "- A", "* (C) Paris", "1. B"
_ITEM = r"^\s*(?:[-*•]\s*|\d+[.)]\s+)?[\(\[\*]*({label})(?:[\.\)\]:\*]+|(?=\s)|$)"
# After the last label of a cut answer, nothing that closes the list: "A, C", "A, C,", "A and"
_OPEN_LIST = re.compile(r"^[ \t,;/&+\*\)\]\"'`]*(?:(?:and|or)\b[ \t]*)?$", re.I)
# "A cat ...", "I think ...": the word, unless a connective of a list of labels follows
_LEADING_WORD = re.compile(r"^[AI] (?!(?:and|or|nor|is|are|was|were|plus|&)\b)[a-z']")


def parse_label_set(raw: str, labels: Sequence[str], options: Sequence[str] | None = None) -> tuple[int, ...] | None:
    """The slots a select-all answer names, sorted; None when it names none or a label that was not shown.

    Reads the first line: "A, C", "A and C", "(A) (C)", "AC", "Options B and D are correct"; an
    answer prefix ("Answer:", "The correct options are") is skipped, and a heading alone on the first line
    ("The correct options are:") is followed by one label per line. Lowercase letters count only in a
    line made of nothing but labels ("a, c"); the option texts themselves ("Paris and Lyon") count when
    every part of the line is one. Reasoning blocks are removed first; a copy of the option list is no answer.

    >>> L = ("A", "B", "C", "D")
    >>> [parse_label_set(t, L) for t in ("A, C", "AC", "B", "Answer: (B) and (D).", "Options A and D are correct")]
    [(0, 2), (0, 2), (1,), (1, 3), (0, 3)]
    >>> [parse_label_set(t, L) for t in ("A, E", "A or C", "None of them", "", "A cat is a mammal: C")]
    [None, None, None, None, (2,)]
    """
    return parse_label_set_with_rule(raw, labels, options)[0]


def parse_label_set_with_rule(raw: str, labels: Sequence[str], options: Sequence[str] | None = None, *,
                              truncated: bool = False) -> tuple[tuple[int, ...] | None, str]:
    """`parse_label_set`'s verdict and its rule. A cut answer (`truncated`) keeps its set only when the list is
    closed before the cut (a newline, a full stop or a word follows its last label): "A, C" or "A, C," at the
    end of a cut text may have gone on naming more.

    >>> parse_label_set_with_rule("A, C,", ("A", "B", "C", "D"), truncated=True)
    (None, 'truncated')
    >>> parse_label_set_with_rule("A, C\\nBecause", ("A", "B", "C", "D"), truncated=True)
    ((0, 2), 'label_list')
    """
    text, state, invalid = _answer_text(raw, truncated)
    if text is None:
        return None, invalid
    slots, rule, end = _label_set(text, labels, options)
    if slots is not None and truncated and end is not None and _OPEN_LIST.match(text[end:]):
        return None, "truncated"
    if slots is None and truncated and rule in ("invalid_no_label", "invalid_option_list"):
        return None, "truncated"
    return _ruled(slots, rule, state)


def _label_set(text: str, labels: Sequence[str], options: Sequence[str] | None
               ) -> tuple[tuple[int, ...] | None, str, int | None]:
    """(slots, rule, end of the last label read in `text`) of a stripped, non-empty answer."""
    index = {label.upper(): slot for slot, label in enumerate(labels)}
    numeric = all(label.isdigit() for label in labels)
    lines = [line for line in text.splitlines() if line.strip()]
    alternatives = "|".join(re.escape(label) for label in sorted(labels, key=len, reverse=True))
    listed = [re.match(r"^\s*[\(\[\*]*(" + alternatives + r")[\.\)\]:]\s", line) for line in lines[:2]]
    if len(lines) > 1 and all(listed) and listed[0].group(1) != listed[1].group(1):
        return None, "invalid_option_list", None  # "A. Paris\nB. Lyon": the options copied out
    boxed = re.search(r"\\boxed\s*\{((?:[^{}]|\{[^{}]*\})*)\}", text)
    if boxed:
        inner = re.sub(r"\\(?:text|textbf|mathrm)\s*\{([^{}]*)\}", r"\1", boxed.group(1))
        slots, rule, _ = _label_line(inner, index, numeric, options)
        if slots is not None or rule != "invalid_no_label":
            return slots, "boxed" if slots is not None else rule, None
    first = lines[0]
    line = _SET_PREFIX.sub("", first.strip(" *#")).strip()
    if not line.strip(_DECOR + " ") and len(lines) > 1:  # "The correct options are:" then "- A", "- C"
        item = re.compile(_ITEM.format(label=alternatives))
        named, end = [], None
        for following in lines[1:]:
            match = item.match(following)
            if not match:
                break
            named.append(index[match.group(1).upper()])
            end = text.find(following) + match.end()
        if named:
            return tuple(sorted(set(named))), "label_list", end
    slots, rule, end = _label_line(line, index, numeric, options)
    return slots, rule, None if end is None else text.find(line) + end


def _label_line(line: str, index: dict[str, int], numeric: bool, options: Sequence[str] | None
                ) -> tuple[tuple[int, ...] | None, str, int | None]:
    """The set one line names: (slots, rule, end of its last label in `line`)."""
    parts = [p.strip(_DECOR) for p in _SEPARATORS.split(line) if p.strip(_DECOR)]
    if not parts:
        return None, "invalid_no_label", None
    if _HEDGE.search(line):
        return None, "invalid_hedge", None  # "A or C" does not say which
    last = re.escape(parts[-1])
    end = next((m.end() for m in re.finditer(rf"(?<!\w){last}(?!\w)", line)), None)
    if all(p.upper() in index for p in parts):  # a line of labels only: "A, C", "a and c", "1, 3"
        return tuple(sorted({index[p.upper()] for p in parts})), "label_list", end
    compact = "".join(parts)
    if not numeric and len(parts) == 1 and compact.isupper() and all(ch in index for ch in compact) \
            and len(set(compact)) == len(compact):
        return tuple(sorted(index[ch] for ch in compact)), "label_list", end  # "AC"
    if options:  # "Paris and Lyon", "Paris, Lyon"
        norms = {_norm(o): slot for slot, o in enumerate(options) if _norm(o)}
        pieces = [_norm(p) for p in re.split(r"(?i)\s*(?:,|;|\band\b)\s*", line) if _norm(p)]
        if pieces and all(p in norms for p in pieces):
            return tuple(sorted({norms[p] for p in pieces})), "option_text", len(line.rstrip(_DECOR + " "))
    pattern = r"(?<![\w])(\d{1,2})(?![\w])" if numeric else r"(?<![A-Za-z\\])([A-Z])(?![A-Za-z])"
    tokens = [m for m in re.finditer(pattern, line)
              if not (m.group(1) in ("A", "I") and _LEADING_WORD.match(line[m.start():]))]  # "A cat", "I think"
    if not tokens:
        return None, "invalid_no_label", None
    if any(t.group(1).upper() not in index for t in tokens):
        return None, "invalid_out_of_range", None
    return tuple(sorted({index[t.group(1).upper()] for t in tokens})), "label_mentions", tokens[-1].end()


def _norm(text: str) -> str:
    return " ".join(text.casefold().split()).strip(_DECOR + " ")


def parse_for_with_rule(fmt: str, raw: str, labels: Sequence[str], options: Sequence[str] | None = None, *,
                        truncated: bool = False) -> tuple[int | None, tuple[int, ...] | None, str]:
    """(slot, slots, rule) of a true_false or multi_select answer: slot is 0/1 for Yes/No (or the one label named);
    slots the named set; rule the one that decided them."""
    if fmt == "true_false":
        slot, rule = parse_yes_no_with_rule(raw, truncated=truncated)
        return slot, None, rule
    if fmt == "multi_select":
        slots, rule = parse_label_set_with_rule(raw, labels, options, truncated=truncated)
        return (slots[0] if slots is not None and len(slots) == 1 else None), slots, rule
    raise ValueError(f"no parser for format {fmt!r}")
