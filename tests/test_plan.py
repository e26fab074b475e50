"""`python -m src.plan` (how many questions are enough) and `python -m src.compare`'s paired differences on real
MLflow runs of simulated jobs, in-process: the printed lines, the same-questions check and the one-line errors."""

from __future__ import annotations

import re
import shutil

import pytest

from src.compare.__main__ import main as compare_main
from src.metrics.paired import questions_needed
from src.plan import main as plan_main

from .conftest import DATA_DIR

COMMON = ("variants=cora", "tracking.experiment=plan")


@pytest.fixture(scope="module")
def study(tmp_path_factory, empty_mlflow_db):
    """Two models on the same 30 questions, and one run of the weaker model on 25 of them (run once per module,
    in-process, as the run_job_in fixture does)."""
    from src.config.compose import compose_job
    from src.job.runner import run_job

    tmp = tmp_path_factory.mktemp("plan")
    (tmp / "mlruns").mkdir()
    shutil.copyfile(empty_mlflow_db, tmp / "mlruns" / "mlflow.db")
    uri = f"sqlite:///{tmp}/mlruns/mlflow.db"
    ids = []
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TQDM_DISABLE", "1")
        for i, (rate, name, limit) in enumerate(((0.9, "strong", 30), (0.5, "weak", 30), (0.5, "weak", 25))):
            cfg = compose_job(
                [
                    "model=simulated",
                    f"model.success_rate={rate}",
                    f"model.name={name}",
                    f"limit={limit}",
                    *COMMON,
                    f"tracking.uri={uri}",
                    f"cache.path={tmp}/cache.db",
                    f"data_dir={DATA_DIR}",
                ]
            )
            ids.append(run_job(cfg, out_dir=tmp / "out" / str(i)).run_id)
    return (uri, *ids)


LINE = re.compile(r"^(\S+)\s+(\d+)\s+([\d.]+)\s+(\d+|–)\s+(.+)$")


@pytest.mark.promise(
    "README.md", "src.plan says from two finished runs how many questions detect a given difference per headline"
)
def test_plan_prints_one_line_per_metric_for_a_run_and_a_pair(study, capsys):
    uri, strong, weak, short = study
    assert plan_main(["--run", weak, "--delta", "0.02", "--tracking-uri", uri]) == 0
    heading, header, *lines = capsys.readouterr().out.strip().splitlines()
    assert heading.startswith(
        f"run {weak} (weak / synthetic / cora / T=0.0): 30 questions of the benchmark's 100; to detect a difference "
        "of 0.02 at alpha 0.05 (two-sided) with power 0.8"
    )
    assert header.split() == ["metric", "n", "sd", "n", "needed", "enough"]
    rows = {m.group(1): m.groups() for m in map(LINE.match, lines)}
    assert {"mcqa", "mcqa_plus", "cora"} <= set(rows)
    metric, n, sd, needed, verdict = rows["mcqa"]
    # n needed comes from the unrounded sd, printed rounded: the true sd lies within half a unit of the printed
    # last digit, and n needed grows with sd, so it lies between the figures of those two ends
    half_unit = 0.5 * 10 ** -len(sd.partition(".")[2])
    assert n == "30" and questions_needed(float(sd) - half_unit, 0.02) <= int(needed) <= questions_needed(
        float(sd) + half_unit, 0.02
    )
    # the synthetic benchmark holds 100 questions: more than that is not reachable, and what all 100 would detect
    # is the inverse of the same formula
    assert int(needed) > 100
    detectable = float(
        re.fullmatch(
            r"no: not reachable on this benchmark; (0\.\d{3}) detectable with all 100 "
            r"questions",
            verdict,
        ).group(1)
    )
    z = 1.959963984540054 + 0.8416212335729143
    assert detectable == pytest.approx(z * float(sd) / 10, abs=0.5 * 10 ** -len(sd.partition(".")[2]) * z / 10 + 5e-4)
    assert plan_main(["--run", weak, "--delta", "0.3", "--tracking-uri", uri]) == 0  # reachable: how many more
    assert any(
        re.search(r"  no \(\d+ more\)$", line) or line.endswith("yes") for line in capsys.readouterr().out.splitlines()
    )
    assert plan_main(["--run", strong, "--run", weak, "--delta", "0.3", "--tracking-uri", uri]) == 0
    heading, _, *lines = capsys.readouterr().out.strip().splitlines()
    assert heading.startswith(
        f"runs {strong} (strong / synthetic / cora / T=0.0) − {weak} (weak / synthetic / cora "
        "/ T=0.0), paired (leader − runner-up on mcqa): 30 shared questions"
    )
    assert any(line.startswith("mcqa ") and line.endswith("yes") for line in lines)  # 0.3 needs few questions


def test_plan_refuses_bad_input_in_one_line(study, capsys):
    uri, strong, weak, short = study
    for args, message in (
        (["--run", weak, "--delta", "0"], "error: --delta: 0 must be > 0"),
        (["--run", weak, "--power", "1.5"], "error: --power: 1.5 must be between 0 and 1"),
        (["--run", "nope"], "error: --run: no MLflow run 'nope'"),
        (
            ["--run", strong, "--run", short],
            f"error: --run: runs {strong} and {short} asked different questions (30 and 25 questions, 25 shared)",
        ),
    ):
        assert plan_main([*args, "--tracking-uri", uri]) == 2
        err = capsys.readouterr().err
        assert err.startswith(message) and err.count("\n") == 1, err
    assert plan_main(["--run", strong, "--run", short, "--pair-intersection", "--tracking-uri", uri]) == 0
    assert "paired (leader − runner-up on mcqa): 25 shared questions" in capsys.readouterr().out


def test_compare_prints_paired_differences_and_writes_them(study, tmp_path, capsys):
    uri, strong, weak, short = study
    out = tmp_path / "report"
    assert compare_main(["--experiment", "plan", "--tracking-uri", uri, "--out", str(out), "--no-mlflow"]) == 0
    err = capsys.readouterr().err
    # what to pick comes first: one bottom line per benchmark and condition, before the paired differences
    bottom = [line for line in err.splitlines() if line.startswith("bottom line: ")]
    assert [line.split(":")[1] for line in bottom] == [" synthetic (limit=30)"]  # limit=25: one model
    assert err.index("bottom line: ") < err.index("paired: ")
    paired = [line for line in err.splitlines() if line.startswith("paired: ")]
    assert paired and all(line.startswith("paired: synthetic (limit=30): strong − weak ") for line in paired)
    mcqa = next(line for line in paired if " mcqa " in line)
    assert re.search(r" mcqa \+0\.\d{3} \[[+-]0\.\d{3}, \+0\.\d{3}\] p=[\d.<]+ p_holm=[\d.<]+", mcqa), mcqa
    md = (out / "report.md").read_text()
    assert "## Paired differences between models" in md and "### synthetic (limit=30)" in md
    assert re.search(r"\| MCQA \| 0\.\d{3} \[0\.\d{3}, [01]\.\d{3}\] \(\d\)", md)  # intervals in the CoRA table
    power = md.split("## How many questions are enough", 1)[1]
    assert "strong − weak (paired)" in power and "| weak | mcqa | 25 |" in power  # the 25-question run alone
    assert (out / "tables" / "paired_synthetic_limit_30.csv").is_file()
    assert (
        compare_main(["--experiment", "plan", "--tracking-uri", uri, "--out", str(out), "--no-mlflow", "--delta", "-1"])
        == 2
    )
    assert capsys.readouterr().err.startswith("error: --delta: -1 must be > 0")


def test_the_report_and_plan_cap_the_questions_needed_by_one_rule(study, tmp_path, capsys):
    """30 of the synthetic benchmark's 100 questions: where more than 100 are needed, the report's
    questions-needed table, its bottom line and `src.plan` all say what the 100 would detect, in the same words
    for the same sd; none names a count beyond the benchmark."""
    import pandas as pd
    from mlflow.tracking import MlflowClient

    uri, strong, weak, short = study
    assert MlflowClient(tracking_uri=uri).get_run(weak).data.params["benchmark_size"] == "100"  # logged by the job
    out = tmp_path / "report"
    assert compare_main(["--experiment", "plan", "--tracking-uri", uri, "--out", str(out), "--no-mlflow"]) == 0
    (bottom,) = [line for line in capsys.readouterr().err.splitlines() if line.startswith("bottom line: ")]
    power = pd.read_csv(out / "tables" / "power_synthetic_limit_30.csv")
    assert (power["benchmark_size"] == 100).all()
    beyond = power[power["n_needed"] > 100]
    assert (
        len(beyond)
        and beyond["verdict"]
        .str.fullmatch(r"no: not reachable on this benchmark; 0\.\d{3} detectable with all 100 questions")
        .all()
    )
    z = 1.959963984540054 + 0.8416212335729143
    assert beyond["detectable_with_all"].to_numpy() == pytest.approx(z * beyond["sd"].to_numpy() / 10, rel=1e-9)
    assert "no (" not in " ".join(beyond["verdict"])  # never "no (690 more)" past the benchmark's end
    weak_mcqa = power[(power["who"] == "weak") & (power["metric"] == "mcqa")].iloc[0]
    assert plan_main(["--run", weak, "--delta", "0.02", "--tracking-uri", uri]) == 0
    planned = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("mcqa "))
    assert planned.endswith(weak_mcqa["verdict"]) and str(int(weak_mcqa["n_needed"])) in planned
    if "no model is better" in bottom:  # a tie: what the 100 questions would detect, not a count beyond them
        assert "no number of its 100 questions tells a difference of 0.02" in bottom, bottom
        assert re.search(r"0\.\d{3} detectable with all 100 questions", bottom), bottom
    assert not re.search(r"(\d+) questions would tell", bottom) or all(
        int(n) <= 100 for n in re.findall(r"(\d+) questions would tell", bottom)
    )


def test_plan_rows_collapse_identical_metrics_and_name_runs_at_chance():
    """A one-variant run's CoRA family equals its MCQA: one row names them together; a run whose headline interval
    contains chance is named (no MLflow: a stand-in client)."""
    from types import SimpleNamespace as N

    from src.plan import chance_notes, format_rows, plan_rows

    rows = plan_rows(
        {"mcqa": 0.5, "mcqa_plus": 0.5, "bmca_1.0": 0.5, "rws": 0.3}, 20, 100, delta=0.3, alpha=0.05, power=0.8
    )
    assert [r["metric"] for r in rows] == ["mcqa = mcqa_plus = bmca_1.0", "rws"]
    assert rows[0]["n_needed"] == questions_needed(0.5, 0.3) and rows[0]["enough"] is False
    assert format_rows(rows)[1].endswith(f"no ({questions_needed(0.5, 0.3) - 20} more)")
    metrics = {"acc_mean": 0.26, "acc_mean_lo": 0.2, "acc_mean_hi": 0.33, "chance": 0.25, "mcqa": 0.5}
    client = N(get_run=lambda run_id: N(data=N(metrics=metrics if run_id == "a" * 32 else {"mcqa": 0.9})))
    (note,) = chance_notes(client, ["a" * 32, "b" * 32], ["gemma", "smollm2"])
    assert note.startswith("run aaaaaaaa (gemma) is indistinguishable from chance on acc_mean (0.260 [0.200, 0.330]")


@pytest.mark.promise("docs/review.md", "src.plan caps the questions needed by each run's own benchmark size")
def test_plan_caps_a_pair_by_each_runs_own_questions_not_the_shared_ones(study, monkeypatch, capsys):
    """Two runs paired on the 25 questions they share (--pair-intersection): the benchmark's size is looked up
    from each run's own questions asked (30 and 25), as a run asked without `limit` holds its whole benchmark, not
    from the 25 shared ones, which would cap the answer below what the benchmark holds."""
    import src.plan as plan_module

    uri, strong, weak, short = study
    asked: dict[str, int] = {}

    def size(client, run_id, n_asked):
        asked[run_id] = n_asked
        return None  # as for a run logged without `benchmark_size`: the count asked is all that is known

    monkeypatch.setattr(plan_module, "benchmark_size", size)
    heading, _ = plan_module.plan([strong, short], tracking_uri=uri, intersect=True, delta=0.3)
    assert asked == {strong: 30, short: 25}
    assert "25 shared questions;" in heading


@pytest.mark.promise("docs/review.md", "a run id that names no run is one line naming the flag --run, exit 2")
def test_plan_names_a_run_id_flag_as_a_flag_in_one_line(study, capsys):
    """`--run deadbeef` (no such run): the error names the flag `--run` and `--tracking-uri`, not a config key, in
    one line, exit 2."""
    uri = study[0]
    assert plan_main(["--run", "deadbeef", "--tracking-uri", uri]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --run: no MLflow run 'deadbeef'") and err.count("\n") == 1, err
    assert "config key" not in err and "(--tracking-uri must point at its store)" in err
