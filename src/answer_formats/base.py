"""What every answer format provides, and the request that says which format it asks in.

A format (`src.answer_formats.FORMATS`, looked up by `Variant.fmt`) renders a variant into a backend request,
says which labels the model is shown and whether only generation can answer it, parses a completion into a
`src.core.parsing.Parse` (slot, rule, and for a set of labels the slots), fills the record columns that depend on
it, and names the REVAS metric family that reads its rows (`src.metrics.revas`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, TypeVar

import pandas as pd

from src.core.parsing import Parse, strip_reasoning
from src.core.prompts import PromptTemplate, labels_for, lm_eval_request, relisted
from src.core.questions import Question
from src.core.variant import Variant, trial_key

from ..backends.base import Request


@dataclass(frozen=True)
class FormatRequest(Request):
    """A Request that says its answer format (`fmt`: true_false, multi_select); an mcq request is a plain Request."""

    fmt: str = "mcq"


class AnswerFormat:
    """One answer format; subclasses set `name` and implement `render`, `labels`, `parse` and `columns`."""

    name: str = ""
    generated_only = False  # True: scored by generation whatever the run's scoring (a set can only be written)
    names_a_set = False  # True: the answer names a set of labels (an oracle backend's answer key says so)
    min_new_tokens = 0  # generation gets at least this many new tokens
    metric_family: str | None = None  # the REVAS metrics of its rows, `src.metrics.revas.FAMILIES`

    def render(
        self,
        template: PromptTemplate,
        question: Question,
        variant: Variant,
        *,
        fewshot: Sequence[tuple[Question, Variant]] = (),
        scoring: str = "generate",
    ) -> str:
        raise NotImplementedError

    def labels(self, template: PromptTemplate, variant: Variant) -> tuple[str, ...]:
        """The labels the model is shown, in slot order."""
        raise NotImplementedError

    def options(self, variant: Variant) -> tuple[str, ...]:
        """The texts behind the labels (cloze scoring, option-text parsing)."""
        return variant.option_texts

    def request(
        self,
        template: PromptTemplate,
        question: Question,
        variant: Variant,
        *,
        seed: int,
        fewshot: Sequence[tuple[Question, Variant]] = (),
        scoring: str = "generate",
        data: str = "",
    ) -> Request:
        """The backend request of one variant of `question` (`data`: the question's content identity, part of the
        response cache's key, `Request.data`): under `prompt=lm_eval` a cloze request is lm-eval's
        own (context, continuation) pair, and on a task whose choices are labels its labels are scored, as lm-eval
        scores " A" after MMLU's listed options."""
        listing = question.metadata.get("lm_eval_listing") if self.name == "mcq" else None
        if listing is not None:
            # lm-eval asks a label task in its own context, its options listed: under every scoring the context's
            # listing in the variant's order, re-lettered (so a suite's label and text tasks are each lm-eval's
            # request under scoring=cloze), and its labels scored under either cloze mode
            texts = listed_texts(question, variant, listing["texts"])
            labels = labels_for(variant.n_options, str(listing["style"]))
            shown = replace(question, metadata={**question.metadata, "context": relisted(listing, texts)})
            prompt = self.render(template, shown, variant, fewshot=fewshot, scoring="cloze")
        else:
            prompt, labels = (
                self.render(template, question, variant, fewshot=fewshot, scoring=scoring),
                self.labels(template, variant),
            )
        options = self.options(variant)
        prompt, prefix = lm_eval_request(prompt, question, scoring)
        if prefix is not None and listing is not None:
            options = labels
        return self.request_of(
            prompt=prompt,
            labels=labels,
            options=options,
            seed=seed,
            key=trial_key(question.id, variant.variant_id),
            data=data,
            continuation_prefix=prefix,
        )

    def request_of(self, **fields: Any) -> Request:
        """The request of these fields in this format (`request`'s; src/ingest/generic.py builds its own with it)."""
        return FormatRequest(**fields, fmt=self.name)

    def parse(
        self, raw: str, labels: Sequence[str], options: Sequence[str] | None = None, *, truncated: bool = False
    ) -> Parse:
        """The answer a completion gives and the rule that decided it (see `src.core.parsing`)."""
        raise NotImplementedError

    def columns(
        self,
        question: Question,
        variant: Variant,
        labels: Sequence[str],
        *,
        slot: int | None,
        slots: tuple[int, ...] | None,
    ) -> dict[str, Any]:
        """The record columns that depend on the format: `correct_option`, `chosen_option` and any it overrides."""
        raise NotImplementedError

    def correct_category(self, row: pd.Series) -> int | None:
        """The category of the right answer in a record's `answer_dist` (None when no shown answer is right)."""
        order = [int(x) for x in row["option_order"]]
        correct = row["correct_option"]
        return (
            order.index(int(correct))
            if correct is not None and not pd.isna(correct) and int(correct) in order
            else None
        )


# Parsers of formats beside mcq return a Parse whose rule follows src/core/parsing.py: a decided answer's rule
# ("first_word", "yes_no_word", "label_list", "label_mentions", "answer_phrase", "boxed", "option_text",
# prefixed "reasoning_stripped+" after a removed <think> block) or an INVALID reason ("invalid_empty",
# "invalid_hedge", "invalid_out_of_range", "invalid_option_list", "invalid_unclosed_reasoning",
# "invalid_no_label", "truncated").


def listed_texts(question: Question, variant: Variant, raw: Sequence[str]) -> list[str]:
    """The texts a variant shows in its slots, each original option as lm-eval's context wrote it (`raw`, its spaces
    kept) where the variant shows it unchanged, any other text (None of the above, a filler, a replacement) as is.

    >>> q = Question(id="q", question="2+2?", options=("3", "4"), answer=1)
    >>> listed_texts(q, Variant("q", "nota", "nota_0", (1, 0, -1), ("4", "3", "None of the above"), 0), ["3 ", "4 "])
    ['4 ', '3 ', 'None of the above']
    >>> listed_texts(q, Variant("q", "misleading", "misleading_0", (0, 1), ("3", "5"), 0), ["3 ", "4 "])
    ['3 ', '5']
    """
    return [
        raw[index] if index >= 0 and text == question.options[index] else text  # NOTA and fillers: index < 0
        for index, text in zip(variant.option_order, variant.option_texts)
    ]


def answer_text(raw: str, truncated: bool) -> tuple[str | None, str, str]:
    """(text to parse or None, reasoning state, INVALID rule when None): empty and unfinished answers."""
    if not raw or not raw.strip():
        return None, "", "truncated" if truncated else "invalid_empty"
    text, state = strip_reasoning(raw)
    if state == "unclosed":
        return None, state, "truncated" if truncated else "invalid_unclosed_reasoning"
    if not text.strip():
        return None, state, "invalid_empty"
    return text.strip(), state, ""


Verdict = TypeVar("Verdict")


def ruled(verdict: Verdict, rule: str, state: str) -> tuple[Verdict, str]:
    """(verdict, rule), the rule marked when a reasoning block was removed before a decided verdict."""
    return verdict, (f"reasoning_stripped+{rule}" if state and verdict is not None else rule)
