"""CI's step times (devtools/ci_times.py): `.ci/run` prints one `ci-step:` line per step, docs/development.md's times
table is made from those lines, and a step that takes more than 1.5 x its budget fails CI."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from devtools import ci_times

REPO = Path(__file__).resolve().parents[1]
CI_RUN = REPO / ".ci" / "run"

pytestmark = pytest.mark.promise(
    "docs/development.md",
    "CI prints each step's time and fails a step over 1.5 x its budget; the times table is made from its log",
)

SAMPLE_LOG = """\
ci-machine: AMD EPYC 9R14, 2 vCPUs, AVX2, commit 0123abc
+ some pip output
ci-step: lint 250 300 300
============================= 2055 passed in 713.12s (0:11:53) ==============================
ci-step: readme 790 840 480
ci-step: suite 713 720 360
ci-step: vllm 1300 1320 480
ci-step: lm-eval 1584 1620 480
ci-step: lint 260 300 300
ci-step: all 3593 3600 2400
"""


def test_the_table_is_made_from_the_step_lines_of_a_log():
    run = ci_times.parse_log(SAMPLE_LOG)
    assert run.machine == "AMD EPYC 9R14, 2 vCPUs, AVX2, commit 0123abc"
    assert list(run.steps) == ["all", "lint", "readme", "suite", "lm-eval", "vllm"]  # the table's order, not the log's
    assert run.steps["lint"].seconds == 260  # a step named twice keeps its last line
    table = ci_times.render_table(run)
    rows = [line for line in table.splitlines() if line.startswith("| suite ")]
    assert len(rows) == 1
    assert "| 713 s | 720 s | 360 s | over, by 98 %: 11 min 53 s |" in rows[0]
    assert "| 260 s | 300 s | 300 s | within: 4 min 20 s |" in table
    assert ci_times.table_of(table) == run  # the table reads back as the run it was made from


def test_rewriting_the_page_changes_its_table_alone():
    page = f"# Title\n\nbefore\n\n{ci_times.BEGIN}\nold table\n{ci_times.END}\n\nafter\n"
    new = ci_times.rewrite(page, ci_times.parse_log(SAMPLE_LOG))
    assert new.startswith("# Title\n\nbefore\n\n" + ci_times.BEGIN) and new.endswith(ci_times.END + "\n\nafter\n")
    assert "old table" not in new and "| readme |" in new


@pytest.mark.parametrize(("seconds", "fails"), [(150, False), (151, True), (60, False)])
def test_a_step_fails_the_check_above_one_and_a_half_times_its_budget(tmp_path, capsys, seconds, fails):
    log = tmp_path / "ci.log"
    log.write_text(f"ci-step: fast {seconds} 100 90\nci-step: lint 10 300 300\n")
    assert ci_times.main(["--check", str(log)]) == (1 if fails else 0)
    err = capsys.readouterr().err
    assert (f"ci: step fast took {seconds} s, more than 1.5 x its budget of 100 s (target 90 s)" in err) is fails
    assert "lint" not in err


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("no step here\n", "the log has no `ci-step:` line"),
        ("ci-step: mystery 1 2 3\n", "step 'mystery' of the log is not described in devtools/ci_times.py"),
        ("ci-step: lint 12s 300\n", "not a step line (ci-step: NAME SECONDS BUDGET TARGET)"),
    ],
)
def test_a_log_without_usable_step_lines_is_one_line_and_exit_2(tmp_path, capsys, text, message):
    log = tmp_path / "ci.log"
    log.write_text(text)
    page = tmp_path / "page.md"
    page.write_text(f"{ci_times.BEGIN}\n{ci_times.END}\n")
    assert ci_times.main([str(log), "--page", str(page)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err and err.count("\n") == 1
    assert page.read_text() == f"{ci_times.BEGIN}\n{ci_times.END}\n"  # left as it was
    assert ci_times.main([str(tmp_path / "absent.log")]) == 2


def ci_run_table(name: str) -> dict[str, int]:
    """.ci/run's `declare -A NAME=([step]=seconds ...)`, which may run over several lines."""
    text = CI_RUN.read_text()
    body = re.search(rf"^declare -A {name}=\((.*?)\)$", text, re.M | re.S)
    assert body, f".ci/run declares no {name} table"
    return {step: int(seconds) for step, seconds in re.findall(r"\[([a-z-]+)\]=(\d+)", body[1])}


def test_the_docs_table_is_in_the_generators_format_with_ci_runs_budgets():
    page = ci_times.PAGE.read_text()
    shown = ci_times.table_of(page)
    assert ci_times.rewrite(page, shown) == page, "docs/development.md's table is not what devtools.ci_times makes"
    budgets, targets = ci_run_table("BUDGET"), ci_run_table("TARGET")
    assert set(budgets) == set(targets) == set(ci_times.STEPS) == set(shown.steps)
    for step in shown.steps.values():
        assert (step.budget, step.target) == (budgets[step.name], targets[step.name]), step.name
        assert not step.failing, f"{step.name}: the table's time would fail CI: raise its budget in .ci/run"
        # a budget is the target, unless the step was over its target where it was measured
        assert step.budget == step.target or step.seconds > step.target, step.name


def ci_machinery_script(tmp_path, name: str, steps: str):
    """A script of .ci/run's own step functions (its lines from the TARGET table to machine()) with two fake steps,
    `quick` and `broken`, then `steps`."""
    text = CI_RUN.read_text()
    machinery = text[text.index("declare -A TARGET") : text.index("\nmachine() {")]
    script = tmp_path / name
    script.write_text(
        "set -euo pipefail\n"
        f"ENVS={tmp_path}\n"
        f"{machinery}\n"
        "quick() ( echo quick-output )\n"
        "broken() ( echo broken-output; false; echo not-reached )\n" + steps
    )
    return script


def test_ci_runs_steps_beside_each_other_print_their_output_and_a_failing_one_fails_ci(tmp_path):
    """.ci/run's own step functions (its lines from the TARGET table to machine()), run on fake steps."""
    script = ci_machinery_script(
        tmp_path,
        "steps.sh",
        "run_step lint quick\n"
        "start_beside lm-eval quick\n"
        "start_beside vllm broken\n"
        "wait_beside lm-eval vllm\n"
        "echo after-the-failure\n",
    )
    proc = subprocess.run(["bash", str(script)], capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0, proc.stdout
    assert "error: step(s) failed: vllm (exit 1)" in proc.stderr
    assert "broken-output" in proc.stdout and "not-reached" not in proc.stdout
    assert "after-the-failure" not in proc.stdout
    run = ci_times.parse_log(proc.stdout)
    assert list(run.steps) == ["lint", "lm-eval"]  # the failed step prints no time
    assert run.steps["lint"].budget == ci_run_table("BUDGET")["lint"]
    assert (tmp_path / "steps.log").read_text() == "".join(
        line + "\n" for line in proc.stdout.splitlines() if line.startswith("ci-step: ")
    )


def test_a_lane_runs_its_steps_in_order_each_timed_and_its_first_failure_ends_it_and_ci(tmp_path):
    """.ci/run's lanes (the tiers that mostly wait on their servers, one after another beside the two long tiers):
    each step of a lane prints its own time, a lane prints none, and a failing step ends its lane and then CI."""
    script = ci_machinery_script(
        tmp_path,
        "lanes.sh",
        "lane_ok() { lane postgres quick browser quick; }\n"
        "lane_bad() { lane slurm broken ray quick; }\n"
        "start_beside lm-eval quick\n"
        "start_beside servers lane_ok\n"
        "start_beside cluster lane_bad\n"
        "wait_beside lm-eval servers cluster\n"
        "echo after-the-failure\n",
    )
    proc = subprocess.run(["bash", str(script)], capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0, proc.stdout
    assert "error: step(s) failed: cluster (exit 1)" in proc.stderr
    assert "ci: step slurm starts" in proc.stdout and "broken-output" in proc.stdout
    assert "not-reached" not in proc.stdout and "ci: step ray starts" not in proc.stdout  # the lane ended there
    assert "after-the-failure" not in proc.stdout
    lines = [line for line in proc.stdout.splitlines() if line.startswith("ci-step: ")]
    assert [line.split()[1] for line in lines] == ["lm-eval", "postgres", "browser"]  # a lane's steps, in order
    assert set(ci_times.parse_log(proc.stdout).steps) == {"lm-eval", "postgres", "browser"}
    logged = (tmp_path / "steps.log").read_text().splitlines()
    assert sorted(logged) == sorted(lines)  # the log the budgets are checked on holds every step's line
