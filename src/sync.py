"""Upload runs logged with `tracking.offline=true` to their tracking server.

    python -m src.sync [--offline-dir mlruns/offline] [--to URI]

Each finished offline run is copied (params, metrics, tags, artifacts) into the experiment of the same name at
`--to` (default: the `offline_target` tag the run was logged with) and tagged `synced_run_id` in the offline
store, so running sync again uploads only what is new. A sweep's parent run logged offline is uploaded before its
jobs, which then point at the uploaded parent. Runs that a server outage left RUNNING on the server (noted in
`<offline dir>/pending_closes.jsonl` by jobs with `tracking.on_outage=fail` or `offline`) get their final status.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from src.cli import entry, user_error
from src.common.errors import UserError
from src.common.redact import MASK
from src.tracking import offline, store


def sync(offline_dir: Path, to: str | None = None) -> list[tuple[str, str]]:
    """Copy every unsynced FINISHED offline run (and the sweep parent runs they belong to, parents first); returns
    (offline run id, uploaded run id) pairs. Safe to run again after an interruption: a run half uploaded by an
    earlier sync is replaced, a complete one is only marked, so every trial arrives exactly once."""
    db = offline_dir / "mlflow.db"
    if not db.is_file():
        if (offline_dir / offline.PENDING_FILE).is_file():
            return []  # only runs to close (main applies them)
        raise UserError(f"no offline runs at {db}: pass --offline-dir (the tracking.offline_dir of the runs)")
    source = store.client(f"sqlite:///{db}")
    todo = []
    for exp in source.search_experiments():
        for run in store.search_all(source, [exp.experiment_id], "attributes.status != 'RUNNING'"):
            is_parent = run.data.tags.get("kind") == "sweep"
            if "synced_run_id" in run.data.tags or (run.info.status != "FINISHED" and not is_parent):
                continue
            todo.append((not is_parent, run.info.start_time, exp, run))
    copied: list[tuple[str, str]] = []
    new_ids: dict[str, str] = {}  # offline run id -> its uploaded run id
    for _, _, exp, run in sorted(todo, key=lambda t: t[:2]):  # sweep parents first: their jobs point at them
        target_uri = to or run.data.tags.get("offline_target")
        if not target_uri:
            raise UserError(f"offline run {run.info.run_id} has no offline_target tag: pass --to URI")
        if MASK in target_uri:  # the store's credentials were never written down: the user gives them again
            raise UserError(
                f"offline run {run.info.run_id}: its target {target_uri} had credentials, which offline "
                f"runs never store; pass --to URI with them (or set MLFLOW_TRACKING_USERNAME and "
                f"MLFLOW_TRACKING_PASSWORD and give --to without them)"
            )
        new_id = _upload(source, run, exp.name, target_uri, new_ids)
        new_ids[run.info.run_id] = new_id
        source.set_tag(run.info.run_id, "synced_run_id", new_id)
        copied.append((run.info.run_id, new_id))
    return copied


def _upload(source: store.Client, run: store.Run, experiment: str, target_uri: str, new_ids: dict[str, str]) -> str:
    from mlflow.entities import Metric, Param

    store.check_tracking(target_uri)
    store.open_store(target_uri)
    target = store.client(target_uri)
    exp_id = store.with_retries(lambda: store.experiment_id(target, experiment, target_uri))
    earlier = store.search_all(target, [exp_id], f"tags.synced_from = '{run.info.run_id}'")
    for done in earlier:
        if done.info.status == run.info.status:  # uploaded whole by a sync that stopped before marking it
            return str(done.info.run_id)
        target.delete_run(done.info.run_id)  # half uploaded: replaced below
    # every tag the run was logged with, MLflow's own (user, source) included, so a synced run carries what an
    # online run of the same job does; the parent link is re-pointed below
    tags = {k: v for k, v in run.data.tags.items() if k != "mlflow.parentRunId"}
    parent = run.data.tags.get("mlflow.parentRunId")
    if parent in new_ids:
        tags["mlflow.parentRunId"] = new_ids[parent]
    elif parent and _exists(target, parent):  # the sweep's parent run was made on the server before the outage
        tags["mlflow.parentRunId"] = parent
    elif parent:  # its parent is still running offline: linked when the parent is uploaded
        tags["offline_parent_run_id"] = parent
    tags["synced_from"] = run.info.run_id
    new = target.create_run(exp_id, start_time=run.info.start_time, tags=tags, run_name=run.info.run_name)
    target.log_batch(
        new.info.run_id,
        metrics=[Metric(k, v, run.info.end_time or 0, 0) for k, v in run.data.metrics.items()],
        params=[Param(k, v) for k, v in run.data.params.items()],
    )
    with tempfile.TemporaryDirectory() as tmp:
        local = source.download_artifacts(run.info.run_id, "", tmp)
        target.log_artifacts(new.info.run_id, local)
    if run.data.tags.get("kind") == "sweep":  # jobs that reached the server, or were synced, before this parent
        for key in ("mlflow.parentRunId", "offline_parent_run_id"):
            for child in store.search_all(target, [exp_id], f"tags.{key} = '{run.info.run_id}'"):
                target.set_tag(child.info.run_id, "mlflow.parentRunId", new.info.run_id)
    target.set_terminated(new.info.run_id, run.info.status, end_time=run.info.end_time)
    return str(new.info.run_id)


def _exists(client: store.Client, run_id: str) -> bool:
    try:
        client.get_run(run_id)
        return True
    except Exception:  # noqa: BLE001 - MLflow's RESOURCE_DOES_NOT_EXIST
        return False


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m src.sync", description=__doc__.split("\n")[1])
    parser.add_argument("--offline-dir", type=Path, default=Path("mlruns/offline"))
    parser.add_argument("--to", default=None, help="tracking URI to upload to (default: each run's offline_target)")
    args = parser.parse_args(argv)
    try:
        copied = sync(args.offline_dir, args.to)
        closed = offline.apply_pending_closes(args.offline_dir)  # runs a server outage left RUNNING
    except UserError as err:
        return user_error(err)
    for old, new in copied:
        print(f"uploaded offline run {old} as {new}")
    print(f"{len(copied)} run(s) uploaded")
    if closed:
        print(f"{closed} run(s) left RUNNING by a tracking server outage given their final status")
    return 0


if __name__ == "__main__":
    entry(main)
