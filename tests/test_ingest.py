"""`python -m src.ingest`: the CoRA authors' released outputs (a 40-question cut of each, tests/data/cat/README.md),
lm-evaluation-harness samples and the generic long table become records, metrics and an MLflow run laid out as
a native job's. With the full released files (MCQ_EXTERNAL_DIR), the repetition paper's MedQA rows at T = 0.7
are reproduced at printed precision."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from src.core.records import COLUMNS
from src.ingest.__main__ import main

from .conftest import REPO, mlflow_runs

CAT = REPO / "tests" / "data" / "cat"
MISTRAL = CAT / "MedQA_wOutputs_Mistral-7B-Instruct_0_merged.first40.xlsx"
MEDALPACA = CAT / "MedQA_wOutputs_medalpaca-7b_0_merged.first40.xlsx"
EXTERNAL = os.environ.get("MCQ_EXTERNAL_DIR")
RELEASED = {  # the full released files (github IBM/cat, data/MedQA/) and the paper's rows (Table 2, T = 0.7)
    "Mistral-7B-Instruct": (
        "MedQA_wOutputs_Mistral-7B-Instruct_0_merged.xlsx",
        ("14%", "16%", "26%", "44%", "0.310", "0.009", "0.24 | 58%"),
        ("18%", "15%", "34%", "33%", "0.310", "0.009", "0.35 | 51%"),
    ),
    "medalpaca-7b": (
        "MedQA_wOutputs_medalpaca-7b_0_merged.xlsx",
        ("2%", "21%", "60%", "17%", "0.289", "0.015", "0.11 | 19%"),
        ("5%", "33%", "59%", "3%", "0.289", "0.015", "0.59 | 8%"),
    ),
}
SHARES = ("sure_right", "unsure_right", "unsure_wrong", "sure_wrong")


@pytest.fixture
def store(tmp_path, empty_mlflow_db) -> str:
    shutil.copyfile(empty_mlflow_db, tmp_path / "mlflow.db")
    return f"sqlite:///{tmp_path}/mlflow.db"


def ingest(store: str, *args: str, path: Path = MISTRAL, model: str = "Mistral-7B-Instruct", capsys=None) -> dict:
    """Run the CLI in-process on a CoRA table; returns the JSON summary it prints."""
    argv = [
        "--format",
        "cat",
        "--path",
        str(path),
        "--model",
        model,
        "--benchmark",
        "medqa",
        "--temperature",
        "0.7",
        "--tracking-uri",
        store,
        "--experiment",
        "ingest-test",
        *args,
    ]
    assert main(argv) == 0
    out = capsys.readouterr().out if capsys else ""
    return json.loads(out.splitlines()[0]) if out else {}


def reference(path: Path, rule: str, first: int = 10) -> dict[str, float]:
    """METRICS.md's rules applied to the file's own `model_choice` labels, written out without this tool's code."""
    frame = pd.read_excel(path, dtype=object)
    counts, per_rep, sure_vote = [], [0] * first, []
    for cell in frame["expanded_evaluation"]:
        answers = json.loads(cell)["standard_MC"][:first]
        right = [a["model_choice"] == a["correct_choice"] for a in answers]
        counts.append(sum(right))
        per_rep = [p + r for p, r in zip(per_rep, right)]
        keys = [a["model_choice"] if a["model_choice"] in a["choices"] else None for a in answers]
        tally = {k: keys.count(k) for k in set(keys)}
        top = max(tally.values())
        sure_vote.append((top >= 9, tally.get(answers[0]["correct_choice"], 0) == top))
    n = len(counts)
    if rule == "correctness":
        outcomes = [
            ("S" if c in (0, first) else "U") + ("R" if c == first or (0 < c and c >= first - c) else "W")
            for c in counts
        ]
    else:
        outcomes = [("S" if s else "U") + ("R" if r else "W") for s, r in sure_vote]
    shares = dict(zip(SHARES, (outcomes.count(o) / n for o in ("SR", "UR", "UW", "SW"))))
    acc = pd.Series(per_rep) / n
    return {**shares, "st": shares["sure_right"] + shares["sure_wrong"], "acc_mean": acc.mean(), "acc_std": acc.std()}


@pytest.mark.parametrize("path, model", [(MISTRAL, "Mistral-7B-Instruct"), (MEDALPACA, "medalpaca-7b")])
@pytest.mark.parametrize("rule", ["correctness", "answer"])
def test_fixture_with_the_files_labels_follows_metrics_md(store, capsys, path, model, rule):
    got = ingest(
        store,
        "--set",
        "standard_MC",
        "--first",
        "10",
        "--sure-rule",
        rule,
        "--labels-from",
        "source",
        path=path,
        model=model,
        capsys=capsys,
    )
    for name, value in reference(path, rule).items():
        assert got[name] == pytest.approx(value, abs=1e-4), name


def test_fixture_reparsed_numbers_and_the_one_answer_our_parser_reads_otherwise(store, capsys):
    mistral = ingest(store, "--first", "10", "--sure-rule", "correctness", capsys=capsys)
    assert [mistral[k] for k in (*SHARES, "acc_mean", "rws", "st")] == pytest.approx(
        [0.2, 0.225, 0.35, 0.225, 0.435, 0.4706, 0.425], abs=1e-4
    )
    assert (
        main(
            [
                "--format",
                "cat",
                "--path",
                str(MEDALPACA),
                "--model",
                "medalpaca-7b",
                "--benchmark",
                "medqa",
                "--temperature",
                "0.7",
                "--first",
                "10",
                "--sure-rule",
                "correctness",
                "--tracking-uri",
                store,
                "--experiment",
                "ingest-test",
            ]
        )
        == 0
    )
    captured = capsys.readouterr()
    raw = json.loads(captured.out.splitlines()[0])
    # one medalpaca answer is the option's text ("Matching"): their first-letter rule read M (INVALID), ours option E
    assert (
        "1 read differently from the file's model_choice, e.g. 'Matching': file M, ours E (option_text)" in captured.err
    )
    assert raw["unsure_wrong"] == pytest.approx(0.65) and raw["sure_wrong"] == pytest.approx(0.2)
    source = reference(MEDALPACA, "correctness")
    assert source["unsure_wrong"] == pytest.approx(0.625) and source["sure_wrong"] == pytest.approx(0.225)


def test_run_layout_params_tags_artifacts_and_records(store, capsys, tmp_path):
    ingest(
        store,
        "--set",
        "standard_MC",
        "--first",
        "10",
        "--sure-rule",
        "correctness",
        "--out",
        str(tmp_path / "a"),
        capsys=capsys,
    )
    client, (run,) = mlflow_runs(store, "ingest-test")
    tags, params = run.data.tags, run.data.params
    assert tags["source"] == "ingest" and tags["source_format"] == "cat" and tags["kind"] == "job"
    assert tags["source_sha256"] == hashlib.sha256(MISTRAL.read_bytes()).hexdigest() == params["ingest.sha256"]
    assert tags["sure_rule"] == "correctness" == params["metrics.sure_rule"]
    assert (tags["model"], tags["benchmark"], tags["variants"], tags["temperature"], tags["scoring"]) == (
        "Mistral-7B-Instruct",
        "medqa",
        "original",
        "0.7",
        "generate",
    )
    assert (params["repetitions"], params["fewshot"], params["seed"], params["limit"]) == ("10", "0", "0", "null")
    artifacts = {a.path for a in client.list_artifacts(run.info.run_id)}
    assert {"records.parquet", "metrics.json", "config.yaml"} <= artifacts
    records = pd.read_parquet(tmp_path / "a" / "artifacts" / "records.parquet")
    assert list(records.columns) == list(COLUMNS)
    assert len(records) == 400 and sorted(records["repetition"].unique()) == list(range(10))
    assert records["question_id"].iloc[0] == "medqa/0" and records["question_id"].iloc[-1] == "medqa/39"
    assert set(records["variant_id"]) == {"original"} and records["prompt_hash"].isna().all()
    assert set(records["parse_rule"]) <= {
        "first_token",
        "invalid_empty",
        "invalid_no_label",
        "option_text",
        "invalid_out_of_range",
    }
    first = records.iloc[0]  # the first question's first answer: "D. Report", the answer is C
    assert (
        first["raw_output"],
        first["parsed_label"],
        first["chosen_option"],
        first["correct_label"],
        first["correct_option"],
        bool(first["correct"]),
    ) == ("D. Report", "D", 3, "C", 2, False)
    logged = json.loads((tmp_path / "a" / "artifacts" / "metrics.json").read_text())
    assert logged["sure_right"] == pytest.approx(run.data.metrics["sure_right"])


def test_csv_as_released_gives_the_same_records(store, capsys, tmp_path):
    csv = tmp_path / "mistral.csv"
    pd.read_excel(MISTRAL, dtype=object).to_csv(csv, index=False)  # the CoRA tools save csv with pandas too
    a = ingest(store, "--first", "10", "--out", str(tmp_path / "x"), capsys=capsys)
    b = ingest(store, "--first", "10", "--out", str(tmp_path / "c"), path=csv, capsys=capsys)
    assert {k: v for k, v in a.items() if k != "run_id"} == {k: v for k, v in b.items() if k != "run_id"}
    ra, rb = (pd.read_parquet(tmp_path / d / "artifacts" / "records.parquet").drop(columns="run_id") for d in "xc")
    pd.testing.assert_frame_equal(ra, rb)


def test_shuffled_lists_as_variants_keep_option_identity(store, capsys, tmp_path):
    ingest(
        store,
        "--set",
        "standard_MC,standard_MC_shuffled",
        "--first",
        "2",
        "--as",
        "variants",
        "--out",
        str(tmp_path / "v"),
        capsys=capsys,
    )
    records = pd.read_parquet(tmp_path / "v" / "artifacts" / "records.parquet")
    q0 = records[records["question_id"] == "medqa/0"]
    assert list(q0["variant_id"]) == ["original", "original_1", "shuffled_0", "shuffled_1"]
    assert set(records["repetition"]) == {0} and set(records["variant_kind"]) == {"original", "shuffled"}
    q0 = q0[q0["variant_kind"] == "shuffled"]
    # the first shuffled answer shows "Tell the attending ..." (option C = 2) as A, and the model chose A
    assert list(q0["option_order"].iloc[0]) == [2, 1, 0, 4, 3]
    assert (q0["correct_label"].iloc[0], q0["chosen_option"].iloc[0], bool(q0["correct"].iloc[0])) == ("A", 2, True)
    client, runs = mlflow_runs(store, "ingest-test")
    assert {"mcqa", "mcqa_plus", "cora"} <= set(runs[0].data.metrics) and "st" not in runs[0].data.metrics
    assert runs[0].data.tags["variants"] == "cat:standard_MC,standard_MC_shuffled"


def test_shuffled_lists_as_repetitions(store, capsys):
    got = ingest(store, "--set", "standard_MC_shuffled", "--first", "10", "--sure-rule", "correctness", capsys=capsys)
    assert got["n_trials"] == 400 and "st" in got and "mcqa" not in got


def bad_cat(tmp_path: Path, edit) -> Path:
    frame = pd.read_excel(MISTRAL, dtype=object).iloc[:3]
    edit(frame)
    path = tmp_path / "bad.csv"
    frame.to_csv(path, index=False)
    return path


def _broken_choice(frame):
    lists = json.loads(frame.at[1, "expanded_evaluation"])
    lists["standard_MC"][2]["choices"]["B"] = "an option of another question"
    frame.at[1, "expanded_evaluation"] = json.dumps(lists)


@pytest.mark.parametrize(
    "edit, args, message",
    [
        (
            lambda f: f.drop(columns="options", inplace=True),
            (),
            "bad.csv line 2 (question medqa/0): no column 'options'",
        ),
        (
            lambda f: f.__setitem__("expanded_evaluation", f["expanded_evaluation"].str[:-5]),
            (),
            "bad.csv line 2 (question medqa/0): expanded_evaluation is not valid JSON",
        ),
        (
            lambda f: None,
            ("--set", "standard_MC_nota"),
            "expanded_evaluation has no list 'standard_MC_nota' (it has standard_MC, standard_MC_shuffled)",
        ),
        (lambda f: None, ("--first", "12"), "list standard_MC has 11 answers, --first asks for 12"),
        (
            _broken_choice,
            (),
            "bad.csv line 3 (question medqa/1) standard_MC[2]: shown option 'an option of another "
            "question' is none of the question's options",
        ),
        (lambda f: f.__setitem__("answer", "not an option"), (), "the answer 'not an option' is none of the options"),
    ],
)
def test_malformed_cat_files_are_one_line_errors(store, capsys, tmp_path, edit, args, message):
    path = bad_cat(tmp_path, edit)
    argv = [
        "--format",
        "cat",
        "--path",
        str(path),
        "--model",
        "m",
        "--benchmark",
        "medqa",
        "--temperature",
        "0.7",
        "--tracking-uri",
        store,
        *args,
    ]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and len(err.splitlines()) == 1, err
    assert message in err


def test_missing_flags_and_files(store, capsys):
    assert main(["--format", "cat", "--path", str(MISTRAL), "--model", "m", "--tracking-uri", store]) == 2
    assert "--benchmark: the CoRA tables do not say it" in capsys.readouterr().err
    assert main(["--format", "cat", "--path", "/nonexistent.xlsx", "--tracking-uri", store]) == 2
    assert "--path /nonexistent.xlsx: no such file" in capsys.readouterr().err


@pytest.mark.slow
def test_malformed_file_exits_2_from_the_command_line(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(
        '{"question_id": "q1", "variant_id": "original", "option_order": [0, 1], "correct_label": "A", '
        '"raw_output": "A", "model": "m", "benchmark": "b"}\n{"question_id": "q2", "variant_id": \n'
    )
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "src.ingest",
            "--format",
            "generic",
            "--path",
            str(bad),
            "--tracking-uri",
            f"sqlite:///{tmp_path}/mlflow.db",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        f"error: {bad} line 2: invalid JSON (Expecting value at column 37); fix or remove the line (a truncated file?)"
    ]


# ---------------------------------------------------------------- generic long table

GENERIC_ROWS = [
    # question q1: original order, asked twice; q2: a shuffled order, answered by text and by label
    {
        "question_id": "q1",
        "variant_id": "original",
        "option_order": [0, 1, 2],
        "repetition": 0,
        "correct_label": "B",
        "options": ["Paris", "Rome", "Lyon"],
        "raw_output": "B. Rome",
    },
    {
        "question_id": "q1",
        "variant_id": "original",
        "option_order": [0, 1, 2],
        "repetition": 1,
        "correct_label": "B",
        "options": ["Paris", "Rome", "Lyon"],
        "raw_output": "The answer is Lyon",
    },
    {
        "question_id": "q2",
        "variant_id": "shuffled_0",
        "option_order": [2, 0, 1],
        "repetition": 0,
        "correct_label": "A",
        "options": ["x", "y", "z"],
        "parsed_label": "A",
    },
    {
        "question_id": "q2",
        "variant_id": "shuffled_0",
        "option_order": [2, 0, 1],
        "repetition": 1,
        "correct_label": "A",
        "options": ["x", "y", "z"],
        "parsed_label": "D",
    },
]


@pytest.mark.parametrize("suffix", [".jsonl", ".csv", ".parquet"])
def test_generic_table_in_every_file_type(store, capsys, tmp_path, suffix):
    frame = pd.DataFrame(GENERIC_ROWS)
    path = tmp_path / f"answers{suffix}"
    if suffix == ".jsonl":
        path.write_text("".join(json.dumps(r) + "\n" for r in GENERIC_ROWS))
    elif suffix == ".csv":
        frame.assign(**{c: frame[c].map(json.dumps) for c in ("option_order", "options")}).to_csv(path, index=False)
    else:
        frame.to_parquet(path)
    assert (
        main(
            [
                "--format",
                "generic",
                "--path",
                str(path),
                "--model",
                "elsewhere",
                "--benchmark",
                "toy",
                "--temperature",
                "0.5",
                "--tracking-uri",
                store,
                "--out",
                str(tmp_path / "g"),
            ]
        )
        == 0
    )
    got = json.loads(capsys.readouterr().out.splitlines()[0])
    records = pd.read_parquet(tmp_path / "g" / "artifacts" / "records.parquet")
    assert list(records["parse_rule"]) == ["first_token", "option_text", "source_label", "invalid_source_label"]
    assert list(records["chosen_option"].astype("Int64")) == [1, 2, 2, pd.NA]
    assert list(records["variant_kind"]) == ["original", "original", "shuffled", "shuffled"]
    assert list(records["correct"]) == [True, False, True, False]
    assert got["mcqa"] == 1.0 and got["accuracy"] == 0.5 and got["invalid_rate"] == 0.25


def test_generic_errors_name_the_row(store, capsys, tmp_path):
    path = tmp_path / "bad.jsonl"
    rows = [dict(GENERIC_ROWS[0]), {**GENERIC_ROWS[1], "correct_label": "Z"}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert (
        main(["--format", "generic", "--path", str(path), "--model", "m", "--benchmark", "b", "--tracking-uri", store])
        == 2
    )
    assert capsys.readouterr().err.strip() == (
        f"error: {path} line 2 (question q1, variant original): correct_label "
        "'Z' is not one of the labels A, B, C; fix the row"
    )
    path.write_text(json.dumps({**GENERIC_ROWS[0], "repetition": 1}) + "\n")
    assert (
        main(["--format", "generic", "--path", str(path), "--model", "m", "--benchmark", "b", "--tracking-uri", store])
        == 2
    )
    assert "repetitions [1] are not 0..0 each once" in capsys.readouterr().err


# ---------------------------------------------------------------- lm-evaluation-harness samples


def lm_eval_sample(doc_id: int, logliks, target, *, new_style: bool = True) -> dict:
    ctx = f"Question {doc_id}?\nA. red\nB. green\nC. blue\nAnswer:"
    conts = [" A", " B", " C"]
    args = (
        {f"gen_args_{i}": {"arg_0": ctx, "arg_1": c} for i, c in enumerate(conts)}
        if new_style
        else [[ctx, c] for c in conts]
    )
    return {
        "doc_id": doc_id,
        "doc": {"question": f"Question {doc_id}?", "choices": ["red", "green", "blue"], "answer": target},
        "target": target,
        "arguments": args,
        "resps": [[[str(x), "False"]] for x in logliks],
        "filtered_resps": [[str(x), "False"] for x in logliks],
        "acc": 0.0,
    }


def test_lm_eval_multiple_choice_and_two_seeds_as_repetitions(store, capsys, tmp_path):
    seed0 = [lm_eval_sample(0, [-0.1, -2.0, -3.0], 0), lm_eval_sample(1, [-1.0, -0.5, -3.0], 2, new_style=False)]
    seed1 = [lm_eval_sample(0, [-0.1, -2.0, -3.0], 0), lm_eval_sample(1, [-1.0, -3.5, -0.2], 2)]
    paths = []
    for n, samples in enumerate((seed0, seed1)):
        folder = tmp_path / f"seed{n}"
        folder.mkdir()
        path = folder / "samples_arc_toy_2025-01-01T00-00-00.000.jsonl"
        path.write_text("".join(json.dumps(s) + "\n" for s in samples))
        paths += ["--path", str(path)]
    assert (
        main(
            [
                "--format",
                "lm_eval",
                *paths,
                "--model",
                "some-model",
                "--tracking-uri",
                store,
                "--out",
                str(tmp_path / "l"),
            ]
        )
        == 0
    )
    got = json.loads(capsys.readouterr().out.splitlines()[0])
    records = pd.read_parquet(tmp_path / "l" / "artifacts" / "records.parquet")
    assert list(records["question_id"]) == ["arc_toy/0", "arc_toy/0", "arc_toy/1", "arc_toy/1"]
    assert list(records["repetition"]) == [0, 1, 0, 1] and set(records["scoring"]) == {"logprob"}
    assert list(records["parsed_label"]) == ["A", "A", "B", "C"] and set(records["parse_rule"]) == {"logprob_argmax"}
    assert got["mcqa"] == 0.5 and got["acc_mean"] == 0.75 and "st" in got


def test_lm_eval_generation_with_repeats_is_reparsed(store, capsys, tmp_path):
    sample = {
        "doc_id": 3,
        "doc": {"choices": {"text": ["red", "green"], "label": ["A", "B"]}},
        "target": "B",
        "arguments": {"gen_args_0": {"arg_0": "Q?", "arg_1": {"until": ["\n"]}}},
        "resps": [["B", "The answer is green", "A or B"]],
        "filtered_resps": ["B"],
    }
    path = tmp_path / "samples_toy_gen_2025-01-01T00-00-00.jsonl"
    path.write_text(json.dumps(sample) + "\n")
    assert (
        main(
            [
                "--format",
                "lm_eval",
                "--path",
                str(path),
                "--model",
                "m",
                "--temperature",
                "1.0",
                "--tracking-uri",
                store,
                "--out",
                str(tmp_path / "r"),
            ]
        )
        == 0
    )
    records = pd.read_parquet(tmp_path / "r" / "artifacts" / "records.parquet")
    assert list(records["parse_rule"]) == ["first_token", "option_text", "invalid_hedge"]
    assert list(records["correct"]) == [True, True, False]


# ---------------------------------------------------------------- the full released files


def released(name: str) -> Path | None:
    if not EXTERNAL:
        return None
    for candidate in (Path(EXTERNAL) / name, Path(EXTERNAL) / "data" / "MedQA" / name):
        if candidate.is_file():
            return candidate
    return None


def printed_row(capsys) -> tuple[str, ...]:
    """The cells of the ingested run's row in the table the command prints."""
    out = capsys.readouterr().out.splitlines()
    row = [line for line in out if line.startswith("| ") and not line.startswith("| model")][0]
    cells = [c.strip().replace("\\|", "|") for c in row.strip("| ").split(" | ")]
    return tuple(cells[2:])


@pytest.mark.parametrize("model", sorted(RELEASED))
def test_full_released_files_reproduce_the_papers_rows(store, capsys, model):
    name, paper, answer_rule = RELEASED[model]
    path = released(name)
    if path is None:
        pytest.skip(
            f"the full released file {name} is not in MCQ_EXTERNAL_DIR "
            f"({EXTERNAL or 'unset'}); fetch it from github IBM/cat, data/MedQA/ (never commit it)"
        )
    for rule, expected in (("correctness", paper), ("answer", answer_rule)):
        assert (
            main(
                [
                    "--format",
                    "cat",
                    "--path",
                    str(path),
                    "--model",
                    model,
                    "--benchmark",
                    "medqa",
                    "--temperature",
                    "0.7",
                    "--set",
                    "standard_MC",
                    "--first",
                    "10",
                    "--sure-rule",
                    rule,
                    "--tracking-uri",
                    store,
                    "--experiment",
                    "paper",
                ]
            )
            == 0
        )
        assert printed_row(capsys) == expected, rule
