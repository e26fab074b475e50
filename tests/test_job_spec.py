"""One typed job from the command line to the store (src/config/spec.py `JobSpec`, src/config/checks.py `job_spec`).

- Each check of a job's config runs once per job: in-process, under `python -m src.run` (whose command-line check
  and the job inside Hydra are two doors of one process) and in a sweep under the basic launcher (the command line,
  the sweep's pre-check and the jobs share one check per job).
- Below its door the job reads the spec alone: a config nothing can read runs the same job once its spec is built.
- The spec is frozen, its values typed as the schema says.
"""

from __future__ import annotations

import dataclasses
from collections import Counter, OrderedDict

import pytest
from omegaconf import open_dict

from src.answering import adaptive
from src.backends.base import SamplingParams
from src.common.errors import UserError
from src.config import checks as config_checks, command_line
from src.config.checks import job_spec
from src.config.compose import compose_job
from src.job import runner
from src.tracking import store

from .conftest import DATA_DIR
from .test_job_promises import run_main

# every check of a job's values, by the module namespaces it is called through
CHECKS = {
    "check_config": (config_checks,),
    "check_values": (config_checks,),
    "check_metrics": (config_checks, command_line),
    "check_options": (config_checks, store),
    "check_adaptive": (adaptive,),
    "check_validity": (config_checks,),
    "check_option_style": (config_checks, runner),
}


@pytest.fixture
def checks(monkeypatch) -> Counter:
    """How many times each check ran since the test began (the process's built specs forgotten first)."""
    monkeypatch.setattr(config_checks, "_BUILT", OrderedDict())
    counts: Counter = Counter()
    for name, modules in CHECKS.items():
        for module in modules:
            real = getattr(module, name)

            def counted(*args, _real=real, _name=name, **kwargs):
                counts[_name] += 1
                return _real(*args, **kwargs)

            monkeypatch.setattr(module, name, counted)
    return counts


def test_each_check_runs_once_for_a_job_run_in_process(run_job_in, checks):
    result = run_job_in("model=simulated", "limit=3")
    assert result.run_id and not result.skipped
    assert checks == dict.fromkeys(CHECKS, 1)


def test_each_check_runs_once_for_a_job_of_the_command_line(run_job_in, checks, monkeypatch, capfd, tmp_path):
    """`python -m src.run`: its check before Hydra starts and the job inside Hydra are two doors of one process;
    the job finds its spec built."""
    where = [f"tracking.uri={run_job_in.store_uri}", f"cache.path={tmp_path}/cache.db", f"data_dir={DATA_DIR}"]
    code = run_main(monkeypatch, ["model=simulated", "limit=3", *where, f"hydra.run.dir={tmp_path}/single"])
    assert code == 0, capfd.readouterr().err
    assert checks == dict.fromkeys(CHECKS, 1)


def test_each_job_of_a_sweep_is_checked_once(run_job_in, checks, monkeypatch, capfd, tmp_path):
    """Under the basic launcher: the command line's check, the sweep's pre-check and the jobs, one process."""
    where = [f"tracking.uri={run_job_in.store_uri}", f"cache.path={tmp_path}/cache.db", f"data_dir={DATA_DIR}"]
    argv = ["-m", "variants=original,perm_cyclic", "model=simulated", "limit=2", *where]
    code = run_main(monkeypatch, [*argv, f"hydra.sweep.dir={tmp_path}/multirun"])
    out, err = capfd.readouterr()
    assert code == 0, err
    assert len(out.splitlines()) == 2, out  # both jobs ran
    per_job = {name: checks[name] for name in CHECKS if name != "check_options"}
    assert per_job == dict.fromkeys(per_job, 2)
    assert checks["check_options"] == 3  # each job's, and the sweep's own tracking node (its parent run's store)


def test_below_its_door_a_job_reads_its_spec_alone(run_job_in, monkeypatch, tmp_path):
    """Once `run_job` has the spec, nothing reads the config: a job of a config that has no attributes at all
    (`object()`) runs, given the spec of a real one."""
    spec = job_spec(
        compose_job(
            ["model=simulated", "limit=3", f"tracking.uri={run_job_in.store_uri}", f"cache.path={tmp_path}/c.db"]
        )
    )
    unreadable = object()
    monkeypatch.setattr(runner, "job_spec", lambda cfg: spec if cfg is unreadable else pytest.fail("another config"))
    result = runner.run_job(unreadable, out_dir=tmp_path / "out")  # type: ignore[arg-type]
    assert result.run_id and "mcqa" in result.metrics
    assert (result.out_dir / "artifacts" / "records.parquet").is_file()
    assert result.level == spec.level == 0.95


def test_the_spec_is_frozen_and_typed_as_the_schema_says():
    spec = job_spec(compose_job(["model=simulated", "temperature=1", "repetitions=2", "top_k=5", "limit=4"]))
    assert spec.sampling == SamplingParams(n=2, temperature=1.0, top_k=5, top_p=1.0, max_new_tokens=3)
    assert isinstance(spec.temperature, float) and spec.repetitions == 2 and spec.limit == 4
    assert (spec.tracking.on_outage, spec.tracking.retry_budget_s, spec.cache.enabled) == ("fail", 20.0, True)
    assert (spec.sure_rule, spec.pride_protocol, spec.bootstrap, spec.level) == ("answer", "paper", 1000, 0.95)
    assert "scoring" in spec.model and "scoring" not in spec.backend_config
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.seed = 1  # type: ignore[misc]
    with pytest.raises(TypeError):
        spec.model["name"] = "other"  # type: ignore[index]
    plain = spec.plain()
    plain["model"]["name"] = "changed"  # a copy: the spec keeps its own
    assert spec.model["name"] == spec.resolved["model"]["name"] == "simulated"


def test_a_changed_config_is_checked_again_not_served_from_an_earlier_spec(checks, tmp_path):
    cfg = compose_job(["model=simulated"])
    first = job_spec(cfg)
    assert job_spec(cfg) is first and checks["check_config"] == 1
    (tmp_path / "cache.db").mkdir()
    with open_dict(cfg):
        cfg.cache.path = str(tmp_path / "cache.db")  # now a folder: refused, though the first was accepted
    with pytest.raises(UserError, match=r"^config key cache.path: .* is a folder"):
        job_spec(cfg)
    assert checks["check_config"] == 2


def test_the_jobs_sampling_reaches_score_labels_as_one_value(run_job_in, monkeypatch):
    """`score_labels(requests, sampling)`: the job's temperature, top-k and top-p arrive as its one `SamplingParams`,
    which no backend rebuilds from loose values."""
    from src.backends.simulated import SimulatedBackend

    asked = []
    real = SimulatedBackend.score_labels

    def recording(self, requests, sampling=None):
        asked.append(sampling)
        return real(self, requests, sampling)

    monkeypatch.setattr(SimulatedBackend, "score_labels", recording)
    over = ("scoring=logprob", "temperature=0.7", "top_k=5", "top_p=0.9", "repetitions=3", "limit=2")
    run_job_in("model=simulated", "variants=original", "cache.enabled=false", *over)
    assert asked and all(s == SamplingParams(n=3, temperature=0.7, top_k=5, top_p=0.9) for s in asked), asked
