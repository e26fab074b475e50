"""A finished run's records, read back from the tracking store: the full id behind a short one
(`resolve_run_id`), the records table it logged (`read_run_records`), its tags and any other artifact.

The table itself and its columns are the records' own concern (src/core/records.py); finding and fetching it is
the store's.
"""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

import pandas as pd

from src.common.errors import UserError
from src.core.records import RECORDS_FILE
from src.tracking import store

SHORT_ID_LENGTH = 8  # the reports print run ids this long; any unique prefix this long or longer names a run


def _named(key: str) -> tuple[str, str]:
    """(how an error names `key`, the setting that says where the store is): a command-line flag as itself
    (`--run`, with `--tracking-uri`), a config key as one (`config key variants.source_run`, with `tracking.uri`).

    >>> _named("--run"), _named("variants.source_run")
    (('--run', '--tracking-uri'), ('config key variants.source_run', 'tracking.uri'))
    """
    return (key, "--tracking-uri") if key.startswith("--") else (f"config key {key}", "tracking.uri")


def resolve_run_id(run_id: str, tracking_uri: str, *, key: str = "--run") -> str:
    """The full id of the run that `run_id` names: the id itself, or a unique prefix of 8 or more characters (the
    short ids the reports print). UserError naming `key` when no run, or more than one, matches.

    Every command that takes a run id (compare --diff, plan --run, variants.source_run) goes through here."""
    from mlflow.exceptions import MlflowException

    client = store.client(tracking_uri)
    run_id = str(run_id).strip()
    named, uri_key = _named(key)
    try:
        return str(client.get_run(run_id).info.run_id)
    except MlflowException:
        pass
    if not re.fullmatch(rf"[0-9a-f]{{{SHORT_ID_LENGTH},32}}", run_id):
        raise UserError(
            f"{named}: no MLflow run {run_id!r} at {tracking_uri}; give the id of a finished run "
            f"or its first {SHORT_ID_LENGTH} or more characters ({uri_key} must point at its store)"
        )
    experiments = [e.experiment_id for e in client.search_experiments()]
    # three at most: one is the answer, two make the refusal's example (a store without experiments finds none)
    found = client.search_runs(experiments, filter_string=f"attributes.run_id LIKE '{run_id}%'", max_results=3)
    if len(found) == 1:
        return str(found[0].info.run_id)
    if not found:
        raise UserError(
            f"{named}: no MLflow run {run_id!r} at {tracking_uri}, nor one whose id starts so; "
            f"give the id of a finished run ({uri_key} must point at its store)"
        )
    raise UserError(
        f"{named}: {run_id!r} is the start of several run ids at {tracking_uri} "
        f"({', '.join(r.info.run_id for r in found[:2])}, ...); give more characters"
    )


def read_run_records(run_id: str, tracking_uri: str, *, key: str = "--run") -> pd.DataFrame:
    """The records table a finished run logged (`run_id` the full id or a unique prefix, `resolve_run_id`);
    UserError naming `key` when the run or its records are missing."""
    run_id = resolve_run_id(run_id, tracking_uri, key=key)
    missing = f"{_named(key)[0]}: run {run_id} has no {RECORDS_FILE} artifact; give a run of src.run that finished"
    with tempfile.TemporaryDirectory() as tmp:
        return pd.read_parquet(download_artifact(run_id, RECORDS_FILE, Path(tmp), tracking_uri, missing=missing))


def run_tags(run_id: str, tracking_uri: str) -> dict[str, str]:
    """The tags of run `run_id` (its full id, `resolve_run_id`)."""
    return dict(store.client(tracking_uri).get_run(run_id).data.tags)


def download_artifact(run_id: str, name: str, folder: Path, tracking_uri: str, *, missing: str) -> Path:
    """Artifact `name` of run `run_id`, downloaded into `folder`; UserError `missing` when the run has none."""
    from mlflow.exceptions import MlflowException

    try:
        return Path(store.client(tracking_uri).download_artifacts(run_id, name, str(folder)))
    except (MlflowException, OSError):
        raise UserError(missing) from None
