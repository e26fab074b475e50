"""Closes that could not reach the store (tracking.on_outage=offline), applied later."""
from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Mapping

from src.common.errors import UserError
from src.tracking import store

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
        run = store.with_retries(lambda: client.get_run(entry["run_id"]))
        return [entry["run_id"]] if run.info.status in ("RUNNING", "SCHEDULED") else []
    search = entry["search"]
    runs = store.with_retries(lambda: client.search_runs(
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
            store.check_tracking(entry["uri"])
            client = MlflowClient(tracking_uri=entry["uri"])
            for run_id in _pending_runs(client, entry):
                for key, value in entry.get("tags", {}).items():
                    store.with_retries(lambda: client.set_tag(run_id, key, value))
                store.with_retries(lambda: client.set_terminated(run_id, entry["status"], end_time=entry["end_time"]))
                closed += 1
        except UserError:
            down.add(entry["uri"])
            kept.append(entry)
        except Exception as err:  # the run is gone (deleted store): nothing left to close
            if store.is_outage(err):
                down.add(entry["uri"])
                kept.append(entry)
    path.write_text("".join(json.dumps(e) + "\n" for e in kept))
    return closed
