"""What the comparison report reads from the tracking store, and the one run it writes there: the MLflow calls of
`python -m src.compare`, each retried while a shared SQLite store is busy (`store.with_retries`).

MLflow is imported inside the functions: the report's commands load it only when they reach the store.
"""

from __future__ import annotations

import functools
import os
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from src.tracking import names, store

if TYPE_CHECKING:
    import pandas as pd
    from mlflow.entities import Run
    from mlflow.tracking import MlflowClient


def _client(tracking_uri: str) -> MlflowClient:
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=store.local_uri(tracking_uri))


def experiments(tracking_uri: str, name: str | None = None) -> dict[str, str] | None:
    """{experiment id: name} of the experiment called `name` (None when the store has none of that name), or of
    every experiment of the store when `name` is None."""
    client = _client(tracking_uri)
    if name is None:
        return {e.experiment_id: e.name for e in store.with_retries(client.search_experiments)}
    found = store.with_retries(lambda: client.get_experiment_by_name(name))
    return None if found is None else {found.experiment_id: found.name}


def runs_in(tracking_uri: str, experiment_ids: Sequence[str], filter_string: str = "") -> list[Run]:
    """Every run of the experiments that `filter_string` selects, page after page (`store.search_all`)."""
    client = _client(tracking_uri)
    return list(store.with_retries(lambda: store.search_all(client, list(experiment_ids), filter_string)))


def run_tags(tracking_uri: str, run_id: str) -> dict[str, str]:
    """A run's tags."""
    run = store.with_retries(lambda: _client(tracking_uri).get_run(run_id))
    return dict(run.data.tags)


def run_experiment_id(tracking_uri: str, run_id: str) -> str:
    """The id of the experiment a run belongs to."""
    run = store.with_retries(lambda: _client(tracking_uri).get_run(run_id))
    return str(run.info.experiment_id)


def parquet_artifact(tracking_uri: str, run_id: str, path: str) -> pd.DataFrame | None:
    """A run's parquet artifact at `path`, or None when the run has none (or it cannot be read)."""
    import pandas as pd
    from mlflow.exceptions import MlflowException

    client = _client(tracking_uri)
    with tempfile.TemporaryDirectory() as tmp:
        try:
            local = store.with_retries(lambda: client.download_artifacts(run_id, path, tmp))
            return pd.read_parquet(local)
        except (MlflowException, OSError):
            return None


def log_folder_run(
    folder: Path,
    *,
    tracking_uri: str,
    experiment_id: str,
    name: str,
    tags: Mapping[str, str],
    params: Mapping[str, object],
) -> str:
    """A finished run named `name` in the experiment, with `tags`, `params` (each value as text,
    `names.param_text`) and the files of `folder` as its artifacts; returns its id. The run is closed FAILED
    when logging fails (KILLED when interrupted), and the error raised."""
    client = _client(tracking_uri)
    run = store.with_retries(lambda: client.create_run(experiment_id, run_name=name, tags=dict(tags)))
    run_id = run.info.run_id
    try:
        for key, value in params.items():
            store.with_retries(functools.partial(client.log_param, run_id, key, names.param_text(value)))
        # a snapshot, so the artifacts match what this call wrote: hard links (the report is replaced whole, by
        # renames, never written over in place), so its bytes are on disk once with a local store
        with tempfile.TemporaryDirectory(dir=Path(folder).parent, prefix=".snapshot-") as tmp:
            shutil.copytree(folder, Path(tmp) / "report", copy_function=_link_or_copy)
            store.with_retries(lambda: store.log_artifacts(client, run_id, Path(tmp) / "report"))
    except BaseException as err:  # Ctrl-C too: no comparison run is left RUNNING
        status = "KILLED" if isinstance(err, KeyboardInterrupt) else "FAILED"
        store.with_retries(lambda: client.set_terminated(run_id, status))
        raise
    store.with_retries(lambda: client.set_terminated(run_id, "FINISHED"))
    return str(run_id)


def _link_or_copy(source: str, target: str) -> None:
    """A hard link where the file system allows one, else a copy."""
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)
