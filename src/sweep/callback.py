"""Hydra callback that gives each multirun one MLflow parent run and a shared `sweep_id`.

The parent run holds the sweep's config and overrides; every job's run carries `sweep_id` and
`mlflow.parentRunId`, so the MLflow UI can filter and compare one sweep. Jobs find the ids in
`<sweep dir>/sweep.json`, which also works for launchers that run jobs in other processes or hosts
sharing the sweep folder.

Before the first job it refuses the sweep when a job's config is invalid or a model's weights or a benchmark's
files are missing. A rerun of the same sweep (same `sweep_hash`, any sweep folder) joins its parent run. Each
job writes its outcome to `<job dir>/job.json` (src/run.py); at the end the callback prints the summary, gives
the parent run FINISHED or FAILED (KILLED when interrupted) and sets the exit code.
"""

from __future__ import annotations

import json
import logging
import sys
import uuid
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from src.backends import load_backend
from src.benchmarks import load_benchmark
from src.common.digests import json_sha256, sorted_json
from src.common.errors import UserError
from src.common.redact import redact, redact_text
from src.config import hydra_adapter, plain_dict
from src.config.checks import job_spec
from src.config.spec import JobSpec
from src.config.sweep_compose import composed_jobs, split_sweep
from src.presentation.closing import look_commands
from src.sweep import state as sweep_state
from src.tracking import offline as tracking_offline, store
from src.tracking.dead_runs import mark_dead_runs
from src.tracking.identity import JOB_INDEPENDENT_KEYS
from src.tracking.names import param_text
from src.tracking.provenance import git_commit

log = logging.getLogger(__name__)
SWEEP_FILE = "sweep.json"


def read_sweep_info(sweep_dir: str | Path) -> dict[str, str]:
    path = Path(sweep_dir) / SWEEP_FILE
    return json.loads(path.read_text()) if path.is_file() else {}


# Hydra's basic sweeper and ours, which runs the same jobs (hydra_plugins/mcq_consistency_sweeper.py)
BASIC_SWEEPERS = (hydra_adapter.BASIC_SWEEPER, "hydra_plugins.mcq_consistency_sweeper.PrecheckedSweeper")


def sweep_jobs(config: DictConfig) -> list[list[str]]:
    """The override lists of every job of this multirun, as Hydra's basic sweeper will launch them ([] for another
    sweeper, whose jobs are then checked one by one as they start)."""
    sweeper = config.hydra.get("sweeper") or {}
    if sweeper.get("_target_") not in BASIC_SWEEPERS:
        return []
    params = [f"{k}={v}" for k, v in (sweeper.get("params") or {}).items()]
    return split_sweep([*params, *config.hydra.overrides.task])


def refused_jobs(composed: list[tuple[list[str], Any]]) -> list[str]:
    """One line per job of `composed` (`sweep_compose.composed_jobs`) whose config the run would refuse (validity
    rules, value checks), naming the job by its overrides."""
    return checked_jobs(composed)[1]


def checked_jobs(composed: list[tuple[list[str], Any]]) -> tuple[list[JobSpec], list[str]]:
    """(the spec of each job of `composed` that its check accepts, one line per job it refuses): `job_spec`, once a
    job; the jobs this process runs (the basic launcher) find their spec built."""
    specs, lines = [], []
    for job, cfg in composed:
        try:
            if isinstance(cfg, Exception):
                raise cfg
            specs.append(job_spec(cfg))
        except UserError as err:
            lines.append(f"job {' '.join(job)}: {err}")
    return specs, lines


def sweep_hash(config: DictConfig) -> str:
    """What makes two multiruns the same sweep: the config (hydra, where-things-go keys aside), the sweep axes and
    the command line's overrides. A rerun of a killed sweep finds its earlier parent run by it."""

    def job_key(override: str) -> bool:
        key = override.lstrip("+~").split("=", 1)[0].split(".", 1)[0].split("/", 1)[0]
        return key not in ("hydra", *JOB_INDEPENDENT_KEYS)

    kept = [str(k) for k in config if k not in ("hydra", *JOB_INDEPENDENT_KEYS)]  # the top-level keys
    body = OmegaConf.to_container(OmegaConf.masked_copy(config, kept), resolve=False)
    params = config.hydra.sweeper.get("params")
    axes = OmegaConf.to_container(params) if OmegaConf.is_config(params) else dict(params or {})
    task = sorted(o for o in config.hydra.overrides.task if job_key(o))
    return json_sha256([body, axes, task], length=16)


def missing_resources(specs: list[JobSpec]) -> list[str]:
    """One line per model whose weights, or benchmark whose files, a job of this sweep needs and cannot find:
    checked before the first job, so a missing model is not found only when its first job starts hours in."""
    needs: dict[str, tuple[Any, list[int]]] = {}
    for num, spec in enumerate(specs):
        model, bench = spec.backend_config, dict(spec.benchmark)
        for key, need in (
            (sorted_json(["model", model]), ("model", model)),
            (
                sorted_json(["bench", bench, spec.data_dir]),  # its files
                ("benchmark", (bench, spec.data_dir, spec.seed)),
            ),
        ):
            needs.setdefault(key, (need, []))[1].append(num)
    lines = []
    for (kind, what), nums in needs.values():
        try:
            if kind == "model":
                load_backend(what, chat=False)  # finds (and fingerprints) the weights; loads nothing
            else:
                bench, data_dir, seed = dict(what[0]), what[1], what[2]
                load_benchmark(
                    bench.pop("name"),
                    path=bench.pop("path", None),
                    split=bench.pop("split", None),
                    data_dir=data_dir,
                    seed=seed,
                    limit=1,
                    options=bench,
                )
        except UserError as err:
            shown = ", ".join(f"#{n}" for n in nums[:6]) + (f" and {len(nums) - 6} more" if len(nums) > 6 else "")
            lines.append(f"job{'s' if len(nums) > 1 else ''} {shown}: {err}")
    return lines


# ---------------------------------------------------------------- what each job of a multirun did

JOB_FILE = "job.json"  # in each job's output folder: its outcome, read by the sweep's summary


def job_label(overrides: list[str]) -> str:
    """A job's overrides without those that only say where things go (tracking, cache, hydra).

    >>> job_label(["model=simulated", "seed=1", "tracking.uri=http://h:5000", "cache.path=c.db"])
    'model=simulated seed=1'
    """
    return " ".join(o for o in overrides if not o.lstrip("+~").startswith(("tracking.", "cache.", "hydra")))


def write_outcome(out_dir: str | Path, **outcome: Any) -> None:
    path = Path(out_dir)
    path.mkdir(parents=True, exist_ok=True)

    (path / JOB_FILE).write_text(json.dumps(redact(outcome)))


def read_outcomes(sweep_dir: str | Path, invocation: str | None) -> list[dict[str, Any]]:
    """The outcomes the jobs of this invocation of the sweep wrote, in job order."""
    found = []
    for path in Path(sweep_dir).glob(f"*/{JOB_FILE}"):
        try:
            outcome = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if invocation is None or outcome.get("invocation") == invocation:
            found.append(outcome)
    return sorted(found, key=lambda o: int(o.get("num", 0)))


def report_lost_job(
    config: DictConfig, hydra_context: Any, num: int, overrides: list[str], what: str, *, status: str
) -> None:
    """One `error: job #N (...)` line and the outcome record of job #num of the multirun `config`, which ended
    outside its own error handling (a cluster launcher's job that was cancelled, killed or lost: src/sweep/job.py
    writes the record of a job that could); the record the job wrote when it was stopped keeps its run id."""
    from omegaconf import open_dict

    sweep_dir = Path(str(config.hydra.sweep.dir))
    invocation = read_sweep_info(sweep_dir).get("invocation")
    earlier = next((o for o in read_outcomes(sweep_dir, invocation) if int(o.get("num", -1)) == num), {})
    message = f"{what}; run the same command again to resume it from the response cache"
    print(f"error: job #{num} ({job_label(overrides)}): {message}", file=sys.stderr, flush=True)
    job_cfg = hydra_context.config_loader.load_sweep_config(config, overrides)
    with open_dict(job_cfg.hydra.job):
        job_cfg.hydra.job.num = num  # the job's folder (hydra.sweep.subdir) is named by it
    out_dir = sweep_dir / str(job_cfg.hydra.sweep.subdir)
    write_outcome(
        out_dir,
        num=num,
        overrides=overrides,
        invocation=invocation,
        offline_dir=str(job_cfg.tracking.offline_dir),
        run_id=earlier.get("run_id"),
        status=status,
        error=message,
    )


class MlflowSweepCallback(Callback):
    def __init__(self, enabled: bool = True) -> None:
        self.enabled = enabled
        self.client: store.Client | None = None  # the parent run's store, from `_open_parent` on
        self.parent_id: str | None = None
        self.parent_uri: str | None = None
        self.experiment_id: str | None = None
        self.sweep_id: str | None = None
        self.sweep_dir: Path | None = None
        self.invocation = uuid.uuid4().hex[:12]
        self.expected: int | None = None
        self.tracking: store.TrackingOptions | None = None  # the sweep's, once its parent run is opened
        self.closed = False  # finish() ran: the parent has its terminal status
        self.look: tuple[str, str] | None = None  # (tracking uri, experiment) the summary's commands name
        self.composed: set[tuple[str, ...]] = set()  # jobs composed here, which the sweeper does not compose again

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        from hydra.core.global_hydra import GlobalHydra

        running = sweep_state.current()  # the entry point's (run.py and the sweeper read it)
        running.callback, running.exit_code = self, 0
        composed = composed_jobs(config, sweep_jobs(config), GlobalHydra.instance().config_loader())
        self.composed = {tuple(job) for job, cfg in composed if not isinstance(cfg, Exception)}
        specs, refused = checked_jobs(composed)
        if refused:  # before any job runs or any parent run is made
            for line in refused:
                print(f"error: {line}", file=sys.stderr)
            print(
                f"error: the sweep refuses {len(refused)} job(s) listed above and runs none; drop those "
                f"combinations (or run them as separate sweeps) and start again",
                file=sys.stderr,
            )
            sys.exit(2)
        missing = missing_resources(specs)
        if missing:
            for line in missing:
                print(f"error: {line}", file=sys.stderr)
            print(
                "error: the sweep runs none of its jobs until every model and benchmark file above is there",
                file=sys.stderr,
            )
            sys.exit(2)
        self.sweep_dir = Path(config.hydra.sweep.dir)
        self.sweep_dir.mkdir(parents=True, exist_ok=True)
        self.expected = len(composed) or None
        self.look = (str(config.tracking.uri), str(config.tracking.experiment))
        if not self.enabled:
            return
        try:  # Hydra turns a callback's exception into a warning: the error is stated here, in one line
            self._open_parent(config)
        except UserError as err:
            print(f"error: {err}", file=sys.stderr)
            sys.exit(err.exit_code)
        except Exception as err:  # noqa: BLE001 - a sweep without its parent run would log orphans: stop
            print(
                f"error: the sweep's MLflow parent run at {config.tracking.uri}: {type(err).__name__}: "
                f"{' '.join(str(err).split())[:300]}",
                file=sys.stderr,
            )
            sys.exit(1)

    def _open_parent(self, config: DictConfig) -> None:
        """Join the sweep's parent run (same sweep folder, or a rerun of the same sweep found by `sweep_hash`),
        or make one; record its ids in `<sweep dir>/sweep.json` for the jobs."""
        tracking = plain_dict(config.tracking)  # the sweep's own, once: its jobs' are in their specs
        store.check_options(tracking)
        self.tracking = options = store.TrackingOptions.of(tracking)
        store.apply_retry_budget(options.retry_budget_s)
        offline_dir = options.offline_dir
        sweep_dir = self.sweep_dir
        assert sweep_dir is not None  # on_multirun_start sets it before opening the parent
        info = read_sweep_info(sweep_dir)
        digest = sweep_hash(config)
        uri = options.job_uri
        try:
            store.check_tracking(uri)
        except UserError:
            if options.on_outage != "offline" or options.offline:
                raise
            print(
                f"warning: MLflow server {uri} is unreachable; the sweep's parent run goes to {offline_dir} "
                f"(tracking.on_outage=offline): run python -m src.sync --offline-dir {offline_dir} once the "
                f"server is back",
                file=sys.stderr,
            )
            uri = f"sqlite:///{offline_dir}/mlflow.db"
        store.open_store(uri)
        tracking_offline.apply_pending_closes(offline_dir, uri)  # runs an earlier outage left open on this server
        client = store.client(uri)
        self.client, self.parent_uri = client, uri
        exp_id = store.with_retries(lambda: store.experiment_id(client, config.tracking.experiment, uri))
        self.experiment_id = exp_id
        parent = None

        if info.get("parent_run_id") and info.get("parent_uri", redact_text(uri)) == redact_text(uri):  # same folder
            parent = store.with_retries(lambda: client.get_run(info["parent_run_id"]))
        earlier = store.with_retries(
            lambda: store.search_all(
                client,
                [exp_id],
                f"tags.kind = 'sweep' and tags.sweep_hash = '{digest}'",
                order_by=["attributes.start_time DESC"],
            )
        )
        if parent is None and earlier and config.get("resume", True):
            parent = earlier[0]  # a rerun of the same sweep (resume=true) joins it: one parent run per sweep
        for old in earlier:  # any other parent of this sweep left open (a killed process) is closed
            if old.info.status == "RUNNING" and (parent is None or old.info.run_id != parent.info.run_id):
                # B023, a closure over a loop variable: called at once, inside the loop
                store.with_retries(lambda: client.set_tag(old.info.run_id, "interrupted", "true"))  # noqa: B023
                # B023, a closure over a loop variable: called at once, inside the loop
                store.with_retries(lambda: client.set_terminated(old.info.run_id, "KILLED"))  # noqa: B023
        if parent is not None:
            self.parent_id, self.sweep_id = parent.info.run_id, parent.data.tags.get("sweep_id") or info.get("sweep_id")
            resumed = int(parent.data.tags.get("resumed", "0")) + 1
            store.with_retries(lambda: client.set_tag(parent.info.run_id, "resumed", str(resumed)))
            store.with_retries(lambda: client.update_run(parent.info.run_id, status="RUNNING"))
            log.info("sweep %s resumes in parent run %s", self.sweep_id, self.parent_id)
        else:
            self.sweep_id = uuid.uuid4().hex[:12]
            self._create_parent(config, exp_id, digest)
        (sweep_dir / SWEEP_FILE).write_text(
            json.dumps(
                {
                    "sweep_id": self.sweep_id,
                    "parent_run_id": self.parent_id,
                    "experiment_id": exp_id,
                    "parent_uri": redact_text(uri),
                    "sweep_hash": digest,
                    "invocation": self.invocation,
                }
            )
        )

    def _create_parent(self, config: DictConfig, exp_id: str, digest: str) -> None:
        client = self.client
        assert client is not None  # _open_parent made it
        overrides = list(config.hydra.overrides.task)
        params = config.hydra.sweeper.get("params")
        sweep_params = OmegaConf.to_container(params) if OmegaConf.is_config(params) else dict(params or {})
        tags = {"sweep_id": self.sweep_id, "kind": "sweep", "sweep_hash": digest, "git_commit": git_commit()}
        if self.parent_uri != config.tracking.uri:
            tags["offline_target"] = redact_text(config.tracking.uri)  # where `python -m src.sync` uploads it
        run = store.with_retries(
            lambda: client.create_run(exp_id, run_name=f"sweep-{config.tracking.experiment}-{self.sweep_id}", tags=tags)
        )
        self.parent_id = parent_id = run.info.run_id
        store.with_retries(
            lambda: client.log_dict(
                parent_id,
                redact(
                    {
                        "overrides": overrides,
                        "sweeper_params": sweep_params,
                        "config": OmegaConf.to_container(config, resolve=False),
                    }
                ),
                "sweep.json",
            )
        )
        store.with_retries(lambda: client.log_param(parent_id, "overrides", param_text(redact(" ".join(overrides)))))

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        self.finish(interrupted=False)

    def finish(self, *, interrupted: bool) -> int:
        """Print the sweep's summary (one line per job that did not finish), give the parent run its terminal
        status and leave the exit code in the command's sweep state. Also called by run.py when the sweep is
        interrupted (Ctrl-C, SIGTERM)."""
        self.closed = True
        outcomes = read_outcomes(self.sweep_dir, self.invocation) if self.sweep_dir else []
        counts = {s: sum(o["status"] == s for o in outcomes) for s in ("finished", "skipped", "failed", "killed")}
        missing = 0 if interrupted or self.expected is None else max(0, self.expected - len(outcomes))
        failed = counts["failed"] + counts["killed"] + missing
        status = "KILLED" if interrupted else "FAILED" if failed else "FINISHED"
        closed = self._close_parent(status) if self.parent_id else None
        offline = [o for o in outcomes if o.get("offline")]
        head = (
            f"sweep {self.sweep_id or '-'}{' interrupted' if interrupted else ''}: {len(outcomes) + missing} "
            f"job(s), {counts['finished']} finished, {counts['skipped']} skipped, {failed} failed"
            + (f" ({counts['killed']} killed)" if counts["killed"] else "")
            + (f", {missing} without a report" if missing else "")
            + (f"; parent run {self.parent_id} {closed}" if self.parent_id else "")
        )
        print(head, file=sys.stderr)
        for o in outcomes:
            line = f"  #{o['num']} {o['status']:<8} {o.get('run_id') or '-':<32}  {job_label(o.get('overrides', []))}"
            if o.get("offline"):
                line += "  (offline)"
            print(line + (f": {o['error']}" if o.get("error") else ""), file=sys.stderr)
        if offline:
            folder = offline[0].get("offline_dir") or "mlruns/offline"
            print(
                f"{len(offline)} job(s) logged to {folder} while the server was down: run python -m src.sync "
                f"--offline-dir {folder} once it is back",
                file=sys.stderr,
            )
        if self.look is not None and counts["finished"] + counts["skipped"]:  # once for the sweep, not per job
            uri = self.parent_uri or self.look[0]  # the parent's store (the offline one when the server was down)
            for line in look_commands(uri, self.look[1], sweep_id=self.sweep_id):
                print(line, file=sys.stderr)
        crashed = any(o.get("crashed") for o in outcomes)
        code = 130 if interrupted else (1 if crashed else 2) if failed else 0
        sweep_state.current().exit_code = code
        return code

    def _close_parent(self, status: str) -> str:
        """The parent's terminal status, or where it was noted when its server is down."""
        client, uri, parent_id, experiment_id = self.client, self.parent_uri, self.parent_id, self.experiment_id
        # all set with the parent run, which finish() closes only when there is one
        assert client is not None and uri is not None and parent_id is not None and experiment_id is not None
        try:
            store.check_tracking(uri)
            # a job whose process was killed outright (SIGKILL, out of memory, its node lost) could not end its run
            store.with_retries(
                lambda: mark_dead_runs(
                    client, experiment_id, f"tags.sweep_id = '{self.sweep_id}' and tags.kind = 'job'"
                )
            )
            store.with_retries(lambda: client.set_terminated(parent_id, status))
            return status
        except Exception as err:
            if not (isinstance(err, UserError) or store.is_outage(err)):
                raise
            offline_dir = self.tracking.offline_dir if self.tracking is not None else "mlruns/offline"
            tracking_offline.note_pending_close(offline_dir, uri, parent_id, status)
            return f"not marked {status}: its server is down (python -m src.sync --offline-dir {offline_dir} marks it)"
