"""A job run's description in words, MLflow's Description box of the run page (Markdown): what was asked of which
model, the headline metrics with their intervals and the chance level they are judged against."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from src.tracking.review import ONE_DRAW, SUBJECTS_FILE

DESCRIBED_HEADLINES = 6  # headline metrics named in a run's description


def headline_text(metrics: Mapping[str, float], *, limit: int = DESCRIBED_HEADLINES) -> str:
    """`mcqa 0.750 [0.531, 0.888], rws 1.000 [0.646, 1.000]`: the run's headline metrics with their intervals; in a
    run with repetitions `mcqa ... one draw` (ONE_DRAW: repetition 0 alone, as its tag says; acc_mean is its
    accuracy).

    >>> headline_text({"mcqa": 0.05, "acc_mean": 0.1})
    'mcqa 0.050 one draw, acc_mean 0.100'
    """
    from src.metrics import headline_order  # local: loads numpy, pandas (slow import)
    from src.metrics.display import cell  # local: loads numpy, pandas (slow import)

    names = [n for n in headline_order(list(metrics)) if metrics[n] == metrics[n]][:limit]
    drawn = "acc_mean" in metrics  # a repetition run: its mcqa is one sampled draw
    return ", ".join(
        f"{name} {cell(metrics, name)}" + (f" {ONE_DRAW}" if drawn and name == "mcqa" else "") for name in names
    )


def run_description(
    *,
    model: str,
    benchmark: str,
    variants: str,
    scoring: str,
    temperature: float,
    repetitions: int,
    n_questions: int,
    limit: Any,
    metrics: Mapping[str, float],
    level: float,
    rws_st: str | None = None,
) -> str:
    """The run's description in words (MLflow's Description box, Markdown): what was asked of which model, the
    headline metrics with their intervals and the chance level (with the sentence `chance_verdict` gives a run at
    chance, in bold).

    >>> print(run_description(model="m", benchmark="b", variants="original", scoring="generate", temperature=0.7,
    ...     repetitions=5, n_questions=20, limit=20, level=0.95, rws_st="1.00 | 35%",
    ...     metrics={"n_trials": 100, "mcqa": 0.75, "mcqa_lo": 0.53, "mcqa_hi": 0.89, "st": 0.35, "chance": 0.25,
    ...              "rws": float("nan")}))  # doctest: +NORMALIZE_WHITESPACE
    **m** on **b**: 20 questions (`limit=20`), variant set `original`, scoring `generate`, temperature 0.7,
    5 repetitions; 100 trials.
    <BLANKLINE>
    Headline: mcqa 0.750 [0.530, 0.890], st 0.350 (intervals at 95%); chance 0.250, mcqa: above chance.
    <BLANKLINE>
    rws undefined: no question was SURE (RWS is the share right among the SURE questions).
    <BLANKLINE>
    RWS | S/T: 1.00 | 35%.
    <BLANKLINE>
    Per-subject values: `subjects.csv`; every metric: `metrics.json`; every trial: `records.parquet`.
    """
    from src.metrics import headline_order, is_interval_name  # local: loads numpy, pandas (slow import)
    from src.metrics.chance import chance_verdict, invalid_flag  # local: loads numpy, pandas (slow import)
    from src.metrics.display import undefined_reason  # local: loads numpy, pandas (slow import)

    limit_text = f" (`limit={limit}`)" if limit not in (None, "null") else ""
    lines = [
        f"**{model}** on **{benchmark}**: {n_questions} questions{limit_text}, variant set `{variants}`, "
        f"scoring `{scoring}`, temperature {float(temperature):g}"
        + (f", {int(repetitions)} repetitions" if int(repetitions) > 1 else "")
        + f"; {int(metrics.get('n_trials', 0))} trials."
    ]
    headline = headline_text(metrics)
    verdict = chance_verdict(metrics)
    if headline:
        bounded = any(is_interval_name(name) for name in metrics)
        said = f", {verdict.metric}: {verdict.short()}" if verdict and verdict.short() else ""
        lines.append(
            f"Headline: {headline}"
            + (f" (intervals at {level:.0%})" if bounded else "")
            + (f"; chance {verdict.chance:.3f}{said}." if verdict else ".")
        )
    if verdict and verdict.sentence():
        lines.append(f"**{verdict.sentence()}**")
    if invalid_flag(metrics):  # src/metrics/chance.py INVALID_FLAG: beside the verdict it weakens
        lines.append(f"**{invalid_flag(metrics)}.**")
    undefined = [n for n in headline_order(list(metrics)) if metrics[n] != metrics[n]]
    lines += [f"{name} {undefined_reason(name)}." for name in undefined]  # NaN: not logged to MLflow
    if rws_st:
        lines.append(f"RWS | S/T: {rws_st}.")
    lines.append(
        f"Per-subject values: `{SUBJECTS_FILE}`; every metric: `metrics.json`; every trial: `records.parquet`."
    )
    return "\n\n".join(lines)
