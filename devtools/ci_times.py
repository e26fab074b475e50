"""CI's step times, from a `.ci/run` log: docs/development.md's times table made from them, and the budget check.

    CI=true bash .ci/run |& tee ci.log
    python -m devtools.ci_times ci.log           # docs/development.md's table made anew from ci.log
    python -m devtools.ci_times --check ci.log   # exit 1 naming each step that took more than 1.5 x its budget

`.ci/run` prints one line per step when the step ends, `ci-step: NAME SECONDS BUDGET TARGET` (whole seconds), and one
`ci-machine: TEXT` line first (the CPU, its cores, the commit). The target is what the step should take; the budget
is the target, or, for a step over its target on the slowest machine CI meets, its time there rounded up: a step
fails CI when it takes more than 1.5 x its budget (`--check`, .ci/run's last command), so CI stays green where it
was measured and turns red on a 50 % slowdown. Standard library only: .ci/run runs it with the system's python3.
Bad input (no such log, no `ci-step:` line, a step this module does not describe) is one line on stderr, exit 2.
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PAGE = REPO / "docs" / "development.md"
BEGIN = "<!-- ci-times: made by `python -m devtools.ci_times LOG` from a .ci/run log; edit .ci/run, not this table -->"
END = "<!-- end of ci-times -->"
OVER = 1.5  # a step fails CI above this multiple of its budget

# Each step .ci/run times, in the table's order: what it runs, and the command a developer types for it.
STEPS = {
    "all": ("all of `.ci/run`, every step", "`CI=true bash .ci/run`"),
    "lint": (
        "lint: ruff, `ruff format --check` and mypy (strict) in an environment of their own (most of it README's "
        "torch and the lint extra installed)",
        "the first step of `.ci/run`",
    ),
    "readme": (
        "README's test command in a new environment (venv, installs, collection, suite)",
        "README's second line",
    ),
    "suite": ("the suite, as pytest counts it (within the README step)", "`python -m pytest`"),
    "fast": ("the edit loop, the fast tier", '`python -m pytest -m "not slow"`'),
    "postgres": ("the PostgreSQL tier", "`python -m pytest -n 0 tests/test_postgres_server.py --run-postgres`"),
    "browser": ("the browser tier", "`python -m pytest -n 0 tests/test_mlflow_ui.py --run-browser`"),
    "model-server": ("the model-server tier", "`python -m pytest -n 0 tests/test_model_server.py --run-model-server`"),
    "lm-eval": (
        "the lm-eval tier, the suites' parity tests included (beside the vLLM tier)",
        "`python -m pytest -n 0 tests/test_lm_eval_tasks.py --run-lm-eval`",
    ),
    "vllm": (
        "the vLLM tier, six engine starts (beside the lm-eval tier)",
        "`python -m pytest -n 0 tests/test_vllm_engine.py --run-vllm`",
    ),
    "slurm": (
        "the Slurm tier",
        "`python -m pytest -n 0 tests/test_slurm_cluster.py tests/test_slurm_no_accounting.py --run-slurm`",
    ),
    "ray": ("the Ray tier", "`python -m pytest -n 0 tests/test_ray_cluster.py --run-ray`"),
}

STEP_LINE = re.compile(r"^ci-step: (?P<name>\S+) (?P<seconds>\d+) (?P<budget>\d+) (?P<target>\d+)\s*$")
MACHINE_LINE = re.compile(r"^ci-machine: (?P<text>.+?)\s*$")
ROW = re.compile(
    r"^\| (?P<name>[a-z-]+) \| .+ \| (?P<seconds>\d+) s \| (?P<budget>\d+) s \| (?P<target>\d+) s \| .+ \|$"
)


class LogError(ValueError):
    """A log this module cannot make a table from: the message says what and what to do."""


@dataclass(frozen=True)
class Step:
    name: str
    seconds: int
    budget: int
    target: int

    @property
    def failing(self) -> bool:
        return self.seconds > OVER * self.budget

    @property
    def over_target(self) -> bool:
        return self.seconds > self.target


@dataclass(frozen=True)
class CiRun:
    machine: str
    steps: dict[str, Step]  # in STEPS' order


def parse_log(text: str) -> CiRun:
    """The `ci-step:` and `ci-machine:` lines of a .ci/run log; a step named twice keeps its last line.

    >>> run = parse_log("ci-machine: a CPU, 2 vCPUs\\nother output\\nci-step: fast 96 90 90\\n")
    >>> run.machine, run.steps["fast"].seconds, run.steps["fast"].failing
    ('a CPU, 2 vCPUs', 96, False)
    """
    machine = "unknown machine"
    found: dict[str, Step] = {}
    for line in text.splitlines():
        if m := MACHINE_LINE.match(line):
            machine = m["text"]
        elif m := STEP_LINE.match(line):
            if m["name"] not in STEPS:
                raise LogError(f"step {m['name']!r} of the log is not described in devtools/ci_times.py: add it there")
            found[m["name"]] = Step(m["name"], int(m["seconds"]), int(m["budget"]), int(m["target"]))
        elif line.startswith("ci-step:"):
            raise LogError(f"not a step line (ci-step: NAME SECONDS BUDGET TARGET): {line!r}")
    if not found:
        raise LogError("the log has no `ci-step:` line: give the output of `bash .ci/run` (2>&1)")
    return CiRun(machine, {name: found[name] for name in STEPS if name in found})


def duration(seconds: int) -> str:
    """`11 min 53 s` (or `53 s` under a minute).

    >>> duration(713), duration(53)
    ('11 min 53 s', '53 s')
    """
    minutes, rest = divmod(seconds, 60)
    return f"{minutes} min {rest} s" if minutes else f"{rest} s"


def render_table(run: CiRun) -> str:
    """The table between BEGIN and END, markers included."""
    lines = [
        BEGIN,
        f"Measured on: {run.machine}.",
        "",
        "| step | what | took | budget | target | against its target | command |",
        "|---|---|---|---|---|---|---|",
    ]
    for step in run.steps.values():
        what, command = STEPS[step.name]
        against = (
            f"over, by {round(100 * (step.seconds - step.target) / step.target)} %: {duration(step.seconds)}"
            if step.over_target
            else f"within: {duration(step.seconds)}"
        )
        lines.append(
            f"| {step.name} | {what} | {step.seconds} s | {step.budget} s | {step.target} s | {against} | {command} |"
        )
    lines.append(END)
    return "\n".join(lines)


def table_of(page_text: str) -> CiRun:
    """The run a page's table shows, read back from its rows: the inverse of render_table."""
    block = _block(page_text)
    machine = next(
        (line.removeprefix("Measured on: ").removesuffix(".") for line in block if line.startswith("Measured on: ")),
        "",
    )
    steps = {}
    for line in block:
        if m := ROW.match(line):
            steps[m["name"]] = Step(m["name"], int(m["seconds"]), int(m["budget"]), int(m["target"]))
    return CiRun(machine, steps)


def _block(page_text: str) -> list[str]:
    lines = page_text.splitlines()
    if BEGIN not in lines or END not in lines:
        raise LogError(f"{PAGE.name} has no ci-times table: put the lines {BEGIN!r} and {END!r} where it goes")
    return lines[lines.index(BEGIN) : lines.index(END) + 1]


def rewrite(page_text: str, run: CiRun) -> str:
    """The page with its table made from `run`, every other line as it was."""
    old = "\n".join(_block(page_text))
    return page_text.replace(old, render_table(run), 1)


def failing_steps(run: CiRun) -> list[str]:
    """One line for each step over 1.5 x its budget."""
    return [
        f"ci: step {s.name} took {s.seconds} s, more than {OVER} x its budget of {s.budget} s (target {s.target} s)"
        for s in run.steps.values()
        if s.failing
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m devtools.ci_times", description=__doc__.splitlines()[0])
    parser.add_argument("log", type=Path, help="a .ci/run log (its stdout and stderr)")
    parser.add_argument("--check", action="store_true", help="exit 1 when a step took more than 1.5 x its budget")
    parser.add_argument("--page", type=Path, default=PAGE, help="the page whose table is rewritten")
    args = parser.parse_args(argv)
    try:
        run = parse_log(args.log.read_text(errors="replace"))
        if args.check:
            failing = failing_steps(run)
            for line in failing:
                print(line, file=sys.stderr)
            return 1 if failing else 0
        args.page.write_text(rewrite(args.page.read_text(), run))
    except FileNotFoundError as err:
        print(f"error: {err.filename} not found: give a .ci/run log", file=sys.stderr)
        return 2
    except LogError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(f"{args.page}: the times of {len(run.steps)} steps ({run.machine})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
