"""`python -m src.plan --run RUN_ID [--run RUN_ID2] --delta 0.02`: how many questions a study needs.

From a finished run (a pilot), for each headline metric: the run's number of questions n, the per-question
standard deviation sd (sqrt(n) x the metric's cluster-bootstrap standard error over the run's questions), and the
number of questions needed to detect a difference `delta` by a two-sided test at level `alpha` with probability
`power`, by the normal approximation

    n_needed = ((z_{1 - alpha/2} + z_{power}) * sd / delta)^2

(z the standard normal quantile; `src.metrics.paired.questions_needed`). With two runs (`--run` twice) sd is that
of the paired per-question difference leader − runner-up on the questions both asked (the runs must have asked the same
questions, or pass `--pair-intersection`): the figure for comparing the two models on one question set. With one
run, n_needed is what detects a shift of `delta` in that run's metric against a fixed reference; two models that
answer independently would need about twice as many. A reviewer learns before a GPU day whether the study can
answer its question: "enough" says whether the run's own n already reaches n_needed.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, cast

from src.cli import add_tracking_flags, check_power_args, entry, user_error
from src.common.errors import UserError
from src.core.metric_choices import SURE_RULES
from src.tracking import store
from src.tracking.names import DEFAULT_URI

if TYPE_CHECKING:
    import pandas as pd


def _run_info(client: store.Client, run_id: str) -> tuple[str, str]:
    """(label, SURE rule) of a run, from its tags."""
    run = client.get_run(run_id)
    tags, params = run.data.tags, run.data.params
    label = " / ".join(str(tags.get(k)) for k in ("model", "benchmark", "variants")) + f" / T={tags.get('temperature')}"
    return label, str(tags.get("sure_rule") or params.get("metrics.sure_rule") or SURE_RULES[0])


def benchmark_size(client: store.Client, run_id: str, n_asked: int) -> int | None:
    """How many questions the run's benchmark holds: the questions asked when it ran without `limit`, else counted
    from its config.yaml with the limit removed (the benchmark's data must be here); None when not known."""
    import tempfile

    from mlflow.exceptions import MlflowException
    from omegaconf import DictConfig, OmegaConf

    params = client.get_run(run_id).data.params
    if params.get("benchmark_size", "").isdigit():  # logged by the job (src/job/runner.py)
        return int(params["benchmark_size"])
    if params.get("limit") in (None, "null", "None"):
        return n_asked
    from src.config.checks import logged_spec  # local: loads hydra (slow import)
    from src.job.runner import job_questions  # local: loads hydra, the benchmarks (slow import)

    with tempfile.TemporaryDirectory() as tmp:
        try:
            cfg = cast(DictConfig, OmegaConf.load(client.download_artifacts(run_id, "config.yaml", tmp)))  # a mapping
            cfg.limit = None
            return len(job_questions(logged_spec(cfg)))
        except (MlflowException, OSError, UserError, ValueError, KeyError):
            return None


def chance_notes(client: store.Client, run_ids: list[str], labels: list[str]) -> list[str]:
    """One line per run whose headline is not above chance (`src.metrics.chance.chance_verdict`): its interval
    contains chance, or lies wholly below it (with its INVALID share where that is above INVALID_FLAG)."""
    from src.metrics.chance import AT_CHANCE, INVALID_FLAG, chance_verdict, invalid_flag  # local: slow import

    notes = []
    for run_id, label in zip(run_ids, labels):
        metrics = client.get_run(run_id).data.metrics
        verdict = chance_verdict(metrics)
        if verdict is None or verdict.at_chance is None or verdict.short() == "above chance":
            continue
        judged = (
            f"{verdict.metric} ({verdict.value:.3f} [{verdict.lo:.3f}, {verdict.hi:.3f}], chance {verdict.chance:.3f})"
        )
        if verdict.at_chance:
            notes.append(
                f"run {run_id[:8]} ({label}) is {AT_CHANCE} on {judged}: more questions measure a guesser more "
                "precisely"
            )
            continue
        invalid = (
            f", with {metrics['invalid_rate']:.2f} of its answers INVALID (above {INVALID_FLAG:.2f}, counted wrong)"
            if invalid_flag(metrics)
            else ""
        )
        notes.append(
            f"run {run_id[:8]} ({label}) is below chance on {judged}{invalid}: more questions measure a model "
            "worse than a guesser more precisely"
        )
    return notes


def lead_notes(client: store.Client, run_ids: list[str], headline: str) -> list[str]:
    """The line that says the leader's lead on `headline` comes mostly from the runner-up's unparsed answers
    (`src.metrics.chance.invalid_lead`, the report's rule), for two runs leader first; none otherwise. Runs of one
    model are named by their ids."""
    from src.metrics.chance import invalid_lead  # local: loads numpy, pandas (slow import)

    data = [client.get_run(run_id).data for run_id in run_ids]
    names = [str(d.tags.get("model")) for d in data]
    if names[0] == names[1]:
        names = [run_id[:8] for run_id in run_ids]
    cause = invalid_lead((names[0], data[0].metrics), (names[1], data[1].metrics), headline)
    return [f"on {headline}, {cause}"] if cause else []


def leader_first(client: store.Client, run_ids: list[str]) -> tuple[list[str], str | None]:
    """(the two runs, the one higher on their shared headline first, a tie by model name; the headline): the
    report's order (`src.compare.tables.common.ranked`), so that a pair reads leader − runner-up everywhere. The
    order given where the two logged no headline in common."""
    from src.metrics.chance import VERDICT_METRICS  # local: loads numpy, pandas (slow import)

    data = [client.get_run(run_id).data for run_id in run_ids]
    headline = next((m for m in VERDICT_METRICS if all(m in d.metrics for d in data)), None)
    if headline is None:
        return run_ids, None
    order = sorted(range(2), key=lambda i: (-data[i].metrics[headline], str(data[i].tags.get("model"))))
    return [run_ids[i] for i in order], headline


def _pilot(
    records: list[pd.DataFrame],
    run_ids: list[str],
    info: list[tuple[str, str]],
    *,
    intersect: bool,
    n_resamples: int,
    seed: int,
) -> tuple[int, dict[str, float], str]:
    """(questions, per-question sd by metric, what was paired) of one run, or of the paired difference of two."""
    from .metrics.intervals import decompose  # local: loads numpy, pandas (slow import)
    from .metrics.paired import paired_differences, per_question_sd, question_mismatch  # local: loads numpy

    if len(run_ids) == 1:
        decomposition = decompose(records[0], by_subjects=False, sure_rule=info[0][1])
        sds = per_question_sd(decomposition, n_resamples=n_resamples, seed=seed)
        return len(decomposition.question_ids), sds, ""
    ids = [r["question_id"].dropna().astype(str).unique() for r in records]
    mismatch = question_mismatch(*ids)
    if mismatch:
        if not intersect:
            raise UserError(
                f"--run: runs {run_ids[0]} and {run_ids[1]} asked different questions ({mismatch}); "
                "a paired comparison needs the same questions: give --pair-intersection to pair them "
                "on the shared ones"
            )
        keep = set(ids[0]) & set(ids[1])
        if not keep:
            raise UserError(f"--run: runs {run_ids[0]} and {run_ids[1]} share no question")
        records = [r[r["question_id"].astype(str).isin(keep)] for r in records]
    if info[0][1] != info[1][1]:
        raise UserError(
            f"--run: runs {run_ids[0]} and {run_ids[1]} use different SURE rules "
            f"({info[0][1]}, {info[1][1]}); compare runs under one rule"
        )
    a, b = (decompose(r, by_subjects=False, sure_rule=i[1]) for r, i in zip(records, info))
    differences = paired_differences(a, b, n_resamples=n_resamples, seed=seed)
    return len(a.question_ids), {name: d.sd for name, d in differences.items() if d.sd is not None}, "paired"


def without_one_draw(sds: Mapping[str, float]) -> tuple[dict[str, float], list[str]]:
    """(sds, notes): a repetition run's `mcqa` (one sampled draw) left out and named, as the report's tables do."""
    from src.metrics.display import MCQA_ONE_DRAW, mcqa_one_draw  # local: loads numpy, pandas (slow import)

    if "mcqa" in sds and mcqa_one_draw(sds):
        return {k: v for k, v in sds.items() if k != "mcqa"}, [f"mcqa left out: {MCQA_ONE_DRAW}"]
    return dict(sds), []


def plan_rows(
    sds: Mapping[str, float], n: int, size: int | None, *, delta: float, alpha: float, power: float
) -> list[dict[str, Any]]:
    """One row per metric (metric, n, sd, n_needed, enough, size, detectable, verdict: the rule of
    `QuestionsVerdict`, the report's too); metrics whose sd is the same on these questions are one row, named
    together."""
    from .metrics.paired import QuestionsVerdict  # local: loads numpy, pandas (slow import)

    rows: list[dict[str, Any]] = []
    for metric, sd in sds.items():  # sd 0: the metric did not vary (every question alike): no n can be estimated
        same = next((r for r in rows if abs(r["sd"] - sd) <= 1e-12), None)
        if same is not None:
            same["metric"] += f" = {metric}"
            continue
        verdict = QuestionsVerdict.of(n, sd, size, delta=delta, alpha=alpha, power=power)
        rows.append(
            {
                "metric": metric,
                "n": n,
                "sd": sd,
                "n_needed": verdict.needed,
                "enough": None if verdict.needed is None else n >= verdict.needed,
                "size": size,
                "detectable": verdict.detectable,
                "verdict": verdict.enough_cell(),
            }
        )
    return rows


def plan(
    run_ids: list[str],
    *,
    tracking_uri: str = DEFAULT_URI,
    delta: float = 0.02,
    alpha: float = 0.05,
    power: float = 0.8,
    intersect: bool = False,
    n_resamples: int = 1000,
    seed: int = 0,
) -> tuple[str, list[dict[str, Any]]]:
    """(heading, one row per metric: metric, n, sd, n_needed, enough, size, detectable) for one run or a pair of
    runs; the heading's later lines name the runs at chance."""
    from src.metrics.display import MINUS, minus  # local: loads numpy, pandas (slow import)
    from src.metrics.intervals import MIN_BOOTSTRAP_QUESTIONS  # local: loads numpy (slow import)
    from src.tracking.records import read_run_records, resolve_run_id  # local: loads pandas (slow import)

    check_power_args(delta, alpha, power)
    if not 1 <= len(run_ids) <= 2:
        raise UserError(f"--run: give one run, or two to compare (got {len(run_ids)})")
    if n_resamples < 100:
        raise UserError(f"--bootstrap: {n_resamples} must be >= 100 (resamples of the questions)")
    store.check_tracking(tracking_uri)
    db = store.sqlite_path(tracking_uri)
    if db is not None and not db.is_file():
        raise UserError(f"--tracking-uri: no MLflow database at {db}; point --tracking-uri at the run's store")
    run_ids = [resolve_run_id(run_id, tracking_uri, key="--run") for run_id in run_ids]  # short ids accepted
    client = store.client(tracking_uri)
    headline = None
    if len(run_ids) == 2:
        run_ids, headline = leader_first(client, run_ids)
    records = [read_run_records(run_id, tracking_uri, key="--run") for run_id in run_ids]
    info = [_run_info(client, run_id) for run_id in run_ids]
    n, sds, paired = _pilot(records, run_ids, info, intersect=intersect, n_resamples=n_resamples, seed=seed)
    test = f"to detect a difference of {delta:g} at alpha {alpha:g} (two-sided) with power {power:g}"
    # each run's benchmark size from its own questions (not the pair's shared ones): the cap is the benchmark's
    asked = [int(r["question_id"].dropna().astype(str).nunique()) for r in records]
    sizes = (benchmark_size(client, run_id, own) for run_id, own in zip(run_ids, asked))
    size = min((s for s in sizes if s is not None), default=None)
    of = f" of the benchmark's {size}" if size is not None and size != n else ""
    if paired:
        order = f"leader {MINUS} runner-up on {headline}" if headline else "in the order given"
        heading = (
            f"runs {minus(f'{run_ids[0]} ({info[0][0]})', f'{run_ids[1]} ({info[1][0]})')}, paired ({order}): "
            f"{n} shared questions{of}; {test}"
        )
    else:
        heading = f"run {run_ids[0]} ({info[0][0]}): {n} questions{of}; {test}"
    sds, drawn_once = without_one_draw(sds)
    rows = plan_rows(sds, n, size, delta=delta, alpha=alpha, power=power)
    if not rows:
        raise UserError(
            f"--run: no headline metric of {', '.join(run_ids)} has {MIN_BOOTSTRAP_QUESTIONS} or more questions "
            "behind it to estimate its variance from"
        )
    notes = chance_notes(client, run_ids, [i[0] for i in info])
    notes += drawn_once
    if paired and headline:
        notes += lead_notes(client, run_ids, headline)
    return "\n".join([heading, *notes]), rows


def format_rows(rows: list[dict[str, Any]]) -> list[str]:
    """The aligned lines `python -m src.plan` prints."""
    width = max(len("metric"), *(len(r["metric"]) for r in rows))
    lines = [f"{'metric':<{width}}  {'n':>6}  {'sd':>6}  {'n needed':>9}  enough"]
    for r in rows:
        needed = "–" if r["n_needed"] is None else r["n_needed"]
        lines.append(f"{r['metric']:<{width}}  {r['n']:>6}  {r['sd']:>6.3f}  {needed:>9}  {r['verdict']}")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m src.plan", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--run",
        action="append",
        required=True,
        metavar="RUN_ID",
        help="a finished run (give it twice, with another run id, for a paired comparison)",
    )
    parser.add_argument("--delta", type=float, default=0.02, help="difference to detect (default 0.02)")
    parser.add_argument("--power", type=float, default=0.8, help="probability of detecting it (default 0.8)")
    parser.add_argument("--alpha", type=float, default=0.05, help="two-sided level of the test (default 0.05)")
    add_tracking_flags(parser)
    parser.add_argument(
        "--pair-intersection",
        action="store_true",
        help="pair two runs that asked different questions on the questions they share",
    )
    parser.add_argument("--bootstrap", type=int, default=1000, help="resamples of the questions (default 1000)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the resamples (default 0)")
    args = parser.parse_args(argv)
    try:
        heading, rows = plan(
            args.run,
            tracking_uri=args.tracking_uri,
            delta=args.delta,
            alpha=args.alpha,
            power=args.power,
            intersect=args.pair_intersection,
            n_resamples=args.bootstrap,
            seed=args.seed,
        )
    except UserError as err:
        return user_error(err)
    print(heading)
    for line in format_rows(rows):
        print(line)
    return 0


if __name__ == "__main__":
    entry(main)
