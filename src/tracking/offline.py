"""Closes that could not reach the store (tracking.on_outage=offline), applied later."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from src.common import owners
from src.common.errors import UserError
from src.tracking import store

PENDING_FILE = "pending_closes.jsonl"
LOCK_FILE = "pending_closes.lock"  # held only to append a close, or to take the file's closes or put some back
CLAIMED = "pending_closes.claimed.{owner}"  # the closes one process (owner `<host>:<pid>`) took and is applying


def note_pending_close(
    offline_dir: str | Path,
    uri: str,
    run_id: str | None,
    status: str,
    *,
    search: Mapping[str, Any] | None = None,
    **tags: str,
) -> None:
    """Remember a run that could not be given its terminal status because its server was down;
    `python -m src.sync` (and the next sweep on that server) applies it. `run_id=None` with `search`
    (experiment_id, config_hash, since): a run whose creation reached the server but whose id never came back."""
    folder = Path(offline_dir)
    folder.mkdir(parents=True, exist_ok=True)
    line = (
        json.dumps(
            {
                "uri": uri,
                "run_id": run_id,
                "status": status,
                "tags": tags,
                "search": dict(search or {}),
                "end_time": int(time.time() * 1000),
            }
        )
        + "\n"
    )
    with store.file_lock(folder / LOCK_FILE), open(folder / PENDING_FILE, "a") as handle:
        handle.write(line)


def _pending_runs(client: store.Client, entry: Mapping[str, Any]) -> list[str]:
    """The ids of the runs a pending close names that are still open."""
    if entry.get("run_id"):
        run = store.with_retries(lambda: client.get_run(entry["run_id"]))
        return [entry["run_id"]] if run.info.status in ("RUNNING", "SCHEDULED") else []
    search = entry["search"]
    runs = store.with_retries(
        lambda: store.search_all(
            client,
            [search["experiment_id"]],
            f"tags.config_hash = '{search['config_hash']}' and "
            f"attributes.status = 'RUNNING' and attributes.start_time >= {int(search['since'])}",
        )
    )
    return [r.info.run_id for r in runs if r.info.start_time <= entry["end_time"]]


def apply_pending_closes(offline_dir: str | Path, uri: str | None = None) -> int:
    """Give the runs noted by `note_pending_close` their status (those of `uri`, or all whose server answers);
    the ones that cannot be reached stay noted. Returns how many were closed.

    The closes are taken from the file under its lock (moved into this process's claim file, the pending file
    emptied) and the server is asked without the lock, so that a job noting a close meanwhile appends to the empty
    file and loses nothing; what is kept is appended back under the lock. A claim file whose process died (a killed
    sync) is taken over by the next one."""
    from mlflow.tracking import MlflowClient

    folder = Path(offline_dir)
    path = folder / PENDING_FILE
    if not path.is_file() and not any(folder.glob(CLAIMED.format(owner="*"))):
        return 0
    claim = folder / CLAIMED.format(owner=owners.this_owner())
    with store.file_lock(folder / LOCK_FILE):
        taken = [claim.read_text()] if claim.is_file() else []
        for orphan in folder.glob(CLAIMED.format(owner="*")):
            if orphan != claim and owners.is_alive(orphan.name.removeprefix(CLAIMED.format(owner=""))) is False:
                taken.append(orphan.read_text())  # its sync was killed before it put them back
                orphan.unlink()
        if path.is_file():
            taken.append(path.read_text())
        claim.write_text("".join(taken))
        path.write_text("")
    entries = [json.loads(line) for line in claim.read_text().splitlines() if line.strip()]
    kept, closed, down = [], 0, set()
    for entry in entries:
        if (uri is not None and entry["uri"] != uri) or entry["uri"] in down:
            kept.append(entry)
            continue
        try:
            store.check_tracking(entry["uri"])
            client = MlflowClient(tracking_uri=entry["uri"])
            for run_id in _pending_runs(client, entry):
                for key, value in entry["tags"].items():
                    # B023, a closure over a loop variable: called at once, inside the loop
                    store.with_retries(lambda: client.set_tag(run_id, key, value))  # noqa: B023
                status, end_time = entry["status"], entry["end_time"]
                # B023, a closure over a loop variable: called at once, inside the loop
                store.with_retries(lambda: client.set_terminated(run_id, status, end_time=end_time))  # noqa: B023
                closed += 1
        except UserError:
            down.add(entry["uri"])
            kept.append(entry)
        except Exception as err:  # noqa: BLE001 - the run is gone (deleted store): nothing left to close
            if store.is_outage(err):
                down.add(entry["uri"])
                kept.append(entry)
    with store.file_lock(folder / LOCK_FILE):
        with open(path, "a") as handle:
            handle.write("".join(json.dumps(e) + "\n" for e in kept))
        claim.unlink()
    return closed
