"""What docs/launchers.md promises of any launcher's sweep, checked in-process: the default launcher, a failed job's
one line (its traceback, for an unexpected exception, in `<job dir>/error.txt`) and the sweep going on, and the
summary's counts, parent status and exit code (2 when a job failed, 1 when one crashed, 130 when interrupted)."""

from __future__ import annotations

import json

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from src.common.errors import UserError
from src.sweep import job as sweep_job
from src.sweep.callback import MlflowSweepCallback, write_outcome

from .conftest import REPO


@pytest.mark.promise("docs/launchers.md", "the default launcher is Hydra's basic one: sequential, one process")
def test_the_default_launcher_is_hydras_basic_one():
    for config_dir, name in ((REPO / "conf", "config"), (REPO / "sweeps", "smoke")):
        with initialize_config_dir(config_dir=str(config_dir), version_base="1.3"):
            cfg = compose(config_name=name, return_hydra_config=True)
        assert cfg.hydra.launcher._target_ == "hydra._internal.core_plugins.basic_launcher.BasicLauncher", name


def sweep_job_in(tmp_path, monkeypatch, error: Exception):
    """`run_sweep_job` of job #3 whose run raises `error`; its folder."""
    out = tmp_path / "3"

    def run_job(cfg, **kwargs):
        raise error

    monkeypatch.setattr(sweep_job, "run_job", run_job)
    cfg = OmegaConf.create({"tracking": {"offline_dir": "mlruns/offline", "offline": False}})
    hydra = OmegaConf.create(
        {
            "sweep": {"dir": str(tmp_path)},
            "runtime": {"output_dir": str(out)},
            "job": {"num": 3},
            "overrides": {"task": ["model=simulated", "temperature=0.7", "tracking.uri=sqlite:///x.db"]},
        }
    )
    sweep_job.run_sweep_job(cfg, hydra)  # returns: the sweep goes on with the next job
    return out


@pytest.mark.promise("docs/launchers.md", "a job that crashes in a sweep is one error line, its traceback in error.txt")
def test_a_job_that_crashes_in_a_sweep_is_one_line_with_its_traceback_in_error_txt(tmp_path, monkeypatch, capsys):
    out = sweep_job_in(tmp_path, monkeypatch, ZeroDivisionError("division by zero"))
    err = capsys.readouterr().err
    assert err == (
        f"error: job #3 (model=simulated temperature=0.7): ZeroDivisionError: division by zero "
        f"(traceback in {out / 'error.txt'})\n"
    )
    assert "Traceback (most recent call last)" in (out / "error.txt").read_text()
    outcome = json.loads((out / "job.json").read_text())
    assert (outcome["status"], outcome["crashed"], outcome["num"]) == ("failed", True, 3)


@pytest.mark.promise("docs/launchers.md", "a job refused in a sweep is one error line, no traceback file")
def test_a_job_refused_in_a_sweep_is_one_line_without_a_traceback(tmp_path, monkeypatch, capsys):
    out = sweep_job_in(tmp_path, monkeypatch, UserError("config key limit: -1 is not a count; give limit>=1"))
    assert capsys.readouterr().err == (
        "error: job #3 (model=simulated temperature=0.7): config key limit: -1 is not a count; give limit>=1\n"
    )
    assert not (out / "error.txt").exists()
    assert json.loads((out / "job.json").read_text())["crashed"] is False


def summary_of(tmp_path, capsys, statuses, *, interrupted=False, crashed=()):
    """The sweep callback's summary over jobs with `statuses`: (exit code, stderr)."""
    callback = MlflowSweepCallback()
    callback.sweep_dir, callback.invocation, callback.expected = tmp_path, "inv", len(statuses)
    for num, status in enumerate(statuses):
        write_outcome(
            tmp_path / str(num),
            num=num,
            overrides=[f"seed={num}"],
            invocation="inv",
            status=status,
            run_id=f"r{num}",
            crashed=num in crashed,
            **({"error": "boom"} if status in ("failed", "killed") else {}),
        )
    code = callback.finish(interrupted=interrupted)
    return code, capsys.readouterr().err


@pytest.mark.promise(
    "docs/launchers.md", "the sweep's summary counts jobs; it exits 2 when a job failed, 1 when one crashed"
)
def test_the_summary_counts_the_jobs_and_its_exit_code_says_how_they_ended(tmp_path, capsys):
    code, err = summary_of(tmp_path / "a", capsys, ["finished", "finished", "skipped", "failed"])
    head, *jobs = err.splitlines()
    assert head == "sweep -: 4 job(s), 2 finished, 1 skipped, 1 failed" and code == 2
    assert len(jobs) == 4 and jobs[3].split()[:3] == ["#3", "failed", "r3"] and jobs[3].endswith(": boom")
    assert summary_of(tmp_path / "b", capsys, ["finished", "failed"], crashed={1})[0] == 1
    assert summary_of(tmp_path / "c", capsys, ["finished", "skipped"])[0] == 0
    code, err = summary_of(tmp_path / "d", capsys, ["finished", "killed"])
    assert code == 2 and "1 failed (1 killed)" in err.splitlines()[0]


@pytest.mark.promise("docs/launchers.md", "an interrupted sweep exits 130")
def test_an_interrupted_sweep_exits_130(tmp_path, capsys):
    code, err = summary_of(tmp_path, capsys, ["finished", "killed"], interrupted=True)
    assert code == 130 and err.startswith("sweep - interrupted: 2 job(s)")


@pytest.mark.promise("docs/clusters.md", "a job stopped by SIGTERM or Ctrl-C records its outcome killed, then stops")
def test_a_job_stopped_as_ctrl_c_does_records_a_killed_outcome_and_stops(tmp_path, monkeypatch):
    with pytest.raises(KeyboardInterrupt):
        sweep_job_in(tmp_path, monkeypatch, KeyboardInterrupt())
    outcome = json.loads((tmp_path / "3" / "job.json").read_text())
    assert (outcome["status"], outcome["error"], outcome["num"]) == ("killed", "interrupted", 3)
