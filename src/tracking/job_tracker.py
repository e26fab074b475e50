"""One MLflow run per job: `JobTracker` makes it, keeps its heartbeat, logs the job into it, closes it FINISHED,
FAILED or KILLED, and falls back to the offline store when the server stops answering."""

from __future__ import annotations

import contextlib
import functools
import json
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from src.common import owners
from src.common.errors import UserError
from src.common.paths import expand_path
from src.tracking import offline, review, store
from src.tracking.dead_runs import HEARTBEAT_S, mark_interrupted_runs
from src.tracking.names import metric_name, param_text

if TYPE_CHECKING:
    from mlflow.data.pandas_dataset import PandasDataset

T = TypeVar("T")


last_run: dict[str, str] = {}  # the run the latest JobTracker of this process made: run_id, uri, status


class JobTracker:
    """A job's MLflow run, through MlflowClient: a health check of the store first, every call retried on the
    races of parallel first use, MLflow's HTTP retries bounded by `tracking.retry_budget_s`. When the server does
    not answer: with `tracking.on_outage=fail` the job stops in one line (UserError, exit 2); with `offline` it goes
    on into `tracking.offline_dir` and says to run `python -m src.sync`. Every run it makes ends FINISHED, FAILED
    or KILLED; a run on a server that died is noted for `src.sync` to close."""

    def __init__(self, options: store.TrackingOptions, *, job_hash: str, sweep: Mapping[str, str] | None = None):
        self.options = options  # checked once, where the job's spec was built (src/config/spec.py)
        store.apply_retry_budget(options.retry_budget_s)
        self.target = options.uri
        self.offline_dir = expand_path(options.offline_dir)
        self.offline_uri = f"sqlite:///{self.offline_dir}/mlflow.db"
        self.job_hash = job_hash
        self.sweep = dict(sweep or {})
        self.run_id: str | None = None
        self.fell_back = False
        self._connect(self.offline_uri if options.offline else self.target)

    # -- where the job logs

    @property
    def offline(self) -> bool:
        return self.uri == self.offline_uri

    def _can_fall_back(self) -> bool:
        return self.options.on_outage == "offline" and not self.offline

    def _connect(self, uri: str) -> None:
        import mlflow

        uri = store.local_uri(uri)  # `sqlite:///~/...` is the home's store (src/common/paths.py)
        self.uri = uri
        try:
            store.check_tracking(uri)  # the health check: before any compute, and before each job of a sweep
            store.open_store(uri)
            self.client = store.client(uri)
            self.exp_id = self._call(lambda: store.experiment_id(self.client, self.options.experiment, uri))
        except UserError as err:
            if not self._can_fall_back():
                raise
            self._fall_back(err)
            return
        mlflow.set_tracking_uri(uri)

    def _fall_back(self, err: BaseException) -> None:
        print(
            f"warning: MLflow server {self.target} is not answering; this job logs to {self.offline_dir} "
            f"(tracking.on_outage=offline): run python -m src.sync --offline-dir {self.offline_dir} once the "
            f"server is back",
            file=sys.stderr,
        )
        self.fell_back = True
        self._connect(self.offline_uri)

    def _down(self, err: BaseException, doing: str) -> store.TrackingDown:
        return store.TrackingDown(
            f"config key tracking.uri: MLflow server {self.uri} stopped answering {doing} "
            f"({store.short(err)}); answers already computed are in the response cache: start the server "
            f"and run the same command again, or set tracking.on_outage=offline"
        )

    def _call(self, op: Callable[[], T], *, doing: str = "before the job started") -> T:
        """`op()` with the race retries; a server outage becomes TrackingDown (after MLflow's bounded retries)."""
        try:
            return store.with_retries(op)
        except UserError:
            raise
        except Exception as err:
            if store.is_outage(err):
                raise self._down(err, doing) from None
            raise

    # -- before the job

    def finished_run(
        self, identities: Mapping[str, str] | None = None, *, work_hash: str | None = None
    ) -> store.Run | None:
        """The latest FINISHED run of this job's config hash in the experiment (with these content `identities`
        where given), or None. With `work_hash`: of that hash instead (the config less where the model's files
        are, src/job/runner.py), so a model folder that moved finds the runs made with the same files."""
        which = ("work_hash", work_hash) if work_hash else ("config_hash", self.job_hash)
        return self._before(lambda: finished_run_of(self.client, self.exp_id, which[1], identities, tag=which[0]))

    def finished_metrics(self, run: store.Run) -> dict[str, float]:
        """Every metric a finished run's job computed: its `metrics.json` (MLflow holds the review view only,
        `review_view`), or the metrics MLflow holds when the artifact cannot be read."""
        import tempfile

        try:
            with tempfile.TemporaryDirectory(prefix="metrics-") as folder:
                local = self._call(lambda: self.client.download_artifacts(run.info.run_id, "metrics.json", folder))
                return {k: float(v) for k, v in json.loads(Path(local).read_text()).items()}
        except store.TrackingDown:
            raise
        except Exception:  # noqa: BLE001 - a run without a readable metrics.json (logged elsewhere, or older)
            return {metric_name(k): v for k, v in run.data.metrics.items()}

    def mark_interrupted(self) -> None:
        self._before(lambda: mark_interrupted_runs(self.client, self.exp_id, self.job_hash))

    def _before(self, op: Callable[[], T]) -> T:
        try:
            return self._call(op)
        except store.TrackingDown as err:
            if not self._can_fall_back():
                raise
            self._fall_back(err)
            return self._call(op)

    # -- the run

    def _tags(self, tags: Mapping[str, str]) -> dict[str, str]:
        out = {
            "config_hash": self.job_hash,
            "kind": "job",
            "owner": owners.this_owner(),
            "heartbeat": str(int(time.time())),
            **tags,
        }
        if self.offline:
            from src.common.redact import redact_text  # local: loads hydra (slow import)

            out["offline_target"] = redact_text(self.target)  # where `python -m src.sync` uploads it (no secret)
        if self.sweep.get("sweep_id"):
            out["sweep_id"] = self.sweep["sweep_id"]
        if self.sweep.get("parent_run_id"):
            out["mlflow.parentRunId"] = self.sweep["parent_run_id"]
        return out

    def _create(self, run_name: str, tags: Mapping[str, str]) -> str:
        from mlflow.tracking.context import registry as context_registry

        resolved = context_registry.resolve_tags(self._tags(tags))
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
            run_id = self._create(run_name, self._run_tags)
        except store.TrackingDown as err:
            self._lost_create(since=time.time() - 60)
            if not self._can_fall_back():
                raise
            self._fall_back(err)
            run_id = self._create(run_name, self._run_tags)
        beating = threading.Event()
        heart = threading.Thread(target=self._beat, args=(self.client, run_id, beating), daemon=True)
        heart.start()
        try:
            yield run_id
        except KeyboardInterrupt:
            beating.set()
            self._close("KILLED", interrupted="true")
            raise
        except store.TrackingDown:
            raise  # closed, or noted for src.sync, where it was raised
        except BaseException:
            beating.set()
            self._close("FAILED")
            raise
        finally:
            beating.set()
        self._close("FINISHED")

    @staticmethod
    def _beat(client: store.Client, run_id: str, stop: threading.Event) -> None:
        """Refresh the run's `heartbeat` tag while the job lives, so that no other process takes it for dead."""
        while not stop.wait(HEARTBEAT_S):
            try:
                client.set_tag(run_id, "heartbeat", str(int(time.time())))
            except Exception:  # noqa: BLE001 - a missed beat only makes the run look older
                pass

    def _lost_create(self, since: float) -> None:
        """The server may have made the run whose id never came back: note it, found by its config hash."""
        offline.note_pending_close(
            self.offline_dir,
            self.uri,
            None,
            "KILLED",
            interrupted="true",
            search={"experiment_id": self.exp_id, "config_hash": self.job_hash, "since": int(since * 1000)},
        )

    def _close(self, status: str, **tags: str) -> None:
        last_run["status"] = status
        run_id = self.run_id
        assert run_id is not None  # run() made the run it closes
        try:
            store.check_tracking(self.uri)
            for key, value in tags.items():
                self._call(functools.partial(self.client.set_tag, run_id, key, value))
            self._call(lambda: self.client.set_terminated(run_id, status))
        except UserError as err:
            offline.note_pending_close(self.offline_dir, self.uri, run_id, status, search=None, **tags)
            print(
                f"warning: run {self.run_id} could not be marked {status} ({store.short(err, 100)}); "
                f"python -m src.sync --offline-dir {self.offline_dir} marks it once the server is back",
                file=sys.stderr,
            )

    def log(
        self,
        *,
        params: Mapping[str, Any],
        metrics: Mapping[str, float],
        tags: Mapping[str, str],
        artifacts_dir: Path,
        dataset: PandasDataset | None = None,
    ) -> None:
        """Params, metrics (as `review_view` shows them), tags, the questions asked as
        the run's `dataset` input and the artifacts into the job's run; a server outage here moves the run into the
        offline store (`on_outage=offline`) or stops the job in one line with the run noted as FAILED."""
        view = review.review_view(metrics)
        review.write_subjects(view[1], artifacts_dir)
        try:
            self._log(params, view[0], tags, artifacts_dir, dataset)
        except store.TrackingDown as err:
            lost = self.run_id
            assert lost is not None  # run() made it before the job logs
            if not self._can_fall_back():
                last_run["status"] = "FAILED"
                offline.note_pending_close(self.offline_dir, self.uri, lost, "FAILED", error="tracking server outage")
                raise
            offline.note_pending_close(
                self.offline_dir,
                self.uri,
                lost,
                "KILLED",
                interrupted="true",
                error="tracking server outage; the job went on offline",
            )
            self._fall_back(err)
            self._create(self._run_name, {**self._run_tags, "replaces_run_id": lost})
            self._log(params, view[0], tags, artifacts_dir, dataset)

    def _log(
        self,
        params: Mapping[str, Any],
        metrics: Mapping[str, float],
        tags: Mapping[str, str],
        artifacts_dir: Path,
        dataset: PandasDataset | None = None,
    ) -> None:
        from mlflow.entities import Dataset, DatasetInput, InputTag, Metric, Param, RunTag
        from mlflow.utils.mlflow_tags import MLFLOW_DATASET_CONTEXT

        run_id = self.run_id
        assert run_id is not None  # run() made it before the job logs
        doing = f"while logging run {run_id}"
        now = int(time.time() * 1000)
        self._call(
            lambda: self.client.log_batch(
                run_id,
                metrics=[Metric(k, v, now, 0) for k, v in metrics.items()],
                params=[Param(k, param_text(v)) for k, v in params.items()],
                tags=[RunTag(k, str(v)) for k, v in tags.items()],
            ),
            doing=doing,
        )
        if dataset is not None:  # the runs table's Dataset column: the benchmark, and a digest of its questions
            entity = Dataset(**dataset.to_dict())  # the dataset's public description, as MLflow's log_input sends it
            asked = DatasetInput(entity, tags=[InputTag(MLFLOW_DATASET_CONTEXT, "eval")])
            self._call(lambda: self.client.log_inputs(run_id, [asked]), doing=doing)
        self._call(lambda: self._share_review_view(metrics), doing=doing)
        self._call(lambda: store.log_artifacts(self.client, run_id, artifacts_dir), doing=doing)

    def _share_review_view(self, metrics: Mapping[str, float]) -> None:
        """Add this run's headline metrics to the experiment's review view (`review_link`)."""
        names = [metric_name(k) for k in metrics]
        key = review.SHARED_VIEW_TAG + review.REVIEW_VIEW_KEY
        earlier = self.client.get_experiment(self.exp_id).tags.get(key)
        state = review.review_view_state(names, earlier)
        if state != earlier:
            self.client.set_experiment_tag(self.exp_id, key, state)
        described = self.client.get_experiment(self.exp_id).tags.get(review.LEGEND_TAG)
        legend = review.review_legend(state)
        if (described is None or described.startswith(review.LEGEND_HEAD)) and described != legend:
            self.client.set_experiment_tag(self.exp_id, review.LEGEND_TAG, legend)  # the view's legend


def finished_run_of(
    client: store.Client,
    experiment: str,
    job_hash: str,
    identities: Mapping[str, str] | None = None,
    *,
    tag: str = "config_hash",
) -> store.Run | None:
    """`finished_run` through an MlflowClient (`tag`: the hash tag searched, config_hash or work_hash)."""
    which = "".join(f" and tags.{tag} = '{value}'" for tag, value in (identities or {}).items())
    runs = client.search_runs(
        [experiment],
        max_results=1,
        order_by=["attributes.start_time DESC"],
        filter_string=f"tags.{tag} = '{job_hash}' and attributes.status = 'FINISHED'{which}",
    )
    return runs[0] if runs else None


def artifacts_folder(out_dir: str | Path) -> Path:
    """`out_dir/artifacts`, made empty: an earlier run's files there are that run's artifacts in a local store too
    (hard links, `store.log_artifacts`), so they are removed, never written over in place."""
    import shutil

    folder = Path(out_dir) / "artifacts"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    return folder
