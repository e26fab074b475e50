"""The MLflow UI in a real browser (`python -m src.ui_check`): the review view lists the job runs with their
headline metrics, and a run page shows its description, `rws_st` and headline metrics. Needs Chromium."""
from __future__ import annotations

import pytest

from src import ui_check

# an opt-in tier (--run-browser, the third step of .ci/run): a real `mlflow ui` server (20 s to minutes to start)
# and four headless Chromium loads
pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_the_mlflow_ui_shows_the_headline_metrics(tmp_path, monkeypatch):
    if ui_check.find_chromium() is None:  # asked for: a missing browser fails, it is not skipped
        pytest.fail(f"no Chromium on PATH: {ui_check.INSTALL_HINT}")
    monkeypatch.setenv("TQDM_DISABLE", "1")
    failed = ui_check.check(tmp_path / "shots", work=tmp_path / "work", chromium=ui_check.find_chromium())
    assert failed == []
    for name in ("mlflow_runs.png", "mlflow_run.png"):
        png = (tmp_path / "shots" / name).read_bytes()
        assert png.startswith(b"\x89PNG") and len(png) > 20_000, name  # a rendered page, not a blank one
