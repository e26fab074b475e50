"""Paired comparisons (src/metrics/paired.py, src/compare/paired.py): the same resample for both runs, the
difference's interval and p-value, Holm, the questions-needed formula, the report's paired tables, rank-swap
significance, the same-questions check, and intervals in the compare tables and plots. All in-process on
hand-built records; the MLflow side is in tests/test_plan.py."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from src.common.errors import UserError
from src.compare import load, plots, report, summary, tables
from src.compare.paired import PairedStudy, paired_study
from src.compare.sections import build_sections
from src.compare.tables.common import p_text
from src.metrics.intervals import bootstrap_values, decompose, wilson_interval
from src.metrics.paired import (
    bootstrap_p_value,
    holm,
    paired_differences,
    paired_values,
    per_question_sd,
    question_mismatch,
    questions_needed,
)

from .records_factory import divergent, records, repeated

PNG = b"\x89PNG\r\n\x1a\n"


def cora_records(right_original, right_variants, n_variants: int = 3) -> pd.DataFrame:
    """A CoRA-like run: per question an original and `n_variants` NOTA variants, each right as given."""
    rows = []
    for i, (orig, var) in enumerate(zip(right_original, right_variants)):
        rows += divergent(f"q{i:03d}", [orig] + [var] * n_variants)
    return records(rows)


def two_models(n: int = 120, seed: int = 3):
    """A strong model (right 85%) and a weaker one that agrees with it on most questions."""
    rng = np.random.default_rng(seed)
    strong = rng.random(n) < 0.85
    weak = strong & (rng.random(n) < 0.8)  # right only where the strong one is, and not always
    strong_variants = strong & (rng.random(n) < 0.5)  # inconsistent: often wrong on the variants
    weak_variants = weak  # consistent
    return cora_records(strong, strong_variants), cora_records(weak, weak_variants)


# ---------------------------------------------------------------- the statistics


def test_both_runs_get_the_same_resample_and_each_its_own_bootstrap():
    a, b = (decompose(r, by_subjects=False) for r in two_models())
    values_a, values_b = paired_values([a, b], ["mcqa", "cora"], n_resamples=300, seed=7)
    # each run's marginal replicates are exactly its own bootstrap with that seed: the counts are shared
    for dec, values in ((a, values_a), (b, values_b)):
        own = bootstrap_values(dec, n_resamples=300, seed=7, names=["mcqa", "cora"])
        assert np.array_equal(own["mcqa"], values["mcqa"]) and np.array_equal(own["cora"], values["cora"])
    # by default too: both functions default to seed 0
    default = paired_differences(a, b, ["mcqa"], n_resamples=300)["mcqa"]
    assert default == paired_differences(a, b, ["mcqa"], n_resamples=300, seed=0)["mcqa"]
    d = (
        bootstrap_values(a, n_resamples=300, names=["mcqa"])["mcqa"]
        - bootstrap_values(b, n_resamples=300, names=["mcqa"])["mcqa"]
    )
    assert default.sd == pytest.approx(float(np.std(d, ddof=1)) * math.sqrt(len(a.question_ids)), rel=1e-12)
    # any integer seed, a negative one too (both map it onto the generator's seeds the same way)
    (negative,) = paired_values([a], ["mcqa"], n_resamples=50, seed=-3)
    assert np.array_equal(bootstrap_values(a, n_resamples=50, seed=-3, names=["mcqa"])["mcqa"], negative["mcqa"])


def test_a_run_against_itself_differs_by_zero_with_p_one():
    a = decompose(two_models()[0], by_subjects=False)
    result = paired_differences(a, a, n_resamples=200)
    assert set(result) == {"mcqa", "mcqa_plus", "bmca_1.0", "cora"}
    for d in result.values():
        assert d.difference == 0 and d.lo == d.hi == 0 and d.p == 1.0 and d.sd == 0


def test_a_clear_difference_is_significant_and_pairing_narrows_it():
    strong, weak = two_models()
    a, b = decompose(strong, by_subjects=False), decompose(weak, by_subjects=False)
    result = paired_differences(a, b, n_resamples=1000, seed=1)
    mcqa = result["mcqa"]
    assert mcqa.difference == pytest.approx(
        strong.query("variant_kind == 'original'")["correct"].mean()
        - weak.query("variant_kind == 'original'")["correct"].mean()
    )
    assert 0 < mcqa.lo < mcqa.difference < mcqa.hi and mcqa.p < 0.01
    assert result == paired_differences(a, b, n_resamples=1000, seed=1)  # deterministic in the seed
    # the weak model is right only where the strong one is: the paired sd is far below the unpaired one
    sd = per_question_sd(a, n_resamples=1000)["mcqa"], per_question_sd(b, n_resamples=1000)["mcqa"]
    assert mcqa.sd < 0.8 * math.hypot(*sd)
    # CoRA goes the other way: the strong model is inconsistent
    assert result["cora"].hi < 0


def test_p_value_and_holm():
    assert bootstrap_p_value(np.array([np.nan, np.nan])) is None
    assert bootstrap_p_value(np.zeros(99)) == 1.0
    assert bootstrap_p_value(np.full(999, -1.0)) == pytest.approx(2 / 1000)
    assert bootstrap_p_value(np.full(999, 1.0)) == pytest.approx(2 / 1000)
    # 2 of 9 at or below 0, 8 at or above (the tie counts on both sides): p = 2 (1 + 2) / 10
    assert bootstrap_p_value(np.arange(-1.0, 8.0)) == pytest.approx(0.6)
    ps = [0.001, 0.2, None, 0.04, 0.03]
    adjusted = holm(ps)
    assert adjusted[2] is None
    assert all(h >= p for h, p in zip(adjusted, ps) if p is not None)
    assert adjusted[0] == pytest.approx(0.004) and adjusted[4] == pytest.approx(0.09) and adjusted[1] == 0.2


def test_a_difference_gets_an_interval_only_with_enough_questions_and_defined_metrics():
    from src.metrics.intervals import MIN_BOOTSTRAP_QUESTIONS

    strong, weak = two_models()
    few = [f"q{i:03d}" for i in range(MIN_BOOTSTRAP_QUESTIONS - 1)]
    small = [decompose(r[r["question_id"].isin(few)], by_subjects=False) for r in (strong, weak)]
    for d in paired_differences(*small, n_resamples=200).values():
        assert d.lo is None and d.hi is None and d.p is None and d.sd is None and d.n_questions == len(few)
    enough = few + [f"q{MIN_BOOTSTRAP_QUESTIONS - 1:03d}"]  # exactly the minimum: an interval
    at_minimum = [decompose(r[r["question_id"].isin(enough)], by_subjects=False) for r in (strong, weak)]
    assert all(d.lo is not None and d.p is not None for d in paired_differences(*at_minimum, n_resamples=200).values())
    # by default the overall metrics only, not each subject's (the per-subject ones are asked for by name)
    halves = {q: ("law" if int(q[1:]) % 2 else "math") for q in strong["question_id"].unique()}
    by_subject = [decompose(r.assign(subject=r["question_id"].map(halves)), by_subjects=True) for r in (strong, weak)]
    assert any("/" in name for name in by_subject[0].names)
    found = paired_differences(*by_subject, n_resamples=50)
    assert found and not any("/" in name for name in found)
    # RWS undefined in one run (nothing SURE: every question answered differently each time) is not compared
    unsure = decompose(records([t for i in range(30) for t in repeated(f"q{i}", [0, 1, 2, 3] * 2)]), by_subjects=False)
    sure = decompose(records([t for i in range(30) for t in repeated(f"q{i}", [0] * 8)]), by_subjects=False)
    found = paired_differences(unsure, sure, n_resamples=50)
    assert "st" in found and "rws" not in found and found["st"].difference == -1.0


def test_questions_needed_is_the_normal_approximation():
    z = 1.959963984540054 + 0.8416212335729143
    assert questions_needed(0.5, 0.02) == math.ceil((z * 0.5 / 0.02) ** 2)
    assert questions_needed(0.5, 0.04) < questions_needed(0.5, 0.02) < questions_needed(0.5, 0.02, power=0.9)
    # for a 0/1 share the per-question sd is sqrt(p (1 - p)): the bootstrap estimate is close to it
    sd = per_question_sd(
        decompose(cora_records([i % 4 != 0 for i in range(400)], [True] * 400), by_subjects=False), n_resamples=2000
    )["mcqa"]
    assert sd == pytest.approx(math.sqrt(0.75 * 0.25), rel=0.1)
    with pytest.raises(ValueError):
        questions_needed(0.5, 0)
    for bad in ({"alpha": 1.5}, {"power": 1.5}, {"alpha": 0}, {"alpha": 1}, {"power": 0}, {"power": 1}):
        with pytest.raises(ValueError, match="between 0 and 1"):
            questions_needed(0.5, 0.02, **bad)
    assert questions_needed(0.0, 0.02) == 1  # no variation: one question


def test_question_mismatch_says_the_counts():
    assert question_mismatch(["a", "b"], ["b", "a"]) is None
    assert question_mismatch(["a", "b", "c"], ["a"]) == "3 and 1 questions, 1 shared"


# ---------------------------------------------------------------- the report, on hand-built runs


def runs_of(frames: dict[str, pd.DataFrame], monkeypatch, **extra) -> load.Runs:
    """A Runs table of one CoRA run per model (metrics as compute_metrics gives them, with intervals), whose
    records are `frames` (read through a stand-in for read_run_records)."""
    from src.metrics import compute_metrics

    rows = []
    for i, (model, frame) in enumerate(frames.items()):
        metrics = compute_metrics(frame, intervals=200)
        rows.append(
            {
                "run_id": f"run{i}",
                "experiment_id": "1",
                "experiment": "e",
                "sweep_id": "s",
                "start_time": i,
                "model": model,
                "benchmark": "bench",
                "variants": "cora",
                "temperature": 0.0,
                "scoring": "generate",
                "prompt": "cora",
                "fewshot": 0,
                "repetitions": 1,
                "limit": "null",
                "seed": 0,
                "sure_rule": "answer",
                **metrics,
                **extra,
            }
        )
    by_id = {f"run{i}": frame for i, frame in enumerate(frames.values())}
    monkeypatch.setattr("src.compare.load.read_run_records", lambda run_id, uri, key="--run": by_id[run_id])
    no_prompts = pd.DataFrame(columns=["prompt_hash", "prompt"])  # the stand-in store holds no prompts.parquet
    monkeypatch.setattr("src.compare.load.read_prompts", lambda run_id, uri: no_prompts)
    return load.Runs(table=pd.DataFrame(rows), tracking_uri="http://stand-in:5000", experiments={"1": "e"})


def test_report_has_paired_differences_power_and_significant_swaps(monkeypatch, tmp_path):
    strong, weak = two_models()
    runs = runs_of({"strong": strong, "weak": weak}, monkeypatch)
    sections = build_sections(runs)
    by_title = {s.title: s for s in sections}
    (paired,) = by_title["Paired differences between models"].tables
    data = paired.data.set_index("metric")
    assert list(paired.text.index) == ["strong − weak"] * len(data)
    assert data.at["mcqa", "difference"] > 0 and data.at["mcqa", "lo"] > 0 and bool(data.at["mcqa", "significant"])
    assert (data["p_holm"] >= data["p"]).all()
    cell = paired.text.set_index("metric").at["mcqa", "A − B [95%]"]
    assert cell.startswith("+0.") and "[+0." in cell
    (power,) = by_title["How many questions are enough"].tables
    assert set(power.data["who"]) == {"strong − weak (paired)", "strong", "weak"}
    assert (power.data["n"] == 120).all() and power.name.startswith("power_")
    # the rank swap: strong is above on MCQA and below on CoRA, both significantly
    changes = by_title["Rank changes between MCQA and CoRA"].tables
    assert "strong ranks above weak on MCQA, below it on CoRA (significant)" in changes[0].caption
    assert changes[1].data.iloc[0]["significant"] and changes[1].text.iloc[0]["significant"] == "yes"
    # CoRA table cells carry the logged intervals
    cora = by_title["CoRA ranking"].tables[0].text
    assert cora.at["MCQA", "strong"].count("[") == 1 and cora.at["MCQA", "strong"].endswith("(1)")
    assert by_title["Runs"].paired_lines and all(" − " in line for line in by_title["Runs"].paired_lines)
    # the page opens on the bottom line, then the table it is read from: per benchmark the first, the second,
    # the paired difference and Holm's p
    assert [s.title for s in sections[:2]] == [summary.BOTTOM_TITLE, summary.TITLE]
    (line,) = sections[0].lines
    assert line.startswith("bench: pick strong (its lead on mcqa over weak is +0.")
    assert f"p_holm {data.at['mcqa', 'p_holm']:.3f}" in line or "p_holm <0.001" in line
    (table,) = sections[1].tables
    row = table.data.iloc[0]
    assert (row["leader"], row["second"], row["metric"]) == ("strong", "weak", "mcqa") and not row["tie"]
    assert row["difference"] == pytest.approx(data.at["mcqa", "difference"], abs=1e-12)
    assert (row["lo"], row["hi"]) == pytest.approx((data.at["mcqa", "lo"], data.at["mcqa", "hi"]), abs=1e-12)
    assert row["p_holm"] == pytest.approx(data.at["mcqa", "p_holm"], abs=1e-12)
    shown = table.text.iloc[0]
    assert shown["first"] == f"strong {tables.judged_cell(runs.table.iloc[0], 'mcqa')}"
    assert shown["verdict"] == "pick strong (p < 0.05)"
    assert shown["first − second [95%]"] == paired.text.set_index("metric").at["mcqa", "A − B [95%]"]

    written = report.write(sections, tmp_path / "r", header=["h"], title="t")
    names = {p.name for p in written}
    assert {"paired_bench.csv", "power_bench.csv", "rank_swaps.csv"} <= names
    html = (tmp_path / "r" / "report.html").read_text()
    assert "Paired differences between models" in html and "How many questions are enough" in html


def test_the_summary_marks_a_tie_when_the_lead_is_not_significant(monkeypatch):
    strong, weak = two_models()
    runs = runs_of({"a": strong, "b": strong.copy()}, monkeypatch)  # the same answers: no lead at all
    (table,) = summary.leader_table(runs, paired_study(runs)).tables
    assert table.data.iloc[0]["tie"] and table.text.iloc[0]["verdict"] == "tie (equal): no leader"
    assert table.data.iloc[0]["leader"] is None and table.text.iloc[0]["first − second [95%]"] == "+0.000 (equal)"
    runs = runs_of({"strong": strong, "weak": weak}, monkeypatch)
    (alone,) = summary.leader_table(runs, None).tables  # --no-paired: no test, so no lead is claimed
    assert alone.text.iloc[0]["verdict"] == "tie? (no paired test): no leader" and alone.text.iloc[0]["p (Holm)"] == "–"
    # a lead whose Holm-adjusted p is not below alpha is a tie, whatever the difference
    study = paired_study(runs)
    p_holm = study.differences.tables[0].data.set_index("metric").at["mcqa", "p_holm"]
    (strict,) = summary.leader_table(runs, study, alpha=p_holm).tables
    assert strict.data.iloc[0]["tie"] and strict.text.iloc[0]["verdict"] == f"tie (p ≥ {p_holm:g}): no leader"


def test_the_summary_of_three_or_more_models_compares_the_leader_with_the_second(monkeypatch):
    """Four models with distinct MCQA values and intervals, listed out of rank order: the runner-up is the second
    of the ranking (not the last, not the second listed), and the difference, its interval and its Holm p are
    the paired study's leader − that runner-up."""
    rng = np.random.default_rng(11)
    n = 120
    base = rng.random(n)
    right = {
        name: base < share for name, share in (("third", 0.5), ("leader", 0.9), ("last", 0.3), ("second", 0.7))
    }  # nested: each right where the weaker is
    runs = runs_of({name: cora_records(r, r) for name, r in right.items()}, monkeypatch)
    mcqa = runs.table.set_index("model")["mcqa"]
    assert mcqa["leader"] > mcqa["second"] > mcqa["third"] > mcqa["last"]  # distinct values
    bounds = runs.table.set_index("model")[["mcqa_lo", "mcqa_hi"]]
    assert bounds.drop_duplicates().shape[0] == 4  # distinct intervals
    study = paired_study(runs)
    (table,) = summary.leader_table(runs, study).tables
    row = table.data.iloc[0]
    assert (row["first"], row["second"], row["models"]) == ("leader", "second", 4)
    ids = runs.table.set_index("model")["run_id"]
    assert (row["first_run"], row["second_run"]) == (ids["leader"], ids["second"])
    assert row["second_value"] == pytest.approx(mcqa["second"], abs=1e-12)
    found = study.lookup(ids["leader"], ids["second"], "mcqa")
    assert row["difference"] == pytest.approx(mcqa["leader"] - mcqa["second"], abs=1e-12)
    assert row["difference"] == pytest.approx(found.difference, abs=1e-12)
    assert (row["lo"], row["hi"]) == pytest.approx((found.lo, found.hi), abs=1e-12)
    (differences,) = study.differences.tables  # one condition: every pair of the four models, Holm over them
    data = differences.data
    between = data[["run_a", "run_b"]].apply(set, axis=1) == {ids["leader"], ids["second"]}
    pair = data[(data["metric"] == "mcqa") & between]
    assert len(pair) == 1 and row["p_holm"] == pytest.approx(pair["p_holm"].iloc[0], abs=1e-12)
    shown = table.text.iloc[0]
    by_model = runs.table.set_index("model", drop=False)
    assert shown["second"] == f"second {tables.judged_cell(by_model.loc['second'], 'mcqa')}"
    assert shown["first − second [95%]"].startswith(f"{mcqa['leader'] - mcqa['second']:+.3f}")


def test_the_summary_reads_the_holm_p_of_its_pair_and_metric_and_ranks_by_a_metric_every_run_logged(monkeypatch):
    """A study whose Holm p differs per metric and per pair (the pair stored in the other order, b − a): the
    summary shows the leader − runner-up p of the headline metric, whichever way the pair was stored; a p of
    exactly 0.001 is printed, not '<0.001'. A headline metric one run lacks is not ranked by: the next one is."""
    from src.compare.tables import Built, Table
    from src.metrics.paired import PairedDifference

    rng = np.random.default_rng(5)
    base = rng.random(120)
    right = {"leader": base < 0.9, "second": base < 0.6, "third": base < 0.3}
    runs = runs_of({name: cora_records(r, r) for name, r in right.items()}, monkeypatch)
    ids = runs.table.set_index("model")["run_id"]
    # stored as second − leader, and with a p of its own for each metric and pair
    rows = [
        {"metric": metric, "run_a": ids[a], "run_b": ids[b], "p_holm": p}
        for (a, b), ps in {
            ("second", "leader"): {"cora": 0.5, "mcqa": 0.001, "mcqa_plus": 0.2},
            ("third", "leader"): {"cora": 0.7, "mcqa": 0.04, "mcqa_plus": 0.3},
            ("third", "second"): {"cora": 0.9, "mcqa": 0.6, "mcqa_plus": 0.8},
        }.items()
        for metric, p in ps.items()
    ]
    table = Table(title="t", data=pd.DataFrame(rows), text=pd.DataFrame(), name="t")
    study = PairedStudy(differences=Built(tables=[table]))
    study.results[(ids["second"], ids["leader"])] = {
        "mcqa": PairedDifference("mcqa", 0.6, 0.9, -0.3, -0.4, -0.2, 0.0005, 120, 0.5)
    }
    (table,) = summary.leader_table(runs, study).tables
    row, shown = table.data.iloc[0], table.text.iloc[0]
    assert (row["leader"], row["second"], row["metric"]) == ("leader", "second", "mcqa")
    assert row["p_holm"] == 0.001 and shown["p (Holm)"] == "0.001" and shown["verdict"] == "pick leader (p < 0.05)"
    assert (row["difference"], row["lo"], row["hi"]) == pytest.approx((0.3, 0.2, 0.4), abs=1e-12)  # flipped: a − b
    (weaker,) = summary.leader_table(runs, study, alpha=0.001).tables  # p = alpha is not below it: a tie
    assert weaker.data.iloc[0]["tie"] and weaker.text.iloc[0]["verdict"] == "tie (p ≥ 0.001): no leader"

    runs.table.loc[runs.table["model"] == "third", "mcqa"] = math.nan  # one run without MCQA: ranked by accuracy
    (table,) = summary.leader_table(runs, None).tables
    assert table.data.iloc[0]["metric"] == "accuracy" and table.data.iloc[0]["models"] == 3


def test_significance_is_read_from_the_holm_adjusted_p_not_the_raw_one(monkeypatch):
    """Four metrics of one pair, each with raw p = 2/1001 (the smallest 1000 resamples give): Holm multiplies the
    smallest by 4, so at alpha 0.005 every raw p is below the level and every adjusted one above it."""
    strong, weak = two_models()
    runs = runs_of({"strong": strong, "weak": weak}, monkeypatch)
    for alpha in (0.005, 0.05):
        (table,) = paired_study(runs, alpha=alpha).differences.tables
        data = table.data
        assert list(data["significant"]) == [p < alpha for p in data["p_holm"]], alpha
        assert list(table.text["significant"]) == ["*" if p < alpha else "" for p in data["p_holm"]]
        if alpha == 0.005:  # the case that tells the two apart: raw p below the level, the adjusted one not
            assert (data["p"] < alpha).all() and not data["significant"].any()
        else:
            assert data["significant"].all()


def test_power_rows_cover_each_run_and_significance_needs_p_below_alpha(monkeypatch):
    strong, weak = two_models()
    runs = runs_of({"strong": strong, "weak": weak}, monkeypatch)
    study = paired_study(runs)
    (table,) = study.differences.tables
    assert list(table.data.columns[:2]) == ["table", "model_a"]  # the CSV's first column names its table
    p_holm = float(table.data["p_holm"].min())
    assert not paired_study(runs, alpha=p_holm).differences.tables[0].data["significant"].any()  # p = alpha: no
    (power,) = study.power.tables
    assert power.data.columns[0] == "table"
    for who in ("strong", "weak", "strong − weak (paired)"):
        assert {"mcqa", "cora"} <= set(power.data.loc[power.data["who"] == who, "metric"]), who  # CoRA runs: CoRA too
    rows = power.data[power.data["n_needed"].notna()]
    assert len(rows) and all(r["enough"] == (r["n"] >= r["n_needed"]) for _, r in rows.iterrows())
    assert not any("different SURE rules" in note for note in study.differences.notes)
    runs.table.loc[1, "sure_rule"] = "correctness"
    assert any("use different SURE rules" in note for note in paired_study(runs).differences.notes)


def test_runs_on_different_questions_are_refused_unless_intersected(monkeypatch):
    strong, weak = two_models()
    weak = weak[weak["question_id"] < "q100"]  # 100 of the 120 questions
    runs = runs_of({"strong": strong, "weak": weak}, monkeypatch)
    with pytest.raises(
        UserError,
        match=r"^paired differences: runs run0 \(strong\) and run1 \(weak\) of bench asked "
        r"different questions \(120 and 100 questions, 100 shared\)",
    ):
        paired_study(runs)
    study = paired_study(runs, intersect=True)
    (table,) = study.differences.tables
    assert (table.data["n_questions"] == 100).all()
    assert any("paired on their 100 shared questions" in n for n in study.differences.notes)
    assert not build_sections(runs, paired=False)[-1].title.startswith("How many")


def test_significance_of_a_swap_needs_both_intervals_to_exclude_zero():
    frame = pd.DataFrame(
        [
            {
                "run_id": f"r{i}",
                "start_time": i,
                "model": m,
                "benchmark": "b",
                "variants": "cora",
                "mcqa": mcqa,
                "cora": cora,
            }
            for i, (m, mcqa, cora) in enumerate([("x", 0.8, 0.3), ("y", 0.7, 0.4)])
        ]
    )
    cora = tables.cora_tables(frame)
    from src.metrics.paired import PairedDifference

    def study(cora_hi):
        found = PairedStudy()
        found.results[("r1", "r0")] = {  # stored as y - x: lookup flips it
            "mcqa": PairedDifference("mcqa", 0.7, 0.8, -0.1, -0.15, -0.05, 0.01, 100, 0.3),
            "cora": PairedDifference("cora", 0.4, 0.3, 0.1, -cora_hi, 0.2, 0.04, 100, 0.3),
        }
        return found

    caption = tables.rank_changes(cora, study(-0.01)).tables[0].caption
    assert "x ranks above y on MCQA, below it on CoRA (significant)" in caption
    assert "(not significant)" in tables.rank_changes(cora, study(0.02)).tables[0].caption
    assert "significant" not in tables.rank_changes(cora).tables[0].caption  # no paired results: no verdict


# ---------------------------------------------------------------- intervals in the tables and plots


def test_cells_show_logged_intervals_only():
    assert tables.fmt_ci(0.41, (0.36, 0.46), 2) == "0.41 [0.36, 0.46]"
    row = {"mcqa": 0.41, "mcqa_lo": 0.36, "mcqa_hi": 0.46, "cora": 0.2}
    assert tables.cell(row, "mcqa") == "0.410 [0.360, 0.460]"
    assert tables.cell(row, "cora") == "0.200"  # no bounds logged: the value alone, never an invented interval
    assert tables.cell({"acc@6": 0.5, "acc@6_lo": math.nan, "acc@6_hi": 0.6}, "acc@6") == "0.500"


def test_plots_draw_the_logged_intervals():
    base = {
        "experiment_id": "1",
        "variants": "x",
        "scoring": "generate",
        "prompt": "p",
        "fewshot": 0,
        "limit": "n",
        "seed": 0,
        "sure_rule": "answer",
    }
    n = 100
    lo, hi = wilson_interval(8, n)
    cora_row = {
        **base,
        "run_id": "c",
        "start_time": 0,
        "model": "m",
        "benchmark": "b",
        "temperature": 0.0,
        "repetitions": 1,
        "n_questions": float(n),
        "bmca_0.5": 0.9,
        "bmca_1.0": 0.08,
        "bmca_1.0_lo": lo,
        "bmca_1.0_hi": hi,
    }
    assert plots.bmca_band(pd.Series(cora_row))[0] == [0.5, 1.0]
    assert plots.bmca_band(pd.Series({**cora_row, "bmca_1.0_lo": lo + 0.01})) is None  # not the logged interval
    assert plots.bmca_band(pd.Series({k: v for k, v in cora_row.items() if not k.endswith(("_lo", "_hi"))})) is None
    (bmca,), _ = plots.bmca_curves(pd.DataFrame([cora_row]))
    assert "bands" in bmca.caption and bmca.png.startswith(PNG)
    rep = [
        {
            **base,
            "run_id": f"r{t}",
            "start_time": i,
            "model": "m",
            "benchmark": "b",
            "temperature": t,
            "repetitions": 10,
            "st": 0.6,
            "st_lo": 0.5,
            "st_hi": 0.7,
            "rws": 0.8,
            "rws_lo": 0.7,
            "rws_hi": 0.9,
            "acc_mean": 0.7,
            "acc_std": 0.01,
            "sure_right": 0.48,
            "sure_wrong": 0.12,
            "unsure_right": 0.2,
            "unsure_wrong": 0.2,
        }
        for i, t in enumerate((0.3, 0.7))
    ]
    (consistency,), _ = plots.consistency_plots(pd.DataFrame(rep))
    assert "error bars" in consistency.caption and consistency.png.startswith(PNG)
    (table,) = tables.repetition_tables(pd.DataFrame(rep)).tables
    assert table.text["RWS [95%]"].iloc[0] == "0.800 [0.700, 0.900]" and "st_lo" in table.data.columns
    revas = [
        {
            **base,
            "run_id": "v",
            "start_time": 0,
            "model": "m",
            "benchmark": "b",
            "temperature": 0.0,
            "repetitions": 1,
            "acc@4": 0.6,
            "acc@4_lo": 0.5,
            "acc@4_hi": 0.7,
            "acc@6": 0.5,
            "acc_h@4": 0.4,
        }
    ]
    (options,), _ = plots.options_plots(pd.DataFrame(revas))
    assert "error bars" in options.caption and options.png.startswith(PNG)
    text = tables.revas_tables(pd.DataFrame(revas)).tables[0].text
    assert text.at["m · Acc", "n=4"] == "0.600 [0.500, 0.700]" and text.at["m · Acc", "n=6"] == "0.500"


def repetition_records(first_right, later_right, repetitions: int = 5) -> pd.DataFrame:
    """Each question asked `repetitions` times on its original order: repetition 0 right as `first_right` says,
    the later ones as `later_right` (a wrong answer picks option 1)."""
    rows = []
    for i, (first, later) in enumerate(zip(first_right, later_right)):
        answers = [0 if first else 1] + [0 if later else 1] * (repetitions - 1)
        rows += repeated(f"q{i:03d}", answers)
    return records(rows)


def test_a_repetition_study_is_ranked_by_the_mean_over_repetitions_not_one_draw(monkeypatch, tmp_path):
    """Two models whose repetition 0 (MCQA, one sampled draw) is right on the same questions, while over the five
    repetitions one is right far more often: the summary ranks by acc mean, tests acc mean, and the bottom line
    names its leader with its Holm p. The same answers twice: a true tie, and no model is named."""
    rng = np.random.default_rng(7)
    n = 100
    first = rng.random(n) < 0.5
    strong = repetition_records(first, rng.random(n) < 0.9)
    weak = repetition_records(first, rng.random(n) < 0.5)
    runs = runs_of({"steady": strong, "shaky": weak}, monkeypatch, variants="original", repetitions=5)
    by_model = runs.table.set_index("model")
    assert by_model.at["steady", "mcqa"] == by_model.at["shaky", "mcqa"]  # the per-draw headline ties
    assert by_model.at["steady", "acc_mean"] > by_model.at["shaky", "acc_mean"] + 0.2
    sections = build_sections(runs)
    (line,) = sections[0].lines
    (table,) = sections[1].tables
    row = table.data.iloc[0]
    assert (row["metric"], row["leader"], row["tie"]) == ("acc_mean", "steady", False)
    paired = next(s for s in sections if s.title == "Paired differences between models").tables[0].data
    acc = paired[paired["metric"] == "acc_mean"].iloc[0]
    assert row["p_holm"] == pytest.approx(acc["p_holm"], abs=1e-12) and acc["p_holm"] < 0.05
    assert line.startswith("bench: pick steady (its lead on acc_mean over shaky is +0.")
    assert f"p_holm {tables.fmt(acc['p_holm'])}" in line or "p_holm <0.001" in line

    # the same answers twice, logged with a high INVALID share: a true tie, and the share named beside it
    tie = runs_of({"a": strong, "b": strong.copy()}, monkeypatch, variants="original", repetitions=5, invalid_rate=0.4)
    sections = build_sections(tie)
    (line,) = sections[0].lines
    row = sections[1].tables[0].data.iloc[0]
    assert row["metric"] == "acc_mean" and row["tie"] and row["leader"] is None
    acc = tie.table.set_index("model")["acc_mean"]
    assert line.startswith(  # each model's value and the pair's Holm p, as the summary table shows them
        f"bench: no model is better on these questions (acc_mean: a {tables.fmt(acc['a'])}, b {tables.fmt(acc['b'])}"
        f", p_holm {p_text(row['p_holm'])})"
    )
    assert "pick" not in line and "-0.000" not in sections[1].tables[0].text.to_string()
    assert line.endswith("; INVALID share above 0.10 (counted wrong): a 0.40, b 0.40.")
    report.write(sections, tmp_path / "r", header=["h"], title="t")  # the CSV without float noise
    csv = (tmp_path / "r" / "tables" / "summary.csv").read_text()
    assert "00000000" not in csv and "99999999" not in csv and ",-0.0," not in csv


def test_a_tie_on_the_whole_benchmark_says_what_all_of_it_detects_never_a_count_beyond_it(monkeypatch):
    """Two close models on all 100 questions of a 100-question benchmark: the bottom line and the questions-needed
    table say what the 100 questions detect (`QuestionsVerdict`, the rule `src.plan` prints too); on a benchmark
    large enough the bottom line gives the count."""
    from src.metrics.paired import QuestionsVerdict
    from src.plan import plan_rows

    rng = np.random.default_rng(7)
    first = rng.random(100) < 0.5
    a, b = repetition_records(first, rng.random(100) < 0.3), repetition_records(first, rng.random(100) < 0.32)
    options = {"variants": "original", "repetitions": 5, "limit": 100}
    sections = build_sections(runs_of({"a": a, "b": b}, monkeypatch, **options, benchmark_size=100))
    (line,) = sections[0].lines
    power = next(s for s in sections if s.title == "How many questions are enough").tables[0].data
    pair = power[power["who"].str.endswith("(paired)") & (power["metric"] == "acc_mean")].iloc[0]
    verdict = QuestionsVerdict.of(100, pair["sd"], 100, delta=0.02)
    z = 1.959963984540054 + 0.8416212335729143
    assert pair["n_needed"] > 100 and verdict.detectable == pytest.approx(z * pair["sd"] / 10, rel=1e-12)
    assert (
        pair["verdict"]
        == f"no: not reachable on this benchmark; {verdict.detectable:.3f} detectable with all 100 questions"
    )
    assert line.startswith("bench: no model is better on these questions (acc_mean: ")
    assert (
        "; no number of its 100 questions tells a difference of 0.02 (power 0.8; these runs asked 100): "
        f"{verdict.detectable:.3f} detectable with all 100 questions;"
    ) in line
    assert "questions would tell" not in line
    (planned,) = plan_rows({"acc_mean": pair["sd"]}, 100, 100, delta=0.02, alpha=0.05, power=0.8)
    assert planned["verdict"] == pair["verdict"]  # src.plan: the same words for the same sd
    # a benchmark that holds enough questions: the count itself
    sections = build_sections(runs_of({"a": a, "b": b}, monkeypatch, **options, benchmark_size=100_000))
    assert (
        f"; {int(pair['n_needed'])} questions would tell a difference of 0.02 (power 0.8; these runs asked 100);"
        in (sections[0].lines[0])
    )


def test_the_bottom_line_and_the_summary_name_every_models_verdict_against_chance(monkeypatch):
    """Above, indistinguishable from and below chance (0.5 here), each named per model, in rank order, where the
    choice is made: the bottom line and the summary table."""
    rng = np.random.default_rng(3)
    base = rng.random(200)
    right = {"high": base < 0.9, "middle": base < 0.5, "low": base < 0.1}
    runs = runs_of({m: cora_records(r, r) for m, r in right.items()}, monkeypatch, chance=0.5)
    by_model = runs.table.set_index("model")
    assert by_model.at["middle", "mcqa_lo"] <= 0.5 <= by_model.at["middle", "mcqa_hi"]
    assert by_model.at["low", "mcqa_hi"] < 0.5 < by_model.at["high", "mcqa_lo"]
    sections = build_sections(runs)
    (line,) = sections[0].lines
    assert line.endswith("; high above chance, middle indistinguishable from chance, low below chance on mcqa."), line
    (table,) = sections[1].tables
    assert table.text.iloc[0]["vs chance"] == "high above, middle indistinguishable, low below"
    assert "vs chance" in table.caption
    # one verdict for all: said once
    same = runs_of(
        {"x": cora_records(right["high"], right["high"]), "y": cora_records(base < 0.85, base < 0.85)},
        monkeypatch,
        chance=0.25,
    )
    (line,) = build_sections(same)[0].lines
    assert line.endswith("; every model is above chance on mcqa."), line


def sure_runs(monkeypatch, **extra) -> load.Runs:
    """Two repetition runs (5 draws, 60 questions): 10 questions always right (SURE), the rest drawn at random
    with a fifth of the trials INVALID, so that RWS has fewer SURE questions behind it than an interval needs."""
    rng = np.random.default_rng(5)
    frames = {}
    for model, right in (("m", 0.5), ("n", 0.35)):
        rows = []
        for i in range(60):
            drawn = rng.choice([0, 1, 2], size=5, p=[right, 0.8 - right, 0.2])
            answers = [0] * 5 if i < 10 else [None if int(x) == 2 else int(x) for x in drawn]
            rows += repeated(f"q{i:03d}", answers)
        frames[model] = records(rows)
    return runs_of(frames, monkeypatch, variants="original", repetitions=5, **extra)


def test_a_difference_without_a_p_says_why_and_the_caption_counts_only_those_holm_adjusts(monkeypatch):
    runs = sure_runs(monkeypatch)
    sections = build_sections(runs)
    (table,) = next(s for s in sections if s.title == "Paired differences between models").tables
    data = table.data.set_index("metric")
    untested = [m for m in data.index if data.at[m, "p"] is None or data.at[m, "p"] != data.at[m, "p"]]
    assert untested == ["rws"] and data.at["rws", "n_questions"] < 20
    text = table.text.set_index("metric")
    assert (text.at["rws", "p"], text.at["rws", "p (Holm)"]) == ("–", "–") and "[" not in text.at["rws", "A − B [95%]"]
    tested = len(data) - 1
    assert f"Holm-adjusted over the {tested} differences of this table with a p;" in table.caption
    assert (
        "– in an interval, p or p (Holm): no interval and no p, so not among the differences Holm adjusts: "
        f"rws (m − n): {int(data.at['rws', 'n_questions'])} questions behind it in one run (an interval needs 20; "
        "rws counts only SURE questions)"
    ) in table.caption


def _bars(fig) -> dict[str, list[float]]:
    (ax,) = fig.axes
    return {c.get_label(): [p.get_height() for p in c] for c in ax.containers}


def test_the_sure_unsure_bars_add_up_to_acc_mean_with_invalid_a_part_of_its_own(monkeypatch):
    """The bars' right parts add up to acc mean (the caption says so), INVALID is its own part (the runs'
    invalid_rate), and every bar is all of its trials; without the records (--no-paired) the same from the
    metrics."""
    runs = sure_runs(monkeypatch)
    drawn: list = []
    monkeypatch.setattr(plots, "_png", lambda fig: drawn.append(fig) or PNG)
    rows = runs.table.sort_values("model")
    for paired in (True, False):
        drawn.clear()
        sections = build_sections(runs, paired=paired)
        (plot,) = [p for s in sections for p in s.plots if p.name.startswith("sure_unsure")]
        (fig,) = [f for f in drawn if f.axes[0].get_title() == plot.title]
        bars = _bars(fig)
        right = [k for k in bars if k.startswith("right")]
        assert right == (["right, SURE question", "right, UNSURE question"] if paired else ["right (acc mean)"])
        assert np.sum([bars[k] for k in right], axis=0) == pytest.approx(rows["acc_mean"].to_numpy(), abs=1e-12)
        assert bars["INVALID (unparsed)"] == pytest.approx(rows["invalid_rate"].to_numpy(), abs=1e-12)
        assert (rows["invalid_rate"] > 0.1).all()
        assert np.sum(list(bars.values()), axis=0) == pytest.approx([1.0, 1.0], abs=1e-12)
        assert ("right on SURE + right on UNSURE questions = acc mean" in plot.caption) == paired
        assert "INVALID" in plot.caption
