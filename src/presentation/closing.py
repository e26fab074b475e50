"""What a finished job tells the person who started it, after its JSON line: the study's headline metrics with
their intervals and the chance level they are judged against (`src.metrics.chance.chance_verdict`), the run id,
and the two commands that look at it (`python -m src.ui`, `python -m src.compare`).

`python -m src.run` prints `job_block` to stderr at the end of a job (stdout keeps the one JSON summary line
that scripts read); the jobs of a sweep print theirs without the commands, and the sweep's summary
(src/sweep/callback.py) prints the commands once, for the whole sweep.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from src.tracking.names import DEFAULT_URI


def headline_metrics(metrics: Mapping[str, float]) -> tuple[str, ...]:
    """The names of the study's headline metrics among `metrics`, in the order `src.metrics.headline_order` gives
    (a CoRA study: mcqa, mcqa_plus, bmca_1.0, cora; a repetition study: mcqa, rws, st, acc_mean; ...); a run
    logs only the families its variant set measures (`src.metrics.applicable_families`). `accuracy` when no
    headline metric is there.

    >>> headline_metrics({"mcqa": 0.4, "mcqa_lo": 0.3, "rws": 0.8, "st": 0.5, "n_trials": 10, "accuracy": 0.4})
    ('mcqa', 'rws', 'st')
    >>> headline_metrics({"accuracy": 0.5, "invalid_rate": 0.0})
    ('accuracy',)
    """
    from src.metrics import headline_order  # local: loads numpy, pandas (slow import)

    names = headline_order(list(metrics))
    return tuple(names) or (("accuracy",) if "accuracy" in metrics else ())


def _number(value: float) -> str:
    return f"{value:.4g}"


def metric_lines(metrics: Mapping[str, float], names: Sequence[str]) -> list[str]:
    """One line per metric: its value and, when logged, its interval (`<name>_lo`, `<name>_hi`).

    >>> metric_lines({"mcqa": 0.23, "mcqa_lo": 0.151, "mcqa_hi": 0.32, "cora": 0.18}, ["mcqa", "cora"])
    ['  mcqa  0.23    [0.151, 0.32]', '  cora  0.18']
    >>> metric_lines({"rws": float("nan")}, ["rws"])
    ['  rws  undefined: no question was SURE (RWS is the share right among the SURE questions)']
    """
    from src.metrics.display import undefined_reason  # local: loads numpy, pandas (slow import)

    width = max((len(n) for n in names), default=0)
    lines = []
    for name in names:
        if name not in metrics:
            continue
        if metrics[name] != metrics[name]:  # NaN: say why instead of printing nan
            lines.append(f"  {name:<{width}}  {undefined_reason(name)}")
            continue
        line = f"  {name:<{width}}  {_number(metrics[name])}"
        lo, hi = metrics.get(f"{name}_lo"), metrics.get(f"{name}_hi")
        if lo is not None and hi is not None:
            line = f"{line:<{width + 11}} [{_number(lo)}, {_number(hi)}]"
        lines.append(line)
    return lines


def look_commands(uri: str, experiment: str, *, sweep_id: str | None = None) -> list[str]:
    """The commands that show the runs of `experiment` in the store at `uri` (its password masked).

    >>> look_commands("sqlite:///mlruns/mlflow.db", "smoke", sweep_id="ab12")  # doctest: +NORMALIZE_WHITESPACE
    ['see the runs:      python -m src.ui --experiment smoke',
     'compare the runs:  python -m src.compare --experiment smoke --sweep-id ab12']
    >>> look_commands("sqlite:////tmp/s/mlflow.db", "x")[0]
    'see the runs:      python -m src.ui --experiment x --tracking-uri sqlite:////tmp/s/mlflow.db'
    >>> look_commands("http://u:pw@host:5000", "x")[0]
    'see the runs:      open http://***@host:5000 (the MLflow server serves its UI)'
    """
    from src.common.redact import redact_text  # local: loads hydra (slow import)

    shown = redact_text(uri)
    store = "" if uri == DEFAULT_URI else f" --tracking-uri {shown}"
    if uri.startswith(("http://", "https://")):
        ui = f"open {shown} (the MLflow server serves its UI)"
    else:  # src/ui.py: mlflow ui on 127.0.0.1, opened on the experiment's review view
        ui = f"python -m src.ui --experiment {experiment}{store}"
    compare = f"python -m src.compare --experiment {experiment}{store}"
    if sweep_id:
        compare += f" --sweep-id {sweep_id}"
    return [f"see the runs:      {ui}", f"compare the runs:  {compare}"]


_EXPLAINED: list[bool] = []  # the meaning of "indistinguishable from chance" said once in this process


def judged_lines(metrics: Mapping[str, float], names: Sequence[str], *, once: bool = False) -> list[str]:
    """`metric_lines` of `names`, then the chance level the run's accuracy is judged against
    (`src.metrics.chance.chance_verdict`) aligned with them, and, for a run at chance, the one sentence on what that
    means (with `once`, the jobs of a sweep: its meaning in full the first time in this process only).

    >>> for line in judged_lines({"mcqa": 0.23, "mcqa_lo": 0.158, "mcqa_hi": 0.322, "chance": 0.2262}, ["mcqa"]):
    ...     print(line)  # doctest: +NORMALIZE_WHITESPACE
      mcqa    0.23    [0.158, 0.322]
      chance  0.2262  (mcqa: indistinguishable from chance)
    mcqa's interval [0.158, 0.322] contains chance (0.226): this run is indistinguishable from chance; its accuracy
    cannot be told from guessing, so its consistency metrics (CoRA, RWS and S/T, answer fluctuation) describe how a
    guesser's answers agree, not what the model knows.
    >>> judged_lines({"mcqa": 0.8, "mcqa_lo": 0.7, "mcqa_hi": 0.88, "chance": 0.25}, ["mcqa"])[-1]
    '  chance  0.25  (mcqa: above chance)'
    >>> judged_lines({"mcqa": 0.4, "chance": 0.25, "invalid_rate": 0.33}, ["mcqa"])[-1]  # doctest: +ELLIPSIS
    '  INVALID 0.330 of trials (above 0.10): its accuracies count them wrong, ...'
    """
    from src.metrics.chance import chance_verdict, invalid_flag  # local: loads numpy, pandas (slow import)

    verdict = chance_verdict(metrics)
    flag = [f"  {invalid_flag(metrics)}"] if invalid_flag(metrics) else []  # src/metrics/chance.py INVALID_FLAG
    if verdict is None:
        return metric_lines(metrics, names) + flag
    lines = metric_lines({**metrics, "chance": verdict.chance}, [*names, "chance"])
    if verdict.short():
        lines[-1] += f"  ({verdict.metric}: {verdict.short()})"
    explain = not (once and _EXPLAINED)
    if verdict.at_chance:
        _EXPLAINED.append(True)
    return [*lines, *flag, *filter(None, [verdict.sentence(explain=explain)])]


def near_tie_line(near: int, ranked: int) -> str:
    """How many of a run's ranked decisions were near-ties (src/core/records.py NEAR_TIE_MARGIN).

    >>> near_tie_line(2, 46)
    '  near-ties: 2 of 46 decisions within 0.001 of the next option (another CPU, dtype or batch size may flip them)'
    """
    from src.core.records import NEAR_TIE_MARGIN  # local: loads pandas (slow import)

    return (
        f"  near-ties: {near} of {ranked} decisions within {NEAR_TIE_MARGIN:g} of the next option (another CPU, "
        f"dtype or batch size may flip them)"
    )


def slot_lines(metrics: Mapping[str, float]) -> list[str]:
    """The position-bias line of a run whose most chosen slot is far above its share of right answers
    (`src.metrics.slots`, docs/metrics.md "Position bias"); none otherwise.

    >>> slot_lines({"slot_share_A": 0.8, "slot_share_A_lo": 0.73, "slot_share_A_hi": 0.86, "slot_correct_A": 0.2,
    ...             "slot_bias_flag": 1.0, "n_slot_choices": 158})  # doctest: +NORMALIZE_WHITESPACE
    ['  position bias: A chosen 0.800 [0.730, 0.860] of 158 valid answers, right answer in A 0.200: far above (a
    letter habit); its accuracy and agreement describe the habit as much as the model']
    >>> slot_lines({"slot_share_A": 0.3, "slot_correct_A": 0.25, "slot_bias_flag": 0.0})
    []
    """
    from src.metrics.slots import slot_flagged, slot_summary  # local: loads numpy, pandas (slow import)

    if not slot_flagged(dict(metrics)):
        return []
    return [
        f"  position bias: {slot_summary(dict(metrics))}; its accuracy and agreement describe the habit as much as "
        "the model"
    ]


ONE_DRAW_NOTE = "repetition 0 alone: one sampled draw; acc_mean is the mean over the draws"


class FinishedJob(Protocol):
    """What the closing block reads of a job (`src.job.runner.JobResult`, a layer above: named by its fields)."""

    @property
    def run_id(self) -> str: ...
    @property
    def metrics(self) -> Mapping[str, float]: ...
    @property
    def skipped(self) -> bool: ...
    @property
    def headline(self) -> tuple[str, ...]: ...
    @property
    def tracking_uri(self) -> str: ...
    @property
    def experiment(self) -> str: ...
    @property
    def near_ties(self) -> tuple[int, int] | None: ...


def job_block(result: FinishedJob, *, level: float | None = None, commands: bool = True) -> str:
    """The closing block of one job: what it measured, its run, where to look."""
    if result.skipped:
        head = f"run {result.run_id} had already finished (resume=true; resume=false runs the job again)"
    else:
        head = f"run {result.run_id} finished"
    has_interval = any(f"{name}_lo" in result.metrics for name in result.headline)
    lines = [
        head + (f", {level:.0%} intervals in brackets:" if level and has_interval else ":"),
        *judged_lines(result.metrics, result.headline, once=not commands),  # a sweep's job: said once
    ]
    if "acc_mean" in result.metrics:  # a repetition run: its mcqa is repetition 0's sampled answers, one draw
        lines = [f"{line}  ({ONE_DRAW_NOTE})" if line.startswith("  mcqa ") else line for line in lines]
    if result.near_ties:
        lines.append(near_tie_line(*result.near_ties))
    lines += slot_lines(result.metrics)
    if commands and result.tracking_uri:
        lines += look_commands(result.tracking_uri, result.experiment)
    return "\n".join(lines)
