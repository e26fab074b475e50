"""The validity contract between scoring modes and variant sets (docs/metrics.md, "Validity rules").

Each scoring mode says what the model sees; each variant set says what its metrics need. A combination whose
metrics would be constant by construction is refused before any compute, in one line naming the keys:

- `cloze` shows no options (question only, option texts scored as continuations): every order and option set
  of a question is the same prompt, so only variant sets that ask one displayed list per question are valid;
- `cloze` and `cloze_shown` rank option texts deterministically: a temperature changes nothing;
- repetitions of one prompt differ only when answers are sampled (`generate` or `logprob` at a temperature
  above 0); greedy answers are one decode copied R times, so every question would be SURE by construction;
- options that complete their context (HellaSwag endings, an lm-eval task whose context asks no question) do
  not stand alone: a set that adds "None of the above" (which completes no sentence) lets the form of an option
  give the answer away, so such sets are refused for them, under every scoring (`check_option_style`).

>>> check_validity(scoring="cloze", variants={"name": "original"}, temperature=0.0, repetitions=1)
>>> check_validity(scoring="cloze", variants={"name": "perm_cyclic"}, temperature=0.0,
...                repetitions=1)  # doctest: +NORMALIZE_WHITESPACE
Traceback (most recent call last):
...
src.common.errors.UserError: config keys scoring=cloze and variants=perm_cyclic: cloze scoring shows the model no
options, so every order or option set of a question is the same prompt and the set's consistency metrics would be
constant; use scoring=cloze_shown (option texts scored with the options listed), logprob or generate, or
variants=original
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from src.common.errors import UserError

# scoring mode -> does the prompt show the labelled options in their displayed order?
SHOWS_OPTIONS = {"generate": True, "logprob": True, "cloze_shown": True, "cloze": False}
SCORING_MODES = tuple(SHOWS_OPTIONS)
DESCRIPTIONS = {  # what the model sees and what counts as its answer (docs/validity.md; src.catalog)
    "generate": "shows the labelled options; the model writes its answer, which is parsed to a label",
    "logprob": "shows the labelled options; the most probable label token (drawn exactly at a temperature)",
    "cloze_shown": (
        "shows the labelled options in the order asked; the option whose text is most likely after 'Answer:'"
    ),
    "cloze": "shows the question only (lm-eval's acc); the option whose text is most likely as its continuation",
}
SAMPLING_MODES = ("generate", "logprob")  # modes whose answers depend on the temperature
# Variant sets that ask each question through one displayed option list (plus, for revas_multi_select, a
# select-all prompt that is always generated with the options shown): valid under every mode.
ONE_LIST_SETS = frozenset({"original", "perm_original", "revas_multi_select"})
# Variant sets that add "None of the above" as an option, so every option must read as an answer on its own.
STANDALONE_OPTION_SETS = frozenset({"cora", "cora_same_size", "revas_nota"})


def needs_shown_options(variants: Mapping[str, Any]) -> bool:
    """Whether a variant set's metrics compare orders or option sets of one question (so the model must see them).

    >>> needs_shown_options({"name": "cora"}), needs_shown_options({"name": "revas_true_false", "with_reorder": False})
    (True, False)
    """
    name = variants.get("name")
    if name in ONE_LIST_SETS:
        return False
    if name == "revas_true_false":  # the yes/no prompts show their option; the reorders need the list shown
        return bool(variants.get("with_reorder", True))
    return True


def check_shown_options(*, shows: bool, variants: Mapping[str, Any], keys: str, why: str, instead: str) -> None:
    """The rule of shown options, for a whole run (`check_validity`) and for each task of an lm-eval suite
    (src/benchmarks/lm_eval.py `check_task_shapes`): a set that compares orders or option sets of one question
    (`needs_shown_options`) needs the options shown. Where they are not (`shows` false, `why` says so), every
    variant is the same prompt: UserError naming `keys` and what to use `instead`."""
    if not shows and needs_shown_options(variants):
        raise UserError(
            f"config keys {keys}: {why}, so every order or option set of a question is the same prompt and the "
            f"set's consistency metrics would be constant; use {instead}"
        )


def check_validity(
    *, scoring: str, variants: Mapping[str, Any], temperature: float, repetitions: int, per_task: bool = False
) -> None:
    """Raise UserError when the combination cannot measure what its metrics are named for. `per_task`: an lm-eval
    task or suite under `prompt=lm_eval`, whose tasks show their options or not by their shape, checked per task
    once they load (`check_shown_options`)."""
    if scoring not in SHOWS_OPTIONS:
        raise UserError(f"config key scoring: {scoring!r} is not one of {', '.join(SCORING_MODES)}")
    name = variants.get("name")
    if not per_task:
        check_shown_options(
            shows=SHOWS_OPTIONS[scoring],
            variants=variants,
            keys=f"scoring={scoring} and variants={name}",
            why="cloze scoring shows the model no options",
            instead="scoring=cloze_shown (option texts scored with the options listed), logprob or generate, or "
            "variants=original",
        )
    if scoring not in SAMPLING_MODES and temperature > 0:
        raise UserError(
            f"config keys scoring={scoring} and temperature={temperature}: {scoring} ranks option texts without "
            f"sampling, so the temperature would change nothing; set temperature=0, or scoring=logprob or generate "
            f"to sample answers"
        )
    if repetitions > 1 and temperature <= 0:
        raise UserError(
            f"config keys repetitions={repetitions} and temperature={temperature}: greedy answers are one decode "
            f"copied to every repetition, so every question would be SURE by construction; set temperature>0 "
            f"(with scoring=generate or logprob) or repetitions=1"
        )


def check_option_style(*, variants: Mapping[str, Any], benchmark: str, continuation: bool) -> None:
    """Raise UserError when a variant set that needs options standing alone meets options that complete their
    context (`continuation`: HellaSwag, a continuation-style lm-eval task). `benchmark` names it as the keys do
    (`hellaswag`, `lm_eval benchmark.task=hellaswag`).

    >>> check_option_style(variants={"name": "perm_cyclic"}, benchmark="hellaswag", continuation=True)
    >>> check_option_style(variants={"name": "cora"}, benchmark="hellaswag",
    ...                    continuation=True)  # doctest: +NORMALIZE_WHITESPACE
    Traceback (most recent call last):
    ...
    src.common.errors.UserError: config keys benchmark=hellaswag and variants=cora: the options of hellaswag
    complete their context rather than answer a question, and cora adds "None of the above", which completes no
    sentence, so its form would give the answer away; use a set without NOTA (original, perm_*, revas_reorder,
    revas_option_count, revas_true_false, revas_multi_select)
    """
    name = variants.get("name")
    if continuation and name in STANDALONE_OPTION_SETS:
        raise UserError(
            f"config keys benchmark={benchmark} and variants={name}: the options of {benchmark} complete their context "
            f'rather than answer a question, and {name} adds "None of the above", which completes no sentence, so '
            f"its form would give the answer away; use a set without NOTA (original, perm_*, revas_reorder, "
            f"revas_option_count, revas_true_false, revas_multi_select)"
        )
