"""Bad input through the CLI: one line on stderr naming the file/record or config key, exit code 2, no traceback."""
from __future__ import annotations

import json

import pytest


def write_jsonl(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


GOOD = {"question": "2+2?", "options": ["3", "4", "5"], "answer": 1}


def assert_one_line_error(proc, *needles):
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-2000:])
    assert "Traceback" not in proc.stderr
    lines = [ln for ln in proc.stderr.strip().splitlines() if ln.startswith("error:")]
    assert len(lines) == 1, proc.stderr
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])


@pytest.mark.parametrize("bad, needle", [
    ({"question": "2+2?", "options": ["3", "4"]}, "answer"),                      # record without an answer
    ({"question": "2+2?", "options": ["3", "4"], "answer": 7}, "7"),             # answer out of range
    ({"question": "2+2?", "options": ["4"], "answer": 0}, "option"),             # fewer than two options
    ({"question": "2+2?", "options": ["4", "4 ", "5"], "answer": 0}, "same text"),  # duplicate options
])
def test_bad_records_name_file_and_line(run_cli, tmp_path, bad, needle):
    path = write_jsonl(tmp_path / "bench.jsonl", [GOOD, bad])
    proc = run_cli("model=simulated", "benchmark=generic", f"benchmark.path={path}", check=False)
    assert_one_line_error(proc, str(path), "2", needle)


def test_missing_file_names_path_and_key(run_cli, tmp_path):
    proc = run_cli("model=simulated", "benchmark=medqa", f"benchmark.path={tmp_path}/nope.jsonl", check=False)
    assert_one_line_error(proc, "nope.jsonl", "benchmark.path")


def test_unknown_benchmark_names_the_key(run_cli):
    proc = run_cli("model=simulated", "benchmark=mmlux", check=False)
    assert_one_line_error(proc, "benchmark", "mmlux")
    proc = run_cli("model=simulated", "benchmark.name=mmlux", check=False)
    assert_one_line_error(proc, "benchmark", "mmlux")


def test_bad_config_values_name_the_key(run_cli):
    assert_one_line_error(run_cli("model=simulated", "scoring=vibes", check=False), "scoring")
    assert_one_line_error(run_cli("model=simulated", "repetitions=0", check=False), "repetitions")
    assert_one_line_error(run_cli("model=simulated", "tracking.uri=./mlruns", check=False), "tracking.uri")
