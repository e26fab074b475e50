"""What a person sees of a job: one progress bar per job in a terminal, plain `progress:` lines in a log file, and
the closing block (the study's headline metrics with intervals, the run id, the `src.ui` and `src.compare`
commands) after the one JSON line on stdout; a sweep prints the commands once, in its summary."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys

import pytest

from src.backends.base import SamplingParams
from src.backends.simulated import SimulatedBackend, SimulatedSettings
from src.common import progress
from src.presentation.closing import headline_metrics, look_commands

from .conftest import REPO, needs_data


class _Stream(io.StringIO):
    """A stderr that says whether it is a terminal."""

    def __init__(self, tty: bool) -> None:
        super().__init__()
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


@pytest.fixture
def stderr(monkeypatch):
    """Replace sys.stderr by a stream that is a terminal or not: `stderr(tty=...)` -> the stream."""
    monkeypatch.delenv("TQDM_DISABLE", raising=False)

    def make(*, tty: bool) -> _Stream:
        stream = _Stream(tty)
        monkeypatch.setattr(sys, "stderr", stream)
        return stream

    return make


def _items(n: int, *, variants: str = "original", scoring: str = "generate"):
    from src.config.checks import job_spec
    from src.config.compose import compose_job
    from src.core.prompts import PromptTemplate
    from src.core.questions import Question
    from src.job.runner import build_items

    cfg = compose_job(["model=simulated", f"variants={variants}", f"scoring={scoring}"])
    questions = [
        Question(
            id=f"q/{i}", question=f"Which one is {i}?", options=(f"{i}", f"{i + 1}", f"{i + 2}"), answer=0, subject="s"
        )
        for i in range(n)
    ]
    from omegaconf import OmegaConf

    template = PromptTemplate.from_config(OmegaConf.to_container(cfg.prompt, resolve=True))
    return build_items(job_spec(cfg), questions, template)


def _answer(items, **kwargs):
    from src.answering.trials import answer_items

    return answer_items(
        SimulatedBackend(SimulatedSettings(success_rate=0.7)),
        items,
        params=SamplingParams(n=1),
        chunk_size=8,
        **{"scoring": "generate", **kwargs},
    )


@pytest.mark.promise("README.md", "a log file gets plain progress lines, no bar and no escape sequences")
def test_a_log_file_gets_plain_progress_lines_with_no_bar_and_no_escape_sequences(stderr, monkeypatch):
    out = stderr(tty=False)
    monkeypatch.setattr(progress, "LINE_EVERY_S", 0.0)  # a line at every update: each 8-prompt chunk
    _answer(_items(20))
    lines = out.getvalue().splitlines()
    assert "\r" not in out.getvalue() and "\x1b" not in out.getvalue()
    shown = [re.fullmatch(r"progress: (\d+)/20 prompts \((\d+)%\) \d+\.\d s", line) for line in lines]
    assert all(shown), lines
    assert [int(m.group(1)) for m in shown] == [8, 16, 20]  # every chunk, and the end once
    assert shown[-1].group(2) == "100"


@pytest.mark.promise("README.md", "a log file gets a progress line at most every 10 s")
def test_in_a_log_file_lines_come_at_most_every_interval_and_once_at_the_end(stderr, monkeypatch):
    out = stderr(tty=False)
    monkeypatch.setattr(progress, "LINE_EVERY_S", 3600.0)
    _answer(_items(20))
    assert out.getvalue().splitlines() == [
        line for line in out.getvalue().splitlines() if line.startswith("progress: 20/20 prompts (100%)")
    ]
    assert len(out.getvalue().splitlines()) == 1


def test_progress_false_or_tqdm_disable_prints_nothing(stderr, monkeypatch):
    out = stderr(tty=False)
    _answer(_items(5), progress=False)
    monkeypatch.setenv("TQDM_DISABLE", "1")
    _answer(_items(5))
    assert out.getvalue() == ""


@pytest.mark.promise("README.md", "while a job answers, a terminal shows one progress bar")
def test_a_terminal_gets_one_bar_per_job_even_when_its_items_are_answered_in_two_parts(stderr):
    """Select-all items are generated under any scoring: answer_items answers them apart from the rest, and both
    parts count on the job's one bar (one description, one total), not a bar each."""
    out = stderr(tty=True)
    items = _items(6, variants="revas_multi_select") + _items(6)
    _answer(items, scoring="logprob")
    text = out.getvalue()
    totals = set(re.findall(r"(\d+)/(\d+) \[", text))
    assert {total for _, total in totals} == {str(len(items))}, text[-500:]
    assert set(re.findall(r"(\w+): +\d+%", text)) == {"logprob"}, text[-500:]
    assert f"{len(items)}/{len(items)}" in text


def test_a_step_bar_inside_a_job_is_removed_when_done_and_silent_in_a_log_file(stderr):
    out = stderr(tty=False)
    with progress.step_bar(10, "model x batches") as bar:
        bar.update(10)
    assert out.getvalue() == ""
    assert progress.step_bar(1, "x").leave is False  # in a terminal it leaves no finished line behind


# ---------------------------------------------------------------- the closing block


@pytest.mark.promise(
    "README.md",
    "the closing block shows the headline metrics with intervals, chance, the run id and the ui and compare commands",
)
def test_the_closing_block_of_a_cora_study_shows_its_headline_metrics_run_and_commands(run_job_in):
    result = run_job_in("model=simulated", "variants=cora", "limit=6")
    block = result.closing(level=0.95)
    lines = block.splitlines()
    assert lines[0] == f"run {result.run_id} finished, 95% intervals in brackets:"
    shown = [line.split()[0] for line in lines[1:] if line.startswith("  ")]
    assert shown == ["mcqa", "mcqa_plus", "bmca_1.0", "cora", "chance"]
    mcqa = next(line for line in lines if line.split()[0] == "mcqa")
    assert mcqa.split()[1] == f"{result.metrics['mcqa']:.4g}"
    assert f"[{result.metrics['mcqa_lo']:.4g}, {result.metrics['mcqa_hi']:.4g}]" in mcqa
    # the simulated model (success rate 0.8) is far above chance: said so, and no word of "indistinguishable"
    chance = next(line for line in lines if line.split()[0] == "chance")
    assert float(chance.split()[1]) == pytest.approx(result.metrics["chance"], abs=5e-4)
    assert 0.2 < result.metrics["chance"] < 0.34 and "(mcqa: above chance)" in chance
    assert "indistinguishable" not in block
    assert lines[-2] == (
        f"see the runs:      python -m src.ui --experiment mcq-consistency --tracking-uri {run_job_in.store_uri}"
    )
    assert lines[-1] == (
        f"compare the runs:  python -m src.compare --experiment mcq-consistency --tracking-uri {run_job_in.store_uri}"
    )
    assert "see the runs" not in result.closing(commands=False)  # a sweep's job: the sweep prints them once


@pytest.mark.promise(
    "README.md", "a run at chance says indistinguishable from chance in its closing block and run description"
)
def test_a_run_at_chance_says_so_in_its_closing_block_and_description(run_job_in):
    """A simulated model right as often as a guesser: its MCQA interval contains chance, said where the numbers are
    (closing block, MLflow run description) with the one sentence on its consistency metrics."""
    from mlflow.tracking import MlflowClient

    from src.tracking import review

    result = run_job_in("model=simulated", "model.success_rate=0.26", "variants=cora", "limit=30")
    metrics = result.metrics
    assert metrics["mcqa_lo"] <= metrics["chance"] <= metrics["mcqa_hi"]
    block = result.closing(level=0.95)
    assert "(mcqa: indistinguishable from chance)" in block
    assert f"contains chance ({metrics['chance']:.3f})" in block and "consistency metrics" in block
    note = MlflowClient(run_job_in.store_uri).get_run(result.run_id).data.tags[review.DESCRIPTION_TAG]
    assert f"chance {metrics['chance']:.3f}, mcqa: indistinguishable from chance." in note
    assert "this run is indistinguishable from chance" in note


@pytest.mark.slow
def test_the_headline_of_each_study(run_job_in):
    """A run of the original order alone: its accuracy (mcqa), not the CoRA family it fixes by construction; a
    repetition study: RWS, S/T and the mean accuracy."""
    single = run_job_in("model=simulated", "limit=4")
    assert single.headline == ("mcqa",)
    repeated = run_job_in("model=simulated", "limit=4", "repetitions=4", "temperature=0.7")
    assert {"rws", "st", "acc_mean"} <= set(repeated.headline) and "cora" not in repeated.headline
    skipped = run_job_in("model=simulated", "limit=4")
    assert skipped.skipped and "had already finished" in skipped.closing().splitlines()[0]
    assert headline_metrics({"invalid_rate": 0.0, "accuracy": 0.5}) == ("accuracy",)


def test_the_commands_never_show_a_password():
    lines = look_commands("postgresql://ann:s3cret@db:5432/mlflow", "exp")
    assert all("s3cret" not in line for line in lines)
    assert lines[1].endswith("--tracking-uri postgresql://***@db:5432/mlflow") or "***" in lines[1]


def test_a_sweep_prints_the_commands_once_in_its_summary(tmp_path, empty_mlflow_db, capsys):
    import shutil

    from hydra import compose, initialize_config_dir

    from src.sweep.callback import MlflowSweepCallback, write_outcome

    shutil.copyfile(empty_mlflow_db, tmp_path / "mlflow.db")
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        cfg = compose(
            "config",
            overrides=[
                "model=simulated",
                "limit=2",
                f"tracking.uri={uri}",
                "tracking.experiment=look",
                f"hydra.sweep.dir={tmp_path / 'sweep'}",
            ],
            return_hydra_config=True,
        )
        callback = MlflowSweepCallback()
        callback.on_multirun_start(cfg)
    for num in range(2):
        write_outcome(
            tmp_path / "sweep" / str(num),
            num=num,
            overrides=[f"seed={num}"],
            invocation=callback.invocation,
            status="finished",
            run_id=f"r{num}",
        )
    capsys.readouterr()
    callback.expected = 2
    assert callback.finish(interrupted=False) == 0
    err = capsys.readouterr().err
    assert err.count("python -m src.ui --experiment look") == 1
    assert f"python -m src.compare --experiment look --tracking-uri {uri} --sweep-id {callback.sweep_id}" in err


@needs_data
def test_the_command_line_keeps_one_json_line_on_stdout_and_closes_on_stderr(run_cli):
    proc = run_cli("model=simulated", "limit=3")
    summaries = [line for line in proc.stdout.splitlines()]  # stdout is data: Hydra's log lines are on stderr
    assert all(line.startswith("{") for line in summaries), proc.stdout
    assert len(summaries) == 1
    run_id = json.loads(summaries[0])["run_id"]
    assert "see the runs" not in proc.stdout
    assert f"run {run_id} finished" in proc.stderr
    assert f"python -m src.ui --experiment mcq-consistency --tracking-uri {run_cli.store_uri}" in proc.stderr
    assert "python -m src.compare --experiment mcq-consistency" in proc.stderr


def test_model_loading_bars_of_the_libraries_are_off_in_a_log_file_and_restored_after(stderr):
    from transformers.utils import logging as transformers_logging

    stderr(tty=False)
    assert transformers_logging.is_progress_bar_enabled()
    with progress.library_bars():
        assert not transformers_logging.is_progress_bar_enabled()
    assert transformers_logging.is_progress_bar_enabled()
    stderr(tty=True)
    with progress.library_bars():
        assert transformers_logging.is_progress_bar_enabled()  # a terminal: labelled by the library, kept


def test_importing_the_tool_sets_no_environment_variable():
    """The MLflow defaults are an entry point's to set, not an import's: `import src` and the entry
    point's module leave a process's environment as it was."""
    probe = (
        "import json, os; before = dict(os.environ); import src, src.run, src.cli, src.sweep.job; "
        "print(json.dumps(sorted(set(os.environ.items()) ^ set(before.items()))))"
    )
    env = {k: v for k, v in os.environ.items() if k not in progress.MLFLOW_DEFAULTS}
    proc = subprocess.run([sys.executable, "-c", probe], cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout) == []


def test_each_entry_point_and_a_sweeps_job_set_the_mlflow_defaults_a_users_setting_wins(monkeypatch):
    """`quiet_housekeeping` (every entry point's) sets MLflow's defaults where the environment has none; a sweep's
    job sets them too, for a launcher's worker that no entry point of ours started."""
    from src.common import gc_tuning
    from src.sweep import job

    for name in progress.MLFLOW_DEFAULTS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "true")  # the user's
    progress.quiet_housekeeping()
    assert os.environ["MLFLOW_DISABLE_TELEMETRY"] == "true"
    assert os.environ["MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR"] == "true"

    class Reached(Exception):
        pass

    def reached(_):
        raise Reached

    # a launcher's worker (a Ray worker: not the command's environment) runs the job function, no entry point
    for name in progress.MLFLOW_DEFAULTS:
        monkeypatch.delenv(name)
    monkeypatch.setattr(gc_tuning, "tune_for_batch", lambda: None)
    monkeypatch.setattr(job, "read_sweep_info", reached)
    with pytest.raises(Reached):
        job.run_sweep_job(None, type("HydraCfg", (), {"sweep": type("Sweep", (), {"dir": "x"})})())
    assert {name: os.environ.get(name) for name in progress.MLFLOW_DEFAULTS} == progress.MLFLOW_DEFAULTS
