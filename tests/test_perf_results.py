"""The bench's results file (devtools/perf/results.py): every figure one JSON line with what makes it comparable."""

from __future__ import annotations

import json
import math

import pytest

from devtools.perf import results


@pytest.mark.promise(
    "docs/speed.md", "each figure the bench prints is one JSON line with its machine, date, load, command and commit"
)
def test_every_finite_figure_is_a_line_with_its_machine_date_load_command_commit_and_unit(tmp_path):
    phases = {"cora, packed": {"seconds": 8.9, "prompts": 100, "ms_per_token": math.nan, "peak_rss_mib": 1080.0}}
    taken = {"cora, packed": (0.0, 1.25)}
    ratios = {"cora_vs_padded": 3.3, "gpu_peak_memory_gib": math.nan, "startup_run_wall_s": 2.62}
    path = tmp_path / "deeper" / "results.jsonl"
    figures = results.records(["--only", "cora"], phases, taken, ratios, {"cora_vs_padded": True})
    assert results.append(path, figures) == 5, "the two NaNs (nothing measured) are left out"
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    by_name = {line["name"]: line for line in lines}
    seconds = by_name["cora, packed: seconds"]
    assert (seconds["value"], seconds["unit"], seconds["date"], seconds["load_average"]) == (
        8.9,
        "s",
        "1970-01-01T00:00:00Z",
        1.25,
    ), "a phase's figure carries the date and load of when its phase ended"
    assert by_name["cora, packed: peak_rss_mib"]["unit"] == "MiB" and by_name["cora, packed: prompts"]["value"] == 100
    assert by_name["cora_vs_padded"]["target_met"] is True and "target_met" not in by_name["startup_run_wall_s"]
    assert by_name["startup_run_wall_s"]["unit"] == "s"
    assert seconds["command"] == "python -m devtools.perf --only cora"
    assert seconds["machine"]["cpus"] >= 1 and isinstance(seconds["machine"]["cpu_flags"], list)
    assert seconds["commit"] == "unknown" or len(seconds["commit"].removesuffix("+dirty")) >= 7
    results.append(path, results.records([], {}, {}, {"cora_vs_padded": 3.1}, {}))
    assert len(path.read_text().splitlines()) == 6, "a second run appends; it never rewrites the history"


@pytest.mark.promise("docs/speed.md", "--results PATH or MCQ_PERF_RESULTS writes the results elsewhere")
def test_the_file_is_the_argument_else_the_environment_else_the_committed_one(monkeypatch, tmp_path):
    monkeypatch.delenv(results.PATH_ENV, raising=False)
    assert results.results_path(None) == results.DEFAULT_PATH
    assert results.DEFAULT_PATH.relative_to(results.REPO).as_posix() == "devtools/perf/results.jsonl"
    monkeypatch.setenv(results.PATH_ENV, str(tmp_path / "env.jsonl"))
    assert results.results_path(None) == tmp_path / "env.jsonl"
    assert results.results_path(str(tmp_path / "arg.jsonl")) == tmp_path / "arg.jsonl"


def test_a_ratios_unit_is_read_from_its_name():
    assert results.unit_of("gpu_one_call_tokens_per_s") == "tokens/s"
    assert results.unit_of("gpu_auto_budget_tokens") == "tokens"
    assert results.unit_of("gpu_peak_memory_gib") == "GiB"
    assert results.unit_of("mainjob_token_vs_fixed_batches") == "ratio"
    assert results.unit_of("forward_tokens") == "tokens" and results.unit_of("ms_per_token") == "ms/token"


def test_a_figure_carries_the_commit_the_bench_started_on_not_one_made_while_it_ran():
    figures = list(results.records([], {}, {}, {"main_job_s": 70.4}, {}, measured_commit="abc1234"))
    assert [f["commit"] for f in figures] == ["abc1234"]
    assert list(results.records([], {}, {}, {"main_job_s": 70.4}, {}))[0]["commit"] == results.commit()
