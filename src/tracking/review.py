"""What a job run logs for its review in MLflow: its params, its metrics in the run page's order, the subjects
table, the questions as its dataset, the rounded tags that the experiment's review view shows as columns, that
view's saved state and its legend."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from src.tracking.names import mlflow_metric_name

if TYPE_CHECKING:
    import pandas as pd
    from mlflow.data.pandas_dataset import PandasDataset

    from src.core.questions import Question

SUBJECTS_FILE = "subjects.csv"  # the per-subject values: a row per subject, a column per metric and bound


DESCRIPTION_TAG = "mlflow.note.content"  # the run page's Description (Markdown)


# config keys whose effective value the run logs under another param, so that params never disagree: `scoring`
# (which `model.scoring` only defaults) and `n_questions` (the questions asked, after `limit`; the synthetic
# generator's pool size stays in config.yaml)
SHADOWED_PARAMS = ("model.scoring", "benchmark.n_questions")


def finite_metrics(metrics: Mapping[str, float]) -> dict[str, float]:
    """The metrics MLflow can hold, `@` spelt `_at_`: NaN (undefined, e.g. RWS with nothing SURE) and infinities
    are left out (metrics.json keeps them)."""
    return {
        mlflow_metric_name(k): float(v)
        for k, v in metrics.items()
        if isinstance(v, (int, float)) and v == v and abs(v) != float("inf")
    }


def review_view(metrics: Mapping[str, float]) -> tuple[dict[str, float], pd.DataFrame]:
    """(run metrics, subjects table): what MLflow gets of a run's metrics. Run-level metrics only; the per-subject
    values (`mcqa/<subject>`, `mcqa_lo/<subject>`, ...) go to a table, a row per subject, rather than hundreds of
    metric keys.

    The headline metrics come first, each followed by its bounds (the run page lists metrics in logged order).

    >>> logged, table = review_view({"n_trials": 8, "mcqa": 0.5, "mcqa/law": 1.0, "mcqa_lo/law": 0.2})
    >>> logged, table.to_dict("records")
    ({'mcqa': 0.5, 'n_trials': 8.0}, [{'subject': 'law', 'mcqa': 1.0, 'mcqa_lo': 0.2}])
    """
    import pandas as pd

    from src.metrics import headline_order, interval_names  # local: loads numpy, pandas (slow import)

    kept = dict(metrics)
    by_subject: dict[str, dict[str, float]] = {}
    for name, value in kept.items():
        metric, sep, subject = name.partition("/")
        if sep:
            by_subject.setdefault(subject, {})[metric] = value
    table = pd.DataFrame([{"subject": subject, **values} for subject, values in sorted(by_subject.items())])
    order = ["subject"]  # each metric followed by its bounds
    for column in table.columns:
        order += [c for c in (column, *interval_names(column)) if c in table.columns and c not in order]
    run_level = {k: v for k, v in kept.items() if "/" not in k}
    first = [
        name
        for headline in headline_order(list(run_level))
        for name in (headline, *interval_names(headline))
        if name in run_level
    ]
    ordered = {name: run_level[name] for name in [*first, *run_level]}  # the run page lists them in this order
    return finite_metrics(ordered), table[order] if len(table) else table


# The experiment's saved runs-table view that shows job runs with their headline metrics as columns: MLflow's
# "share view" state, kept as an experiment tag and opened by the link `review_link` makes (docs/mlflow_ui.md)
REVIEW_VIEW_KEY = "review"
SHARED_VIEW_TAG = "mlflow.sharedViewState."
# The view's columns after the fixed Run Name, Created and Duration: tags only. MLflow's metric columns show
# unrounded values (`0.16000000000000003`), sort `_hi` before `_lo` and are drawn before every tag column, and a
# param column before them too: in a 1,400-px window (MLflow's Assistant panel open, as on a first visit) they left
# no room for the keys that tell runs apart. So the view shows each headline as its rounded tag (`rounded_tags`)
# and the keys that vary between runs as tags; the UI draws tag columns in the order the runs logged them, and a
# job logs model and temperature first, then its condition's headline (RESULT_TAG), then the rest (`review_tags`).
# REVIEW_HEADLINES: the metrics with a rounded tag, in this order the first present (else `accuracy`) is the
# accuracy the chance tag judges.
REVIEW_HEADLINES = ("mcqa", "acc_mean", "cora", "rws", "st", "full_fr", "acc_h")
REVIEW_FALLBACK = "accuracy"  # the headline of runs that asked no original order
RUN_KEYS = ("model", "temperature", "variants")  # the keys a study varies, logged (and so drawn) first
# A 1,400-px window with the Assistant panel open shows three tag columns: model, temperature and this one, the
# condition's headline (acc_mean with repetitions, else mcqa, else accuracy) rounded with its interval, value first
# so that a 100-px column shows it (`0.215 [0.070, 0.395] acc_mean`); one column for every run, whatever its study
RESULT_TAG = "result"
# `chance`: src.metrics.chance.CHANCE_TAG (`0.226: mcqa indistinguishable from chance`); `slot_bias`: the most
# chosen answer slot against its share of right answers (src/metrics/slots.py `slot_tag`)
SLOT_TAG = "slot_bias"
REVIEW_COLUMNS = tuple(f"tags.`{key}`" for key in (*RUN_KEYS, "chance", SLOT_TAG, "benchmark", "scoring"))
# `pride_prior`: PriDe's estimated position prior (src/metrics/slots.py `prior_text`), a column after `slot_bias`
# only in an experiment where a run logged one (a cyclic set scored with label probabilities): elsewhere it would be
# a column of dashes
PRIOR_TAG = "pride_prior"
PRIOR_METRIC = "pride_prior_A"  # every prior has slot A
# A repetition run's `mcqa` is repetition 0 of the original order alone: one sampled draw, not the run's accuracy
# (acc_mean, the mean over the R draws); its tag says so after the value
ONE_DRAW = "one draw"
# The experiment's Description (the experiment page shows it above the runs table): what each column of the view
# is and what its dashes mean. Written while absent or while it is the tool's own (it starts with LEGEND_HEAD), so
# that a description someone wrote is never replaced.
LEGEND_TAG = "mlflow.note.content"
LEGEND_HEAD = "**Review view: what each column is.**"

JOB_RUNS_FILTER = "tags.kind = 'job'"  # job runs only: no sweep parents, assessments or comparisons


# by run name (model-benchmark-variants-T): sorted by anything but start time, the UI lists the job runs flat
# instead of folding them under their collapsed sweep parent
JOB_RUNS_ORDER = "tags.`mlflow.runName`"


ML_WORKFLOW = "workflowType=machine_learning"  # the UI's "Model training" side, not its GenAI overview


def review_link(experiment_id: str, base_url: str = "http://127.0.0.1:5000") -> str:
    """The address of the experiment's review view in `mlflow ui`.

    >>> review_link("3")
    'http://127.0.0.1:5000/#/experiments/3/runs?viewStateShareKey=review&workflowType=machine_learning'
    """
    return (
        f"{base_url.rstrip('/')}/#/experiments/{experiment_id}/runs?viewStateShareKey={REVIEW_VIEW_KEY}&{ML_WORKFLOW}"
    )


def review_metric_names(names: Sequence[str]) -> list[str]:
    """The metric columns of the review view among `names`: REVIEW_HEADLINES (else `accuracy`), the accuracy with
    its bounds, the others with theirs where they sort after the accuracy (see REVIEW_COLUMNS).

    >>> review_metric_names(["st", "rws", "mcqa_hi", "cora_lo", "cora", "mcqa", "mcqa_lo", "bmca_1.0", "rws_lo"])
    ['mcqa', 'mcqa_lo', 'mcqa_hi', 'cora', 'rws', 'rws_lo', 'st']
    >>> review_metric_names(["accuracy", "chance_variants", "sc_mean"])
    ['accuracy']
    """
    from src.metrics import interval_names  # local: loads numpy, pandas (slow import)

    present = set(names)
    headlines = [n for n in REVIEW_HEADLINES if n in present] or [n for n in (REVIEW_FALLBACK,) if n in present]
    chosen: list[str] = []
    for name in headlines:
        shown = [name, *interval_names(name)] if name >= headlines[0] else [name]
        chosen += [n for n in shown if n in present]
    return chosen


# Metric columns the runs table shows whole after its fixed columns in a 1,400-px window with the Assistant panel
# open (100 px each): with more than two sorting before the accuracy it leaves the window (measured with
# `python -m src.ui --screenshot`, 2026-11-26: acc_h, cora and full_fr of three studies push mcqa out).
WINDOW_COLUMNS_BEFORE_ACCURACY = 2


def _view_columns(view_state: str | None) -> list[str]:
    try:
        return list(json.loads(view_state).get("selectedColumns", [])) if view_state else []
    except (ValueError, AttributeError):
        return []


def view_metric_columns(view_state: str | None) -> list[str]:
    """The metric names among a review view state's columns (`metrics.`name``), in its order; [] without a state, for
    one that is not the UI's JSON, and for the view as jobs now write it (headlines as rounded tags only)."""
    return [c[len("metrics.`") : -1] for c in _view_columns(view_state) if c.startswith("metrics.`")]


def view_headlines(view_state: str | None) -> list[str]:
    """The headline metrics a review view state shows, as metric columns (older views) or as rounded tags."""
    tags = [c[len("tags.`") : -1] for c in _view_columns(view_state) if c.startswith("tags.`")]
    return [*view_metric_columns(view_state), *(name for name in tags if name in REVIEW_ROUNDED)]


def columns_before_accuracy(view_state: str | None) -> tuple[str | None, list[str]]:
    """(the view's accuracy column, the metric columns the UI shows left of it: it sorts them by name), from a
    review view's state that shows metric columns (written before the view showed tags only); (None, []) without
    a state or an accuracy metric column.

    >>> older = ["metrics.`full_fr`", "metrics.`acc_h`", "metrics.`cora`", "metrics.`mcqa`", "metrics.`rws`"]
    >>> columns_before_accuracy(json.dumps({"selectedColumns": older}))
    ('mcqa', ['acc_h', 'cora', 'full_fr'])
    >>> columns_before_accuracy(review_view_state(["full_fr", "acc_h", "cora", "mcqa"]))  # tags: drawn as logged
    (None, [])
    >>> columns_before_accuracy(None)
    (None, [])
    """
    metrics = sorted(view_metric_columns(view_state))
    accuracy = next((name for name in (REVIEW_HEADLINES[0], REVIEW_FALLBACK) if name in metrics), None)
    return accuracy, [name for name in metrics if accuracy is not None and name < accuracy]


def rounded_tags(metrics: Mapping[str, float]) -> dict[str, str]:
    """A tag per review headline (REVIEW_HEADLINES, else `accuracy`) the run has: its value and interval at three
    decimals, bounds in the order lo, hi (`mcqa`: `0.230 [0.158, 0.322]`). The metric columns show MLflow's
    unrounded values, with `_hi` sorted before `_lo`; these tags are the view's readable form of each headline (the
    logged metrics stay as computed).

    >>> rounded_tags({"mcqa": 0.23, "mcqa_lo": 0.15812, "mcqa_hi": 0.3217, "n_trials": 8})
    {'mcqa': '0.230 [0.158, 0.322]'}
    >>> rounded_tags({"mcqa": 0.05, "acc_mean": 0.15})
    {'mcqa': '0.050 one draw', 'acc_mean': '0.150'}
    >>> rounded_tags({"accuracy": 0.5, "rws": float("nan")})
    {'accuracy': '0.500'}

    A repetition run (it has `acc_mean`) names its `mcqa` as the one sampled draw it is (ONE_DRAW).
    """
    from src.metrics.display import cell  # local: loads numpy, pandas (slow import)

    finite = finite_metrics(metrics)
    out = {name: cell(finite, name) for name in review_metric_names(list(finite)) if name in REVIEW_ROUNDED}
    if "mcqa" in out and "acc_mean" in finite:  # a repetition run: mcqa is repetition 0's sampled answers
        out["mcqa"] = f"{out['mcqa']} {ONE_DRAW}"
    return out


REVIEW_ROUNDED = (*REVIEW_HEADLINES, REVIEW_FALLBACK)  # the metrics `rounded_tags` gives a tag


def review_view_state(metric_names: Sequence[str], earlier: str | None = None) -> str:
    """The review view's state (JSON, as the UI's *Share* button saves it): job runs by name, RESULT_TAG, the rounded
    tag (`rounded_tags`) of every headline (`review_metric_names` without bounds) of every study logged so far
    (`earlier` state's kept), then the keys that tell runs apart (REVIEW_COLUMNS); no metric or param column (see
    REVIEW_HEADLINES).

    >>> state = json.loads(review_view_state(["rws", "st"], review_view_state(["mcqa", "chance"])))
    >>> state["searchFilter"], state["selectedColumns"][:4]
    ("tags.kind = 'job'", ['tags.`result`', 'tags.`mcqa`', 'tags.`rws`', 'tags.`st`'])
    >>> [c for c in state["selectedColumns"] if not c.startswith("tags.")]
    []
    """
    from src.metrics import is_interval_name  # local: loads numpy, pandas (slow import)

    names = [*metric_names, *view_headlines(earlier)]
    shown = [name for name in review_metric_names(names) if not is_interval_name(name)]  # bounds: in the tags
    rounded = [f"tags.`{name}`" for name in shown if name in REVIEW_ROUNDED]
    keys = list(REVIEW_COLUMNS)
    if PRIOR_METRIC in metric_names or f"tags.`{PRIOR_TAG}`" in _view_columns(earlier):
        keys.insert(keys.index(f"tags.`{SLOT_TAG}`") + 1, f"tags.`{PRIOR_TAG}`")
    return json.dumps(
        {
            "searchFilter": JOB_RUNS_FILTER,
            "orderByKey": JOB_RUNS_ORDER,
            "orderByAsc": True,
            "selectedColumns": [f"tags.`{RESULT_TAG}`", *rounded, *keys],
            "runsExpanded": {},
            "groupBy": None,
        }
    )


# What each column of the review view is (`review_legend`), in the view's order; a headline's line is written only
# where a run of the experiment logged it
COLUMN_MEANINGS = {
    RESULT_TAG: "the run's headline, rounded with its interval: acc_mean for a run with repetitions (the mean over "
    "them), else mcqa, else accuracy",
    "mcqa": "accuracy on the original order; in a run with repetitions it reads `... one draw`: repetition 0 alone, "
    "one sampled answer per question (acc_mean is that run's accuracy)",
    "acc_mean": "the mean over the repetitions of each repetition's accuracy (runs with repetitions)",
    "cora": "consistency-rebalanced accuracy (the cora sets)",
    "rws": "right when sure: the share right among the SURE questions (runs with repetitions)",
    "st": "the share of questions SURE (runs with repetitions)",
    "full_fr": "the fluctuation rate over all orders (perm_full, perm_all)",
    "acc_h": "the share of questions right in every order (revas sets)",
    "accuracy": "the share of all trials answered right (a run without the original order)",
    "model": "the model",
    "temperature": "the sampling temperature",
    "variants": "the variant set asked",
    "chance": "a uniform guesser's accuracy on the same questions, and whether the headline's interval contains it",
    SLOT_TAG: "the most chosen answer slot's share of the valid answers against the share of right answers in that "
    "slot; `far above` where the lower bound of its 95% interval exceeds that share by more than {margin} "
    "(a letter habit: its accuracy and agreement describe the habit)",
    PRIOR_TAG: "PriDe's estimate of the same habit: the prior over answer slots it removes, from the cyclic orders "
    "of a seeded 5% of the questions (runs with a cyclic set scored with label probabilities)",
    "benchmark": "the benchmark",
    "scoring": "how answers were read (generate, logprob, cloze, cloze_shown)",
}
LEGEND_DASH = (
    "**-** in a cell: the run has no such value. Its variant set does not measure that metric (cora needs a cora "
    "set, rws, st and acc_mean repetitions, full_fr a perm_full or perm_all set, acc_h a revas set; "
    "docs/validity.md, 'What each variant set measures'), or it asked no multiple-choice question (slot_bias), or "
    "it has no cyclic set scored with label probabilities (pride_prior: perm_cyclic or perm_all with "
    "scoring=logprob)."
)


def review_legend(state: str) -> str:
    """The experiment's Description for a review view `state` (`review_view_state`): one line per column it shows
    (COLUMN_MEANINGS), then what a dash means (LEGEND_DASH).

    >>> print(review_legend(review_view_state(["mcqa"])))  # doctest: +ELLIPSIS
    **Review view: what each column is.**
    <BLANKLINE>
    - `result`: the run's headline, rounded with its interval: ...
    - `mcqa`: accuracy on the original order; in a run with repetitions it reads `... one draw`: ...
    ...
    **-** in a cell: the run has no such value. ...
    """
    from src.metrics.slots import FAR_MARGIN  # local: loads numpy, pandas (slow import)

    columns = [c[len("tags.`") : -1] for c in _view_columns(state) if c.startswith("tags.`")]
    lines = [
        f"- `{name}`: {COLUMN_MEANINGS[name].format(margin=f'{FAR_MARGIN:g}')}"
        for name in columns
        if name in COLUMN_MEANINGS
    ]
    return "\n\n".join([LEGEND_HEAD, "\n".join(lines), LEGEND_DASH])


def review_tags(tags: Mapping[str, str], metrics: Mapping[str, float]) -> dict[str, str]:
    """A run's tags in the order the review view draws them (the UI draws tag columns in logged order): model and
    temperature, RESULT_TAG, the other RUN_KEYS, the rounded headlines (`rounded_tags`), then the rest.

    >>> tags = review_tags({"scoring": "x", "temperature": "0.7", "model": "m"}, {"mcqa": 0.5, "acc_mean": 0.4})
    >>> list(tags), tags["result"]
    (['model', 'temperature', 'result', 'mcqa', 'acc_mean', 'scoring'], '0.400 acc_mean')
    """
    from src.metrics.chance import VERDICT_METRICS  # local: loads numpy, pandas (slow import)
    from src.metrics.display import cell  # local: loads numpy, pandas (slow import)

    finite = finite_metrics(metrics)
    headline = next((name for name in VERDICT_METRICS if name in finite), None)
    result = {RESULT_TAG: f"{cell(finite, headline)} {headline}"} if headline is not None else {}
    first = {k: tags[k] for k in RUN_KEYS[:2] if k in tags}
    return {**first, **result, **{k: tags[k] for k in RUN_KEYS if k in tags}, **rounded_tags(metrics), **tags}


def write_subjects(table: pd.DataFrame, artifacts_dir: Path) -> None:
    """`subjects.csv` beside the records when the run has subjects."""
    if len(table):
        table.to_csv(Path(artifacts_dir) / SUBJECTS_FILE, index=False)


def flatten(node: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """{'model': {'name': 'x'}} -> {'model.name': 'x'}; lists become JSON strings."""
    out: dict[str, Any] = {}
    for key, value in node.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(flatten(value, name + "."))
        else:
            out[name] = json.dumps(value) if isinstance(value, (list, tuple)) else value
    return out


def review_params(params: Mapping[str, Any], **effective: Any) -> dict[str, Any]:
    """The flattened config without SHADOWED_PARAMS, plus the `effective` values (`n_questions=20`)."""
    return {**{k: v for k, v in params.items() if k not in SHADOWED_PARAMS}, **effective}


def questions_dataset(questions: Iterable[Question], *, name: str) -> PandasDataset:
    """The questions a run asked as an MLflow dataset (the runs table's Dataset column): one row per question (the
    options as JSON, the right option's text as target), named after the benchmark; its digest changes with the
    questions."""
    import pandas as pd
    from mlflow.data.pandas_dataset import from_pandas  # = mlflow.data.from_pandas, set at run time

    frame = pd.DataFrame(
        [
            {
                "id": q.id,
                "subject": q.subject or "",
                "question": q.question,
                "options": json.dumps(list(q.options)),
                "answer": q.options[q.answer],
            }
            for q in questions
        ]
    )
    return from_pandas(frame, name=name, targets="answer")  # source: MLflow's own (the code that ran, its tags)
