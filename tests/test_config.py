"""Every option of every config group composes, and the top-level keys have their documented defaults."""

from __future__ import annotations

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from .conftest import REPO

CONF = REPO / "conf"
GROUPS = sorted(p.name for p in CONF.iterdir() if p.is_dir())
CHOICES = [(g, p.stem) for g in GROUPS for p in sorted((CONF / g).glob("*.yaml"))]


def compose_with(*overrides):
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        return compose(config_name="config", overrides=list(overrides))


def test_defaults():
    cfg = compose_with()
    assert cfg.seed == 0 and cfg.limit is None and cfg.temperature == 0.0 and cfg.repetitions == 1
    assert cfg.tracking.uri == "sqlite:///mlruns/mlflow.db"
    assert cfg.benchmark.name == "synthetic"
    assert {"model", "benchmark", "variants", "prompt"} <= set(GROUPS)


@pytest.mark.slow
@pytest.mark.parametrize("group, choice", CHOICES, ids=[f"{g}={c}" for g, c in CHOICES])
def test_every_choice_composes(group, choice):
    cfg = compose_with(f"{group}={choice}")
    node = cfg[group]
    container = OmegaConf.to_container(node, resolve=False)
    assert isinstance(container, dict) and container, f"{group}={choice} is empty"
    if group in ("model", "benchmark", "variants"):
        assert node.name is not None


def test_data_dir_follows_env(monkeypatch):
    monkeypatch.setenv("MCQ_DATA_DIR", "/somewhere/data")
    assert compose_with().data_dir == "/somewhere/data"
    monkeypatch.delenv("MCQ_DATA_DIR")
    assert compose_with().data_dir == "../shared/data"


@pytest.mark.promise("README.md", "metrics.pride_protocol defaults to paper")
def test_pride_protocol_key_defaults_to_the_paper():
    from src.config.compose import compose_job

    assert compose_job(["model=simulated"]).metrics.pride_protocol == "paper"
    assert compose_job(["model=simulated", "metrics.pride_protocol=authors"]).metrics.pride_protocol == "authors"
