"""Multi-select (REVAS sections 3.4 and 4): every option shown, "select all correct options", answered with a
set of labels, which only generation can give.

The prompt is zero-shot and fixed here; the `prompt` config's label style is kept.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from src.core.parsing import Parse
from src.core.prompts import LABEL_STYLES, PromptTemplate, labels_for
from src.core.questions import Question
from src.core.variant import Variant

from .base import AnswerFormat, answer_text, ruled

MULTI_SELECT_TEMPLATE = (
    "Answer the following multiple choice question. More than one option may be correct: select all correct options.\n"
    "The first line of your response should list the labels of all correct options, separated by commas "
    "(for example '{example}', without quotes), where each label is one of {letters}, "
    "followed by a step-by-step explanation.\n\n"
    "Question: {question}\nChoices:\n{choices}\nAnswer:"
)

# A select-all answer lists several labels and real models preface it ("The correct options are A, C"):
# 3 tokens cut most lists short, so select-all prompts get at least this many new tokens.
MULTI_SELECT_MIN_NEW_TOKENS = 24


class MultiSelect(AnswerFormat):
    """The parsed labels are the set named ("A, C" in parsed_label), chosen_option is null, the trial is correct
    when the set is exactly the correct option, and scoring is "generate" whatever the run's."""

    name = "multi_select"
    generated_only = True
    names_a_set = True
    min_new_tokens = MULTI_SELECT_MIN_NEW_TOKENS
    metric_family = "multi_select"

    def render(
        self,
        template: PromptTemplate,
        question: Question,
        variant: Variant,
        *,
        fewshot: Sequence[tuple[Question, Variant]] = (),
        scoring: str = "generate",
    ) -> str:
        """The select-all prompt, options shown in the config's label style (zero-shot: `fewshot` is not used)."""
        labels = self.labels(template, variant)
        _, line = LABEL_STYLES[template.label_style]
        choices = "\n".join(line.format(label=label, text=text) for label, text in zip(labels, variant.option_texts))
        example = ", ".join(labels[::2][:2])
        return MULTI_SELECT_TEMPLATE.format(
            question=question.question, choices=choices, example=example, letters=", ".join(labels)
        )

    def labels(self, template: PromptTemplate, variant: Variant) -> tuple[str, ...]:
        return labels_for(variant.n_options, template.label_style)

    def parse(
        self, raw: str, labels: Sequence[str], options: Sequence[str] | None = None, *, truncated: bool = False
    ) -> Parse:
        """The set named, and as `slot` its one label when it names exactly one."""
        slots, rule = parse_label_set_with_rule(raw, labels, options, truncated=truncated)
        return Parse(slots[0] if slots is not None and len(slots) == 1 else None, rule, slots)

    def columns(
        self,
        question: Question,
        variant: Variant,
        labels: Sequence[str],
        *,
        slot: int | None,
        slots: tuple[int, ...] | None,
    ) -> dict[str, Any]:
        return {
            "scoring": "generate",
            "correct_option": variant.option_order[variant.correct_slot],
            "chosen_option": None,
            "parsed_label": None if slots is None else ", ".join(labels[s] for s in slots),
            "correct": slots is not None and set(slots) == set(variant.correct_slots),
            "parsed_labels": None if slots is None else [labels[s] for s in slots],
            "chosen_options": None if slots is None else [variant.option_order[s] for s in slots],
        }


MULTI_SELECT = MultiSelect()


_SET_PREFIX = re.compile(
    r"^(?i:(?:the\s+)?(?:final\s+|correct\s+)?(?:answers?|options?|choices?)(?:\s+(?:is|are))?\s*[:\-–]?\s*)"
)
_SEPARATORS = re.compile(r"(?i)\s*(?:,|;|/|&|\+|\band\b|\s)\s*")
_HEDGE = re.compile(r"(?i)\bor\b")
_DECOR = "*()[]{}'\"“”‘’`.:!"
# A list item on its own line under a heading: "- A", "* (C) Paris", "1. B"
_ITEM = r"^\s*(?:[-*•]\s*|\d+[.)]\s+)?[\(\[\*]*({label})(?:[\.\)\]:\*]+|(?=\s)|$)"
# After the last label of a cut answer, nothing that closes the list: "A, C", "A, C,", "A and"
_OPEN_LIST = re.compile(r"^[ \t,;/&+\*\)\]\"'`]*(?:(?:and|or)\b[ \t]*)?$", re.I)
# "A cat ...", "I think ...": the word, unless a connective of a list of labels follows
_LEADING_WORD = re.compile(r"^[AI] (?!(?:and|or|nor|is|are|was|were|plus|&)\b)[a-z']")


def parse_label_set_with_rule(
    raw: str, labels: Sequence[str], options: Sequence[str] | None = None, *, truncated: bool = False
) -> tuple[tuple[int, ...] | None, str]:
    """The slots a select-all answer names, sorted, or None when it names none or a label that was not shown;
    and the rule that decided it.

    Reads the first line: "A, C", "A and C", "(A) (C)", "AC", "Options B and D are correct"; an
    answer prefix ("Answer:", "The correct options are") is skipped, and a heading alone on the first line
    ("The correct options are:") is followed by one label per line. Lowercase letters count only in a
    line made of nothing but labels ("a, c"); the option texts themselves ("Paris and Lyon") count when
    every part of the line is one. Reasoning blocks are removed first; a copy of the option list is no answer.
    A cut answer (`truncated`) keeps its set only when the list is closed before the cut (a newline, a full
    stop or a word follows its last label): "A, C" or "A, C," at the end of a cut text may have gone on naming more.

    >>> L = ("A", "B", "C", "D")
    >>> [parse_label_set_with_rule(t, L)[0] for t in ("A, C", "AC", "B", "Answer: (B) and (D).",
    ...                                               "Options A and D are correct")]
    [(0, 2), (0, 2), (1,), (1, 3), (0, 3)]
    >>> [parse_label_set_with_rule(t, L)[0] for t in ("A, E", "A or C", "None of them", "", "A cat is a mammal: C")]
    [None, None, None, None, (2,)]

    >>> parse_label_set_with_rule("A, C,", ("A", "B", "C", "D"), truncated=True)
    (None, 'truncated')
    >>> parse_label_set_with_rule("A, C\\nBecause", ("A", "B", "C", "D"), truncated=True)
    ((0, 2), 'label_list')
    """
    text, state, invalid = answer_text(raw, truncated)
    if text is None:
        return None, invalid
    slots, rule, end = _label_set(text, labels, options)
    if slots is not None and truncated and end is not None and _OPEN_LIST.match(text[end:]):
        return None, "truncated"
    if slots is None and truncated and rule in ("invalid_no_label", "invalid_option_list"):
        return None, "truncated"
    return ruled(slots, rule, state)


def _label_set(
    text: str, labels: Sequence[str], options: Sequence[str] | None
) -> tuple[tuple[int, ...] | None, str, int | None]:
    """(slots, rule, end of the last label read in `text`) of a stripped, non-empty answer."""
    index = {label.upper(): slot for slot, label in enumerate(labels)}
    numeric = all(label.isdigit() for label in labels)
    lines = [line for line in text.splitlines() if line.strip()]
    alternatives = "|".join(re.escape(label) for label in sorted(labels, key=len, reverse=True))
    listed = [re.match(r"^\s*[\(\[\*]*(" + alternatives + r")[\.\)\]:]\s", line) for line in lines[:2]]
    one, two = (listed + [None, None])[:2]
    if len(lines) > 1 and one is not None and two is not None and one.group(1) != two.group(1):
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


def _label_line(
    line: str, index: dict[str, int], numeric: bool, options: Sequence[str] | None
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
    if (
        not numeric
        and len(parts) == 1
        and compact.isupper()
        and all(ch in index for ch in compact)
        and len(set(compact)) == len(compact)
    ):
        return tuple(sorted(index[ch] for ch in compact)), "label_list", end  # "AC"
    if options:  # "Paris and Lyon", "Paris, Lyon"
        norms = {_norm(o): slot for slot, o in enumerate(options) if _norm(o)}
        pieces = [_norm(p) for p in re.split(r"(?i)\s*(?:,|;|\band\b)\s*", line) if _norm(p)]
        if pieces and all(p in norms for p in pieces):
            return tuple(sorted({norms[p] for p in pieces})), "option_text", len(line.rstrip(_DECOR + " "))
    pattern = r"(?<![\w])(\d{1,2})(?![\w])" if numeric else r"(?<![A-Za-z\\])([A-Z])(?![A-Za-z])"
    tokens = [
        m
        for m in re.finditer(pattern, line)
        if not (m.group(1) in ("A", "I") and _LEADING_WORD.match(line[m.start() :]))
    ]  # "A cat", "I think"
    if not tokens:
        return None, "invalid_no_label", None
    if any(t.group(1).upper() not in index for t in tokens):
        return None, "invalid_out_of_range", None
    return tuple(sorted({index[t.group(1).upper()] for t in tokens})), "label_mentions", tokens[-1].end()


def _norm(text: str) -> str:
    return " ".join(text.casefold().split()).strip(_DECOR + " ")
