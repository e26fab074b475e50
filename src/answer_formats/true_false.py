"""True/false (REVAS sections 3.4 and 4): one option shown, "Is this the correct answer?", answered Yes or No.

The prompt is zero-shot and fixed here (the paper's wording cannot be derived from the option text: it
rewrote "East" into "Is it true that the sun rises from the east?" by hand).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import pandas as pd

from src.core.parsing import Parse
from src.core.prompts import DEFAULT_SUBJECT, PromptTemplate
from src.core.questions import Question
from src.core.variant import TF_LABELS, Variant

from .base import AnswerFormat, answer_text, ruled

TRUE_FALSE_TEMPLATE = (
    "Answer the following yes/no question about a multiple choice question.\n"
    "The first line of your response should be Yes or No, followed by a step-by-step explanation.\n\n"
    "Question: {question}\nProposed answer: {option}\nIs this the correct answer?\nAnswer:"
)


class TrueFalse(AnswerFormat):
    """Labels Yes/No (TF_LABELS) whatever the `prompt` config; the chosen option is the asked one on Yes, none on No."""

    name = "true_false"
    metric_family = "true_false"

    def render(
        self,
        template: PromptTemplate,
        question: Question,
        variant: Variant,
        *,
        fewshot: Sequence[tuple[Question, Variant]] = (),
        scoring: str = "generate",
    ) -> str:
        """The yes/no prompt about the one option `variant` shows (zero-shot: `fewshot` is not used).

        >>> q = Question(id="q", question="Where does the sun rise?", options=("East", "West"), answer=0)
        >>> from src.variants.revas import true_false_variants
        >>> print(TRUE_FALSE.render(None, q, true_false_variants(q)[1]).splitlines()[-3])
        Proposed answer: West
        """
        return TRUE_FALSE_TEMPLATE.format(
            question=question.question,
            option=variant.option_texts[0],
            subject=(question.subject or DEFAULT_SUBJECT).replace("_", " "),
        )

    def labels(self, template: PromptTemplate, variant: Variant) -> tuple[str, ...]:
        return TF_LABELS

    def options(self, variant: Variant) -> tuple[str, ...]:
        return TF_LABELS

    def parse(
        self, raw: str, labels: Sequence[str], options: Sequence[str] | None = None, *, truncated: bool = False
    ) -> Parse:
        return Parse(*parse_yes_no_with_rule(raw, truncated=truncated))

    def columns(
        self,
        question: Question,
        variant: Variant,
        labels: Sequence[str],
        *,
        slot: int | None,
        slots: tuple[int, ...] | None,
    ) -> dict[str, Any]:
        return {"correct_option": question.answer, "chosen_option": variant.asked_option if slot == 0 else None}

    def correct_category(self, row: pd.Series) -> int | None:
        return 0 if row["correct_label"] == "Yes" else 1


TRUE_FALSE = TrueFalse()


_YES = frozenset({"yes", "true", "correct", "right"})
_NO = frozenset({"no", "false", "incorrect", "wrong"})
_PREDICATES = {"true": 0, "correct": 0, "right": 0, "false": 1, "incorrect": 1, "wrong": 1}
_NEGATIONS = frozenset({"not", "t", "never"})  # "not correct", "isn't true" ("isn", "t")
_WORD = re.compile(r"[A-Za-z]+")
_TF_FALLBACK = re.compile(r"(?i)\b(?:answer|verdict)\b[^.\n]{0,20}?\b(?:is|:)\s*[\*\"'“(]*\s*(yes|no|true|false)\b")
_TF_BOXED = re.compile(r"(?i)\\boxed\s*\{\s*(?:\\text(?:bf)?\s*\{)?\s*(yes|no|true|false)\b")


def parse_yes_no_with_rule(raw: str, *, truncated: bool = False) -> tuple[int | None, str]:
    """0 for Yes, 1 for No, None when neither (or both) is given; and the rule that decided it.

    The first word of the response decides ("Yes.", "**No**", "True", "Incorrect, because"); else a lone
    yes or no in the first line ("I think yes", "This is not correct"); else an "answer is yes" phrase or
    `\\boxed{Yes}` anywhere. Reasoning blocks are removed first. "Yes or no", a refusal or an empty
    answer is INVALID. A cut answer (`truncated`) keeps a complete first word.

    >>> [parse_yes_no_with_rule(t)[0] for t in ("Yes", "**No**.", "True", "I think yes.", "The answer is: no",
    ...                                         "Yes or no", "Maybe", "")]
    [0, 1, 0, 0, 1, None, None, None]
    >>> (parse_yes_no_with_rule("<think>no... wait</think>Yes, because"),
    ...  parse_yes_no_with_rule("The proposed", truncated=True))
    ((0, 'reasoning_stripped+first_word'), (None, 'truncated'))
    """
    text, state, invalid = answer_text(raw, truncated)
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
        return ruled(slot, "first_word", state)
    said = set()
    for k, w in enumerate(words):
        if w in ("yes", "no"):
            said.add(0 if w == "yes" else 1)
        elif w in _PREDICATES and k and words[k - 1] in _NEGATIONS | {"is", "was", "be", "s", "seems"}:
            said.add(_PREDICATES[w] ^ (words[k - 1] in _NEGATIONS))  # "it is true", "this is not correct"
    if len(said) == 1:
        return ruled(said.pop(), "yes_no_word", state)
    if said:
        return None, "invalid_hedge"
    for pattern, rule in ((_TF_BOXED, "boxed"), (_TF_FALLBACK, "answer_phrase")):
        found = {0 if m.group(1).lower() in ("yes", "true") else 1 for m in pattern.finditer(text)}
        if len(found) == 1:
            return ruled(found.pop(), rule, state)
        if found:
            return None, "invalid_conflict"
    return None, "truncated" if truncated else "invalid_no_label"
