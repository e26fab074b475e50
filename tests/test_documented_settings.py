"""The settings the manual states as numbers or install lines, read from where the code and pyproject.toml set
them: the recheck's tolerances (docs/reproducibility.md) and what each extra installs (docs/launchers.md,
docs/clusters.md, docs/mlflow_ui.md)."""

from __future__ import annotations

import tomllib

import pytest
from packaging.requirements import Requirement

from .conftest import REPO


def extra(name: str) -> dict[str, Requirement]:
    extras = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"]
    return {Requirement(r).name: Requirement(r) for r in extras[name]}


@pytest.mark.promise("docs/reproducibility.md", "a near-tie is a decision margin below NEAR_TIE_MARGIN = 1e-3")
def test_the_near_tie_margin_is_1e_3_and_the_closing_block_says_0_001():
    from src.core.records import NEAR_TIE_MARGIN
    from src.presentation.closing import near_tie_line

    assert NEAR_TIE_MARGIN == 1e-3
    assert near_tie_line(0, 26) == (
        "  near-ties: 0 of 26 decisions within 0.001 of the next option "
        "(another CPU, dtype or batch size may flip them)"
    )


@pytest.mark.promise("docs/reproducibility.md", "scores are compared within SCORE_TOLERANCE = 1e-4, room above 6.0e-5")
def test_the_score_tolerance_is_1e_4_above_the_largest_kernel_move_measured():
    from src.core.records import NEAR_TIE_MARGIN, SCORE_TOLERANCE

    assert SCORE_TOLERANCE == 1e-4 and SCORE_TOLERANCE > 6.0e-5
    assert NEAR_TIE_MARGIN > 2 * 6.0e-5 * 8  # about 8 times the largest move of a margin (twice a score's)


@pytest.mark.promise("docs/reproducibility.md", "recheck's --tracking-uri defaults to sqlite:///mlruns/mlflow.db")
def test_the_recheck_reads_the_default_store_unless_told(monkeypatch):
    from src import recheck

    seen = {}

    def fake(run, *, tracking_uri, go_on):
        seen.update(run=run, uri=tracking_uri, go_on=go_on)
        return ["same"], 0

    monkeypatch.setattr(recheck, "recheck", fake)
    assert recheck.main(["--run", "1a2b3c4d"]) == 0
    assert seen == {"run": "1a2b3c4d", "uri": "sqlite:///mlruns/mlflow.db", "go_on": False}


@pytest.mark.promise("docs/launchers.md", "the server extra installs psycopg2, the driver postgresql+psycopg2:// names")
def test_the_server_extra_installs_psycopg2():
    assert "psycopg2-binary" in extra("server")


@pytest.mark.promise("docs/launchers.md", "the ray extra pins joblib<1.6 beside hydra-ray-launcher and Ray")
def test_the_ray_extra_pins_joblib_below_1_6():
    ray = extra("ray")
    assert {"hydra-ray-launcher", "ray", "joblib"} <= set(ray)
    assert "1.6" not in ray["joblib"].specifier and "1.5.3" in ray["joblib"].specifier
    assert str(ray["hydra-ray-launcher"].specifier) == "==1.2.2"


@pytest.mark.promise("docs/clusters.md", "the cluster extra installs mlflow[auth] for the basic-auth server")
def test_the_cluster_extra_installs_mlflows_authentication():
    mlflow = extra("cluster")["mlflow"]
    assert "auth" in mlflow.extras


@pytest.mark.promise("docs/mlflow_ui.md", "the browser extra installs Playwright, and no browser download")
def test_the_browser_extra_installs_playwright_only():
    assert set(extra("browser")) == {"playwright"}


@pytest.mark.promise(
    "docs/reproducibility.md", "every run logs provenance tags: package versions and the kernel variables set"
)
def test_every_run_logs_its_package_versions_and_the_kernel_variables_that_were_set(run_job_in, monkeypatch):
    from importlib.metadata import version

    from .conftest import mlflow_runs

    monkeypatch.setenv("ATEN_CPU_CAPABILITY", "avx2")
    monkeypatch.delenv("MKL_ENABLE_INSTRUCTIONS", raising=False)
    run_job_in("model=simulated", "limit=2")
    _, (run,) = mlflow_runs(run_job_in.store_uri)
    tags = run.data.tags
    assert tags["provenance.numpy"] == version("numpy") and tags["provenance.transformers"] == version("transformers")
    assert tags["provenance.ATEN_CPU_CAPABILITY"] == "avx2" and "provenance.MKL_ENABLE_INSTRUCTIONS" not in tags
    assert tags["provenance.python"].count(".") == 2
