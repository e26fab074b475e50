"""Adaptive repetitions (`adaptive: true`): ask each prompt's R repetitions in rounds and stop once its
repetition-family cell (SURE/UNSURE x right/wrong) can no longer change, under either SURE rule.

The rule is `src.metrics.guessing.verdict_fixed`, with p* at the metrics' defaults (consistency 0.99, conf 0.999,
k = the prompt's options): a prompt stops when, whatever its remaining trials would answer, (a) the modal answer
has reached p* or can no longer reach it, (b) the correct answer stays among the most frequent or can no longer
tie the leader, and (c) the correctness rule's cell is the same for every final right count. The cell computed
from the trials made then equals the full run's, so SURE right / UNSURE right / UNSURE wrong / SURE wrong, RWS
and S/T are identical by construction, given that repetition k is the same sample whether or not later ones are
asked: the backend draws repetition k from its own stream seeded from (trial seed, k) (`SamplingParams.first_repetition`
tells it where a round starts), and the response cache keys each repetition by k, so adaptive and full runs share it.
Not identical: `acc_mean`/`acc_std` (left out), `n_trials`, `invalid_rate`, `accuracy` (over the trials made).

Rounds: each undecided prompt asks the fewest further trials after which it could stop
(`trials_before_stop`: 7 of R = 10 first, then one or two at a time). Only `mcq` prompts stop early (their right
trials all name one option, which the rule needs); other formats are asked all R trials in one round.
Records: the trials not asked are absent; each row carries `n_asked` (trials made of its prompt; repetitions
`n_asked`..R-1 were skipped) and `n_planned` (R), so the repetition family judges against the planned R.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict
from functools import cache
from typing import Any

from src.answering.items import Answer, Item
from src.backends.base import SamplingParams
from src.common.errors import UserError
from src.common.progress import job_progress
from src.metrics.answers import INVALID
from src.metrics.guessing import p_star, trials_before_stop, verdict_fixed

ADAPTIVE_BACKENDS = ("hf", "simulated")  # backends that draw repetition k from its own (seed, k) stream


def check_adaptive(*, adaptive: bool, repetitions: int, temperature: float, scoring: str, backend: str | None) -> None:
    """Refuse `adaptive=true` (one line) where early stopping cannot keep the full run's verdicts or saves nothing;
    the values as the config's check reads them (src/config/checks.py `check_values`)."""
    if not adaptive:
        return
    reasons = [
        (
            repetitions < 2,
            f"repetitions={repetitions}: there is nothing to stop early; give repetitions >= 2",
        ),
        (
            temperature <= 0,
            "temperature=0: one greedy answer serves every repetition; give a temperature > 0",
        ),
        (
            scoring != "generate",
            f"scoring={scoring}: only generated answers are sampled one by one (logprob draws all R answers "
            "from one pass, cloze has no samples); use scoring=generate",
        ),
        (
            backend not in ADAPTIVE_BACKENDS,
            f"model.backend={backend}: only {', '.join(ADAPTIVE_BACKENDS)} draw repetition k from its own seed, so "
            "that a later round gives the full run's samples",
        ),
    ]
    for refused, why in reasons:
        if refused:
            raise UserError(f"config key adaptive: {why} (or adaptive=false)")


@cache
def _threshold(R: int, k: int) -> int | None:
    try:
        return p_star(R=R, k=k)
    except ValueError:  # consistency out of reach at this R: the metrics refuse it too; never stop early
        return None


@cache
def _next_round(n_correct: int, n_other: int, made: int, R: int, threshold: int) -> int:
    if verdict_fixed(n_correct, n_other, made, R=R, p_star=threshold):
        return 0
    return trials_before_stop(n_correct, n_other, made, R=R, p_star=threshold)


def still_to_ask(item: Item, answers: Sequence[Answer], R: int) -> int:
    """How many more repetitions `item` asks next round: 0 once its cell is settled (`verdict_fixed`)."""
    made = len(answers)
    v = item.variant
    threshold = _threshold(R, int(v.n_options)) if v.fmt == "mcq" else None
    if made >= R or threshold is None:
        return R - made
    counts: dict[int, int] = {}
    for a in answers:  # answer identities as src/metrics/answers.py keys them: the original option, or INVALID
        key = INVALID if a.slot is None else int(v.option_order[a.slot])
        counts[key] = counts.get(key, 0) + 1
    right = int(v.option_order[v.correct_slot])
    n_correct = counts.pop(right, 0)
    return _next_round(n_correct, max(counts.values(), default=0), made, R, threshold)


def answer_adaptively(
    backend: Any,
    items: Sequence[Item],
    *,
    params: SamplingParams,
    answer_chunk: Callable[..., list[list[Answer]]],
    cache: Any,
    chunk_size: int,
    progress: bool,
) -> list[list[Answer]]:
    """Up to `params.n` answers per item, in repetition order, asked in rounds until each item's cell is settled.
    Chunk by chunk as `answer_items`, so a killed run loses at most one chunk's rounds."""
    R = params.n
    base = {k: v for k, v in asdict(params).items() if k not in ("n", "first_repetition")}
    answers: list[list[Answer]] = [[] for _ in items]
    with job_progress(len(items), "generate (adaptive)", enabled=progress) as bar:  # one bar per job
        for start in range(0, len(items), chunk_size):
            todo = list(range(start, min(start + chunk_size, len(items))))
            while todo:
                rounds: dict[tuple[int, int], list[int]] = {}  # (first repetition, count) -> items
                for i in todo:
                    more = still_to_ask(items[i], answers[i], R)
                    if more:
                        rounds.setdefault((len(answers[i]), more), []).append(i)
                for (first, more), group in sorted(rounds.items()):
                    got = answer_chunk(
                        backend,
                        [items[i].request for i in group],
                        scoring="generate",
                        params=SamplingParams(**base, n=more, first_repetition=first),
                        cloze_normalise=False,
                        cache=cache,
                    )
                    for i, new in zip(group, got):
                        answers[i].extend(new)
                todo = [i for group in rounds.values() for i in group]
                todo = [i for i in sorted(todo) if still_to_ask(items[i], answers[i], R)]
            bar.update(min(chunk_size, len(items) - start))
    return answers
