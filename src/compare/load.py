"""Read the job runs of an experiment and/or sweep from MLflow into one table: a row per run, a column per metric.

Only finished job runs count: sweep parents (`kind=sweep`), assessments and earlier comparisons are left out, as
are runs still running or failed (counted, so the report can say so). Metric names come back in their docs/metrics.md
spelling (`wacc_at_cyclic` -> `wacc@cyclic`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pandas as pd

from src.common.errors import UserError
from src.core.metric_choices import SURE_RULES
from src.core.prompts import CLOZE_SCORINGS
from src.core.records import PROMPTS_FILE
from src.tracking import reads, store
from src.tracking.identity import (
    CONTENT_TAG,
    OVERRIDES_TAG,
    SETTING_FIELDS,
    content_parts,
    identity_fields,
    weights_fields,
)
from src.tracking.names import DEFAULT_URI, metric_name
from src.tracking.records import read_run_records

if TYPE_CHECKING:
    from mlflow.entities import Run

NOT_JOBS = ("sweep", "assessment", "comparison")  # values of the `kind` tag that are not one job's run
# Run-level columns; every other column of the table is a metric
ID_COLUMNS = (
    "run_id",
    "experiment_id",
    "experiment",
    "sweep_id",
    "start_time",
    "model",
    "benchmark",
    "variants",
    "temperature",
    "scoring",
    "prompt",
    "fewshot",
    "repetitions",
    "limit",
    "seed",
    "sure_rule",
    "source",
    "near_ties",
    "ranked_decisions",
    "model_identity",
    "data_identity",
    "backend",
    "model_content",
    "setting_causes",
)
# What a run was asked under besides model and benchmark: runs that differ in one of these are not compared
# in the same table column (see tables.common.condition_groups)
CONDITION_KEYS = ("variants", "temperature", "fewshot", "scoring", "prompt", "repetitions", "limit", "seed")


@dataclass
class Runs:
    """The selected job runs (`table`), where they came from, and what was left out."""

    table: pd.DataFrame
    tracking_uri: str
    experiments: dict[str, str]  # experiment id -> name
    sweep_id: str | None = None
    skipped: list[str] = field(default_factory=list)  # one line per run left out, and why

    _records: dict[str, pd.DataFrame] = field(default_factory=dict, repr=False)
    _prompts: dict[str, pd.DataFrame] = field(default_factory=dict, repr=False)

    @property
    def metric_columns(self) -> list[str]:
        return [c for c in self.table.columns if c not in ID_COLUMNS]

    def records(self, run_id: str, *, key: str = "--experiment") -> pd.DataFrame:
        """A run's records table, read from MLflow once (UserError naming `key` when it has none)."""
        if run_id not in self._records:
            self._records[run_id] = read_run_records(run_id, self.tracking_uri, key=key)
        return self._records[run_id]

    def prompts(self, run_id: str) -> pd.DataFrame:
        """A run's prompts table (`read_prompts`), read once."""
        if run_id not in self._prompts:
            self._prompts[run_id] = read_prompts(run_id, self.tracking_uri)
        return self._prompts[run_id]


def read_prompts(run_id: str, tracking_uri: str) -> pd.DataFrame:
    """A run's `prompts.parquet` (prompt_hash, prompt, model_input); empty for runs logged without one."""
    found = reads.parquet_artifact(tracking_uri, run_id, PROMPTS_FILE)
    return pd.DataFrame(columns=["prompt_hash", "prompt", "model_input"]) if found is None else found


CHANCE_COLUMNS = ("chance", "chance_variants")  # src/metrics/chance.py, per run


def add_chance(runs: Runs) -> list[str]:
    """Fill each run's chance levels (`chance`, `chance_variants`) from its records where it logged none; returns
    one note per run whose records could not be read (its chance cells stay empty)."""
    from ..metrics.chance import chance_levels  # local: loads numpy (slow import)

    table, notes = runs.table, []
    for column in CHANCE_COLUMNS:
        if column not in table.columns:
            table[column] = math.nan
    for index, row in table.iterrows():
        if not math.isnan(row["chance"]):
            continue
        try:
            levels = chance_levels(runs.records(row["run_id"]))
        except UserError as err:
            notes.append(f"chance level of run {row['run_id'][:8]}: not known ({err})")
            continue
        for column in CHANCE_COLUMNS:
            table.at[index, column] = levels.get(column, math.nan)
    return notes


def _number(value: Any, cast: Callable[[Any], float]) -> float | None:
    try:
        return cast(value)
    except (TypeError, ValueError):
        return math.nan if cast is float else None


def _row(run: Run, experiments: dict[str, str]) -> dict[str, Any]:
    tags, params = run.data.tags, run.data.params
    row = {
        "run_id": run.info.run_id,
        "experiment_id": run.info.experiment_id,
        "experiment": experiments.get(run.info.experiment_id, run.info.experiment_id),
        "sweep_id": tags.get("sweep_id"),
        "start_time": run.info.start_time or 0,
        "model": tags.get("model") or params.get("model.name"),
        "benchmark": tags.get("benchmark") or params.get("benchmark.name"),
        "variants": tags.get("variants") or params.get("variants.name"),
        "temperature": _number(tags.get("temperature", params.get("temperature")), float),
        "scoring": tags.get("scoring") or params.get("scoring"),
        "prompt": params.get("prompt.name"),
        "fewshot": _number(params.get("fewshot"), int),
        "repetitions": _number(params.get("repetitions"), int),
        "limit": params.get("limit"),
        "seed": _number(params.get("seed"), int),
        # the questions the benchmark holds before `limit` (src/job/runner.py), the cap of any questions-needed count
        "benchmark_size": _number(params.get("benchmark_size"), int),
        # the SURE rule of its repetition metrics (runs logged before the tag existed used section 3.2's)
        "sure_rule": tags.get("sure_rule") or params.get("metrics.sure_rule") or SURE_RULES[0],
        "source": tags.get("source") or "run",  # "ingest": answers made elsewhere (python -m src.ingest)
        # decisions within src.core.records.NEAR_TIE_MARGIN of the next option, of the ranked ones (logprob, cloze)
        "near_ties": _number(tags.get("near_ties"), float),
        "ranked_decisions": _number(tags.get("ranked_decisions"), float),
        # the weights and the questions by content (src/job/runner.py): one name may cover several checkpoints
        "model_identity": tags.get("model_identity"),
        "data_identity": tags.get("data_identity"),
        # the backend identity in full (weights by content, then settings: dtype, chat): what model_identity hashes
        "backend": tags.get("backend"),
        # the parts of the model's files by content (weights, tokenizer, chat template, ...; src/backends/weights.py)
        "model_content": tags.get(CONTENT_TAG),
        # what decided each setting of its backend identity (chat, dtype, quantization): `setting_causes`
        "setting_causes": json.dumps(setting_causes(params, tags), sort_keys=True),
    }
    row.update({metric_name(k): float(v) for k, v in run.data.metrics.items()})
    return row


def setting_causes(params: Mapping[str, str], tags: Mapping[str, str]) -> dict[str, str]:
    """What decided each setting of a run's backend identity (its `backend` tag's chat, dtype and quantization), in
    words: the keys behind it with their values and where each came from, a sweep override (or the command line:
    the run's `overrides` tag, src/job/runner.py) or a config's default; a run logged before its overrides were says
    the values alone. Chat is decided by three keys (src/job/runner.py `job_backend`): cloze scoring never wraps
    prompts, else `prompt.chat` does, where the model has a chat template.

    >>> causes = setting_causes({"scoring": "cloze_shown", "prompt.name": "cora", "prompt.chat": "True"},
    ...                         {"backend": "hf|w=1|chat=False", "overrides": "model=m", "sweep_id": "s"})
    >>> print(causes["chat"])  # doctest: +NORMALIZE_WHITESPACE
    scoring=cloze_shown, the model config's default (model.scoring): cloze scoring reads option texts without
    the chat template
    """
    raw = tags.get(OVERRIDES_TAG)
    overridden = None if raw is None else {o.lstrip("+~").partition("=")[0] for o in raw.split()}
    by = "a sweep override" if tags.get("sweep_id") else "set on the command line"

    def said(key: str, value: Any, default: str) -> str:
        if overridden is None:  # a run logged before its overrides were: where the value came from is not known
            return f"{key}={value}"
        return f"{key}={value}, {by if key in overridden else default}"

    fields = identity_fields(tags["backend"]) if tags.get("backend") else {}
    scoring = params.get("scoring") or tags.get("scoring")
    prompt, prompt_chat = params.get("prompt.name"), params.get("prompt.chat")
    chosen = f"prompt={prompt}" + (f", {by}" if overridden is not None and "prompt" in overridden else "")
    chat_key = said("prompt.chat", prompt_chat, f"from {chosen}")
    scoring_key = said("scoring", scoring, "the model config's default (model.scoring)")
    if scoring in CLOZE_SCORINGS:
        chat = f"{scoring_key}: cloze scoring reads option texts without the chat template"
    elif str(prompt_chat).lower() == "false":
        chat = f"{chat_key}: the prompt asks for no chat template"
    elif fields.get("chat") == "False":
        chat = (
            f"{chat_key} with {scoring_key}, but the model has no chat template (model.chat={params.get('model.chat')})"
        )
    else:
        chat = f"{chat_key} with {scoring_key}: the prompt asks for the model's chat template"
    default = "the model config's default"
    return {
        "chat": chat,
        "dtype": said("model.dtype", params.get("model.dtype"), default),
        "quantization": said("model.quantization", params.get("model.quantization"), default),
    }


def benchmark_size(row: Mapping[str, Any]) -> int | None:
    """The questions a run's benchmark holds: its logged `benchmark_size`, else the questions it asked when it ran
    without `limit`; None when not known (a run logged before the size was, with a limit)."""
    size = row.get("benchmark_size")
    if size is not None and size == size:
        return int(size)
    asked, limit = row.get("n_questions"), row.get("limit")
    unlimited = limit is None or limit != limit or limit in ("None", "null")  # NaN: a table's empty cell
    if unlimited and asked is not None and asked == asked:
        return int(asked)
    return None


def as_list(values: Sequence[str] | None) -> list[str]:
    """["a,b", "c"] -> ["a", "b", "c"]: filters may be repeated or comma-separated."""
    return [part.strip() for value in values or () for part in str(value).split(",") if part.strip()]


def load_runs(
    *,
    tracking_uri: str = DEFAULT_URI,
    experiment: str | None = None,
    sweep_id: str | None = None,
    benchmarks: Sequence[str] | None = None,
    models: Sequence[str] | None = None,
    variants: Sequence[str] | None = None,
) -> Runs:
    """The finished job runs of `experiment` and/or `sweep_id`, filtered by benchmark, model and variant set.

    UserError (exit 2) when the experiment does not exist or nothing is selected.
    """
    if not experiment and not sweep_id:
        raise UserError("--experiment or --sweep-id: give at least one of them")
    store.check_tracking(tracking_uri)
    db = store.sqlite_path(tracking_uri)
    if db is not None and not db.is_file():
        raise UserError(f"--tracking-uri: no MLflow database at {db}; run a sweep first or point --tracking-uri at it")
    experiments = reads.experiments(tracking_uri, experiment or None)
    if experiments is None:
        raise UserError(
            f"--experiment: no experiment {experiment!r} at {tracking_uri}; "
            f"check the name (a sweep's experiment is its tracking.experiment) or --tracking-uri"
        )
    query = f"tags.sweep_id = '{sweep_id}'" if sweep_id else ""
    found = reads.runs_in(tracking_uri, list(experiments), query)
    rows, skipped = [], []
    for run in found:
        if run.data.tags.get("kind", "job") in NOT_JOBS or "model" not in run.data.tags:
            continue
        if run.info.status != "FINISHED":
            skipped.append(
                f"run {run.info.run_id} ({run.data.tags.get('model')}, {run.data.tags.get('benchmark')}) "
                f"is {run.info.status}: left out"
            )
            continue
        rows.append(_row(run, experiments))
    table = pd.DataFrame(rows)
    where = " and ".join(
        part
        for part in (f"experiment {experiment!r}" if experiment else "", f"sweep {sweep_id!r}" if sweep_id else "")
        if part
    )
    if table.empty:
        raise UserError(
            f"--experiment/--sweep-id: no finished job runs in {where} at {tracking_uri}; "
            f"run the sweep first (python -m src.run -m ...)"
        )
    for column, wanted, flag in (
        ("benchmark", benchmarks, "--benchmark"),
        ("model", models, "--model"),
        ("variants", variants, "--variants"),
    ):
        wanted = as_list(wanted)
        if wanted:
            table = table[table[column].isin(wanted)]
            if table.empty:
                raise UserError(f"{flag}: no finished job run of {where} has {column} in {', '.join(wanted)}")
    table = table.sort_values("start_time", kind="stable").reset_index(drop=True)
    skipped += identity_notes(table)
    empty = [c for c in table.columns if c not in ID_COLUMNS and table[c].isna().all()]
    table = table.drop(columns=empty)  # metrics only the filtered-out runs logged
    used = {e: experiments[e] for e in table["experiment_id"].unique()}
    return Runs(table=table, tracking_uri=tracking_uri, experiments=used, sweep_id=sweep_id, skipped=skipped)


def identity_notes(table: pd.DataFrame) -> list[str]:
    """One line per model name whose runs were made with more than one model identity (tag `model_identity`),
    named by its cause (`model_identity_note`), and per benchmark asked with more than one set of questions
    (`data_identity`): the tables show the latest run of each condition, the newest weights' and data's."""
    notes = []
    if "model_identity" in table:
        for model, rows in table.dropna(subset=["model_identity"]).groupby("model", sort=True):
            if rows["model_identity"].nunique() > 1:
                notes.append(model_identity_note(str(model), rows))
    if "data_identity" in table:
        counts = table.dropna(subset=["data_identity"]).groupby("benchmark")["data_identity"].nunique()
        notes += [
            f"benchmark {key}: its runs were made with {n} different questions (data_identity); the tables show the "
            f"latest run of each condition"
            for key, n in counts.items()
            if n > 1
        ]
    return notes


def model_identity_note(model: str, rows: pd.DataFrame) -> str:
    """What differs between the identities of one model's runs, read from their `backend` tags
    (`src.tracking.identity.weights_fields`): other model files (by their `model_content` tags, the parts that differ:
    weights, tokenizer, chat template, generation config), or the same files at other settings (dtype, chat: the
    identity hashes them too)."""
    latest = "the tables show the latest run of each condition"
    identities: list[str] = list(rows["backend"].dropna().unique()) if "backend" in rows else []
    if len(identities) < rows["model_identity"].nunique():  # runs that logged no backend identity
        return (
            f"model {model}: its runs were made with {rows['model_identity'].nunique()} different model identities "
            f"(model_identity: weights or settings; some runs logged no backend identity to tell which); {latest}"
        )
    fields = [identity_fields(i) for i in identities]
    weights = {tuple(sorted(weights_fields(i).items())) for i in identities}
    settings = [_setting_values(rows, k) for k in SETTING_FIELDS if len({f.get(k) for f in fields}) > 1]
    if len(weights) > 1:
        parts = _changed_parts(rows)
        if parts and parts != ["weights"]:  # the files that differ, named: not every change is of the weights
            return f"model {model}: its runs were made with different model files ({' and '.join(parts)}); {latest}"
        return f"model {model}: its runs were made with {len(weights)} different weights (backend identity); {latest}"
    return (
        f"model {model}: its runs used the same weights at different settings: {'; '.join(settings)}; "
        "settings are compared as they are, not as other weights"
    )


def _setting_values(rows: pd.DataFrame, field: str) -> str:
    """`chat False in 2 runs (scoring=cloze_shown, the model config's default: ...), True in 2 runs (...)`: each
    value of one setting among a model's runs with what decided it (`setting_causes`, logged per run)."""
    found: dict[str, list[str]] = {}
    for _, row in rows.dropna(subset=["backend"]).iterrows():
        value = identity_fields(str(row["backend"])).get(field, "none")
        logged = row.get("setting_causes")
        causes = json.loads(logged) if isinstance(logged, str) and logged else {}
        found.setdefault(value, []).append(causes.get(field) or "its cause not logged")
    parts = []
    for value in sorted(found):
        causes = list(dict.fromkeys(found[value]))
        count = len(found[value])
        parts.append(f"{value} in {count} run{'s' if count != 1 else ''} ({'; '.join(causes)})")
    return f"{field} " + ", ".join(parts)


def _changed_parts(rows: pd.DataFrame) -> list[str]:
    """The parts of the model's files (weights, tokenizer, chat template, generation config) that differ between
    `rows`' `model_content` tags; [] where a run logged none (older runs, hub snapshots known by their commit)."""
    tags = list(rows["model_content"]) if "model_content" in rows else []
    if not tags or any(not isinstance(t, str) or not t for t in tags):
        return []
    parts = [content_parts(t) for t in tags]
    names = dict.fromkeys(name for p in parts for name in p)
    return [name for name in names if len({p.get(name) for p in parts}) > 1]


def run_label(tracking_uri: str, run_id: str) -> str:
    """`model / benchmark / variants / T=...` of a run (its full id, `src.tracking.records.resolve_run_id`), for
    headings."""
    tags = reads.run_tags(tracking_uri, run_id)
    return f"{tags.get('model')} / {tags.get('benchmark')} / {tags.get('variants')} / T={tags.get('temperature')}"
