"""Upload runs logged with `tracking.offline=true` to their tracking server.

    python -m src.sync [--offline-dir mlruns/offline] [--to URI]

Each finished offline run is copied (params, metrics, tags, artifacts) into the experiment of the same name at
`--to` (default: the `offline_target` tag the run was logged with) and tagged `synced_run_id` in the offline
store, so running sync again uploads only what is new.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from .errors import UserError


def sync(offline_dir: Path, to: str | None = None) -> list[tuple[str, str]]:
    """Copy every unsynced FINISHED offline run; returns (offline run id, uploaded run id) pairs."""
    from mlflow.entities import Metric, Param, RunTag
    from mlflow.tracking import MlflowClient

    from . import tracking

    db = offline_dir / "mlflow.db"
    if not db.is_file():
        raise UserError(f"no offline runs at {db}: pass --offline-dir (the tracking.offline_dir of the runs)")
    source = MlflowClient(tracking_uri=f"sqlite:///{db}")
    copied = []
    for exp in source.search_experiments():
        for run in source.search_runs([exp.experiment_id], filter_string="attributes.status = 'FINISHED'"):
            if "synced_run_id" in run.data.tags:
                continue
            target_uri = to or run.data.tags.get("offline_target")
            if not target_uri:
                raise UserError(f"offline run {run.info.run_id} has no offline_target tag: pass --to URI")
            tracking.check_tracking(target_uri)
            import mlflow

            mlflow.set_tracking_uri(target_uri)
            target = MlflowClient(tracking_uri=target_uri)
            exp_id = tracking.experiment_id(mlflow, exp.name, target_uri)
            tags = {k: v for k, v in run.data.tags.items() if not k.startswith("mlflow.") or k == "mlflow.runName"}
            new = target.create_run(exp_id, start_time=run.info.start_time, tags=tags, run_name=run.info.run_name)
            target.log_batch(new.info.run_id,
                             metrics=[Metric(k, v, run.info.end_time or 0, 0) for k, v in run.data.metrics.items()],
                             params=[Param(k, v) for k, v in run.data.params.items()],
                             tags=[RunTag("synced_from", run.info.run_id)])
            with tempfile.TemporaryDirectory() as tmp:
                local = source.download_artifacts(run.info.run_id, "", tmp)
                target.log_artifacts(new.info.run_id, local)
            target.set_terminated(new.info.run_id, "FINISHED", end_time=run.info.end_time)
            source.set_tag(run.info.run_id, "synced_run_id", new.info.run_id)
            copied.append((run.info.run_id, new.info.run_id))
    return copied


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m src.sync", description=__doc__.split("\n")[1])
    parser.add_argument("--offline-dir", type=Path, default=Path("mlruns/offline"))
    parser.add_argument("--to", default=None, help="tracking URI to upload to (default: each run's offline_target)")
    args = parser.parse_args(argv)
    try:
        copied = sync(args.offline_dir, args.to)
    except UserError as err:
        print(f"error: {err}", file=sys.stderr)
        return err.exit_code
    for old, new in copied:
        print(f"uploaded offline run {old} as {new}")
    print(f"{len(copied)} run(s) uploaded")
    return 0


if __name__ == "__main__":
    sys.exit(main())
