"""Every command a user would copy from README.md and docs/*.md (the fenced shell blocks) is checked here.

- `python -m src.run ...` / `mcq run ...`: the command-line check of every job it names (`check_command_line`:
  composed as Hydra will, then the one `check_config`), i.e. the door a user meets first; a committed sweep
  (`-cd sweeps -cn NAME`) must exist and its extra overrides pass the same check;
- the other `python -m src.X` / `mcq X` commands: their own argument parser takes the command as written;
- `python -m devtools.X` / `python -m tests.X` (the developer tools, run from a clone): their own parser takes the
  command as written;
- `pip install -e ".[extra]"`: the extra exists in pyproject.toml; `python -m pytest PATH`: the path exists.
Tools that are not this project (`mlflow ui|server`, `git clone`, `pip install torch...`) are not run here.
The README's five-command study runs whole in tests/test_docs_commands.py::test_the_readme_study_runs (slow tier),
with `model=simulated` and small limits in place of the real models.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from src import cli
from src.common.errors import UserError
from src.config.command_line import LAUNCHER_EXTRAS, check_command_line, check_launcher, sweep_file_choices
from src.tracking.names import SERVER_ENV

REPO = Path(__file__).resolve().parents[1]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


SHELL_FENCES = ("", "bash", "sh", "console")  # the languages of a fenced block whose lines a user runs


def shell_blocks(text: str) -> list[str]:
    """The fenced blocks of a Markdown page that hold shell lines, each fence opened and closed in turn (so a
    ```` ```text ```` or ```` ```python ```` block is skipped whole, never paired with the next block's fence)."""
    blocks, lang, lines = [], "", None
    for line in text.splitlines():
        fence = re.fullmatch(r"\s*```\s*([\w+-]*)\s*", line)
        if fence and lines is None:
            lang, lines = fence.group(1), []
        elif fence and lines is not None:
            if lang in SHELL_FENCES:
                blocks.append("\n".join(lines) + "\n")
            lines = None
        elif lines is not None:
            lines.append(line)
    return blocks


def commands() -> list[tuple[str, str]]:
    """(page, command) for every command line in a fenced shell block; `\\` continuations joined, `&&` chains split,
    trailing comments dropped."""
    found = []
    for page in PAGES:
        for block in shell_blocks(page.read_text()):
            exported = dict(re.findall(r"^export (\w+)=(\S+)$", block, re.M))  # `$NAME` as the block sets it
            for line in re.sub(r"\\\n\s*", " ", block).splitlines():
                line = re.sub(r"\s+#.*$", "", line.strip())
                # B023, a closure over a loop variable: applied at once
                line = re.sub(r"\$(\w+)", lambda m: exported.get(m.group(1), m.group(0)), line)  # noqa: B023
                for part in line.split("&&"):
                    part = part.strip()
                    if re.match(r"(python -m |mcq |pip install )", part):
                        found.append((page.name, part))
    return found


COMMANDS = commands()


class Parsed(Exception):
    """Raised after an argument parser accepted the command (so the command itself does not run)."""


def _parse_only(monkeypatch) -> None:
    real = argparse.ArgumentParser.parse_args

    def parse(self, args=None, namespace=None):
        real(self, args, namespace)
        raise Parsed

    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", parse)


def test_a_text_block_does_not_hide_the_shell_blocks_after_it():
    page = "```text\nnot a command\n```\n\nprose\n\n```bash\npython -m src.run limit=2\n```\n\n```\nmcq compare\n```\n"
    assert shell_blocks(page) == ["python -m src.run limit=2\n", "mcq compare\n"]


def test_the_pages_hold_commands():
    pages = {page for page, _ in COMMANDS}
    assert {"README.md", "review.md", "launchers.md", "speed.md"} <= pages
    assert any(command.startswith("python -m src.run") for _, command in COMMANDS)


@pytest.mark.parametrize("page, command", COMMANDS, ids=[f"{p}:{c[:60]}" for p, c in COMMANDS])
def test_every_documented_command_is_accepted(page, command, monkeypatch):
    words = shlex.split(command)
    if words[0] == "pip":
        extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
        for spec in re.findall(r"\.\[([\w,-]+)\]", command):
            assert set(spec.split(",")) <= set(extras), f"{page}: {command}: no such extra"
        return
    if words[:2] == ["python", "-m"] and words[2].startswith("vllm."):  # vLLM's own server: the vLLM tier runs it
        from .test_vllm_engine import SERVE

        assert command.removesuffix("&").strip() == SERVE, f"{page}: {command}: not the command the vLLM tier runs"
        return
    if words[:3] == ["python", "-m", "pytest"]:
        for path in (w.split("::")[0] for w in words[3:] if w.startswith("tests/")):
            assert (REPO / path).exists(), f"{page}: {command}: {path} is not there"
        return
    if words[:2] == ["python", "-m"] and words[2].startswith(("tests.", "devtools.")):  # the development tools
        module = importlib.import_module(words[2])
        if not hasattr(module, "main") and hasattr(module, "__path__"):  # a package: what `python -m` runs
            module = importlib.import_module(words[2] + ".__main__")
        if hasattr(module, "main"):
            _parse_only(monkeypatch)
            with pytest.raises(Parsed):
                module.main(words[3:])
        else:  # a `--mode` script: the mode must be one its usage line names
            assert words[3] in (module.__doc__ or "") + Path(module.__file__).read_text().split("__main__", 1)[1], (
                f"{page}: {command}: {words[3]} is not a mode of {words[2]}"
            )
        return
    name, args = (words[2].removeprefix("src."), words[3:]) if words[0] == "python" else (words[1], words[2:])
    assert name in cli.COMMANDS, f"{page}: {command}: not a command of this project"
    if name == "run":
        if "-cn" in args:
            sweep = args[args.index("-cn") + 1]
            assert (REPO / args[args.index("-cd") + 1] / f"{sweep}.yaml").is_file(), f"{page}: {command}"
            # the sweep file's group choices (`- override model: simulated`) come first, as Hydra composes them
            chosen = sweep_file_choices(REPO / args[args.index("-cd") + 1], sweep)
            args = ["-m", *chosen, *[a for a in args if "=" in a]]
        launcher = next((a.split("=", 1)[1] for a in args if a.startswith("hydra/launcher=")), None)
        if launcher in LAUNCHER_EXTRAS:
            try:
                check_launcher(args)
            except (
                UserError
            ):  # its extra is not installed here (.ci/run's main-suite step): its config and the jobs are
                assert (REPO / "conf" / "hydra" / "launcher" / f"{launcher}.yaml").is_file(), f"{page}: {command}"
                args = [a for a in args if not a.startswith("hydra/launcher=")]
        check_command_line(args)  # raises the one-line UserError a user would see
        return
    _parse_only(monkeypatch)
    module = importlib.import_module(cli.COMMANDS[name])
    with pytest.raises(Parsed):
        module.main(args)


def _readme_study() -> list[str]:
    text = (REPO / "README.md").read_text()
    block = text.split("## A model-selection study in five commands", 1)[1].split("```bash\n", 1)[1].split("```")[0]
    return [line for line in block.splitlines() if line.strip()]


@pytest.mark.slow
def test_the_readme_study_runs(tmp_path):
    """The README's five commands, in order, with `model=simulated` (two success rates) in place of the real models,
    20 questions (what plan needs to estimate a variance) and one temperature of the three: the sweeps log their runs,
    compare writes its report, plan reads two of the runs."""
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    study = _readme_study()
    assert len(study) == 5
    run_ids = []
    for line in study:
        words = shlex.split(line)
        if words[2] == "src.ui":  # it serves until Ctrl-C: it must print the review view's address, then stop on SIGINT
            ui = subprocess.Popen(
                [sys.executable, *words[1:], "--tracking-uri", uri],
                cwd=REPO,
                text=True,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env={**os.environ, **SERVER_ENV},
            )
            try:
                first = ui.stdout.readline()
                assert first.startswith("review view: http://127.0.0.1:"), (first, ui.stderr.read()[-2000:])
            finally:
                ui.send_signal(signal.SIGINT)
                # both pipes read while it stops (a wait alone could hold it on a full stderr pipe); what it said
                # shows if it does not stop
                try:
                    _, err = ui.communicate(timeout=60)
                except subprocess.TimeoutExpired:
                    ui.kill()
                    raise AssertionError(
                        f"python -m src.ui still runs 60 s after Ctrl-C: {ui.communicate()[1][-3000:]}"
                    ) from None
                assert ui.returncode == 0, err[-3000:]
            continue
        if words[2] == "src.run":
            words = [w for w in words if not w.startswith(("model=", "limit=", "temperature="))]
            words += ["temperature=0.7"] if any(w.startswith("repetitions=") for w in words) else []
            words += [
                "model=simulated",
                "model.success_rate=0.5,0.9",
                "limit=20",
                f"tracking.uri={uri}",
                f"hydra.sweep.dir={tmp_path}/sweep{len(run_ids)}",
                "hydra/launcher=basic",
            ]
        elif words[2] == "src.compare":
            words += ["--tracking-uri", uri, "--out", str(tmp_path / "report"), "--no-mlflow"]
        elif words[2] == "src.plan":
            words = [w if w not in ("RUN_A", "RUN_B") else run_ids[("RUN_A", "RUN_B").index(w)] for w in words]
            words += ["--tracking-uri", uri]
        proc = subprocess.run([sys.executable, *words[1:]], cwd=REPO, capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, f"{line}\n{proc.stderr[-2000:]}"
        if words[2] == "src.run":
            run_ids += [json.loads(out)["run_id"] for out in proc.stdout.splitlines() if out.startswith("{")]
    assert len(run_ids) >= 4 and (tmp_path / "report").is_dir()
