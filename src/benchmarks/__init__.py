"""Benchmark registry: config `benchmark` name -> loader of `Question`s, plus few-shot pools.

    >>> qs = load_benchmark("synthetic", path=None, data_dir="unused", seed=1, limit=3)
    >>> [q.id for q in qs]
    ['synthetic/1/0', 'synthetic/1/1', 'synthetic/1/2']

Every loader reads its files as they are (see each module's docstring for the format, ids and
subjects), checks and cleans every question (`validate.checked_question`), and reports bad input
as a one-line `UserError` naming the file, the line or record, and what to do. `load_benchmark`
logs once per load: how many texts were cleaned (info), the questions with duplicate option
texts (warning, `duplicate_options_warning`) and a fixed answer position (warning,
`position.answer_slot_warning`). `position.describe_answer_slots` is the run's slot summary.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from src.common.errors import UserError
from src.core.questions import Question, duplicate_option_groups  # re-exported (__all__)

from . import hub, hub_access
from .arc import arc_fewshot_loader, arc_loader
from .commonsense import load_commonsenseqa, load_hellaswag, load_winogrande
from .generic import load_generic
from .lm_eval import (
    check_task_shapes,
    lm_eval_chat_template,
    lm_eval_contexts,
    lm_eval_fewshot,
    load_lm_eval,
    task_tags,
)
from .medical import load_medmcqa, medqa_loader
from .mmlu import load_mmlu, load_mmlu_redux, mmlu_fewshot
from .position import answer_slot_counts, answer_slot_warning, describe_answer_slots
from .synthetic import load_synthetic, synthetic_fewshot
from .truthfulqa import truthfulqa_loader
from .validate import check_unique_ids

log = logging.getLogger(__name__)

Loader = Callable[..., list[Question]]  # (*, path, data_dir, split, seed, options) -> questions
FewshotLoader = Callable[..., list[Question]]  # (*, path, data_dir, subject) -> questions


@dataclass(frozen=True)
class Benchmark:
    """A registry entry: how to load the questions, the few-shot pool (None: the data has none)
    and the `options` keys the loader understands."""

    load: Loader
    fewshot: FewshotLoader | None = None
    options: tuple[str, ...] = ()
    fewshot_options: bool = False  # its few-shot loader needs the `options` too (which lm-eval task)
    limits_itself: bool = False  # `limit` goes to the loader (lm-eval: N documents of each task, as its --limit)


GENERIC_OPTIONS = (
    "question_column",
    "options_column",
    "option_columns",
    "answer_column",
    "id_column",
    "subject_column",
    "delimiter",
)

BENCHMARKS: dict[str, Benchmark] = {
    "synthetic": Benchmark(load_synthetic, synthetic_fewshot, ("n_questions",)),
    "mmlu": Benchmark(load_mmlu, mmlu_fewshot, ("subjects",)),
    "mmlu_redux": Benchmark(load_mmlu_redux, mmlu_fewshot, ("subjects", "only_ok")),
    "arc_challenge": Benchmark(arc_loader("arc_challenge"), arc_fewshot_loader("arc_challenge")),
    "arc_easy": Benchmark(arc_loader("arc_easy"), arc_fewshot_loader("arc_easy")),
    "truthfulqa_mc1": Benchmark(truthfulqa_loader("mc1"), None, ("version", "shuffle")),
    "truthfulqa_mc2": Benchmark(truthfulqa_loader("mc2"), None, ("version", "shuffle")),
    "medqa": Benchmark(medqa_loader("medqa")),
    "medqa_4": Benchmark(medqa_loader("medqa_4")),
    "medmcqa": Benchmark(load_medmcqa),
    "commonsenseqa": Benchmark(load_commonsenseqa),
    "hellaswag": Benchmark(load_hellaswag),
    "winogrande": Benchmark(load_winogrande),
    "generic": Benchmark(load_generic, None, GENERIC_OPTIONS),
    "lm_eval": Benchmark(
        load_lm_eval, lm_eval_fewshot, ("task", "include_path", "choices"), fewshot_options=True, limits_itself=True
    ),
}
# Benchmarks whose options complete their context rather than answer a question (the validity contract,
# src/core/validity.py); an lm-eval task's style is detected when it loads (src/benchmarks/lm_eval.py).
CONTINUATION_BENCHMARKS = frozenset({"hellaswag"})


def _benchmark(name: str) -> Benchmark:
    if name not in BENCHMARKS:
        raise UserError(f"config key benchmark: unknown benchmark {name!r}; choose one of {', '.join(BENCHMARKS)}")
    return BENCHMARKS[name]


def _checked_options(name: str, options: Mapping[str, Any] | None) -> dict[str, Any]:
    options = dict(options or {})
    known = BENCHMARKS[name].options
    for key in options:
        if key not in known:
            allowed = f"it takes {', '.join(known)}" if known else "it takes none"
            raise UserError(f"config key benchmark.{key}: {name} has no such option ({allowed}); remove it")
    return options


def load_benchmark(
    name: str,
    *,
    path: str | None,
    data_dir: str,
    split: str | None = None,
    seed: int = 0,
    limit: int | None = None,
    options: Mapping[str, Any] | None = None,
) -> list[Question]:
    """The questions of benchmark `name`, in file order; `limit` keeps the first N after filtering.

    `path=None` reads the default file under `data_dir`, or, when it is absent, the benchmark's
    Hugging Face Hub dataset (`hub_access.py`: a Hub-layout snapshot, the `datasets` cache or a download;
    offline and absent is a one-line error naming the fetch command); `split=None` the benchmark's default
    split; `seed` only matters to `synthetic` and TruthfulQA (its options are shuffled with it,
    option `shuffle`, default true).
    """
    return load_benchmark_sized(
        name, path=path, data_dir=data_dir, split=split, seed=seed, limit=limit, options=options
    )[0]


def load_benchmark_sized(
    name: str,
    *,
    path: str | None,
    data_dir: str,
    split: str | None = None,
    seed: int = 0,
    limit: int | None = None,
    options: Mapping[str, Any] | None = None,
) -> tuple[list[Question], int | None]:
    """(the questions of benchmark `name`, how many it holds): `load_benchmark`'s questions, and the benchmark's
    size before `limit` (None where the loader applies the limit itself: lm-eval tasks), which caps how many
    questions a study of it can ask (`src.metrics.paired.questions_verdict`)."""
    benchmark = _benchmark(name)
    options = _checked_options(name, options)
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise UserError(
            f"config key benchmark.limit: {limit!r} is not a positive whole number; set it to N >= 1 or null for all"
        )
    # Resolution: an explicit path, else the raw files under data_dir, else the Hub dataset (src/benchmarks/hub.py).
    if path is None and name in hub.HUB and not hub_access.raw_present(name, data_dir, split, options):
        questions = hub_access.hub_questions(name, data_dir=data_dir, split=split, seed=seed, options=options)
    else:
        own_limit = {"limit": limit} if benchmark.limits_itself else {}
        questions = benchmark.load(path=path, data_dir=data_dir, split=split, seed=seed, options=options, **own_limit)
    if not questions:
        raise UserError(
            f"benchmark {name} (path {path or data_dir}): no questions left to ask; "
            "check the file, the benchmark.* options and benchmark.split"
        )
    check_unique_ids(questions, path or f"{data_dir} ({name})")
    size = None if limit is not None and benchmark.limits_itself else len(questions)
    questions = questions[:limit] if limit is not None and not benchmark.limits_itself else questions
    _log_load_notes(name, questions)
    return questions, size


def cleaning_summary(name: str, questions: list[Question]) -> str | None:
    """`mmlu: cleaned surrounding whitespace or quote debris from 979 question texts and 152 option texts`, or None."""
    cleaned = [q.metadata.get("cleaned", ()) for q in questions]
    n_questions = sum("question" in c for c in cleaned)
    n_options = sum(sum(part.startswith("option") for part in c) for c in cleaned)
    if not n_questions and not n_options:
        return None
    return (
        f"{name}: cleaned surrounding whitespace or quote debris from {n_questions} question texts "
        f"and {n_options} option texts"
    )


def duplicate_options_warning(name: str, questions: list[Question], *, shown: int = 3) -> str | None:
    """The one-line warning naming the questions with duplicate option texts, or None.

    A question has them when `checked_question` marked it `metadata["duplicate_options"]`
    (`questions.duplicate_option_groups` found a group).

    >>> from .validate import checked_question
    >>> qs = [checked_question("x", id=f"q{i}", question="?", options=("a", "a ", "b"), answer=2) for i in range(4)]
    >>> duplicate_options_warning("mine", qs)
    'mine: 4 questions have duplicate option texts (q0, q1, q2, ...); variants that would show both copies are not made'
    """
    ids = [q.id for q in questions if q.metadata.get("duplicate_options")]
    if not ids:
        return None
    listed = ", ".join(ids[:shown]) + (", ..." if len(ids) > shown else "")
    noun = "question has" if len(ids) == 1 else "questions have"
    return (
        f"{name}: {len(ids)} {noun} duplicate option texts ({listed}); "
        "variants that would show both copies are not made"
    )


def _log_load_notes(name: str, questions: list[Question]) -> None:
    if (summary := cleaning_summary(name, questions)) is not None:
        log.info("%s", summary)
    if (warning := duplicate_options_warning(name, questions)) is not None:
        log.warning("%s", warning)
    if (warning := answer_slot_warning(questions, name)) is not None:
        log.warning("%s", warning)


def load_fewshot_pool(
    name: str,
    *,
    data_dir: str,
    path: str | None = None,
    subject: str | None = None,
    options: Mapping[str, Any] | None = None,
) -> list[Question]:
    """Questions to draw few-shot examples from (MMLU dev, ARC Train, ...), never the test questions.

    A given `path` is read with the benchmark's own format (for benchmarks whose data has no
    such split); its questions are labelled split "fewshot". `options` (the `benchmark.*` keys) reach
    the few-shot loaders that need them (`lm_eval`: which task).
    """
    benchmark = _benchmark(name)
    if benchmark.fewshot is not None and benchmark.fewshot_options:
        return benchmark.fewshot(path=path, data_dir=data_dir, subject=subject, options=_checked_options(name, options))
    if benchmark.fewshot is not None:
        return benchmark.fewshot(path=path, data_dir=data_dir, subject=subject)
    if path is None:
        raise UserError(
            f"benchmark {name} has no few-shot split in the data; give a few-shot file in "
            f"{name}'s format or use zero-shot prompts"
        )
    pool = benchmark.load(path=path, data_dir=data_dir, split=None, seed=0, options={})
    return [dataclasses.replace(q, split="fewshot") for q in pool if subject is None or q.subject == subject]


def continuation_style(name: str, questions: list[Question] | None = None) -> bool:
    """Whether benchmark `name`'s options complete their context (HellaSwag endings) rather than answer it:
    known for the built-in benchmarks, read from the loaded questions for an lm-eval task (in a suite, those of
    any of its tasks: `continuation_tasks` names them)."""
    if name in CONTINUATION_BENCHMARKS:
        return True
    return bool(continuation_tasks(questions or []))


def continuation_tasks(questions: Sequence[Question]) -> list[str]:
    """The lm-eval tasks among `questions` whose options complete their context, in order of first question."""
    continuing = (str(q.metadata.get("lm_eval_task")) for q in questions if q.metadata.get("choices") == "continuation")
    return list(dict.fromkeys(continuing))


__all__ = [
    "BENCHMARKS",
    "CONTINUATION_BENCHMARKS",
    "Benchmark",
    "answer_slot_counts",
    "continuation_style",
    "check_task_shapes",
    "continuation_tasks",
    "describe_answer_slots",
    "duplicate_option_groups",
    "task_tags",
    "lm_eval_chat_template",
    "lm_eval_contexts",
    "load_benchmark",
    "load_fewshot_pool",
]
