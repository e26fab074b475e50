"""Bad input through the CLI: one line on stderr naming the file/record or config key, exit code 2, no traceback."""

from __future__ import annotations

import json

import pytest

from src.common.errors import UserError


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


def assert_user_error(run, *needles):
    """The in-process form: the job raises one UserError whose single line holds every needle."""
    with pytest.raises(UserError) as err:
        run()
    message = str(err.value)
    assert "\n" not in message, message
    for needle in needles:
        assert needle in message, (needle, message)


@pytest.mark.parametrize(
    "bad, needle",
    [
        ({"question": "2+2?", "options": ["3", "4"]}, "answer"),  # record without an answer
        ({"question": "2+2?", "options": ["3", "4"], "answer": 7}, "7"),  # answer out of range
        ({"question": "2+2?", "options": ["4"], "answer": 0}, "option"),  # fewer than two options
        ({"question": "2+2?", "options": ["4", "4 ", "5"], "answer": 0}, "same text"),  # duplicate options
    ],
)
def test_bad_records_name_file_and_line(run_job_in, tmp_path, bad, needle):
    path = write_jsonl(tmp_path / "bench.jsonl", [GOOD, bad])
    assert_user_error(
        lambda: run_job_in("model=simulated", "benchmark=generic", f"benchmark.path={path}"), str(path), "2", needle
    )


def test_bad_record_through_the_command_line_is_one_line_and_exit_2(run_cli, tmp_path):
    path = write_jsonl(tmp_path / "bench.jsonl", [GOOD, {"question": "2+2?", "options": ["3", "4"]}])
    proc = run_cli("model=simulated", "benchmark=generic", f"benchmark.path={path}", check=False)
    assert_one_line_error(proc, str(path), "2", "answer")


def test_missing_file_names_path_and_key(run_job_in, tmp_path):
    assert_user_error(
        lambda: run_job_in("model=simulated", "benchmark=medqa", f"benchmark.path={tmp_path}/nope.jsonl"),
        "nope.jsonl",
        "benchmark.path",
    )


def test_unknown_benchmark_names_the_key(run_job_in):
    assert_user_error(lambda: run_job_in("model=simulated", "benchmark=mmlux"), "benchmark", "mmlux", "mmlu?")
    assert_user_error(lambda: run_job_in("model=simulated", "benchmark.name=mmlux"), "benchmark", "mmlux")


def test_bad_config_values_name_the_key(run_job_in):
    assert_user_error(lambda: run_job_in("model=simulated", "scoring=vibes"), "scoring")
    assert_user_error(lambda: run_job_in("model=simulated", "repetitions=0"), "repetitions")
    assert_user_error(lambda: run_job_in("model=simulated", "tracking.uri=./mlruns"), "tracking.uri")


@pytest.mark.parametrize(
    "argv, needles",
    [
        (["temprature=0.5"], ["config key temprature", "temperature?"]),
        (["+temprature=0.5"], ["config key temprature", "temperature?"]),
        (["temperature=abc"], ["config key temperature", "abc"]),
        (["-m", "temperature=0,abc"], ["config key temperature", "abc"]),
        (["seed=1.5"], ["config key seed", "1.5"]),
        (["cache.enabeld=false"], ["config key cache.enabeld", "cache.enabled?"]),
        (["model.batchsize=3"], ["config key model.batchsize", "model.batch_size?"]),
        # the default model ships its weights: the user's own are the hf model's, not `model.chat` (the nearest key)
        (["model.path=/data/my-model"], ["config key model.path", "model=hf model.path="]),
        (["model=simulated", "model.gguf_file=x.gguf"], ["config key model.gguf_file", "model=hf model.path="]),
        (["benchmark=mmlux"], ["config key benchmark", "mmlux", "benchmark=mmlu?"]),
        (
            ["metrics.pride_protocol=author"],
            ["config key metrics.pride_protocol", "unknown protocol 'author'", "paper, authors"],
        ),
        # a committed sweep file: its keys and group choices, as Hydra will compose them
        (
            ["-m", "-cd", "sweeps", "-cn", "smoke", "model.succes_rate=0.9"],
            ["config key model.succes_rate", "model.success_rate?"],
        ),
        (["-m", "-cd", "sweeps", "-cn", "smoke", "benchmark=mmlux"], ["config key benchmark", "benchmark=mmlu?"]),
        (["-m", "-cd", "sweeps", "-cn", "cora", "limit=abc"], ["config key limit", "abc"]),
    ],
)
@pytest.mark.promise("conf/config.yaml", "the typed schema turns a typo'd key or a wrong type into one error line")
def test_config_typos_and_types_are_one_line_and_exit_2_before_hydra(monkeypatch, capsys, argv, needles):
    """`python -m src.run` checks its overrides against the schema before Hydra composes
    (src.config.command_line.check_command_line)."""
    from src import run

    monkeypatch.setattr("sys.argv", ["src.run", *argv])
    monkeypatch.setattr(run, "_hydra_main", lambda: pytest.fail("Hydra was reached"))
    with pytest.raises(SystemExit) as exit_:
        run.main()
    assert exit_.value.code == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("error: ") and all(n in line for n in needles), line


@pytest.mark.promise(
    "docs/clusters.md", "without the ray extra, hydra/launcher=ray_cluster stops in one line naming it, exit 2"
)
@pytest.mark.parametrize("hidden", ["hydra_plugins.hydra_ray_launcher", "ray"])
def test_a_launcher_whose_extra_is_missing_is_one_line_and_exit_2(monkeypatch, capsys, hidden):
    """hydra/launcher=ray_cluster without hydra-ray-launcher or Ray (the ray extra; hidden here): one line naming
    `pip install -e ".[ray]"`, exit 2, before Hydra (whose own error is a block about `hydra/launcher/ray`)."""
    import sys

    from src import run

    monkeypatch.setitem(sys.modules, hidden, None)  # its import raises ImportError, as when it is not installed
    monkeypatch.setattr("sys.argv", ["src.run", "-m", "-cd", "sweeps", "-cn", "smoke", "hydra/launcher=ray_cluster"])
    monkeypatch.setattr(run, "_hydra_main", lambda: pytest.fail("Hydra was reached"))
    with pytest.raises(SystemExit) as exit_:
        run.main()
    assert exit_.value.code == 2
    assert capsys.readouterr().err == (
        'error: hydra/launcher=ray_cluster needs hydra-ray-launcher and Ray: pip install -e ".[ray]"\n'
    )


def test_typo_through_the_command_line_is_one_line_and_exit_2(run_cli):
    assert_one_line_error(run_cli("+temprature=0.5", check=False), "temprature", "temperature?")
