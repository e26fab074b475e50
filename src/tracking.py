"""MLflow: one run per job, with the flattened config, metrics, tags and the records as artifacts.

Kept apart from the pipeline so metrics and records never import mlflow.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import math
import os
import re
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

from . import gc_tuning
from .errors import UserError

log = logging.getLogger(__name__)

# Environment for an `mlflow server` or `mlflow ui` this project starts: without it MLflow also starts its GenAI job
# runner (a dozen huey worker processes, each importing MLflow), which this tool never uses; the server then
# answers in ~10 s instead of ~20 s on 2 cores (README "The MLflow UI").
SERVER_ENV = {"MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}

# MLflow metric names allow only [/\w.\- :]; METRICS.md's per-set names use '@' (wacc@cyclic).
MLFLOW_AT = "_at_"


def mlflow_metric_name(name: str) -> str:
    """`wacc@cyclic` -> `wacc_at_cyclic`; other names unchanged."""
    return name.replace("@", MLFLOW_AT)


# ---------------------------------------------------------------- what a run shows in the MLflow UI (docs/mlflow_ui.md)

SUBJECTS_FILE = "subjects.csv"  # the per-subject values: a row per subject, a column per metric and bound
DESCRIPTION_TAG = "mlflow.note.content"  # the run page's Description (Markdown)
# config keys whose effective value the run logs under another param, so that params never disagree: `scoring`
# (which `model.scoring` only defaults) and `n_questions` (the questions asked, after `limit`; the synthetic
# generator's pool size stays in config.yaml)
SHADOWED_PARAMS = ("model.scoring", "benchmark.n_questions")
DESCRIBED_HEADLINES = 6  # headline metrics named in a run's description


def finite_metrics(metrics: Mapping[str, float]) -> dict[str, float]:
    """The metrics MLflow can hold, `@` spelt `_at_`: NaN (undefined, e.g. RWS with nothing SURE) and infinities
    are left out (metrics.json keeps them)."""
    return {mlflow_metric_name(k): float(v) for k, v in metrics.items()
            if isinstance(v, (int, float)) and v == v and abs(v) != float("inf")}


def review_view(metrics: Mapping[str, float], *, constant: Sequence[str] = ()):
    """(run metrics, subjects table): what MLflow gets of a run's metrics. Run-level metrics only, without the
    `constant` ones (`src.metrics.constant_by_construction`); the per-subject values (`mcqa/<subject>`,
    `mcqa_lo/<subject>`, ...) go to a table, a row per subject, rather than hundreds of metric keys.

    The headline metrics come first, each followed by its bounds (the run page lists metrics in logged order).

    >>> logged, table = review_view({"n_trials": 8, "mcqa": 0.5, "mcqa/law": 1.0, "mcqa_lo/law": 0.2, "ci": 1.0},
    ...                             constant=["ci"])
    >>> logged, table.to_dict("records")
    ({'mcqa': 0.5, 'n_trials': 8.0}, [{'subject': 'law', 'mcqa': 1.0, 'mcqa_lo': 0.2}])
    """
    import pandas as pd

    from .metrics import headline_order, interval_names

    dropped = set(constant)
    kept = {k: v for k, v in metrics.items() if k not in dropped}
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
    first = [name for headline in headline_order(list(run_level))
             for name in (headline, *interval_names(headline)) if name in run_level]
    ordered = {name: run_level[name] for name in [*first, *run_level]}  # the run page lists them in this order
    return finite_metrics(ordered), table[order] if len(table) else table


# The experiment's saved runs-table view that shows job runs with their headline metrics as columns: MLflow's
# "share view" state, kept as an experiment tag and opened by the link `review_link` makes (docs/mlflow_ui.md)
REVIEW_VIEW_KEY = "review"
SHARED_VIEW_TAG = "mlflow.sharedViewState."
# The view's columns after the fixed Run Name, Created and Duration. The UI sorts the metric columns by name, so
# what sorts before the accuracy (`cora`, its bounds, `chance`) pushes it right: in a 1,400-px window (MLflow's
# Assistant panel open, as on a first visit) three metric columns fit. So the accuracy keeps its bounds and a
# consistency headline that sorts before it shows its value only (its bounds are on the run page); the chance
# level is the `chance` tag, which says whether the accuracy's interval contains it; the Dataset column (300 px)
# is left to the run page. REVIEW_HEADLINES: in this order, the first present (else `accuracy`) is the accuracy.
REVIEW_HEADLINES = ("mcqa", "cora", "rws", "st", "full_fr", "acc_h")
REVIEW_FALLBACK = "accuracy"  # the headline of runs that asked no original order
# `chance`: src.metrics.chance.CHANCE_TAG (`0.226: mcqa indistinguishable from chance`)
REVIEW_COLUMNS = ("tags.`chance`", "tags.`model`", "tags.`benchmark`", "tags.`variants`", "tags.`temperature`",
                  "tags.`scoring`", "params.`n_questions`")
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
    return f"{base_url.rstrip('/')}/#/experiments/{experiment_id}/runs?viewStateShareKey={REVIEW_VIEW_KEY}&{ML_WORKFLOW}"


def review_metric_names(names: Sequence[str]) -> list[str]:
    """The metric columns of the review view among `names`: REVIEW_HEADLINES (else `accuracy`), the accuracy with
    its bounds, the others with theirs where they sort after the accuracy (see REVIEW_COLUMNS).

    >>> review_metric_names(["st", "rws", "mcqa_hi", "cora_lo", "cora", "mcqa", "mcqa_lo", "bmca_1.0", "rws_lo"])
    ['mcqa', 'mcqa_lo', 'mcqa_hi', 'cora', 'rws', 'rws_lo', 'st']
    >>> review_metric_names(["accuracy", "chance_variants", "sc_mean"])
    ['accuracy']
    """
    from .metrics import interval_names

    present = set(names)
    headlines = [n for n in REVIEW_HEADLINES if n in present] or [n for n in (REVIEW_FALLBACK,) if n in present]
    chosen: list[str] = []
    for name in headlines:
        shown = [name, *interval_names(name)] if name >= headlines[0] else [name]
        chosen += [n for n in shown if n in present]
    return chosen


def review_view_state(metric_names: Sequence[str], earlier: str | None = None) -> str:
    """The review view's state (JSON, as the UI's *Share* button saves it): job runs by name, the headline
    columns (`review_metric_names`) of every study logged so far (`earlier` state's metrics kept), the run's tags.

    >>> state = json.loads(review_view_state(["rws", "st"], review_view_state(["mcqa", "chance"])))
    >>> state["searchFilter"], [c for c in state["selectedColumns"] if c.startswith("metrics")]
    ("tags.kind = 'job'", ['metrics.`mcqa`', 'metrics.`rws`', 'metrics.`st`'])
    """
    names = list(metric_names)
    if earlier:
        try:
            names += [c[len("metrics.`"):-1] for c in json.loads(earlier).get("selectedColumns", [])
                      if c.startswith("metrics.`")]
        except (ValueError, AttributeError):
            pass
    metrics = [f"metrics.`{mlflow_metric_name(name)}`" for name in review_metric_names(names)]
    return json.dumps({"searchFilter": JOB_RUNS_FILTER, "orderByKey": JOB_RUNS_ORDER, "orderByAsc": True,
                       "selectedColumns": [*metrics, *REVIEW_COLUMNS], "runsExpanded": {}, "groupBy": None})


def write_subjects(table, artifacts_dir: Path) -> None:
    """`subjects.csv` beside the records when the run has subjects."""
    if len(table):
        table.to_csv(Path(artifacts_dir) / SUBJECTS_FILE, index=False)


def review_params(params: Mapping[str, Any], **effective: Any) -> dict[str, Any]:
    """The flattened config without SHADOWED_PARAMS, plus the `effective` values (`n_questions=20`)."""
    return {**{k: v for k, v in params.items() if k not in SHADOWED_PARAMS}, **effective}


def headline_text(metrics: Mapping[str, float], *, limit: int = DESCRIBED_HEADLINES) -> str:
    """`mcqa 0.750 [0.531, 0.888], rws 1.000 [0.646, 1.000]`: the run's headline metrics with their intervals."""
    from .compare.tables import cell
    from .metrics import headline_order

    names = [n for n in headline_order(list(metrics)) if metrics[n] == metrics[n]][:limit]
    return ", ".join(f"{name} {cell(metrics, name)}" for name in names)


def run_description(*, model: str, benchmark: str, variants: str, scoring: str, temperature: float,
                    repetitions: int, n_questions: int, limit: Any, metrics: Mapping[str, float], level: float,
                    rws_st: str | None = None) -> str:
    """The run's description in words (MLflow's Description box, Markdown): what was asked of which model, the
    headline metrics with their intervals and the chance level (with the sentence `chance_verdict` gives a run at
    chance, in bold).

    >>> print(run_description(model="m", benchmark="b", variants="original", scoring="generate", temperature=0.7,
    ...     repetitions=5, n_questions=20, limit=20, level=0.95, rws_st="1.00 | 35%",
    ...     metrics={"n_trials": 100, "mcqa": 0.75, "mcqa_lo": 0.53, "mcqa_hi": 0.89, "st": 0.35, "chance": 0.25}))
    **m** on **b**: 20 questions (`limit=20`), variant set `original`, scoring `generate`, temperature 0.7, 5 repetitions; 100 trials.
    <BLANKLINE>
    Headline: mcqa 0.750 [0.530, 0.890], st 0.350 (intervals at 95%); chance 0.250, mcqa: above chance.
    <BLANKLINE>
    RWS | S/T: 1.00 | 35%.
    <BLANKLINE>
    Per-subject values: `subjects.csv`; every metric: `metrics.json`; every trial: `records.parquet`.
    """
    from .metrics import is_interval_name
    from .metrics.chance import chance_verdict

    limit_text = f" (`limit={limit}`)" if limit not in (None, "null") else ""
    lines = [f"**{model}** on **{benchmark}**: {n_questions} questions{limit_text}, variant set `{variants}`, "
             f"scoring `{scoring}`, temperature {float(temperature):g}"
             + (f", {int(repetitions)} repetitions" if int(repetitions) > 1 else "")
             + f"; {int(metrics.get('n_trials', 0))} trials."]
    headline = headline_text(metrics)
    verdict = chance_verdict(metrics)
    if headline:
        bounded = any(is_interval_name(name) for name in metrics)
        said = f", {verdict.metric}: {verdict.short()}" if verdict and verdict.short() else ""
        lines.append(f"Headline: {headline}" + (f" (intervals at {level:.0%})" if bounded else "")
                     + (f"; chance {verdict.chance:.3f}{said}." if verdict else "."))
    if verdict and verdict.sentence():
        lines.append(f"**{verdict.sentence()}**")
    if rws_st:
        lines.append(f"RWS | S/T: {rws_st}.")
    lines.append(f"Per-subject values: `{SUBJECTS_FILE}`; every metric: `metrics.json`; every trial: "
                 "`records.parquet`.")
    return "\n\n".join(lines)


def questions_dataset(questions, *, name: str):
    """The questions a run asked as an MLflow dataset (the runs table's Dataset column): one row per question (the
    options as JSON, the right option's text as target), named after the benchmark; its digest changes with the
    questions."""
    import mlflow.data
    import pandas as pd

    frame = pd.DataFrame([{"id": q.id, "subject": q.subject or "", "question": q.question,
                           "options": json.dumps(list(q.options)), "answer": q.options[q.answer]} for q in questions])
    from mlflow.data.code_dataset_source import CodeDatasetSource
    from mlflow.tracking.context import registry as context_registry

    source = CodeDatasetSource(tags=context_registry.resolve_tags(ignore=_notebook_contexts()))  # as MLflow's own
    return mlflow.data.from_pandas(frame, name=name, targets="answer", source=source)


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


def git_commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5,
                              cwd=Path(__file__).parent).stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def sqlite_path(uri: str) -> Path | None:
    return Path(uri.removeprefix("sqlite:///")) if uri.startswith("sqlite:///") else None


# where things are, not what the job is; `stats` (the intervals' resamples and level) changes no question asked,
# no answer and no point metric, so runs made before it existed keep their hash
JOB_INDEPENDENT_KEYS = ("tracking", "cache", "resume", "data_dir", "stats")


def config_hash(cfg: Mapping[str, Any]) -> str:
    """Identity of a job's work: the resolved config without the keys that only say where results go."""
    kept = {k: v for k, v in cfg.items() if k not in JOB_INDEPENDENT_KEYS}
    return hashlib.sha256(json.dumps(kept, sort_keys=True, default=str).encode()).hexdigest()[:16]


def job_tracking_uri(tracking_cfg: Mapping[str, Any]) -> str:
    """The store a job logs to: `tracking.uri`, or with `tracking.offline=true` a local SQLite file under
    `tracking.offline_dir` that `python -m src.sync` uploads later."""
    if tracking_cfg.get("offline"):
        folder = Path(tracking_cfg.get("offline_dir") or "mlruns/offline")
        return f"sqlite:///{folder}/mlflow.db"
    return tracking_cfg["uri"]


def check_tracking(uri: str) -> None:
    """Fail fast, before any compute, when the tracking store cannot be reached."""
    db = sqlite_path(uri)
    if db is not None:
        try:
            db.parent.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise UserError(f"config key tracking.uri: cannot create {db.parent} ({err.strerror}); "
                            "point tracking.uri at a writable sqlite:/// path") from None
        return
    if uri.startswith(("http://", "https://")):
        try:
            urllib.request.urlopen(uri.rstrip("/") + "/health", timeout=5).read()
        except OSError as err:
            raise UserError(f"config key tracking.uri: MLflow server {uri} is unreachable ({err}); start it, set "
                            "tracking.on_outage=offline or tracking.uri=sqlite:///mlruns/mlflow.db") from None
        return
    if uri.startswith("file:") or "://" not in uri:
        raise UserError(f"config key tracking.uri: {uri!r} is a file store, which current MLflow refuses; "
                        "use tracking.uri=sqlite:///mlruns/mlflow.db")


def experiment_id(mlflow, name: str, uri: str) -> str:
    """Get or create the experiment (`mlflow` is the module or an MlflowClient); local sqlite stores keep artifacts
    beside the database."""
    exp = mlflow.get_experiment_by_name(name)
    if exp is not None:
        return exp.experiment_id
    db = sqlite_path(uri)
    location = (db.parent / "artifacts").resolve().as_uri() if db is not None else None
    try:
        return mlflow.create_experiment(name, artifact_location=location)
    except Exception:  # another job of the same sweep created it first
        exp = mlflow.get_experiment_by_name(name)
        if exp is None:
            raise
        return exp.experiment_id


# Messages of a store that a parallel job is using or creating at the same moment: SQLite's lock, MLflow's schema
# creation (alembic) seen half done by another process, and a row two jobs insert at once (the experiment's review
# view tag: MLflow looks for it, then inserts it; the retry reads it again and merges), in SQLite's and
# PostgreSQL's words. Retried; anything else is raised at once.
RACE_MESSAGES = re.compile(r"database is locked|duplicate column name|expected to match one row|no such table|"
                           r"no such column|(table|index) \S+ already exists|unique constraint failed|"
                           r"duplicate key value violates unique constraint")


def is_race(err: BaseException) -> bool:
    """A message of parallel first use of a store (retried), not of a real error.

    >>> is_race(Exception("(sqlite3.OperationalError) table experiment_tags already exists"))
    True
    >>> is_race(Exception('BAD_REQUEST: (psycopg2.errors.UniqueViolation) duplicate key value violates unique '
    ...                   'constraint "experiment_tag_pk"'))
    True
    >>> is_race(Exception("Experiment(name=x) already exists"))
    False
    """
    return RACE_MESSAGES.search(str(err).lower()) is not None


def with_retries(op, *, attempts: int = 12):
    """Run `op`, retrying while a shared SQLite store is locked by a parallel job (joblib launcher) or its schema
    is being created by another process."""
    for attempt in range(attempts):
        try:
            return op()
        except Exception as err:  # MLflow wraps sqlite's OperationalError in its own exception types
            if not is_race(err) or attempt == attempts - 1:
                raise
            time.sleep(min(0.1 * 2 ** attempt, 5.0))


_OPENED: set[str] = set()


def open_store(uri: str) -> None:
    """Make sure the store's schema exists before any other MLflow call of this process. For a SQLite store the
    creation (MLflow's alembic migrations, seconds long) runs under an exclusive lock on `<db>.init.lock`, so
    parallel first jobs (joblib workers, several `python -m src.run`) create it once and the others wait for it."""
    db = sqlite_path(uri)
    if uri not in _OPENED and db is not None:
        from mlflow.tracking import MlflowClient

        db.parent.mkdir(parents=True, exist_ok=True)
        with _file_lock(Path(f"{db}.init.lock")):
            with_retries(lambda: MlflowClient(tracking_uri=uri).search_experiments(max_results=1))
    _OPENED.add(uri)
    gc_tuning.end_import_pause()  # MLflow and its store are imported: the command's heap is built


@contextlib.contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    try:
        import fcntl
    except ImportError:  # not POSIX: the retries above are the only guard
        yield
        return
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


# ---------------------------------------------------------------- an unreachable tracking server

OUTAGE_CHOICES = ("fail", "offline")


def check_options(tracking_cfg: Mapping[str, Any]) -> None:
    """The `tracking.on_outage` and `tracking.retry_budget_s` values, in one line each."""
    choice = tracking_cfg.get("on_outage", "fail")
    if choice not in OUTAGE_CHOICES:
        raise UserError(f"config key tracking.on_outage: {choice!r} is not a choice; choose fail (stop the job, "
                        f"exit 2) or offline (log to tracking.offline_dir, upload later with python -m src.sync)")
    budget = tracking_cfg.get("retry_budget_s", 20.0)
    if budget is None or not 0 <= float(budget) <= 600:
        raise UserError(f"config key tracking.retry_budget_s: {budget} must be between 0 and 600 seconds")


def client_retries(budget_s: float) -> tuple[int, int]:
    """(retries, request timeout in s) for MLflow's HTTP client so that its retries of one call end within
    `budget_s`: urllib3 sleeps 0, 2, 4, 8 ... s (backoff factor 1) plus up to 1 s of jitter before each retry.

    >>> client_retries(20), client_retries(5), client_retries(0)
    ((4, 5), (2, 5), (1, 5))
    """
    retries = 0
    while retries < 10 and (2 ** (retries + 1) - 2) + retries <= budget_s:
        retries += 1
    return retries, max(5, math.ceil(budget_s / (retries + 1)))


def apply_retry_budget(budget_s: float) -> None:
    """Bound MLflow's own retries (by default ~4 minutes per call against a dead server) to `budget_s`."""
    retries, timeout = client_retries(float(budget_s))
    os.environ["MLFLOW_HTTP_REQUEST_MAX_RETRIES"] = str(retries)
    os.environ["MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR"] = "1"
    os.environ["MLFLOW_HTTP_REQUEST_TIMEOUT"] = str(timeout)


def is_outage(err: BaseException) -> bool:
    """An error of a tracking server that does not answer (refused, reset, timed out, 5xx after the retries)."""
    import requests

    if isinstance(err, (requests.exceptions.ConnectionError, requests.exceptions.Timeout, ConnectionError)):
        return True
    text = str(err)
    return "API request to" in text and ("failed with exception" in text or "timeout" in text.lower() or
                                         "Max retries exceeded" in text)


def short(err: BaseException, limit: int = 160) -> str:
    """An exception as a short single line (for one-line messages)."""
    text = " ".join(str(err).split())
    if "Caused by" in text:
        text = text.split("Caused by")[-1].strip(" (:")
    return text if len(text) <= limit else text[:limit - 3] + "..."


PENDING_FILE = "pending_closes.jsonl"


def note_pending_close(offline_dir: str | Path, uri: str, run_id: str | None, status: str, *,
                       search: Mapping[str, Any] | None = None, **tags: str) -> None:
    """Remember a run that could not be given its terminal status because its server was down;
    `python -m src.sync` (and the next sweep on that server) applies it. `run_id=None` with `search`
    (experiment_id, config_hash, since): a run whose creation reached the server but whose id never came back."""
    folder = Path(offline_dir)
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / PENDING_FILE, "a") as handle:
        handle.write(json.dumps({"uri": uri, "run_id": run_id, "status": status, "tags": tags,
                                 "search": dict(search or {}), "end_time": int(time.time() * 1000)}) + "\n")


def _pending_runs(client, entry: Mapping[str, Any]) -> list[str]:
    """The ids of the runs a pending close names that are still open."""
    if entry.get("run_id"):
        run = with_retries(lambda: client.get_run(entry["run_id"]))
        return [entry["run_id"]] if run.info.status in ("RUNNING", "SCHEDULED") else []
    search = entry["search"]
    runs = with_retries(lambda: client.search_runs(
        [search["experiment_id"]], filter_string=f"tags.config_hash = '{search['config_hash']}' and "
        f"attributes.status = 'RUNNING' and attributes.start_time >= {int(search['since'])}"))
    return [r.info.run_id for r in runs if r.info.start_time <= entry["end_time"]]


def apply_pending_closes(offline_dir: str | Path, uri: str | None = None) -> int:
    """Give the runs noted by `note_pending_close` their status (those of `uri`, or all whose server answers);
    the ones that cannot be reached stay noted. Returns how many were closed."""
    from mlflow.tracking import MlflowClient

    path = Path(offline_dir) / PENDING_FILE
    if not path.is_file():
        return 0
    entries = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    kept, closed, down = [], 0, set()
    for entry in entries:
        if (uri is not None and entry["uri"] != uri) or entry["uri"] in down:
            kept.append(entry)
            continue
        try:
            check_tracking(entry["uri"])
            client = MlflowClient(tracking_uri=entry["uri"])
            for run_id in _pending_runs(client, entry):
                for key, value in entry.get("tags", {}).items():
                    with_retries(lambda: client.set_tag(run_id, key, value))
                with_retries(lambda: client.set_terminated(run_id, entry["status"], end_time=entry["end_time"]))
                closed += 1
        except UserError:
            down.add(entry["uri"])
            kept.append(entry)
        except Exception as err:  # the run is gone (deleted store): nothing left to close
            if is_outage(err):
                down.add(entry["uri"])
                kept.append(entry)
    path.write_text("".join(json.dumps(e) + "\n" for e in kept))
    return closed


class TrackingDown(UserError):
    """The tracking server stopped answering within the retry budget."""


def _notebook_contexts() -> list:
    """MLflow's run contexts that import IPython to ask whether the job runs in a (Databricks) notebook, ~0.4 s
    of every job's start, when it cannot: IPython not loaded (no notebook kernel) and no Databricks runtime."""
    from mlflow.utils.databricks_utils import is_in_databricks_runtime

    if "IPython" in sys.modules or is_in_databricks_runtime():
        return []
    from mlflow.tracking.context.databricks_command_context import DatabricksCommandRunContext
    from mlflow.tracking.context.databricks_job_context import DatabricksJobRunContext
    from mlflow.tracking.context.databricks_notebook_context import DatabricksNotebookRunContext
    from mlflow.tracking.context.databricks_repo_context import DatabricksRepoRunContext
    from mlflow.tracking.context.jupyter_notebook_context import JupyterNotebookRunContext

    return [JupyterNotebookRunContext, DatabricksNotebookRunContext, DatabricksJobRunContext,
            DatabricksCommandRunContext, DatabricksRepoRunContext]


last_run: dict[str, str] = {}  # the run the latest JobTracker of this process made: run_id, uri, status


class JobTracker:
    """A job's MLflow run, through MlflowClient: a health check of the store first, every call retried on the
    races of parallel first use, MLflow's HTTP retries bounded by `tracking.retry_budget_s`. When the server does
    not answer: with `tracking.on_outage=fail` the job stops in one line (UserError, exit 2); with `offline` it goes
    on into `tracking.offline_dir` and says to run `python -m src.sync`. Every run it makes ends FINISHED, FAILED
    or KILLED; a run on a server that died is noted for `src.sync` to close."""

    def __init__(self, tracking_cfg: Mapping[str, Any], *, job_hash: str, sweep: Mapping[str, str] | None = None):
        self.cfg = dict(tracking_cfg)
        check_options(self.cfg)
        apply_retry_budget(self.cfg.get("retry_budget_s", 20.0))
        self.target = self.cfg["uri"]
        self.offline_dir = Path(self.cfg.get("offline_dir") or "mlruns/offline")
        self.offline_uri = f"sqlite:///{self.offline_dir}/mlflow.db"
        self.job_hash = job_hash
        self.sweep = dict(sweep or {})
        self.run_id: str | None = None
        self.fell_back = False
        self._connect(self.offline_uri if self.cfg.get("offline") else self.target)

    # -- where the job logs

    @property
    def offline(self) -> bool:
        return self.uri == self.offline_uri

    def _can_fall_back(self) -> bool:
        return self.cfg.get("on_outage", "fail") == "offline" and not self.offline

    def _connect(self, uri: str) -> None:
        import mlflow
        from mlflow.tracking import MlflowClient

        self.uri = uri
        try:
            check_tracking(uri)  # the health check: before any compute, and before each job of a sweep
            open_store(uri)
            self.client = MlflowClient(tracking_uri=uri)
            self.exp_id = self._call(lambda: experiment_id(self.client, self.cfg["experiment"], uri), fall_back=False)
        except UserError as err:
            if not self._can_fall_back():
                raise
            self._fall_back(err)
            return
        mlflow.set_tracking_uri(uri)

    def _fall_back(self, err: BaseException) -> None:
        print(f"warning: MLflow server {self.target} is not answering; this job logs to {self.offline_dir} "
              f"(tracking.on_outage=offline): run python -m src.sync --offline-dir {self.offline_dir} once the "
              f"server is back", file=sys.stderr)
        self.fell_back = True
        self._connect(self.offline_uri)

    def _down(self, err: BaseException, doing: str) -> TrackingDown:
        return TrackingDown(f"config key tracking.uri: MLflow server {self.uri} stopped answering {doing} "
                            f"({short(err)}); answers already computed are in the response cache: start the server "
                            f"and run the same command again, or set tracking.on_outage=offline")

    def _call(self, op, *, fall_back: bool = True, doing: str = "before the job started"):
        """`op()` with the race retries; a server outage becomes TrackingDown (after MLflow's bounded retries)."""
        try:
            return with_retries(op)
        except UserError:
            raise
        except Exception as err:
            if is_outage(err):
                raise self._down(err, doing) from None
            raise

    # -- before the job

    def finished_run(self):
        """The latest FINISHED run of this job's config hash in the experiment, or None."""
        return self._before(lambda: finished_run_of(self.client, self.exp_id, self.job_hash))

    def finished_metrics(self, run) -> dict[str, float]:
        """Every metric a finished run's job computed: its `metrics.json` (MLflow holds the review view only,
        `review_view`), or the metrics MLflow holds when the artifact cannot be read."""
        import tempfile

        try:
            with tempfile.TemporaryDirectory(prefix="metrics-") as folder:
                local = self._call(lambda: self.client.download_artifacts(run.info.run_id, "metrics.json", folder))
                return {k: float(v) for k, v in json.loads(Path(local).read_text()).items()}
        except TrackingDown:
            raise
        except Exception:  # noqa: BLE001 - a run without a readable metrics.json (logged elsewhere, or older)
            from .compare.load import metric_name

            return {metric_name(k): v for k, v in run.data.metrics.items()}

    def mark_interrupted(self) -> None:
        self._before(lambda: mark_interrupted_runs(self.client, self.exp_id, self.job_hash))

    def _before(self, op):
        try:
            return self._call(op)
        except TrackingDown as err:
            if not self._can_fall_back():
                raise
            self._fall_back(err)
            return self._call(op)

    # -- the run

    def _tags(self, tags: Mapping[str, str]) -> dict[str, str]:
        from . import owners

        out = {"config_hash": self.job_hash, "kind": "job", "owner": owners.this_owner(),
               "heartbeat": str(int(time.time())), **tags}
        if self.offline:
            from .redact import redact_text

            out["offline_target"] = redact_text(self.target)  # where `python -m src.sync` uploads it (no secret)
        if self.sweep.get("sweep_id"):
            out["sweep_id"] = self.sweep["sweep_id"]
        if self.sweep.get("parent_run_id"):
            out["mlflow.parentRunId"] = self.sweep["parent_run_id"]
        return out

    def _create(self, run_name: str, tags: Mapping[str, str]) -> str:
        from mlflow.tracking.context import registry as context_registry

        resolved = context_registry.resolve_tags(self._tags(tags), ignore=_notebook_contexts())
        run = self._call(lambda: self.client.create_run(self.exp_id, tags=resolved, run_name=run_name))
        self.run_id = run.info.run_id
        last_run.clear()
        last_run.update(run_id=self.run_id, uri=self.uri, status="RUNNING")
        return self.run_id

    @contextlib.contextmanager
    def run(self, run_name: str, tags: Mapping[str, str] | None = None) -> Iterator[str]:
        """A new run for the job; it ends FINISHED, FAILED (an error) or KILLED (Ctrl-C, SIGTERM)."""
        self._run_name, self._run_tags = run_name, dict(tags or {})
        try:
            self._create(run_name, self._run_tags)
        except TrackingDown as err:
            self._lost_create(since=time.time() - 60)
            if not self._can_fall_back():
                raise
            self._fall_back(err)
            self._create(run_name, self._run_tags)
        beating = threading.Event()
        heart = threading.Thread(target=self._beat, args=(self.client, self.run_id, beating), daemon=True)
        heart.start()
        try:
            yield self.run_id
        except KeyboardInterrupt:
            beating.set()
            self._close("KILLED", interrupted="true")
            raise
        except TrackingDown:
            raise  # closed, or noted for src.sync, where it was raised
        except BaseException:
            beating.set()
            self._close("FAILED")
            raise
        finally:
            beating.set()
        self._close("FINISHED")

    @staticmethod
    def _beat(client, run_id: str, stop: threading.Event) -> None:
        """Refresh the run's `heartbeat` tag while the job lives, so that no other process takes it for dead."""
        while not stop.wait(HEARTBEAT_S):
            try:
                client.set_tag(run_id, "heartbeat", str(int(time.time())))
            except Exception:  # noqa: BLE001 - a missed beat only makes the run look older
                pass

    def _lost_create(self, since: float) -> None:
        """The server may have made the run whose id never came back: note it, found by its config hash."""
        note_pending_close(self.offline_dir, self.uri, None, "KILLED", interrupted="true",
                           search={"experiment_id": self.exp_id, "config_hash": self.job_hash,
                                   "since": int(since * 1000)})

    def _close(self, status: str, **tags: str) -> None:
        last_run["status"] = status
        try:
            check_tracking(self.uri)
            for key, value in tags.items():
                self._call(lambda: self.client.set_tag(self.run_id, key, value))
            self._call(lambda: self.client.set_terminated(self.run_id, status))
        except UserError as err:
            note_pending_close(self.offline_dir, self.uri, self.run_id, status, **tags)
            print(f"warning: run {self.run_id} could not be marked {status} ({short(err, 100)}); python -m src.sync "
                  f"--offline-dir {self.offline_dir} marks it once the server is back", file=sys.stderr)

    def log(self, *, params: Mapping[str, Any], metrics: Mapping[str, float], tags: Mapping[str, str],
            artifacts_dir: Path, constant: Sequence[str] = (), dataset=None) -> None:
        """Params, metrics (as `review_view` shows them, without the `constant` ones), tags, the questions asked as
        the run's `dataset` input and the artifacts into the job's run; a server outage here moves the run into the
        offline store (`on_outage=offline`) or stops the job in one line with the run noted as FAILED."""
        view = review_view(metrics, constant=constant)
        write_subjects(view[1], artifacts_dir)
        try:
            self._log(params, view[0], tags, artifacts_dir, dataset)
        except TrackingDown as err:
            lost = self.run_id
            if not self._can_fall_back():
                last_run["status"] = "FAILED"
                note_pending_close(self.offline_dir, self.uri, lost, "FAILED", error="tracking server outage")
                raise
            note_pending_close(self.offline_dir, self.uri, lost, "KILLED", interrupted="true",
                               error="tracking server outage; the job went on offline")
            self._fall_back(err)
            self._create(self._run_name, {**self._run_tags, "replaces_run_id": lost})
            self._log(params, view[0], tags, artifacts_dir, dataset)

    def _log(self, params, metrics, tags, artifacts_dir: Path, dataset=None) -> None:
        from mlflow.entities import DatasetInput, InputTag, Metric, Param, RunTag
        from mlflow.utils.mlflow_tags import MLFLOW_DATASET_CONTEXT

        doing = f"while logging run {self.run_id}"
        now = int(time.time() * 1000)
        self._call(lambda: self.client.log_batch(
            self.run_id, metrics=[Metric(k, v, now, 0) for k, v in metrics.items()],
            params=[Param(k, "null" if v is None else str(v)[:6000]) for k, v in params.items()],
            tags=[RunTag(k, str(v)) for k, v in tags.items()]), doing=doing)
        if dataset is not None:  # the runs table's Dataset column: the benchmark, and a digest of its questions
            asked = DatasetInput(dataset._to_mlflow_entity(), tags=[InputTag(MLFLOW_DATASET_CONTEXT, "eval")])
            self._call(lambda: self.client.log_inputs(self.run_id, [asked]), doing=doing)
        self._call(lambda: self._share_review_view(metrics), doing=doing)
        self._call(lambda: self.client.log_artifacts(self.run_id, str(artifacts_dir)), doing=doing)

    def _share_review_view(self, metrics: Mapping[str, float]) -> None:
        """Add this run's headline metrics to the experiment's review view (`review_link`)."""
        from .compare.load import metric_name

        names = [metric_name(k) for k in metrics]
        key = SHARED_VIEW_TAG + REVIEW_VIEW_KEY
        earlier = self.client.get_experiment(self.exp_id).tags.get(key)
        state = review_view_state(names, earlier)
        if state != earlier:
            self.client.set_experiment_tag(self.exp_id, key, state)


def finished_run_of(client, experiment: str, job_hash: str):
    """`finished_run` through an MlflowClient."""
    runs = client.search_runs([experiment], max_results=1, order_by=["attributes.start_time DESC"],
                              filter_string=f"tags.config_hash = '{job_hash}' and attributes.status = 'FINISHED'")
    return runs[0] if runs else None


HEARTBEAT_S = 30.0  # a live job refreshes its run's `heartbeat` tag this often
STALE_S = 180.0  # a run of another host whose heartbeat is older than this is taken for dead


def provably_dead(tags: Mapping[str, str], *, now: float | None = None) -> bool:
    """Whether the process that made a RUNNING run is gone: its `owner` (src/owners.py) is a process of this host
    that no longer runs, or, for another host, its `heartbeat` (epoch seconds) is older than STALE_S. A run
    without an owner (logged before owners were tagged) is taken for dead, as it always was.

    >>> from src import owners
    >>> provably_dead({"owner": owners.this_owner(), "heartbeat": "0"})
    False
    >>> provably_dead({"owner": "elsewhere:1", "heartbeat": str(time.time())}), provably_dead({"owner": "elsewhere:1"})
    (False, True)
    """
    from . import owners

    owner = tags.get("owner")
    if owners.parse_owner(owner) is None:
        return True
    alive = owners.is_alive(owner)
    if alive is not None:
        return not alive
    try:
        beat = float(tags.get("heartbeat", "nan"))
    except ValueError:
        return True
    return not ((now if now is not None else time.time()) - beat <= STALE_S)


def mark_interrupted_runs(client, experiment: str, job_hash: str) -> None:
    """Runs of this job left RUNNING by a process that is provably dead are marked KILLED, so the UI shows what
    happened; the rerun that calls this resumes their work from the response cache. A run whose process still
    lives (the same command started twice) is left alone: this job makes a run of its own beside it."""
    for run in client.search_runs([experiment],
                                  filter_string=f"tags.config_hash = '{job_hash}' and attributes.status = 'RUNNING'"):
        if not provably_dead(run.data.tags):
            log.info("run %s of the same job is still running (owner %s); this job makes a run of its own",
                     run.info.run_id, run.data.tags.get("owner"))
            continue
        client.set_tag(run.info.run_id, "interrupted", "true")
        client.set_terminated(run.info.run_id, "KILLED")


def log_run(mlflow, *, params: Mapping[str, Any], metrics: Mapping[str, float], tags: Mapping[str, str],
            artifacts_dir: Path) -> None:
    """Log into the active run, the metrics as `review_view` shows them (non-finite ones, NaN: undefined, e.g. RWS
    with nothing SURE, are skipped in MLflow and kept in metrics.json; per-subject values in subjects.csv)."""
    finite, subjects = review_view(metrics)
    write_subjects(subjects, artifacts_dir)
    with_retries(lambda: mlflow.log_params({k: ("null" if v is None else str(v)[:6000]) for k, v in params.items()}))
    with_retries(lambda: mlflow.log_metrics(finite))
    with_retries(lambda: mlflow.set_tags(dict(tags)))
    mlflow.log_artifacts(str(artifacts_dir))


