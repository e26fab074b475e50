"""The tracking store: checking and opening it, experiments, retries on races and outages."""

from __future__ import annotations

import math
import os
import shutil
import urllib.request
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import filelock
import tenacity

from src.common import gc_tuning, owners
from src.common.errors import UserError
from src.common.paths import expand_path
from src.tracking import mlflow_adapter
from src.tracking.mlflow_adapter import (  # the store's callers ask it what an error means (re-exported)
    is_outage as is_outage,
    is_race as is_race,
)
from src.tracking.names import DEFAULT_URI

if TYPE_CHECKING:
    from typing import TypeAlias

    from mlflow.entities import Run as MlflowRun
    from mlflow.tracking import MlflowClient

    # the store's client and a run as the other layers name them (`store.Client`, `store.Run`): only src/tracking
    # makes a client (`client`)
    Client: TypeAlias = MlflowClient
    Run: TypeAlias = MlflowRun

T = TypeVar("T")


def client(uri: str) -> Client:
    """The MLflow client of the store at `uri`; its calls are not retried (wrap them in `with_retries`)."""
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=local_uri(uri))


def local_uri(uri: str) -> str:
    """`uri` with a SQLite file's path read as the shell reads it (`~`, `$VARIABLES`: src/common/paths.py), so that
    `sqlite:///~/m/mlflow.db` is the home's store for every command and check, never `./~/m` (SQLAlchemy expands
    nothing); other URIs as they are.

    >>> local_uri("sqlite:///mlruns/mlflow.db"), local_uri("http://h:5000")
    ('sqlite:///mlruns/mlflow.db', 'http://h:5000')
    """
    db = sqlite_path(uri)
    return uri if db is None else f"sqlite:///{db}"


def sqlite_path(uri: str) -> Path | None:
    """The SQLite file of a `sqlite:///` URI, `~` and `$VARIABLES` expanded; None for another store."""
    return expand_path(uri.removeprefix("sqlite:///")) if uri.startswith("sqlite:///") else None


def job_tracking_uri(tracking_cfg: Mapping[str, Any]) -> str:
    """The store a job logs to: `tracking.uri`, or with `tracking.offline=true` a local SQLite file under
    `tracking.offline_dir` that `python -m src.sync` uploads later."""
    if tracking_cfg.get("offline"):
        folder = expand_path(tracking_cfg.get("offline_dir") or "mlruns/offline")
        return f"sqlite:///{folder}/mlflow.db"
    return local_uri(str(tracking_cfg["uri"]))


HEALTH_TIMEOUT_S = 5.0  # a server that accepts the connection but does not answer its health check in this long is down


def check_tracking(uri: str) -> None:
    """Fail fast, before any compute, when the tracking store cannot be reached."""
    db = sqlite_path(uri)
    if db is not None:
        try:
            db.parent.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise UserError(
                f"config key tracking.uri: cannot create {db.parent} ({err.strerror}); "
                "point tracking.uri at a writable sqlite:/// path"
            ) from None
        return
    if uri.startswith(("http://", "https://")):
        try:
            urllib.request.urlopen(uri.rstrip("/") + "/health", timeout=HEALTH_TIMEOUT_S).read()
        except OSError as err:
            raise UserError(
                f"config key tracking.uri: MLflow server {uri} is unreachable ({err}); start it, set "
                f"tracking.on_outage=offline or tracking.uri={DEFAULT_URI}"
            ) from None
        return
    if uri.startswith("file:") or "://" not in uri:
        raise UserError(
            f"config key tracking.uri: {uri!r} is a file store, which current MLflow refuses; "
            f"use tracking.uri={DEFAULT_URI}"
        )


def experiment_id(mlflow: Any, name: str, uri: str) -> str:
    """Get or create the experiment (`mlflow` is the module or an MlflowClient); local sqlite stores keep artifacts
    beside the database."""
    exp = mlflow.get_experiment_by_name(name)
    if exp is not None:
        return str(exp.experiment_id)
    db = sqlite_path(uri)
    location = (db.parent / "artifacts").resolve().as_uri() if db is not None else None
    try:
        return str(mlflow.create_experiment(name, artifact_location=location))
    except Exception:  # another job of the same sweep created it first
        exp = mlflow.get_experiment_by_name(name)
        if exp is None:
            raise
        return str(exp.experiment_id)


def with_retries(op: Callable[[], T], *, attempts: int = 12) -> T:
    """Run `op`, retrying while a shared SQLite store is locked by a parallel job (joblib launcher) or its schema
    is being created by another process (`is_race`: MLflow wraps sqlite's OperationalError in its own exception
    types); backing off 0.1 s, doubled each time up to 5 s. The last attempt's error is raised as it is."""
    retrying = tenacity.Retrying(
        retry=tenacity.retry_if_exception(is_race),
        stop=tenacity.stop_after_attempt(attempts),
        wait=tenacity.wait_exponential(multiplier=0.1, max=5.0),
        reraise=True,
    )
    return retrying(op)


_OPENED: set[str] = set()  # the stores this process opened (created or upgraded once)


def open_store(uri: str) -> None:
    """Make sure the store's schema exists before any other MLflow call of this process. For a SQLite store the
    creation (MLflow's alembic migrations, seconds long, not one transaction) runs under an exclusive lock on
    `<db>.init.lock`, so parallel first jobs (joblib workers, several `python -m src.run`) create it once and the
    others wait for it; and it makes the store under a temporary name beside it, renamed into place when whole, so
    a process killed during the migrations (SIGKILL, OOM, a power cut) leaves no half-made store that every later
    command would fail on. An existing store of an older MLflow schema is refused in one line (MLflow itself never
    upgrades one in place): its upgrade is the user's, after a copy."""
    db = sqlite_path(uri)
    if uri not in _OPENED and db is not None:
        from mlflow.exceptions import MlflowException

        db.parent.mkdir(parents=True, exist_ok=True)
        with file_lock(Path(f"{db}.init.lock")):
            if not db.is_file() or db.stat().st_size == 0:
                _create_sqlite_store(db)
            try:
                with_retries(lambda: client(uri).search_experiments(max_results=1))
            except MlflowException as err:
                if not mlflow_adapter.is_old_schema(err):
                    raise
                raise UserError(
                    f"config key tracking.uri: the store {db} was made by an older MLflow "
                    f"({short(err, 200)}); copy it (cp {db} {db}.bak), then run mlflow db upgrade "
                    f"{uri}, or point tracking.uri at a new store"
                ) from None
    _OPENED.add(uri)
    gc_tuning.end_import_pause()  # MLflow and its store are imported: the command's heap is built


def _create_sqlite_store(db: Path) -> None:
    """A copy of the empty store of MLflow's schema (`store_template`) in a temporary beside `db`, then renamed onto
    `db` (`owners.write_whole`: atomic on one filesystem, the temporaries of killed creations removed first), and
    the SQLite journals those left. Called under the init lock."""
    for side in db.parent.glob(f".{db.name}.tmp-*-*"):  # SQLite's journal of a killed creation's temporary store
        base, _, suffix = side.name.rpartition("-")
        match = owners.TEMP_NAME.match(base)
        if (
            suffix in ("journal", "wal", "shm")
            and match
            and match["pid"]
            and match["host"] == owners.host()
            and not owners.pid_alive(int(match["pid"]))
        ):
            side.unlink(missing_ok=True)

    try:
        template = store_template()
    except OSError:  # a cache folder that cannot be written: MLflow's migrations on the store itself
        owners.write_whole(db, _migrate, "an interrupted store creation")
        return
    owners.write_whole(db, lambda partial: shutil.copyfile(template, partial), "an interrupted store creation")


TEMPLATES = "mlflow-stores"  # under the tool's cache folder: one empty store per MLflow schema revision


def store_template(folder: Path | None = None) -> Path:
    """An empty SQLite store of this MLflow's schema, which every new SQLite store is copied from: MLflow's
    migrations run once per schema revision (5-10 s on two cores), a copy takes ~0.1 s. It is
    `<cache>/mlflow-stores/mlflow-<revision>.db` (`mlflow_adapter.schema_revision`); one whose own revision is not
    its name's, or that holds an experiment (a file changed or cut short, a copy opened in place), is made again,
    under a lock, written whole. Its Default experiment is
    left out, so MLflow makes it when it opens a copy, as in a store it made itself (that store's artifact root and
    time)."""
    folder = folder if folder is not None else owners.cache_root() / TEMPLATES
    revision = mlflow_adapter.schema_revision()
    template = folder / f"mlflow-{revision}.db"
    if mlflow_adapter.empty_store_revision(template) == revision:
        return template
    folder.mkdir(parents=True, exist_ok=True)
    with file_lock(Path(f"{template}.lock")):
        if mlflow_adapter.empty_store_revision(template) != revision:

            def create(partial: Path) -> None:
                _migrate(partial)
                mlflow_adapter.drop_default_experiment(partial)

            owners.write_whole(template, create, "an interrupted store template")
    return template


def _migrate(partial: Path) -> None:
    """MLflow's schema made in an empty file by MLflow itself (its alembic migrations)."""
    try:
        client(f"sqlite:///{partial}").search_experiments(max_results=1)
    finally:
        Path(f"{partial}-journal").unlink(missing_ok=True)


def log_artifacts(client: Client, run_id: str, folder: Path) -> None:
    """The files of `folder` as the run's artifacts, their bytes written once: where the run's artifact root is a
    local folder (a SQLite store keeps it beside the database, `experiment_id`; the offline store too) each file is
    hard-linked into it, one set of bytes under two names, the job's folder and the store's; a server, or a store
    on another file system, gets MLflow's own copy or upload. A linked file is the store's copy: whoever writes into
    `folder` again removes the file first (a file truncated in place would change the logged run)."""
    from mlflow.utils.file_utils import local_file_uri_to_path
    from mlflow.utils.uri import is_local_uri

    uri = client.get_run(run_id).info.artifact_uri
    # MLflow leaves both untyped
    if uri and is_local_uri(uri, is_tracking_or_registry_uri=False):  # type: ignore[no-untyped-call]
        root = Path(local_file_uri_to_path(uri))  # type: ignore[no-untyped-call]
        linked: list[Path] = []
        try:
            for source in sorted(p for p in Path(folder).rglob("*") if p.is_file()):
                target = root / source.relative_to(folder)
                target.parent.mkdir(parents=True, exist_ok=True)
                target.unlink(missing_ok=True)
                os.link(source, target)
                linked.append(target)
            return
        except OSError:  # another file system (EXDEV) or one without hard links: MLflow copies them whole
            for target in linked:
                target.unlink(missing_ok=True)
    client.log_artifacts(run_id, str(folder))


def search_all(
    client: Client, experiment_ids: Iterable[str], filter_string: str = "", order_by: list[str] | None = None
) -> list[Run]:
    """Every run `client.search_runs` finds, page after page: one call returns at most a page (1,000 runs by
    default, 50,000 at most), and a sync, a report or a sweep's clean-up must see them all."""
    found: list[Run] = []
    token = None
    while True:
        page = client.search_runs(
            list(experiment_ids),
            filter_string=filter_string,
            order_by=order_by,
            max_results=PAGE_SIZE,
            page_token=token,
        )
        found.extend(page)
        token = page.token
        if not token:
            return found


PAGE_SIZE = 1000  # MLflow's default page of search_runs


def file_lock(path: Path) -> filelock.FileLock:
    """An exclusive lock on `path` between processes (flock on POSIX), held by `with file_lock(path):`; the file
    stays for the next holder."""
    return filelock.FileLock(path)


OUTAGE_CHOICES = ("fail", "offline")


def check_options(tracking_cfg: Mapping[str, Any]) -> None:
    """The `tracking.on_outage` and `tracking.retry_budget_s` values, in one line each."""
    choice = tracking_cfg.get("on_outage", "fail")
    if choice not in OUTAGE_CHOICES:
        raise UserError(
            f"config key tracking.on_outage: {choice!r} is not a choice; choose fail (stop the job, "
            f"exit 2) or offline (log to tracking.offline_dir, upload later with python -m src.sync)"
        )
    budget = tracking_cfg.get("retry_budget_s", 20.0)
    if budget is None or not 0 <= float(budget) <= 600:
        raise UserError(f"config key tracking.retry_budget_s: {budget} must be between 0 and 600 seconds")


@dataclass(frozen=True, kw_only=True)
class TrackingOptions:
    """Where a job logs and what it does when the store does not answer: the composed `tracking` node, checked once
    (`of`) and read by the tracker, the sweep's parent run and the job as it is, with no defaults of its own (the
    schema, src/config/schema.py `TrackingConfig`, gives them)."""

    uri: str
    experiment: str
    offline: bool  # log to offline_dir now, upload with `python -m src.sync` later
    offline_dir: str
    on_outage: str  # fail | offline (OUTAGE_CHOICES)
    retry_budget_s: float

    @classmethod
    def of(cls, node: Mapping[str, Any]) -> TrackingOptions:
        """The options of a checked `tracking` node (`check_options`) that has every key (a composed config's)."""
        return cls(
            uri=str(node["uri"]),
            experiment=str(node["experiment"]),
            offline=bool(node["offline"]),
            offline_dir=str(node["offline_dir"] or "mlruns/offline"),  # empty: the default (as job_tracking_uri)
            on_outage=str(node["on_outage"]),
            retry_budget_s=float(node["retry_budget_s"]),
        )

    @property
    def job_uri(self) -> str:
        """The store a job logs to (`job_tracking_uri`)."""
        return job_tracking_uri({"uri": self.uri, "offline": self.offline, "offline_dir": self.offline_dir})


def client_retries(budget_s: float) -> tuple[int, int]:
    """(retries, request timeout in s) for MLflow's HTTP client so that its retries of one call end within
    `budget_s`: urllib3 sleeps 0, 2, 4, 8 ... s (backoff factor 1) plus up to 1 s of jitter before each retry.

    >>> client_retries(20), client_retries(5), client_retries(0)
    ((4, 5), (2, 5), (1, 5))
    """
    retries = 1  # the first retry waits 0 s: every budget allows it
    while retries < 10 and (2 ** (retries + 1) - 2) + retries <= budget_s:
        retries += 1
    return retries, max(5, math.ceil(budget_s / (retries + 1)))


def apply_retry_budget(budget_s: float) -> None:
    """Bound MLflow's own retries (by default ~4 minutes per call against a dead server) to `budget_s`."""
    retries, timeout = client_retries(float(budget_s))
    os.environ["MLFLOW_HTTP_REQUEST_MAX_RETRIES"] = str(retries)
    os.environ["MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR"] = "1"
    os.environ["MLFLOW_HTTP_REQUEST_TIMEOUT"] = str(timeout)


def short(err: BaseException, limit: int = 160) -> str:
    """An exception as a short single line (for one-line messages)."""
    text = " ".join(str(err).split())
    if "Caused by" in text:
        text = text.split("Caused by")[-1].strip(" (:")
    return text if len(text) <= limit else text[: limit - 3] + "..."


class TrackingDown(UserError):
    """The tracking server stopped answering within the retry budget."""
