"""The review at scale (`python -m devtools.perf --only review_scale`, docs/review_at_scale.md), on a small store: the
same sweep and comparison commands with two models, one benchmark and one temperature. The report opens on the
bottom line and the summary table: per benchmark and condition the first, the second, the paired difference with
its interval and Holm-adjusted p."""

from __future__ import annotations

import os
import subprocess

import pandas as pd
import pytest

from devtools.perf import meter, processes
from src.compare.summary import TITLE

pytestmark = pytest.mark.slow  # a 4-job sweep and a comparison, each in a fresh process


def test_the_scale_commands_make_a_report_that_opens_on_the_leaders(tmp_path):
    axes = {
        "model.success_rate": "0.3,0.86",
        "benchmark": "synthetic",
        "temperature": "0.3",
        "variants": "original,cora",
    }
    sweep, compare = processes.scale_commands(tmp_path, 30, axes)
    for command in (sweep, compare):
        proc = subprocess.run(
            command,
            cwd=meter.REPO,
            capture_output=True,
            text=True,
            timeout=600,
            env={**os.environ, "TQDM_DISABLE": "1"},
        )
        assert proc.returncode == 0, proc.stderr[-2000:]
    report = tmp_path / "report"
    summary = pd.read_csv(report / "tables" / "summary.csv")
    assert sorted(summary["condition"]) == ["variants=cora", "variants=original"]
    assert (summary["leader"] == "simulated_0.86").all() and (summary["second"] == "simulated_0.3").all()
    paired = pd.concat(pd.read_csv(path) for path in (report / "tables").glob("paired_*.csv"))
    for _, row in summary.iterrows():
        (match,) = paired[
            (paired["metric"] == row["metric"]) & (paired["table"] == f"synthetic ({row['condition']})")
        ].to_dict("records")
        sign = 1 if match["model_a"] == row["leader"] else -1  # the pair is stored in model order
        assert row["difference"] == pytest.approx(sign * match["difference"], abs=1e-12)
        assert row["p_holm"] == pytest.approx(match["p_holm"], abs=1e-12)
        assert row["difference"] > 0 and row["lo"] > 0 and row["p_holm"] < 0.05 and not row["tie"]
    md = (report / "report.md").read_text()
    assert md.index(f"## {TITLE}") < md.index("## Runs") < md.index("## CoRA ranking")
    assert sum(line.startswith("> Note: not in these runs") for line in md.splitlines()) == 1
    assert (report / "report.html").stat().st_size < 5_000_000
