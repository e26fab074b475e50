"""What the report's verdicts rest on, said where the verdict is (docs/review.md, "The first screen decides"): no
pick between models that are all at or below chance, a lead that comes from the runner-up's unparsed answers said
to, one convention for a difference (leader − runner-up, one minus sign) in the bottom line, the tables, stderr
and `src.plan`, every metric a table leaves out named under it, every model in every summary and flag, and the
cause of a settings note. In-process on hand-built records (tests/records_factory.py) through the report's own
builders; the MLflow side of `src.plan` on an empty store."""

from __future__ import annotations

import json
import re
from types import SimpleNamespace as N

import numpy as np
import pandas as pd
import pytest

from src.compare import summary
from src.compare.load import identity_notes, setting_causes
from src.compare.sections import build_sections
from src.metrics.display import MINUS, difference_cell, signed

from .records_factory import records, repeated
from .test_paired import runs_of, two_models

ASCII_MINUS = re.compile(r"(?<![\w.])-\d")  # a hyphen used as the sign of a number


def drawn(n: int, right: float, invalid: float, *, seed: int, reps: int = 5) -> pd.DataFrame:
    """A repetition run on n four-option questions (chance 0.25): each trial right with probability `right`,
    INVALID with probability `invalid`, else wrong."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        draws = rng.random(reps)
        answers = [None if x < invalid else 0 if x < invalid + right else 1 for x in draws]
        rows += repeated(f"q{i:03d}", answers)
    return records(rows)


def repetition_runs(frames: dict[str, pd.DataFrame], monkeypatch):
    return runs_of(frames, monkeypatch, variants="original", repetitions=5, chance=0.25)


def sections_by_title(runs):
    sections = build_sections(runs)
    return sections, {s.title: s for s in sections}


@pytest.mark.promise("docs/review.md", "no model is picked where every model is at or below chance on the headline")
def test_no_pick_between_models_all_at_or_below_chance_and_the_lead_from_invalid_answers_is_said(monkeypatch):
    """The README study's T=1.0 shape: one model indistinguishable from chance, the other below it with most of
    its answers INVALID; the lead is significant, yet no model is named: the bottom line says neither is above
    chance, each with its interval, then the difference and where it comes from."""
    runs = repetition_runs(
        {"smollm2": drawn(100, 0.22, 0.0, seed=1), "gemma": drawn(100, 0.08, 0.6, seed=2)}, monkeypatch
    )
    by_model = runs.table.set_index("model")
    assert by_model.at["smollm2", "acc_mean_lo"] <= 0.25 <= by_model.at["smollm2", "acc_mean_hi"]  # at chance
    assert by_model.at["gemma", "acc_mean_hi"] < 0.25 and by_model.at["gemma", "invalid_rate"] > 0.5  # below
    sections, by_title = sections_by_title(runs)
    (line,) = sections[0].lines
    (table,) = by_title[summary.TITLE].tables
    row, shown = table.data.iloc[0], table.text.iloc[0]
    assert row["p_holm"] < 0.05 and not row["tie"]  # the lead is significant: the old bottom line picked here
    assert row["leader"] is None and row["none_above_chance"]
    assert shown["verdict"] == "no pick: neither model above chance"
    assert "pick smollm2" not in line and "pick gemma" not in line
    assert line.startswith("bench: no pick: neither model is above chance on acc_mean (smollm2 0.")
    assert re.search(r"smollm2 0\.\d{3} \[0\.\d{3}, 0\.\d{3}\] indistinguishable from chance, gemma 0\.\d{3}", line)
    assert "below chance; chance 0.250)" in line
    d = runs.table.set_index("model")["acc_mean"]
    assert f"smollm2 {MINUS} gemma {signed(d['smollm2'] - d['gemma'])} [" in line
    rate = by_model.at["gemma", "invalid_rate"]
    assert f"the lead comes mostly from gemma's INVALID answers ({rate:.2f} of its trials, counted wrong" in line
    assert re.search(r"on the answers it parsed gemma is right 0\.\d\d, smollm2 0\.\d\d", line)
    assert line.endswith(f"; INVALID share above 0.10 (counted wrong): gemma {rate:.2f}.")


@pytest.mark.promise("docs/review.md", "a pick whose lead comes mostly from the runner-up's INVALID answers says so")
def test_a_pick_whose_lead_comes_from_the_runner_ups_invalid_answers_says_so(monkeypatch):
    """The leader is above chance and its lead significant: it is picked, and the line says that the runner-up is
    right as often on the answers it parsed; a runner-up that parsed everything gets no such clause."""
    runs = repetition_runs({"a": drawn(100, 0.6, 0.0, seed=3), "b": drawn(100, 0.3, 0.5, seed=4)}, monkeypatch)
    (line,) = build_sections(runs)[0].lines
    assert line.startswith("bench: pick a (its lead on acc_mean over b is +0.")
    rate = runs.table.set_index("model").at["b", "invalid_rate"]
    assert f", though the lead comes mostly from b's INVALID answers ({rate:.2f} of its trials" in line
    (table,) = summary.leader_table(runs, None).tables  # no paired test: no pick, and the clause is the pick's
    assert "INVALID answers" not in table.text.iloc[0]["verdict"]
    decision = summary.decisions(runs, build_study(runs))[0]
    assert decision.verdict() == "pick a (p < 0.05; lead mostly b's INVALID)"

    plain = repetition_runs({"a": drawn(100, 0.6, 0.0, seed=3), "b": drawn(100, 0.3, 0.0, seed=4)}, monkeypatch)
    (line,) = build_sections(plain)[0].lines
    assert line.startswith("bench: pick a (") and "INVALID" not in line


@pytest.mark.promise("docs/review.md", "a tie whose gap comes mostly from the runner-up's INVALID answers says so")
def test_a_tie_whose_gap_comes_from_the_runner_ups_invalid_answers_says_so(monkeypatch):
    """Both models above chance, the gap too small for a pick on 30 questions, and the runner-up right as often on
    the answers it parsed: the tie's bottom line names the cause; without the runner-up's INVALID answers it names
    none."""
    runs = repetition_runs({"a": drawn(30, 0.55, 0.0, seed=13), "b": drawn(30, 0.48, 0.2, seed=14)}, monkeypatch)
    decision = summary.decisions(runs, build_study(runs))[0]
    assert decision.tie and not decision.none_above and decision.first["model"] == "a"
    (line,) = build_sections(runs)[0].lines
    assert line.startswith("bench: no model is better on these questions (acc_mean: a 0.")
    rate = runs.table.set_index("model").at["b", "invalid_rate"]
    assert f"; the lead comes mostly from b's INVALID answers ({rate:.2f} of its trials, counted wrong" in line

    plain = repetition_runs({"a": drawn(30, 0.55, 0.0, seed=13), "b": drawn(30, 0.48, 0.0, seed=14)}, monkeypatch)
    (line,) = build_sections(plain)[0].lines
    assert line.startswith("bench: no model is better on these questions (") and "INVALID" not in line


@pytest.mark.promise("docs/review.md", "src.plan says when a lead comes mostly from the runner-up's INVALID answers")
def test_plan_says_a_lead_from_the_runner_ups_invalid_answers_with_the_reports_rule():
    """Two runs, leader first (`leader_first`): the runner-up's INVALID answers explain the lead (right as often on
    the answers it parsed), and `src.plan` says so in the report's words; a runner-up whose parsed answers are worse
    too gets no such line; two runs of one model are named by their ids."""
    from src.metrics.chance import invalid_lead
    from src.plan import lead_notes

    metrics = {
        "a" * 32: {"acc_mean": 0.6, "invalid_rate": 0.0},
        "b" * 32: {"acc_mean": 0.3, "invalid_rate": 0.5},
    }
    tags = {"a" * 32: {"model": "smollm2"}, "b" * 32: {"model": "gemma"}}
    client = N(get_run=lambda run_id: N(data=N(metrics=metrics[run_id], tags=tags[run_id])))
    (note,) = lead_notes(client, ["a" * 32, "b" * 32], "acc_mean")
    assert note == (
        "on acc_mean, the lead comes mostly from gemma's INVALID answers (0.50 of its trials, counted wrong; "
        "smollm2 0.00): on the answers it parsed gemma is right 0.60, smollm2 0.60"
    )
    assert note.endswith(invalid_lead(("smollm2", metrics["a" * 32]), ("gemma", metrics["b" * 32]), "acc_mean"))
    metrics["b" * 32]["invalid_rate"] = 0.1  # parsed: 0.33 against 0.60, most of the lead stays
    assert lead_notes(client, ["a" * 32, "b" * 32], "acc_mean") == []
    metrics["b" * 32]["invalid_rate"] = 0.5
    tags["b" * 32]["model"] = "smollm2"
    assert lead_notes(client, ["a" * 32, "b" * 32], "acc_mean")[0].startswith(
        "on acc_mean, the lead comes mostly from bbbbbbbb's INVALID answers (0.50 of its trials, counted wrong; "
        "aaaaaaaa 0.00)"
    )


def build_study(runs):
    from src.compare.paired import paired_study

    return paired_study(runs)


@pytest.mark.promise(
    "docs/review.md", "a repetition run's mcqa, one sampled draw, is no row of a paired or planning table"
)
def test_a_repetition_runs_one_draw_mcqa_is_left_out_of_the_paired_and_planning_tables_and_named(monkeypatch):
    """In a repetition condition the accuracy is acc_mean; mcqa is repetition 0's draw alone. Neither the paired
    differences (where it would also take a share of Holm's adjustment) nor the questions-needed table nor
    `src.plan` gives it a row, and each says why under it; a run without repetitions keeps its mcqa."""
    from src.metrics.display import MCQA_ONE_DRAW
    from src.plan import without_one_draw

    runs = repetition_runs({"smollm2": drawn(40, 0.5, 0.0, seed=1), "gemma": drawn(40, 0.3, 0.0, seed=2)}, monkeypatch)
    _, by_title = sections_by_title(runs)
    (paired,) = by_title["Paired differences between models"].tables
    (power,) = by_title["How many questions are enough"].tables
    assert "acc_mean" in set(paired.data["metric"]) and "mcqa" not in set(paired.data["metric"])
    assert "mcqa" not in set(power.data["metric"])
    assert f"mcqa (smollm2 {MINUS} gemma): {MCQA_ONE_DRAW}" in paired.caption
    assert f"mcqa (smollm2 {MINUS} gemma, paired; smollm2; gemma): {MCQA_ONE_DRAW}" in power.caption
    assert without_one_draw({"mcqa": 0.3, "acc_mean": 0.2}) == ({"acc_mean": 0.2}, [f"mcqa left out: {MCQA_ONE_DRAW}"])
    assert without_one_draw({"mcqa": 0.3, "cora": 0.2}) == ({"mcqa": 0.3, "cora": 0.2}, [])


@pytest.mark.promise("docs/review.md", "every difference reads leader − runner-up with one minus sign, in every place")
def test_one_convention_for_a_difference_in_the_bottom_line_tables_and_stderr(monkeypatch):
    """The leader's name sorts after the runner-up's: the bottom line, the summary, the paired table, its stderr
    lines and the questions-needed table all read `zeta − alpha`, the same signed numbers, and a negative
    difference (CoRA, on which the leader is worse) carries the one MINUS, never a hyphen."""
    strong, weak = two_models()
    runs = runs_of({"alpha": weak, "zeta": strong}, monkeypatch)
    sections, by_title = sections_by_title(runs)
    (line,) = sections[0].lines
    (table,) = by_title[summary.TITLE].tables
    (paired,) = by_title["Paired differences between models"].tables
    (power,) = by_title["How many questions are enough"].tables
    stderr = by_title["Runs"].paired_lines
    name = f"zeta {MINUS} alpha"
    assert list(paired.text.index) == [name] * len(paired.text)
    assert f"{name} (paired)" in set(power.data["who"])
    assert stderr and all(s.startswith(f"bench: {name} ") for s in stderr)
    cells = paired.text.set_index("metric")[f"A {MINUS} B [95%]"]
    mcqa = cells["mcqa"]
    assert mcqa.startswith("+0.") and f"over alpha is {mcqa}" in line
    assert table.text.iloc[0][f"first {MINUS} second [95%]"] == mcqa
    assert any(s.startswith(f"bench: {name} mcqa {mcqa} ") for s in stderr)
    cora = cells["cora"]
    assert cora.startswith(MINUS)  # the leader on MCQA is worse on CoRA: the same order, a negative difference
    ranks, swaps = by_title["Rank changes between MCQA and CoRA"].tables
    assert ranks.text.set_index("model").at["zeta", "change"] == f"{MINUS}1"  # 1st on MCQA, 2nd on CoRA
    texts = [line, *stderr, *cells, table.text.to_string(), paired.text.to_string(), ranks.caption]
    for text in [*texts, ranks.text.to_string(), swaps.text.to_string()]:
        assert not ASCII_MINUS.search(text), text
    assert signed(-0.065) == f"{MINUS}0.065" and MINUS == "\u2212"
    found = paired.data.set_index("metric")
    assert (found.at["mcqa", "model_a"], found.at["mcqa", "model_b"]) == ("zeta", "alpha")
    r = N(difference=found.at["cora", "difference"], lo=found.at["cora", "lo"], hi=found.at["cora", "hi"])
    assert difference_cell(r) == cora


@pytest.mark.promise("docs/review.md", "src.plan pairs two runs leader − runner-up, whatever order they are given in")
def test_plan_puts_the_leader_first_whatever_order_the_runs_are_given():
    from src.plan import leader_first

    metrics = {"a" * 32: {"acc_mean": 0.2, "mcqa": 0.3}, "b" * 32: {"acc_mean": 0.4, "mcqa": 0.1}}
    tags = {"a" * 32: {"model": "smollm2"}, "b" * 32: {"model": "gemma"}}
    client = N(get_run=lambda run_id: N(data=N(metrics=metrics[run_id], tags=tags[run_id])))
    assert leader_first(client, ["a" * 32, "b" * 32]) == (["b" * 32, "a" * 32], "acc_mean")  # by acc_mean
    assert leader_first(client, ["b" * 32, "a" * 32]) == (["b" * 32, "a" * 32], "acc_mean")
    metrics["b" * 32]["acc_mean"] = 0.2  # a tie: by model name, as the report breaks it
    assert leader_first(client, ["a" * 32, "b" * 32])[0] == ["b" * 32, "a" * 32]


def no_sure(question: str) -> list[dict]:
    """Five draws of four different options (the right one once): never SURE."""
    return repeated(question, [0, 1, 2, 3, 1])


@pytest.mark.promise(
    "docs/review.md", "every metric a paired or questions-needed table leaves out is named under it, with why"
)
def test_every_metric_left_out_of_a_table_is_named_under_it_with_the_reason(monkeypatch):
    """One run is never SURE (RWS undefined), the other SURE on 10 questions (fewer than an estimate needs): the
    paired table has no RWS row and the questions-needed table none for either run; both say so, with why, and
    name no CoRA metric: runs of the original order alone measure none (docs/validity.md)."""
    sure_some = []
    for i in range(60):
        sure_some += repeated(f"q{i:03d}", [0] * 5) if i < 10 else no_sure(f"q{i:03d}")
    never = [row for i in range(60) for row in no_sure(f"q{i:03d}")]
    runs = repetition_runs({"m": records(sure_some), "n": records(never)}, monkeypatch)
    _, by_title = sections_by_title(runs)
    (paired,) = by_title["Paired differences between models"].tables
    (power,) = by_title["How many questions are enough"].tables
    assert "rws" not in set(paired.data["metric"]) and "rws" not in set(power.data["metric"])
    assert "; left out (no row): " in paired.caption
    assert (
        f"rws (m {MINUS} n): run run1 (n) undefined: no question was SURE (RWS is the share right among the SURE "
        "questions)"
    ) in paired.caption
    assert not re.findall(r"\b(mcqa_plus|bmca_1\.0|cora)\b", paired.caption + power.caption)
    assert f"rws (m {MINUS} n, paired): run run1 (n) undefined: no question was SURE" in power.caption
    assert "rws (n): undefined: no question was SURE" in power.caption
    assert "rws (m): 10 questions behind it (an estimate needs 20; rws counts only SURE questions)" in power.caption
    # the control: a metric every run has is named nowhere as left out
    assert "acc_mean (" not in paired.caption.split("left out", 1)[1]


@pytest.mark.promise(
    "docs/review.md", "the bottom line's values, chance verdicts and INVALID flags name every model, not two"
)
def test_every_summary_and_flag_covers_every_model_of_three(monkeypatch):
    """Three models, each with a high INVALID share: the tie's values, the chance verdicts and the INVALID flags
    name all three, in rank order; all three at or below chance: `no model is above chance`, each one named."""
    frames = {
        "x": drawn(80, 0.5, 0.2, seed=5),
        "y": drawn(80, 0.5, 0.25, seed=6),
        "z": drawn(80, 0.48, 0.3, seed=7),
    }
    runs = repetition_runs(frames, monkeypatch)
    rates = runs.table.set_index("model")["invalid_rate"]
    (line,) = build_sections(runs)[0].lines
    order = runs.table.sort_values("acc_mean", ascending=False)["model"].tolist()
    assert re.search(r"acc_mean: " + r", ".join(rf"{m} 0\.\d{{3}}" for m in order), line), line
    assert "every model is above chance on acc_mean" in line
    flags = ", ".join(f"{m} {rates[m]:.2f}" for m in order)
    assert line.endswith(f"; INVALID share above 0.10 (counted wrong): {flags}."), line

    low = {m: drawn(80, 0.2, 0.15, seed=s) for m, s in (("x", 8), ("y", 9), ("z", 10))}
    runs = repetition_runs(low, monkeypatch)
    (line,) = build_sections(runs)[0].lines
    assert line.startswith("bench: no pick: no model is above chance on acc_mean ("), line
    assert all(re.search(rf"\b{m} 0\.\d{{3}} \[", line) for m in low)
    (table,) = summary.leader_table(runs, None).tables
    assert table.text.iloc[0]["verdict"] == "no pick: no model above chance"
    assert len(table.text.iloc[0]["vs chance"].split(", ")) == 3


@pytest.mark.promise(
    "docs/review.md", "a settings note names what decided each setting: a config's default or a sweep override"
)
def test_a_settings_note_names_its_cause():
    """The README study's two sweeps: one scores by option text (the model config's default scoring, which wraps
    no prompt in a chat template), the other sets prompt=repetition scoring=logprob; the note says which key
    decided chat in each, and where that key came from."""
    backend = "hf|weights=sha256:aa|revision=None|dtype=float32"
    cora = {
        "params": {"scoring": "cloze_shown", "prompt.name": "cora", "prompt.chat": "True", "model.dtype": "float32"},
        "tags": {"backend": f"{backend}|chat=False", "sweep_id": "s1", "overrides": "model=smollm2_135m variants=cora"},
    }
    repetition = {
        "params": {"scoring": "logprob", "prompt.name": "repetition", "prompt.chat": "True", "model.dtype": "float32"},
        "tags": {
            "backend": f"{backend}|chat=True",
            "sweep_id": "s2",
            "overrides": "model=smollm2_135m prompt=repetition scoring=logprob temperature=0.3",
        },
    }
    runs = [cora, repetition, repetition]
    table = pd.DataFrame(
        {
            "model": ["smollm2_135m"] * 3,
            "benchmark": ["synthetic"] * 3,
            "backend": [r["tags"]["backend"] for r in runs],
            "setting_causes": [json.dumps(setting_causes(r["params"], r["tags"])) for r in runs],
        }
    )
    table["model_identity"] = table["backend"].map(hash)
    (note,) = identity_notes(table)
    assert note == (
        "model smollm2_135m: its runs used the same weights at different settings: chat False in 1 run "
        "(scoring=cloze_shown, the model config's default (model.scoring): cloze scoring reads option texts without "
        "the chat template), True in 2 runs (prompt.chat=True, from prompt=repetition, a sweep override with "
        "scoring=logprob, a sweep override: the prompt asks for the model's chat template); settings are compared "
        "as they are, not as other weights"
    )
    # a single run's command line, and prompt.chat set there
    single = setting_causes(
        {"scoring": "logprob", "prompt.name": "cora", "prompt.chat": "False", "model.dtype": "bfloat16"},
        {"backend": f"{backend}|chat=False", "overrides": "prompt.chat=false model.dtype=bfloat16"},
    )
    assert single["chat"] == "prompt.chat=False, set on the command line: the prompt asks for no chat template"
    assert single["dtype"] == "model.dtype=bfloat16, set on the command line"
    # a run logged before its overrides were: the values, and no guess at where they came from
    older = setting_causes({"scoring": "cloze", "prompt.chat": "True"}, {"backend": f"{backend}|chat=False"})
    assert older["chat"] == "scoring=cloze: cloze scoring reads option texts without the chat template"


@pytest.mark.promise("docs/review.md", "src.plan names every run not above chance: at chance and below it")
def test_plan_names_the_runs_below_chance_as_well_as_those_at_it():
    """Three runs: one whose interval contains chance, one wholly below it with most answers INVALID, one above:
    the first two are named, each with its verdict, the INVALID share beside the one below; the third is not."""
    from src.plan import chance_notes

    metrics = {
        "a" * 32: {"acc_mean": 0.26, "acc_mean_lo": 0.2, "acc_mean_hi": 0.33, "chance": 0.25},
        "b" * 32: {"acc_mean": 0.085, "acc_mean_lo": 0.05, "acc_mean_hi": 0.12, "chance": 0.25, "invalid_rate": 0.57},
        "c" * 32: {"acc_mean": 0.6, "acc_mean_lo": 0.5, "acc_mean_hi": 0.7, "chance": 0.25},
    }
    client = N(get_run=lambda run_id: N(data=N(metrics=metrics[run_id])))
    at, below = chance_notes(client, list(metrics), ["smollm2", "gemma", "strong"])
    assert at.startswith("run aaaaaaaa (smollm2) is indistinguishable from chance on acc_mean (0.260 [0.200, 0.330]")
    assert below.startswith(
        "run bbbbbbbb (gemma) is below chance on acc_mean (0.085 [0.050, 0.120], chance 0.250), with 0.57 of its "
        "answers INVALID (above 0.10, counted wrong)"
    )


@pytest.mark.promise(
    "docs/review.md", "a job's run keeps the keys its command line or sweep set, the cause a settings note names"
)
def test_a_job_under_hydra_tags_its_overrides_and_none_outside_it():
    """`override_tags` reads Hydra's task overrides, less where things go (tracking, cache); a job outside Hydra (a
    test's in-process run) logs no tag, which the settings note reads as 'not known'."""
    from hydra import compose
    from hydra.core.hydra_config import HydraConfig

    from src.config.compose import _own_hydra
    from src.config.schema import CONF_DIR
    from src.job.runner import override_tags

    assert override_tags() == {}
    with _own_hydra(CONF_DIR):
        cfg = compose(
            "config",
            overrides=["prompt=repetition", "scoring=logprob", "tracking.uri=sqlite:///x.db", "cache.path=c.db"],
            return_hydra_config=True,
        )
    HydraConfig.instance().set_config(cfg)
    try:
        assert override_tags() == {"overrides": "prompt=repetition scoring=logprob"}
    finally:
        HydraConfig.instance().cfg = None
    assert override_tags() == {}


def test_a_secret_set_on_the_command_line_never_reaches_the_overrides_tag(monkeypatch):
    """A job whose overrides carry a secret (`+model.api_key=...`): the tag masks it; a job that set nothing (every
    key from the configs' defaults) says so rather than logging an empty tag."""
    from hydra.core.hydra_config import HydraConfig

    from src.job.runner import override_tags

    task: list[str] = ["+model.api_key=sk-secret-1", "seed=1"]
    monkeypatch.setattr(HydraConfig, "initialized", staticmethod(lambda: True))
    monkeypatch.setattr(HydraConfig, "get", staticmethod(lambda: N(overrides=N(task=task))))
    assert override_tags() == {"overrides": "+model.api_key=*** seed=1"}
    task[:] = ["tracking.uri=http://user:pw@h:5000"]
    assert override_tags() == {"overrides": "(none)"}


def test_a_metric_with_one_question_behind_it_says_one_question():
    """The reason under a questions-needed table counts its questions in words that agree with the count."""
    from src.compare.paired import _why_untested

    assert _why_untested("rws", 1, 1000, pair=False).startswith("1 question behind it (an estimate needs 20")
    assert _why_untested("rws", 5, 1000).startswith("5 questions behind it in one run (an interval needs 20")
