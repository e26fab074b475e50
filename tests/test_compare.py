"""`python -m src.compare`: the papers' tables and plots from MLflow runs, the report files, and its errors.

Unit tests feed the table builders hand-made run tables (the CoRA paper's own Table 1 among them); the end-to-end
tests read the smoke sweep's store (tests/smoke_store.py).
"""

from __future__ import annotations

import base64
import math
import re
from html.parser import HTMLParser
from pathlib import Path

import pandas as pd
import pytest

from src.common.errors import UserError
from src.compare import load, plots, report, tables
from src.compare.__main__ import main
from src.compare.sections import build_sections
from src.tracking.records import read_run_records

from .conftest import mlflow_runs
from .smoke_store import run_module, smoke_store  # noqa: F401 - smoke_store is a fixture

PNG = b"\x89PNG\r\n\x1a\n"

# CoRA paper, Table 1 (MedQA): MCQA, MCQA+, MV, CoRA, BMCA(0.5..1.0), CI per model
PAPER_TABLE_1 = {
    "GPT4o": [0.85, 0.90, 0.91, 0.74, 0.91, 0.89, 0.86, 0.84, 0.79, 0.73, 0.88],
    "MedL": [0.74, 0.69, 0.73, 0.32, 0.75, 0.67, 0.57, 0.49, 0.34, 0.18, 0.44],
    "BioML": [0.73, 0.75, 0.77, 0.42, 0.80, 0.73, 0.66, 0.60, 0.46, 0.31, 0.58],
    "BMist": [0.38, 0.58, 0.58, 0.28, 0.61, 0.49, 0.40, 0.33, 0.22, 0.11, 0.73],
}
CORA_NAMES = [
    "mcqa",
    "mcqa_plus",
    "mv",
    "cora",
    "bmca_0.5",
    "bmca_0.6",
    "bmca_0.7",
    "bmca_0.8",
    "bmca_0.9",
    "bmca_1.0",
    "ci",
]


def runs_frame(rows: list[dict]) -> pd.DataFrame:
    """A load_runs-shaped table: run-level columns with defaults, then the given metrics."""
    base = {
        "experiment_id": "1",
        "experiment": "e",
        "sweep_id": "s",
        "variants": "cora",
        "temperature": 0.0,
        "scoring": "generate",
        "prompt": "cora",
        "fewshot": 0,
        "repetitions": 1,
        "limit": "null",
        "seed": 0,
    }
    out = [{"run_id": f"r{i}", "start_time": i, **base, **row} for i, row in enumerate(rows)]
    return pd.DataFrame(out)


def paper_runs(benchmark: str = "medqa", **extra) -> pd.DataFrame:
    return runs_frame(
        [{"model": m, "benchmark": benchmark, **dict(zip(CORA_NAMES, v)), **extra} for m, v in PAPER_TABLE_1.items()]
    )


# ---------------------------------------------------------------- tables from hand-made runs


def test_cora_table_reproduces_the_papers_table_1():
    built = tables.cora_tables(paper_runs())
    (table,) = built.tables
    assert list(table.text.columns) == [*sorted(PAPER_TABLE_1), "chance"]
    assert table.text.at["MCQA", "GPT4o"] == "0.850 (1)" and table.text.at["MCQA", "BMist"] == "0.380 (4)"
    assert table.text.at["MCQA+", "MedL"] == "0.690 (3)" and table.text.at["MCQA+", "BioML"] == "0.750 (2)"
    assert table.text.at["CoRA", "MedL"] == "0.320 (3)" and table.text.at["CoRA", "BioML"] == "0.420 (2)"
    assert table.text.at["BMCA(1.0)", "GPT4o"] == "0.730" and table.text.at["CI", "BMist"] == "0.730"
    assert list(table.text.index) == [
        "MCQA",
        "MCQA+",
        "MV",
        "CoRA",
        *[f"BMCA({c})" for c in ("0.5", "0.6", "0.7", "0.8", "0.9", "1.0")],
        "CI",
        "INVALID",
    ]


def test_equal_scores_share_the_better_rank():
    """The paper's Table 2: MCQA+ 0.75 (1) twice, CoRA 0.33 (3) twice."""
    frame = runs_frame(
        [
            {"model": m, "benchmark": "mmlu", "mcqa": a, "mcqa_plus": p, "mv": 0.5, "cora": c}
            for m, a, p, c in [
                ("Mist", 0.64, 0.75, 0.44),
                ("Llam", 0.58, 0.62, 0.33),
                ("Gran", 0.65, 0.75, 0.47),
                ("DSeek", 0.52, 0.60, 0.33),
            ]
        ]
    )
    text = tables.cora_tables(frame).tables[0].text
    assert text.at["MCQA+", "Mist"] == "0.750 (1)" and text.at["MCQA+", "Gran"] == "0.750 (1)"
    assert text.at["MCQA+", "Llam"] == "0.620 (3)"
    assert text.at["CoRA", "Llam"] == "0.330 (3)" and text.at["CoRA", "DSeek"] == "0.330 (3)"


def test_rank_changes_name_the_models_that_swap():
    changes = tables.rank_changes(tables.cora_tables(paper_runs()))
    (table,) = changes.tables
    ranks = table.data.set_index("model")
    assert ranks.loc["MedL", ["mcqa_rank", "cora_rank", "change"]].tolist() == [2, 3, -1]
    assert ranks.loc["BioML", ["mcqa_rank", "cora_rank", "change"]].tolist() == [3, 2, 1]
    assert "MedL ranks above BioML on MCQA, below it on CoRA" in table.caption
    assert "GPT4o" not in table.caption


def test_runs_that_differ_in_more_than_the_model_get_their_own_table():
    frame = pd.concat([paper_runs(fewshot=0), paper_runs(fewshot=5)], ignore_index=True)
    frame["start_time"] = range(len(frame))
    titles = [t.title for t in tables.cora_tables(frame).tables]
    assert titles == ["medqa (shots=0)", "medqa (shots=5)"]
    rerun = pd.concat([paper_runs(), paper_runs().assign(mcqa=0.1)], ignore_index=True)
    rerun["start_time"] = range(len(rerun))
    (table,) = tables.cora_tables(rerun).tables  # the same runs again: the latest wins
    assert table.text.at["MCQA", "GPT4o"].startswith("0.100")


def repetition_runs() -> pd.DataFrame:
    rows = []
    for model, shift in (("a", 0.0), ("b", 0.2)):
        for t, st in ((0.3, 0.8), (0.7, 0.53), (1.0, 0.0)):
            rws = math.nan if st == 0 else 0.6 + shift
            rows.append(
                {
                    "model": model,
                    "benchmark": "mmlu_redux",
                    "variants": "original",
                    "temperature": t,
                    "repetitions": 10,
                    "sure_right": st * (0.6 + shift),
                    "sure_wrong": st * (0.4 - shift),
                    "unsure_right": (1 - st) / 2,
                    "unsure_wrong": (1 - st) / 2,
                    "st": st,
                    "rws": rws,
                    "acc_mean": 0.5 + shift,
                    "acc_std": 0.01,
                }
            )
    return runs_frame(rows)


def test_repetition_table_has_the_papers_columns():
    (table,) = tables.repetition_tables(repetition_runs()).tables
    assert list(table.text.columns) == [
        "temperature",
        "SURE right",
        "UNSURE right",
        "UNSURE wrong",
        "SURE wrong",
        "acc mean",
        "acc std",
        "RWS | S/T",
        "INVALID",
        "chance",
    ]
    first = table.text.iloc[1]  # model a at T=0.7
    assert first["temperature"] == "0.70" and first["RWS | S/T"] == "0.60 | 53%" and first["SURE right"] == "32%"
    assert table.text.iloc[2]["RWS | S/T"] == "n/a | 0%"
    assert table.caption.startswith("10 repetitions")


def test_repetition_runs_of_several_variant_sets_collapse():
    """The repetition family reads the original variant only: a cora run beside an original run at the same
    setting repeats it, and the original run is the one shown."""
    frame = repetition_runs()
    twin = frame.assign(variants="cora", acc_mean=0.0, start_time=frame["start_time"] + 100)
    (table,) = tables.repetition_tables(pd.concat([frame, twin], ignore_index=True)).tables
    assert len(table.data) == 6 and (table.data["acc_mean"] > 0).all()


def test_consistency_plot_paths_and_undefined_rws():
    made, notes = plots.consistency_plots(repetition_runs())
    (plot,) = made
    assert plot.png.startswith(PNG) and not notes
    assert "a T=1" in plot.caption and "b T=1" in plot.caption  # nothing SURE at T=1: not plotted, and said so


def test_revas_tables_merge_the_variant_sets_of_a_model():
    frame = runs_frame(
        [
            {
                "model": "m",
                "benchmark": "mmlu",
                "variants": "revas_option_count",
                "acc@2": 0.9,
                "sc_mean@2": 0.95,
                "acc_h@2": 0.8,
                "acc@4": 0.7,
                "sc_mean@4": 0.8,
                "acc_h@4": 0.4,
                "sc_mean": 0.8,
                "acc_h": 0.4,
            },
            {"model": "m", "benchmark": "mmlu", "variants": "revas_nota", "nota_acc": 0.1, "nota_acc_h": 0.02},
        ]
    )
    built = tables.revas_tables(frame)
    options, summary = built.tables
    assert list(options.text.columns) == ["n=2", "n=4"]
    assert options.text.loc["m · Acc-H"].tolist() == ["0.800", "0.400"]
    assert summary.text.loc["m", "NOTA Acc"] == "0.100" and summary.text.loc["m", "Sc"] == "0.800"
    (plot,), _ = plots.options_plots(frame)
    assert plot.png.startswith(PNG)


def test_absent_inputs_are_skipped_with_a_reason(tmp_path):
    frame = runs_frame([{"model": "m", "benchmark": "b", "variants": "original", "mcqa": 0.5, "accuracy": 0.5}])
    runs = load.Runs(table=frame, tracking_uri="sqlite:///x.db", experiments={"1": "e"})
    sections = build_sections(runs)
    reasons = " ".join(n for _, notes in sections[0].absent for n in notes)
    for reason in (
        "no run logged `cora`",
        "no run logged `st`",
        "no run logged permutation-set metrics",
        "no run logged REVAS metrics",
        "no run logged bmca_<c>",
        "no acc@n",
    ):
        assert reason in reasons
    report.write(sections, tmp_path, header=["h"], title="t")
    # one line about the absent studies: in Markdown that line alone, in HTML a collapsed list with the reasons
    md, page = (tmp_path / "report.md").read_text(), (tmp_path / "report.html").read_text()
    (line,) = [line for line in md.splitlines() if line.startswith("> Note: not in these runs")]
    assert "> Note: every run has variants" in md  # the keys alike in every run: said once, not a column
    assert line.startswith(
        "> Note: not in these runs (no section): CoRA ranking; Rank changes between MCQA and CoRA; Repetition trials;"
    ) and line.endswith("; How many questions are enough")
    details = re.search(r"<details class=note><summary>Note: not in these runs.*?</details>", page)
    assert details and "CoRA table: no run logged `cora`" in details.group(0) and page.count("<details") == 1
    assert "<table class=prose>" in page  # the definitions, left-aligned


# ---------------------------------------------------------------- end to end on the smoke sweep


class _Refs(HTMLParser):
    def __init__(self):
        super().__init__()
        self.refs: list[tuple[str, str]] = []

    def handle_starttag(self, tag, attrs):
        self.refs += [(tag, value) for name, value in attrs if name in ("src", "href") and value is not None]


EXPECTED_FILES = [
    r"tables/cora_arc_challenge_T_0\.3\.csv",
    r"tables/cora_commonsenseqa_T_0\.7\.csv",
    r"tables/rank_changes\.csv",
    r"tables/repetition_arc_challenge\.csv",
    r"tables/repetition_commonsenseqa\.csv",
    r"tables/fluctuation_r2_full_fr\.csv",
    r"tables/fluctuation_r2_accuracy\.csv",
    r"tables/fluctuation_r2_both\.csv",
    r"tables/revas_options_arc_challenge.*\.csv",
    r"tables/revas_summary_commonsenseqa.*\.csv",
    r"tables/runs\.csv",
    r"plots/consistency_arc_challenge\.png",
    r"plots/consistency_commonsenseqa\.png",
    r"plots/bmca_arc_challenge\.png",
    r"plots/sure_unsure_commonsenseqa\.png",
    r"plots/options_arc_challenge\.png",
    r"plots/options_commonsenseqa\.png",
    r"report\.md",
    r"report\.html",
]


_REPORTS: dict[str, Path] = {}  # store uri -> its report, made once per test process


@pytest.fixture(scope="module")
def smoke_report(smoke_store, tmp_path_factory):
    """The smoke sweep's report, made once per process like the store itself (a module fixture alone is made again
    when pytest-xdist runs another module's test between two of this module's: ~20 s each time)."""
    if smoke_store.uri not in _REPORTS:
        out = tmp_path_factory.mktemp("report")
        assert main(["--experiment", "smoke", "--tracking-uri", smoke_store.uri, "--out", str(out)]) == 0
        _REPORTS[smoke_store.uri] = out
    return _REPORTS[smoke_store.uri]


def test_smoke_report_has_every_table_and_plot(smoke_report, smoke_store):
    files = sorted(str(p.relative_to(smoke_report)) for p in smoke_report.rglob("*") if p.is_file())
    for pattern in EXPECTED_FILES:
        assert any(re.fullmatch(pattern, f) for f in files), f"missing {pattern} in {files}"
    md = (smoke_report / "report.md").read_text()
    # a CoRA cell is the value, the interval the run logged, and the rank
    assert re.search(r"0\.875 \[0\.\d{3}, [01]\.\d{3}\] \(1\)", md) and "RWS \\| S/T" in md
    assert "(a) target: full fluctuation rate" in md
    assert "simulated_0.9 ranks above simulated_0.6 on MCQA, below it on CoRA" in md  # CoRA rewards consistency
    assert "## Paired differences between models" in md
    # 8 questions are too few for a questions-needed estimate: no section, named under the runs
    assert "not in these runs (no section): How many questions are enough" in md
    runs = pd.read_csv(smoke_report / "tables" / "runs.csv")
    assert len(runs) == 24 and "wacc@cyclic" in runs.columns and "wacc_at_cyclic" not in runs.columns


def test_smoke_html_embeds_every_plot(smoke_report):
    html = (smoke_report / "report.html").read_text()
    parser = _Refs()
    parser.feed(html)
    images = [v for tag, v in parser.refs if tag == "img"]
    assert len(images) == len(list((smoke_report / "plots").glob("*.png"))) >= 8
    for tag, ref in parser.refs:
        if ref.startswith("data:"):
            assert ref.startswith("data:image/png;base64,")
            assert base64.b64decode(ref.split(",", 1)[1]).startswith(PNG)
        elif ref.startswith("#"):  # the contents: a link to a heading of the page
            assert f'id="{ref[1:]}"' in html, f"<{tag}> refers to {ref}, no heading has that id"
        else:  # anything not embedded must be a file of the report folder
            assert (smoke_report / ref).is_file(), f"<{tag}> refers to {ref}, which does not exist"


def test_comparison_run_holds_the_report(smoke_report, smoke_store):
    client, found = mlflow_runs(smoke_store.uri, "smoke", kind="comparison")
    assert found, "no run tagged kind=comparison"
    run = found[0]
    assert run.data.tags["compared_experiment"] == "smoke" and "model" not in run.data.tags
    names = {a.path for a in client.list_artifacts(run.info.run_id)}
    assert {"report.html", "report.md", "plots", "tables"} <= names


def test_filters_and_skips(smoke_store, tmp_path, capsys):
    out = tmp_path / "arc"
    assert (
        main(
            [
                "--experiment",
                "smoke",
                "--tracking-uri",
                smoke_store.uri,
                "--out",
                str(out),
                "--benchmark",
                "arc_challenge",
                "--variants",
                "cora",
                "--no-mlflow",
            ]
        )
        == 0
    )
    md = (out / "report.md").read_text()
    assert "commonsenseqa" not in md.split("## Runs")[1] and "### arc_challenge (T=0.3)" in md
    absent = next(line for line in md.splitlines() if line.startswith("> Note: not in these runs (no section): "))
    assert "Answer fluctuation: R² of metrics on permutation subsets" in absent and "REVAS:" in absent
    capsys.readouterr()
    assert main(["--experiment", "smoke", "--tracking-uri", smoke_store.uri, "--out", str(out), "--model", "gpt5"]) == 2
    assert capsys.readouterr().err.strip().startswith("error: --model: no finished job run")


def test_sweep_id_and_diff(smoke_store, tmp_path):
    client, parents = mlflow_runs(smoke_store.uri, "smoke", kind="sweep")
    _, runs = mlflow_runs(smoke_store.uri, "smoke")
    pick = {
        (
            r.data.tags["model"],
            r.data.tags["benchmark"],
            r.data.tags["variants"],
            r.data.tags["temperature"],
        ): r.info.run_id
        for r in runs
    }
    a = pick[("simulated_0.6", "arc_challenge", "cora", "0.3")]
    b = pick[("simulated_0.9", "arc_challenge", "cora", "0.3")]
    out = tmp_path / "sweep"
    # --no-paired: the paired study (a third of the report's time) is test_smoke_report_has_every_table_and_plot's
    assert (
        main(
            [
                "--sweep-id",
                parents[0].data.tags["sweep_id"],
                "--tracking-uri",
                smoke_store.uri,
                "--out",
                str(out),
                "--diff",
                a,
                b,
                "--no-mlflow",
                "--no-paired",
            ]
        )
        == 0
    )
    assert len(pd.read_csv(out / "tables" / "runs.csv")) == 24
    summary = pd.read_csv(out / "tables" / "diff_summary.csv").iloc[0]
    trials = pd.read_csv(out / "tables" / "diff_trials.csv")
    assert (
        summary["shared_trials"] == 8 * 20 * 5 and 0 < summary["disagreement_rate"] < 1
    )  # questions x variants x reps
    assert len(trials) == round(summary["disagreement_rate"] * summary["shared_trials"])
    assert "## Disagreements" in (out / "report.md").read_text()


def test_records_of_a_missing_run_or_a_run_without_records_name_the_flag(smoke_store):
    parent = mlflow_runs(smoke_store.uri, "smoke", kind="sweep")[1][0]  # a sweep's parent run logs no records
    with pytest.raises(UserError, match=r"^--diff: no MLflow run 'nope' at sqlite:"):
        read_run_records("nope", smoke_store.uri, key="--diff")
    with pytest.raises(UserError, match=rf"^--diff: run {parent.info.run_id} has no records.parquet artifact"):
        read_run_records(parent.info.run_id, smoke_store.uri, key="--diff")


def test_cli_missing_experiment_is_one_line_and_exit_2(smoke_store):
    proc = run_module("src.compare", "--experiment", "no-such-sweep", "--tracking-uri", smoke_store.uri, check=False)
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and proc.stderr.startswith("error: --experiment: no experiment")


def test_identity_differences_are_named_by_their_cause():
    """Two runs of one model at different chat settings (the same GGUF): no 'different weights' line, the settings
    named; other weights under the same name: 'different weights'; runs that logged no backend identity: the
    cause is said to be unknown."""
    from src.compare.load import identity_notes

    gguf = "hf|weights=sha256:aa|revision=None|dtype=float32"  # src.backends.weights: the files by content
    table = pd.DataFrame(
        {
            "model": ["smollm2_135m", "smollm2_135m"],
            "benchmark": ["synthetic"] * 2,
            "backend": [f"{gguf}|chat=True", f"{gguf}|chat=False"],
            "data_identity": ["d1", "d1"],
        }
    )
    table["model_identity"] = table["backend"].map(hash)
    (note,) = identity_notes(table)
    assert "different weights" not in note
    assert note == (
        "model smollm2_135m: its runs used the same weights at different settings: chat False in 1 run (its cause "
        "not logged), True in 1 run (its cause not logged); settings are compared as they are, not as other weights"
    )
    table.loc[1, "backend"] = table.loc[1, "backend"].replace("sha256:aa", "sha256:bb")
    table["model_identity"] = table["backend"].map(hash)
    assert identity_notes(table) == [
        "model smollm2_135m: its runs were made with 2 different weights (backend identity); the tables show the "
        "latest run of each condition"
    ]
    assert "logged no backend identity" in identity_notes(table.drop(columns="backend"))[0]
    # with the runs' model_content tags: the part of the files that differs is named, not taken for the weights
    table["model_content"] = ["weights=11,tokenizer=22,chat template=33", "weights=11,tokenizer=22,chat template=44"]
    assert identity_notes(table) == [
        "model smollm2_135m: its runs were made with different model files (chat template); the tables show the "
        "latest run of each condition"
    ]
    table.loc[1, "model_content"] = "weights=12,tokenizer=22,chat template=33"
    assert "2 different weights" in identity_notes(table)[0]
