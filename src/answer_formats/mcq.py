"""Plain multiple choice: the `prompt` config's template, one label answered (parsed by `src.core.parsing`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from src.core.parsing import Parse, parse_with_rule
from src.core.prompts import PromptTemplate, labels_for, render
from src.core.questions import Question
from src.core.variant import Variant

from ..backends.base import Request
from .base import AnswerFormat


class MultipleChoice(AnswerFormat):
    """Every option shown under its label; the chosen option is the one behind the parsed label.

    >>> q = Question(id="q", question="Where does the sun rise?", options=("East", "West"), answer=0)
    >>> MCQ.parse("**B**. West", ("A", "B"), q.options)
    Parse(slot=1, rule='first_token', slots=None)
    """

    name = "mcq"
    metric_family = "orders"

    def render(
        self,
        template: PromptTemplate,
        question: Question,
        variant: Variant,
        *,
        fewshot: Sequence[tuple[Question, Variant]] = (),
        scoring: str = "generate",
    ) -> str:
        return render(template, question, variant, fewshot=fewshot, scoring=scoring)

    def labels(self, template: PromptTemplate, variant: Variant) -> tuple[str, ...]:
        return labels_for(variant.n_options, template.label_style)

    def request_of(self, **fields: Any) -> Request:
        return Request(**fields)  # real backends and the cache see the request as before formats existed

    def parse(
        self, raw: str, labels: Sequence[str], options: Sequence[str] | None = None, *, truncated: bool = False
    ) -> Parse:
        return parse_with_rule(raw, labels, options, truncated=truncated)

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
            "correct_option": variant.option_order[variant.correct_slot],
            "chosen_option": None if slot is None else variant.option_order[slot],
        }


MCQ = MultipleChoice()
