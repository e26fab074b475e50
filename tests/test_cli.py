"""`mcq <command>` (src/cli.py): the console script dispatches to the same `main(argv)` as `python -m src.X`, with the
shared flags and exit codes; the GC settings belong to the entry point, not to importing the package."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from src import cli
from src.tracking.names import DEFAULT_URI

REPO = Path(__file__).resolve().parents[1]


def test_the_console_script_is_the_dispatcher():
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    module, _, name = scripts["mcq"].partition(":")
    assert getattr(importlib.import_module(module), name) is cli.main


@pytest.mark.promise("README.md", "every command is also mcq <command>")
@pytest.mark.parametrize("name", sorted(set(cli.COMMANDS) - {"run"}))
def test_each_command_answers_through_mcq_as_through_python_m(name, capsys):
    """`mcq X --help` is `python -m src.X --help`: the same parser, reached through the same main(argv)."""
    with pytest.raises(SystemExit) as done:
        cli.main([name, "--help"])
    assert done.value.code == 0
    module = cli.COMMANDS[name].removesuffix(".__main__")
    assert capsys.readouterr().out.startswith(f"usage: python -m {module}")


def test_mcq_run_checks_the_config_before_hydra_starts():
    """`mcq run` is `python -m src.run` (in a process of its own: the entry point sets the process's GC)."""
    proc = subprocess.run(
        [sys.executable, "-m", "src.cli", "run", "model=simulated", "temprature=0.5"],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == cli.EXIT_USER_ERROR
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith("error: config key temprature") and "temperature?" in line


def test_an_unknown_command_is_one_error_line_and_exit_2(capsys):
    assert cli.main(["comapre"]) == cli.EXIT_USER_ERROR
    assert capsys.readouterr().err.strip().splitlines()[-1].startswith("error: unknown command 'comapre'")
    assert cli.main(["--help"]) == cli.EXIT_OK


@pytest.mark.parametrize("module", ["src.assess", "src.plan", "src.compare.__main__", "src.ingest.__main__"])
def test_the_tracking_flags_are_the_shared_ones(module, monkeypatch):
    """Every command that reads or writes runs takes --tracking-uri with the config's default."""
    seen = {}

    def parsed(self, args=None, namespace=None):
        seen.update(vars(real(self, args, namespace)))
        raise SystemExit(0)

    real = cli.argparse.ArgumentParser.parse_args
    monkeypatch.setattr(cli.argparse.ArgumentParser, "parse_args", parsed)
    required = {
        "src.assess": ["--experiment", "e"],
        "src.plan": ["--run", "r"],
        "src.ingest.__main__": ["--format", "generic", "--path", "p"],
    }.get(module, [])
    with pytest.raises(SystemExit):
        importlib.import_module(module).main(required)
    assert seen["tracking_uri"] == DEFAULT_URI


def test_importing_the_package_leaves_the_gc_alone():
    """Only an entry point tunes the garbage collector: a library user's process keeps its own settings."""
    code = (
        "import gc; before = gc.get_threshold(); import src.job.runner, src.tracking.job_tracker, src.sweep.callback; "
        "assert gc.get_threshold() == before, gc.get_threshold()"
    )
    subprocess.run([sys.executable, "-c", code], cwd=REPO, check=True)


def test_a_reader_that_leaves_early_ends_the_command_without_a_traceback(monkeypatch):
    """`python -m src.plan ... | head`: the reader closes the pipe; the command stops with the shell's SIGPIPE code
    and its stdout goes to /dev/null, so that the interpreter's last flush cannot raise again."""
    r, w = os.pipe()
    os.close(r)  # the reader left
    stdout = os.fdopen(w, "w")
    monkeypatch.setattr(sys, "stdout", stdout)

    def prints_a_long_table(argv):
        print("row\n" * 100_000)
        return 0

    try:
        assert cli.ended_by_reader(prints_a_long_table, None) == 128 + 13
        stdout.write("more")
        stdout.flush()  # into /dev/null now: no BrokenPipeError
    finally:
        monkeypatch.undo()
        stdout.close()
    assert cli.ended_by_reader(lambda argv: 3, None) == 3  # any other end keeps the command's own code


@pytest.mark.slow
def test_a_command_piped_into_a_reader_that_closed_says_nothing_on_stderr():
    """A real process: its stdout a pipe whose reading end is already closed (the reader left), so the first write
    fails; the interpreter's flush at exit must not raise again."""
    import os

    r, w = os.pipe()
    os.close(r)
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "src.catalog"], stdout=w, stderr=subprocess.PIPE, text=True, cwd=REPO, timeout=120
        )
    finally:
        os.close(w)
    assert proc.stderr == ""
    assert proc.returncode == 128 + 13
