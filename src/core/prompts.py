"""Render a question variant into the prompt text a model sees, from a `str.format` template (config group `prompt`).

Templates are checked for their fields when they are built, so a typo fails at startup with the
config key to fix, not as one identical prompt for every question. The chat template, when
`chat` is set, is applied by the backend, not here.

>>> t = PromptTemplate(name="plain", template="Question: {question}\\n{choices}\\nAnswer:")
>>> q = Question(id="q1", question="2+2?", options=("3", "4"), answer=1)
>>> v = Variant("q1", "original", "original_0", (1, 0), ("4", "3"), 0)
>>> print(render(t, q, v))
Question: 2+2?
A. 4
B. 3
Answer:
"""

from __future__ import annotations

import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from functools import cache
from typing import Any

from src.common.errors import UserError
from src.core.questions import Question
from src.core.variant import LETTERS, Variant

# label_style -> (label alphabet, how a label is shown in front of its option)
LABEL_STYLES = {
    "A.": ("letters", "{label}. {text}"),
    "(A)": ("letters", "({label}) {text}"),
    "1.": ("numbers", "{label}. {text}"),
}
# Fields a template may use; {question} and {choices} are required ({context} may stand for {question} in the
# cloze templates: the question as its benchmark frames it, lm-eval's doc_to_text; the question where it has none).
TEMPLATE_FIELDS = frozenset(
    {"question", "choices", "letters", "subject", "n_options", "fewshot", "context", "preamble"}
)
REQUIRED_FIELDS = ("question", "choices")
FEWSHOT_FIELDS = TEMPLATE_FIELDS - {"fewshot"} | {"answer"}
DEFAULT_SUBJECT = "general knowledge"  # for {subject} when a benchmark has no subjects (ARC, CommonsenseQA)


def labels_for(n: int, style: str) -> tuple[str, ...]:
    """The labels shown for `n` options.

    >>> labels_for(4, "(A)"), labels_for(3, "1.")
    (('A', 'B', 'C', 'D'), ('1', '2', '3'))
    """
    if not isinstance(style, str) or style not in LABEL_STYLES:
        raise UserError(
            f"prompt.label_style={style!r} is not one of {', '.join(map(repr, LABEL_STYLES))}: set prompt.label_style"
        )
    return _labels(n, style)


@cache
def _labels(n: int, style: str) -> tuple[str, ...]:  # every prompt of one size shows the same labels: made once
    alphabet, _ = LABEL_STYLES[style]
    if alphabet == "numbers":
        return tuple(str(i) for i in range(1, n + 1))
    if n > len(LETTERS):
        raise UserError(f"{n} options do not fit letter labels A-Z: set prompt.label_style=1.")
    return tuple(LETTERS[:n])


@dataclass(frozen=True)
class PromptTemplate:
    """One prompt format: the `prompt` config node."""

    name: str
    template: str  # str.format template; fields from TEMPLATE_FIELDS
    label_style: str = "A."  # "A." | "(A)" | "1."
    chat: bool = False  # wrap in the tokenizer's chat template (done by the backend)
    fewshot_template: str | None = None  # one solved example, fields from FEWSHOT_FIELDS; needed for few-shot
    # scoring=cloze ranks option texts as continuations (lm-eval's acc/acc_norm): the prompt shows no choices,
    # and a solved example ends with the right option's text instead of its label.
    cloze_template: str = "{fewshot}Question: {question}\nAnswer:"
    cloze_fewshot_template: str = "Question: {question}\nAnswer: {answer}\n\n"
    # scoring=cloze_shown ranks option texts too, after a prompt that lists the labelled options in their
    # displayed order (the completion formulation over a multiple-choice prompt), so order and option set
    # change what the model sees; a solved example ends with the right option's text.
    cloze_shown_template: str = "{fewshot}Question: {question}\nChoices:\n{choices}\nAnswer:"
    cloze_shown_fewshot_template: str = "Question: {question}\nChoices:\n{choices}\nAnswer: {answer}\n\n"

    def __post_init__(self) -> None:
        labels_for(1, self.label_style)
        _check_fields(self.template, "prompt.template", allowed=TEMPLATE_FIELDS, required=REQUIRED_FIELDS)
        if self.fewshot_template is not None:
            _check_fields(
                self.fewshot_template,
                "prompt.fewshot_template",
                allowed=FEWSHOT_FIELDS,
                required=(*REQUIRED_FIELDS, "answer"),
            )
        _check_fields(
            self.cloze_template, "prompt.cloze_template", allowed=TEMPLATE_FIELDS, required=(("question", "context"),)
        )
        _check_fields(
            self.cloze_fewshot_template,
            "prompt.cloze_fewshot_template",
            allowed=FEWSHOT_FIELDS,
            required=(("question", "context"), "answer"),
        )
        _check_fields(
            self.cloze_shown_template, "prompt.cloze_shown_template", allowed=TEMPLATE_FIELDS, required=REQUIRED_FIELDS
        )
        _check_fields(
            self.cloze_shown_fewshot_template,
            "prompt.cloze_shown_fewshot_template",
            allowed=FEWSHOT_FIELDS,
            required=(*REQUIRED_FIELDS, "answer"),
        )

    def texts_for(self, scoring: str) -> tuple[str, str | None]:
        """(prompt template, solved-example template) that `scoring` sends: cloze modes have their own."""
        if scoring == "cloze":
            return self.cloze_template, self.cloze_fewshot_template
        if scoring == "cloze_shown":
            return self.cloze_shown_template, self.cloze_shown_fewshot_template
        return self.template, self.fewshot_template

    @classmethod
    def from_config(cls, node: Mapping[str, Any]) -> PromptTemplate:
        """Build from the `prompt` config node (a dict or an OmegaConf DictConfig)."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(node) - known)
        if unknown:
            raise UserError(f"prompt.{unknown[0]} is not a prompt setting; the keys are {', '.join(sorted(known))}")
        if "template" not in node or not isinstance(node["template"], str):
            raise UserError("prompt.template is missing: give a str.format template with {question} and {choices}")
        values = {key: node[key] for key in known if key in node}
        if values.get("label_style") == 1 and not isinstance(values["label_style"], str):
            values["label_style"] = "1."  # the command line `prompt.label_style=1.` arrives as the float 1.0
        values.setdefault("name", "custom")
        return cls(**values)


def render(
    template: PromptTemplate,
    question: Question,
    variant: Variant,
    *,
    fewshot: Sequence[tuple[Question, Variant]] = (),
    scoring: str = "generate",
) -> str:
    """The prompt for `variant` of `question`, after the solved `fewshot` examples (each rendered with its variant).

    Under `scoring="cloze"` the prompt is the cloze template: the options are not shown (they are scored as
    continuations), so every variant of a question gets the same prompt text. Under "cloze_shown" the options
    are listed and scored as continuations; solved examples of both cloze modes end with the option's text.
    """
    body, example = template.texts_for(scoring)
    cloze = scoring in CLOZE_SCORINGS
    if fewshot and example is None:
        raise UserError(f"prompt {template.name!r} has no fewshot_template: set prompt.fewshot_template or use 0 shots")
    if fewshot and "{fewshot}" not in body:
        raise UserError(f"prompt {template.name!r} has no {{fewshot}} field: add it to prompt.template or use 0 shots")

    def answer(v: Variant) -> str:
        return (
            v.option_texts[v.correct_slot] if cloze else labels_for(v.n_options, template.label_style)[v.correct_slot]
        )

    shown = example or ""  # None only without fewshot (refused above)
    examples = "".join(shown.format(**_fields(template, q, v), answer=answer(v)) for q, v in fewshot)
    return body.format(**_fields(template, question, variant), fewshot=examples)


CLOZE_SCORINGS = ("cloze", "cloze_shown")  # options scored as continuations, without or with the options listed


def lm_eval_request(prompt: str, question: Question, scoring: str) -> tuple[str, str | None]:
    r"""(prompt, continuation prefix) of a request, lm-eval's own for an lm-eval task's question under `prompt=lm_eval`
    (its questions carry `lm_eval_target_delimiter`, and with `prompt.chat` the chat template's text after the
    question, `lm_eval_postamble`); `(prompt, None)` for any other request. In a cloze mode lm-eval puts the task's
    `target_delimiter` before each choice and moves the context's trailing whitespace into the continuation
    (as its model encodes a pair): "Answer:\n" + " " + "Paris" is scored as "\n Paris" after "Answer:".

    >>> q = Question(id="q", question="Capital?", options=("Paris", "Rome"), answer=0,
    ...              metadata={"lm_eval_target_delimiter": " "})
    >>> lm_eval_request("Q: Capital?\nAnswer:", q, "cloze"), lm_eval_request("Q:\n", q, "cloze_shown")
    (('Q: Capital?\nAnswer:', ' '), ('Q:', '\n '))
    >>> lm_eval_request("Q: Capital?\nAnswer:", q, "logprob")
    ('Q: Capital?\nAnswer:', None)
    """
    delimiter = question.metadata.get("lm_eval_target_delimiter")
    if delimiter is None:
        return prompt, None
    prompt += str(question.metadata.get("lm_eval_postamble", ""))
    if scoring not in CLOZE_SCORINGS:
        return prompt, None
    context = prompt.rstrip()
    return context, prompt[len(context) :] + str(delimiter)


def relisted(listing: Mapping[str, Any], texts: Sequence[str]) -> str:
    r"""An lm-eval task's context with its listed options replaced by `texts`, in their order, under the task's own
    labels (`A, B, ...` or `1, 2, ...`, as many as there are texts) and its own way of listing them: the text
    before the first option, each line's marks around its label, what separates two options, the text after the last
    (`listing`, read from the context by src/benchmarks/lm_eval.py `option_listing`).

    >>> listing = {"head": "2+2?\n", "open": "", "close": ". ", "separator": "\n", "style": "A.", "tail": "\nAnswer:"}
    >>> relisted(listing, ["4", "3", "None of the above"])
    '2+2?\nA. 4\nB. 3\nC. None of the above\nAnswer:'
    """
    labels = labels_for(len(texts), str(listing["style"]))
    lines = (f"{listing['open']}{label}{listing['close']}{text}" for label, text in zip(labels, texts))
    return f"{listing['head']}{str(listing['separator']).join(lines)}{listing['tail']}"


@cache
def _shown_labels(n: int, style: str) -> tuple[tuple[str, ...], str, str]:
    """(labels, the {letters} field, the line of one option) of `n` options in `style`: the same for every prompt
    of that size, so made once."""
    labels = labels_for(n, style)
    _, line = LABEL_STYLES[style]
    # "ABCD" as the CoRA prompt writes letters; numbers joined with commas, so that 1..10 read as ten labels
    letters = "".join(labels) if all(label.isalpha() and len(label) == 1 for label in labels) else ", ".join(labels)
    return labels, letters, line


def _fields(template: PromptTemplate, question: Question, variant: Variant) -> dict[str, Any]:
    labels, letters, line = _shown_labels(variant.n_options, template.label_style)
    subject = (question.subject or DEFAULT_SUBJECT).replace("_", " ")
    return {
        "question": question.question,
        "choices": "\n".join(
            [line.format(label=label, text=text) for label, text in zip(labels, variant.option_texts)]
        ),
        "letters": letters,
        "subject": subject,
        "n_options": variant.n_options,
        "context": question.metadata.get("context", question.question),
        # an lm-eval task's description and solved examples as lm-eval builds them (prompt=lm_eval); else empty
        "preamble": question.metadata.get("lm_eval_preamble", ""),
    }


def _check_fields(text: str, key: str, *, allowed: frozenset[str], required: Sequence[str | tuple[str, ...]]) -> None:
    """Refuse unknown fields and missing required ones (a tuple in `required`: one of its fields is enough)."""
    try:
        names = {name for _, name, _, _ in string.Formatter().parse(text) if name is not None}
    except ValueError as err:
        raise UserError(
            f"{key} is not a valid str.format template ({err}); write literal braces as {{{{ }}}}"
        ) from None
    bad = sorted(name for name in names if name not in allowed)
    if bad:
        raise UserError(f"{key} uses unknown field {{{bad[0]}}}; the fields are {', '.join(sorted(allowed))}")
    missing = [need for need in required if not names & ({need} if isinstance(need, str) else set(need))]
    if missing:
        shown = " or ".join(f"{{{name}}}" for name in ((missing[0],) if isinstance(missing[0], str) else missing[0]))
        raise UserError(f"{key} must contain {shown}: add it to the template")
