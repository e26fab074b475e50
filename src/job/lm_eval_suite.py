"""lm-eval's own numbers of a `prompt=lm_eval` run on an lm-eval task or suite: each task's `acc` and `acc_norm`
as its `process_results` computes them from the run's log-likelihoods, and each group's by lm-eval's own
aggregation (`src/benchmarks/lm_eval.py` `suite_scores`). Logged as `lm_eval_acc`, `lm_eval_acc_norm` (the task or
group the run names) and `lm_eval_acc/<task or group>` (a row each of the subjects table; with a list of tasks,
`benchmark.task=[a,b]`, every named task and group is such a row, as `simple_evaluate(tasks=[a, b])` reports them)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from src.benchmarks.lm_eval import suite_scores, task_spec
from src.config.spec import JobSpec
from src.core.prompts import CLOZE_SCORINGS

CLOZE = CLOZE_SCORINGS  # the scorings whose requests are lm-eval's loglikelihood requests


def document_scores(loglik: Sequence[float], scored: Sequence[str], gold: int) -> dict[str, float]:
    """lm-eval's `acc` and `acc_norm` of one document: the option of the highest log-likelihood, and of the highest
    log-likelihood per character of the scored text (the label where the task scores labels), the first on a tie.

    >>> document_scores([-3.0, -4.0], ["ab", "abcd"], gold=1)
    {'acc': 0.0, 'acc_norm': 1.0}

    An option with nothing scored is never the per-character choice:

    >>> document_scores([-1.0, -5.0], ["", "a"], gold=1)
    {'acc': 0.0, 'acc_norm': 1.0}
    """
    per_char = [ll / len(text) if text else -math.inf for ll, text in zip(loglik, scored)]
    return {
        "acc": float(max(range(len(loglik)), key=list(loglik).__getitem__) == gold),
        "acc_norm": float(max(range(len(per_char)), key=per_char.__getitem__) == gold),
    }


def lm_eval_suite_metrics(spec: JobSpec, items: Sequence[Any], records: Any) -> dict[str, float]:
    """The run's lm-eval numbers (module docstring), from each question's first answer in its original order; {}
    unless the run asks lm-eval's own requests (benchmark=lm_eval, prompt=lm_eval, a cloze scoring)."""
    if not spec.lm_evals_own or spec.scoring not in CLOZE:
        return {}
    scored = {
        (it.question.id, it.variant.variant_id): (str(it.question.metadata["lm_eval_task"]), it.request.options)
        for it in items
    }
    per_task: dict[str, dict[str, float]] = {}
    seen: set[str] = set()
    for row in records.itertuples():
        in_order = list(row.option_order) == list(range(int(row.n_options)))
        if row.fmt != "mcq" or int(row.repetition) != 0 or not in_order or row.question_id in seen:
            continue
        seen.add(row.question_id)
        task, texts = scored[(row.question_id, row.variant_id)]
        totals = per_task.setdefault(task, {"acc": 0.0, "acc_norm": 0.0, "n": 0.0})
        for metric, value in document_scores(row.option_loglik, texts, int(row.correct_option)).items():
            totals[metric] += value
        totals["n"] += 1
    if not per_task:
        return {}
    means = {task: {**{m: t[m] / t["n"] for m in ("acc", "acc_norm")}, "n": t["n"]} for task, t in per_task.items()}
    name = task_spec(spec.benchmark.get("task"))  # a list of tasks names no one of them: each its own row
    scores = suite_scores(name, spec.benchmark.get("include_path"), means)
    return {
        (f"lm_eval_{metric}" if task == name else f"lm_eval_{metric}/{task}"): float(value)
        for task, values in scores.items()
        for metric, value in values.items()
    }
