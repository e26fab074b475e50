"""What docs/clusters.md and docs/launchers.md promise of the cluster launchers that can be checked without a
cluster: each launcher config's resources, the one line and outcome record of a job Slurm or Ray ended without a
result (killed or failed), the job's handling of SIGTERM and the time-limit signal, and the tracking credentials in
no file a job writes. The Slurm and Ray tiers (tests/test_slurm_cluster.py, tests/test_ray_cluster.py) run the
same paths on real clusters."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from types import SimpleNamespace

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from hydra_plugins import mcq_ray_launcher, mcq_slurm_launcher
from src.sweep.callback import JOB_FILE
from src.sweep.state import interrupt_on_sigterm

from .conftest import REPO, mlflow_runs


def launcher_config(name: str):
    with initialize_config_dir(config_dir=str(REPO / "sweeps"), version_base="1.3"):
        cfg = compose(config_name="smoke", overrides=[f"hydra/launcher={name}"], return_hydra_config=True)
    return cfg.hydra.launcher


@pytest.mark.promise("docs/clusters.md", "slurm_gpu gives each job 1 GPU, 8 CPUs, 64 GB and 4 h, 8 jobs at once")
def test_slurm_gpu_gives_each_job_one_gpu_8_cpus_64_gb_4_hours_8_at_once():
    cfg = launcher_config("slurm_gpu")
    assert (cfg.gpus_per_node, cfg.cpus_per_task, cfg.mem_gb, cfg.timeout_min) == (1, 8, 64, 240)
    assert cfg.array_parallelism == 8 and cfg.nodes == 1 and cfg.tasks_per_node == 1


@pytest.mark.promise("docs/clusters.md", "slurm_cpu gives each job no GPU, 4 CPUs, 16 GB and 2 h")
def test_slurm_cpu_gives_each_job_no_gpu_4_cpus_16_gb_2_hours():
    cfg = launcher_config("slurm_cpu")
    assert (cfg.gpus_per_node, cfg.cpus_per_task, cfg.mem_gb, cfg.timeout_min) == (None, 4, 16, 120)
    assert cfg._target_ == "hydra_plugins.mcq_slurm_launcher.TrackedSlurmLauncher"


@pytest.mark.promise(
    "docs/clusters.md", "USR2 comes signal_delay_s (120 s) before the limit; a job is requeued up to 3 times"
)
def test_the_time_limit_signal_comes_120_s_early_and_a_job_is_requeued_up_to_3_times():
    cfg = launcher_config("slurm_gpu")
    assert (cfg.signal_delay_s, cfg.max_num_timeout) == (120, 3)


@pytest.mark.promise(
    "docs/clusters.md", "any submitit_slurm key can be set on the command line, hydra.launcher.<key>=..."
)
def test_a_submitit_slurm_key_is_set_from_the_command_line():
    with initialize_config_dir(config_dir=str(REPO / "sweeps"), version_base="1.3"):
        cfg = compose(
            config_name="smoke",
            overrides=["hydra/launcher=slurm_gpu", "hydra.launcher.timeout_min=600", "hydra.launcher.setup=[x]"],
            return_hydra_config=True,
        )
    assert cfg.hydra.launcher.timeout_min == 600 and list(cfg.hydra.launcher.setup) == ["x"]


@pytest.mark.promise(
    "docs/clusters.md", "the Slurm jobs inherit the submitting shell's environment (sbatch --export=ALL)"
)
def test_the_slurm_jobs_inherit_the_submitting_shells_environment():
    """sbatch exports the whole environment when its script names no `--export` (its default, ALL): neither the
    launcher configs nor submitit's script may name one."""
    for name in ("slurm_gpu", "slurm_cpu"):
        extra = OmegaConf.to_container(launcher_config(name).additional_parameters)
        assert "export" not in extra, extra
    import submitit.slurm.slurm as submitit_slurm

    params = OmegaConf.to_container(launcher_config("slurm_gpu"))
    sbatch = {k: v for k, v in params.items() if k in ("additional_parameters", "setup", "srun_args")}
    lines = submitit_slurm._make_sbatch_string(command="x", folder="/tmp/f", map_count=2, **sbatch)
    assert not [line for line in lines.splitlines() if "--export" in line]


class _Sweep:
    """A multirun's config and Hydra context as a cluster launcher holds them, over the sweep folder `root`."""

    def __init__(self, root: Path) -> None:
        self.config = OmegaConf.create({"hydra": {"sweep": {"dir": str(root)}}})
        job = OmegaConf.create({"hydra": {"sweep": {"subdir": "1"}, "job": {}}, "tracking": {"offline_dir": "o"}})
        self.hydra_context = SimpleNamespace(config_loader=SimpleNamespace(load_sweep_config=lambda cfg, o: job))
        self.root = root

    def outcome(self) -> dict:
        return json.loads((self.root / "1" / JOB_FILE).read_text())


OVERRIDES = ["model.success_rate=0.9", "temperature=0.5", "tracking.uri=http://127.0.0.1:5000"]


class _SlurmJob:
    def __init__(self, state: str, error: type[Exception]) -> None:
        self.job_id, self.error = "4_1", error
        self.watcher = SimpleNamespace(get_state=lambda job_id, mode: state)
        self.paths = SimpleNamespace(stderr=Path("/sweep/.submitit/4_1/4_1_0_log.err"))

    def result(self):
        raise self.error("no result")


def slurm_launcher(sweep: _Sweep) -> mcq_slurm_launcher.TrackedSlurmLauncher:
    launcher = object.__new__(mcq_slurm_launcher.TrackedSlurmLauncher)  # no submitit executor: _collect only
    launcher.config, launcher.hydra_context = sweep.config, sweep.hydra_context
    return launcher


@pytest.mark.parametrize("state", ["CANCELLED by 0", "PREEMPTED", "TIMEOUT", "NODE_FAIL", "LEFT_QUEUE"])
@pytest.mark.promise(
    "docs/clusters.md", "a cancelled or lost Slurm job is one error line naming its state and log; it is killed"
)
def test_a_cancelled_or_lost_slurm_job_is_one_line_and_a_killed_outcome(tmp_path, capsys, state):
    from submitit.core.utils import UncompletedJobError

    sweep = _Sweep(tmp_path)
    returned = slurm_launcher(sweep)._collect(_SlurmJob(state, UncompletedJobError), 1, OVERRIDES)
    assert returned.return_value is None  # the sweep goes on with the others
    err = capsys.readouterr().err
    assert err == (
        f"error: job #1 (model.success_rate=0.9 temperature=0.5): Slurm job 4_1 ended without a result ({state}); "
        "its log: /sweep/.submitit/4_1/4_1_0_log.err; run the same command again to resume it from the response "
        "cache\n"
    )
    assert sweep.outcome()["status"] == "killed" and sweep.outcome()["num"] == 1


@pytest.mark.parametrize("state", ["FAILED", "OUT_OF_MEMORY"])
@pytest.mark.promise(
    "docs/clusters.md", "a Slurm job that failed on its node or ran out of memory is reported as failed"
)
def test_a_slurm_job_that_failed_on_its_node_is_a_failed_outcome(tmp_path, capsys, state):
    from submitit.core.utils import FailedJobError

    sweep = _Sweep(tmp_path)
    slurm_launcher(sweep)._collect(_SlurmJob(state, FailedJobError), 1, OVERRIDES)
    assert f"Slurm job 4_1 ended ({state})" in capsys.readouterr().err
    assert sweep.outcome()["status"] == "failed"


class _RayError(Exception):
    pass


class WorkerCrashedError(_RayError):
    pass


class RayTaskError(_RayError):
    pass


def ray_collect(sweep: _Sweep, error: Exception):
    def get(ref):
        raise error

    ray = SimpleNamespace(get=get, exceptions=SimpleNamespace(RayError=_RayError))
    launcher = mcq_ray_launcher.TrackedRayLauncher(OmegaConf.create({"init": {}, "remote": {}}))
    launcher.config, launcher.hydra_context = sweep.config, sweep.hydra_context
    return launcher._collect(ray, object(), 1, OVERRIDES)


@pytest.mark.promise("docs/clusters.md", "a lost Ray worker's job is one error line, killed, and the sweep goes on")
def test_a_lost_ray_worker_is_one_line_and_a_killed_outcome(tmp_path, capsys):
    sweep = _Sweep(tmp_path)
    returned = ray_collect(sweep, WorkerCrashedError("The worker died unexpectedly\nmore detail"))
    assert returned.return_value is None
    assert capsys.readouterr().err == (
        "error: job #1 (model.success_rate=0.9 temperature=0.5): Ray task ended without a result "
        "(WorkerCrashedError: The worker died unexpectedly); its log: the worker's lines above, and worker-*.err in "
        "the session's logs folder on its node; run the same command again to resume it from the response cache\n"
    )
    assert sweep.outcome()["status"] == "killed"
    assert ray_collect(_Sweep(tmp_path / "b"), RayTaskError("boom")) is not None
    assert _Sweep(tmp_path / "b").outcome()["status"] == "failed"  # the job's own error: not a lost worker


@pytest.fixture
def submitit_handlers(monkeypatch):
    """Stand-ins for submitit's job handlers (SIGTERM bypassed, USR2: checkpoint and requeue), recording calls."""
    calls = []
    term = signal.signal(signal.SIGTERM, lambda s, f: calls.append("submitit SIGTERM"))
    usr = signal.signal(signal.SIGUSR2, lambda s, f: calls.append("submitit requeue"))
    yield calls
    signal.signal(signal.SIGTERM, term)
    signal.signal(signal.SIGUSR2, usr)


def run_slurm_job(monkeypatch, body) -> None:
    """TrackedSlurmLauncher.__call__ with the plugin's job (`super().__call__`) replaced by `body`."""
    monkeypatch.setattr(mcq_slurm_launcher.SlurmLauncher, "__call__", lambda self, *a: body())
    object.__new__(mcq_slurm_launcher.TrackedSlurmLauncher)([], "k", 0, "id", {})


@pytest.mark.promise(
    "docs/clusters.md", "scancel's SIGTERM stops a Slurm job as Ctrl-C does (its run KILLED), not bypassed"
)
def test_sigterm_in_a_slurm_job_interrupts_it_as_ctrl_c_does(monkeypatch, submitit_handlers):
    with pytest.raises(KeyboardInterrupt):
        run_slurm_job(monkeypatch, lambda: os.kill(os.getpid(), signal.SIGTERM))
    assert submitit_handlers == []  # submitit's "Bypassing signal SIGTERM" never ran
    assert signal.getsignal(signal.SIGTERM) is not interrupt_on_sigterm
    os.kill(os.getpid(), signal.SIGTERM)  # submitit's handler is back once the job has ended
    assert submitit_handlers == ["submitit SIGTERM"]


@pytest.mark.promise(
    "docs/clusters.md", "the time-limit signal stops the job as Ctrl-C does, then submitit requeues it"
)
def test_the_time_limit_signal_interrupts_the_job_then_hands_over_to_submitits_requeue(monkeypatch, submitit_handlers):
    reached = []

    def job():
        os.kill(os.getpid(), signal.SIGUSR2)
        reached.append("after the signal")  # never: the signal unwinds the job

    with pytest.raises(KeyboardInterrupt):
        run_slurm_job(monkeypatch, job)
    assert reached == [] and submitit_handlers == ["submitit requeue"]
    assert signal.getsignal(signal.SIGUSR2) is not mcq_slurm_launcher._preempted


@pytest.mark.promise(
    "docs/clusters.md", "a finished Slurm job gets submitit's handlers back: a late signal cannot lose it"
)
def test_a_finished_slurm_job_gets_submitits_handlers_back(monkeypatch, submitit_handlers):
    handlers = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGUSR2)
    run_slurm_job(monkeypatch, lambda: "result")
    assert (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGUSR2)) == handlers
    os.kill(os.getpid(), signal.SIGUSR2)
    assert submitit_handlers == ["submitit requeue"]


@pytest.mark.promise(
    "docs/clusters.md", "the tracking password from the environment is in no file a job writes, param or tag"
)
def test_tracking_credentials_from_the_environment_reach_no_file_param_or_tag(run_job_in, monkeypatch, capsys):
    secret = "pw-" + os.urandom(8).hex()
    monkeypatch.setenv("MLFLOW_TRACKING_USERNAME", "sweeper")
    monkeypatch.setenv("MLFLOW_TRACKING_PASSWORD", secret)
    result = run_job_in("model=simulated", "limit=3")
    _, (run,) = mlflow_runs(run_job_in.store_uri)
    assert not [k for k, v in {**run.data.params, **run.data.tags}.items() if secret in str(v)]
    root = Path(result.out_dir).parents[0]
    for folder in {Path(result.out_dir), root, Path(run_job_in.store_uri.removeprefix("sqlite:///")).parent}:
        for path in folder.rglob("*"):
            if path.is_file():
                assert secret.encode() not in path.read_bytes(), path
    out = capsys.readouterr()
    assert secret not in out.out + out.err
