"""The report's first screen, decision by decision (docs/review.md, "The first screen decides"): which model a
bottom line picks, when it calls a tie or names no pick, what it says about chance and INVALID answers, and the
summary table's cells and numbers. In-process on hand-written runs tables and paired results (no records, no
bootstrap), so each rule is checked on values chosen to sit on either side of it."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from src.compare import summary
from src.compare.load import Runs
from src.compare.paired import PairedStudy
from src.compare.tables.common import Built, Table
from src.metrics.display import MINUS
from src.metrics.paired import PairedDifference, QuestionsVerdict

pytestmark = pytest.mark.promise(
    "docs/review.md", "a bottom line picks a model only on a significant lead above chance"
)


def run(
    run_id: str,
    model: str,
    value: float,
    lo: float | None = None,
    hi: float | None = None,
    *,
    chance: float = 0.25,
    invalid: float = 0.0,
    metric: str = "mcqa",
    **extra: object,
) -> dict[str, object]:
    """One row of the runs table: a run's headline `metric` with its interval (none when lo is None)."""
    row: dict[str, object] = {"run_id": run_id, "model": model, "benchmark": "bench", metric: value}
    row |= {"chance": chance, "invalid_rate": invalid}
    if lo is not None:
        row |= {f"{metric}_lo": lo, f"{metric}_hi": hi}
    return row | extra


def runs_of(*rows: dict[str, object]) -> Runs:
    return Runs(table=pd.DataFrame(list(rows)), tracking_uri="file:./mlruns", experiments={"1": "e"})


def difference(
    a: float, b: float, lo: float | None, hi: float | None, *, n: int = 50, sd: float | None = 0.3, metric="mcqa"
) -> PairedDifference:
    return PairedDifference(metric, a, b, a - b, lo, hi, 0.01, n, sd)


def study_of(
    pairs: dict[tuple[str, str], PairedDifference], p_holm: dict[tuple[str, str], float | None]
) -> PairedStudy:
    """A paired study holding each pair's difference (a − b) and its Holm p in its differences table."""
    rows = [
        {"metric": found.metric, "run_a": a, "run_b": b, "p_holm": p_holm[(a, b)]} for (a, b), found in pairs.items()
    ]
    data = pd.DataFrame(rows)
    table = Table(title="paired", data=data, text=data.astype(str), name="paired_bench")
    return PairedStudy(
        differences=Built(tables=[table]), results={pair: {found.metric: found} for pair, found in pairs.items()}
    )


def shown(d: summary.Decision) -> tuple[dict, dict]:
    """The summary table's row of one decision: (its numbers, its cells)."""
    (table,) = summary.leader_table(runs_of(), PairedStudy(), found=[d]).tables
    return table.data.to_dict("records")[0], table.text.to_dict("records")[0]


def one_decision(*rows: dict[str, object], study: PairedStudy | None = None, alpha: float = 0.05):
    (found,) = summary.decisions(runs_of(*rows), study, alpha=alpha)
    return found


def two(p: float | None, *, a=0.60, b=0.40, lo=0.10, hi=0.30, alpha=0.05, invalid=(0.0, 0.0), sd=0.3, **extra):
    """Two models above chance (0.25), `a` leading by 0.2, the paired p `p`."""
    rows = (
        run("ra", "alpha_m", a, a - 0.05, a + 0.05, invalid=invalid[0], **extra),
        run("rb", "beta_m", b, b - 0.05, b + 0.05, invalid=invalid[1], **extra),
    )
    study = study_of({("ra", "rb"): difference(a, b, lo, hi, sd=sd)}, {("ra", "rb"): p})
    return one_decision(*rows, study=study, alpha=alpha)


def test_a_significant_lead_above_chance_picks_the_leader_with_its_difference_and_p():
    d = two(0.004)
    assert d.pick and not d.tie and not d.none_above
    assert d.verdict() == "pick alpha_m (p < 0.05)"
    assert d.bottom_line(delta=0.02, power=0.8) == (
        "bench: pick alpha_m (its lead on mcqa over beta_m is +0.200 [+0.100, +0.300], p_holm 0.004); "
        "every model is above chance on mcqa."
    )
    assert summary.bottom_lines([d]) == [d.bottom_line(delta=0.02, power=0.8)]


def test_the_leader_is_the_model_ranked_first_whichever_order_the_runs_and_the_paired_result_came_in():
    rows = (run("rb", "beta_m", 0.40, 0.35, 0.45), run("ra", "alpha_m", 0.60, 0.55, 0.65))
    study = study_of({("rb", "ra"): difference(0.40, 0.60, -0.30, -0.10)}, {("rb", "ra"): 0.004})
    d = one_decision(*rows, study=study)
    assert [r["model"] for r in d.ranked] == ["alpha_m", "beta_m"]
    assert d.p_holm == pytest.approx(0.004, abs=1e-12)  # found with the pair stored the other way round
    assert d.found is not None and d.found.difference == pytest.approx(0.2, abs=1e-12)
    assert f"alpha_m {MINUS} beta_m" not in d.bottom_line(delta=0.02, power=0.8)  # a pick names the leader
    assert d.bottom_line(delta=0.02, power=0.8).startswith(
        "bench: pick alpha_m (its lead on mcqa over beta_m is +0.200 [+0.100, +0.300], p_holm 0.004)"
    )


@pytest.mark.parametrize("p", [0.05, 0.2])
def test_a_p_at_or_above_alpha_is_a_tie_that_names_no_leader(p):
    d = two(p)
    assert d.tie and not d.pick
    assert d.verdict() == "tie (p ≥ 0.05): no leader"
    line = d.bottom_line(delta=0.02, power=0.8)
    assert line.startswith(
        f"bench: no model is better on these questions (mcqa: alpha_m 0.600, beta_m 0.400, p_holm {p:.3f})"
    )
    assert "pick" not in line


def test_alpha_is_the_threshold_the_verdict_and_the_pick_use():
    assert two(0.03, alpha=0.01).verdict() == "tie (p ≥ 0.01): no leader"
    assert two(0.03, alpha=0.05).verdict() == "pick alpha_m (p < 0.05)"
    assert two(0.005, alpha=0.01).verdict() == "pick alpha_m (p < 0.01)"


def test_without_a_paired_test_there_is_no_leader_and_the_line_says_so():
    d = two(None)
    assert d.tie and not d.pick and d.p_holm is None
    assert d.verdict() == "tie? (no paired test): no leader"
    assert "p_holm –" not in d.bottom_line(delta=0.02, power=0.8)
    assert ", no paired test)" in d.bottom_line(delta=0.02, power=0.8)


def test_a_nan_p_is_no_paired_test():
    assert two(math.nan).p_holm is None


def test_values_equal_at_the_shown_precision_are_a_tie_however_small_p():
    d = two(0.001, a=0.6001, b=0.6004)
    assert d.equal and d.tie and not d.pick
    assert d.verdict() == "tie (equal): no leader"
    assert shown(d)[1][f"first {MINUS} second [95%]"] == "+0.000 (equal)"
    assert not two(0.001, a=0.600, b=0.599).equal


def test_no_study_leaves_every_difference_out_and_says_so():
    rows = (run("ra", "alpha_m", 0.60, 0.55, 0.65), run("rb", "beta_m", 0.40, 0.35, 0.45))
    built = summary.leader_table(runs_of(*rows), None)
    (table,) = built.tables
    assert built.notes == ["summary: no paired differences (--no-paired): every lead is marked 'tie? (no paired test)'"]
    shown = table.text.iloc[0]
    assert shown[f"first {MINUS} second [95%]"] == "–" and shown["p (Holm)"] == "–"
    record = table.data.iloc[0]
    assert math.isnan(record["difference"]) and math.isnan(record["lo"]) and math.isnan(record["p_holm"])
    assert record["leader"] is None and record["tie"]
    assert summary.bottom_lines(summary.decisions(runs_of(*rows)))[0].startswith(
        "bench: no model is better on these questions (mcqa: alpha_m 0.600, beta_m 0.400, no paired test); "
    )


def test_a_condition_with_one_model_or_no_common_headline_has_no_decision():
    one = runs_of(run("ra", "alpha_m", 0.6), run("rb", "alpha_m", 0.5))
    assert summary.decisions(one) == []
    assert summary.leader_table(one).tables == [] and summary.leader_table(one).notes == []
    partial = runs_of(run("ra", "alpha_m", 0.6), {"run_id": "rb", "model": "beta_m", "benchmark": "bench"})
    assert summary.decisions(partial) == []


def test_each_benchmark_and_condition_gets_its_own_decision_named_with_its_condition():
    rows = [
        run(f"r{m}{t}", m, v + t / 10, temperature=t)
        for m, v in (("alpha_m", 0.5), ("beta_m", 0.3))
        for t in (0.0, 1.0)
    ]
    found = summary.decisions(runs_of(*rows))
    assert [(d.where, d.first["model"]) for d in found] == [("bench (T=0.0)", "alpha_m"), ("bench (T=1.0)", "alpha_m")]
    assert [d.label for d in found] == ["T=0.0", "T=1.0"]
    assert summary.leader_table(runs_of(*rows)).tables[0].text.index.tolist() == ["bench (T=0.0)", "bench (T=1.0)"]
    assert summary.leader_table(runs_of(*rows)).tables[0].text.index.name == "benchmark"


def test_the_latest_run_of_a_model_is_the_one_judged():
    rows = (run("old", "alpha_m", 0.1), run("rb", "beta_m", 0.4), run("new", "alpha_m", 0.7))
    d = one_decision(*rows)
    assert [r["run_id"] for r in d.ranked] == ["new", "rb"]


def test_no_pick_where_every_model_is_at_or_below_chance_however_small_p():
    rows = (
        run("ra", "alpha_m", 0.26, 0.20, 0.32),  # interval holds chance 0.25
        run("rb", "beta_m", 0.10, 0.05, 0.15),  # below it
    )
    study = study_of({("ra", "rb"): difference(0.26, 0.10, 0.08, 0.24)}, {("ra", "rb"): 0.001})
    d = one_decision(*rows, study=study)
    assert d.none_above and not d.tie and not d.pick
    assert d.verdict() == "no pick: neither model above chance"
    assert d.bottom_line(delta=0.02, power=0.8) == (
        "bench: no pick: neither model is above chance on mcqa (alpha_m 0.260 [0.200, 0.320] indistinguishable "
        "from chance, beta_m 0.100 [0.050, 0.150] below chance; chance 0.250); "
        f"alpha_m {MINUS} beta_m +0.160 [+0.080, +0.240], p_holm 0.001."
    )
    assert shown(d)[0]["leader"] is None and shown(d)[0]["none_above_chance"]


def test_no_pick_with_three_models_says_no_model_and_lists_every_chance_level():
    rows = (
        run("ra", "alpha_m", 0.26, 0.20, 0.32),
        run("rb", "beta_m", 0.20, 0.15, 0.25, chance=0.2),
        run("rc", "gamma_m", 0.10, 0.05, 0.15),
    )
    d = one_decision(*rows)
    assert d.models == "no model"
    assert d.verdict() == "no pick: no model above chance"
    line = d.bottom_line(delta=0.02, power=0.8)
    assert line.startswith("bench: no pick: no model is above chance on mcqa (alpha_m ")
    assert "; chance 0.200, 0.250); no paired test." in line


def test_one_model_above_chance_is_enough_to_allow_a_pick():
    rows = (run("ra", "alpha_m", 0.60, 0.55, 0.65), run("rb", "beta_m", 0.10, 0.05, 0.15))
    study = study_of({("ra", "rb"): difference(0.60, 0.10, 0.4, 0.6)}, {("ra", "rb"): 0.001})
    d = one_decision(*rows, study=study)
    assert not d.none_above and d.pick
    assert d.bottom_line(delta=0.02, power=0.8).endswith("; alpha_m above chance, beta_m below chance on mcqa.")
    assert d.chance_cell() == "alpha_m above, beta_m below"


def test_a_model_without_an_interval_is_undecided_and_blocks_no_pick():
    rows = (run("ra", "alpha_m", 0.26, 0.20, 0.32), run("rb", "beta_m", 0.10))
    d = one_decision(*rows)
    assert d.chance_verdicts() == [("alpha_m", "indistinguishable from chance"), ("beta_m", summary.UNDECIDED)]
    assert not d.none_above  # an undecided model might be above chance
    assert d.chance_cell() == "alpha_m indistinguishable, beta_m undecided"
    assert d.chance_text() == (
        "alpha_m indistinguishable from chance, beta_m undecided against chance (no interval or no chance level "
        "logged) on mcqa"
    )


def test_every_model_at_chance_is_said_once():
    rows = (run("ra", "alpha_m", 0.26, 0.20, 0.32), run("rb", "beta_m", 0.24, 0.18, 0.30))
    d = one_decision(*rows)
    assert d.chance_text() == "every model is indistinguishable from chance on mcqa"
    assert d.chance_cell() == "alpha_m indistinguishable, beta_m indistinguishable"


def test_runs_with_an_invalid_share_above_the_flag_are_named_and_others_not():
    d = two(0.004, invalid=(0.10, 0.35))
    assert d.bottom_line(delta=0.02, power=0.8).endswith("; INVALID share above 0.10 (counted wrong): beta_m 0.35.")
    assert "counted wrong): alpha_m" not in d.bottom_line(delta=0.02, power=0.8)  # 0.10 is not above the flag
    assert "INVALID share" not in two(0.004, invalid=(0.10, 0.10)).bottom_line(delta=0.02, power=0.8)


def test_a_lead_mostly_from_the_runner_ups_invalid_answers_is_said_beside_the_pick():
    # counted: 0.60 − 0.40 = 0.20; parsed: 0.60 / 1 = 0.60 vs 0.40 / 0.5 = 0.80: the leader is behind on what
    # each parsed, so the lead is all from the runner-up's INVALID answers
    d = two(0.004, invalid=(0.0, 0.5))
    assert d.invalid_lead() == (
        "the lead comes mostly from beta_m's INVALID answers (0.50 of its trials, counted wrong; alpha_m 0.00): "
        "on the answers it parsed beta_m is right 0.80, alpha_m 0.60"
    )
    assert d.verdict() == "pick alpha_m (p < 0.05; lead mostly beta_m's INVALID)"
    assert d.bottom_line(delta=0.02, power=0.8).startswith(
        "bench: pick alpha_m (its lead on mcqa over beta_m is +0.200 [+0.100, +0.300], p_holm 0.004), though the "
        "lead comes mostly from beta_m's INVALID answers (0.50 of its trials"
    )


@pytest.mark.parametrize(
    ("invalid", "said"),
    [
        # parsed 0.60/0.9 = 0.667 vs 0.40/0.6 = 0.667: no lead on what each parsed, at most half of 0.20
        ((0.1, 0.4), True),
        # parsed 0.60 vs 0.40/0.8 = 0.50: a lead of 0.10, exactly half of 0.20 (at most half: said)
        ((0.0, 0.2), True),
        # parsed 0.60 vs 0.40/0.9 = 0.444: a lead of 0.156, more than half: the lead is the model's own
        ((0.0, 0.1), False),
        # the leader parsed fewer answers: its lead is not from the runner-up's INVALID answers
        ((0.5, 0.4), False),
        ((0.3, 0.3), False),
    ],
)
def test_the_invalid_lead_rule_is_half_the_counted_lead_on_what_each_model_parsed(invalid, said):
    assert bool(two(0.004, invalid=invalid).invalid_lead()) is said


def test_a_runner_up_that_parsed_no_answer_is_said_so():
    d = two(0.004, a=0.30, b=0.0, invalid=(0.0, 1.0))
    assert d.invalid_lead() == (
        "the lead comes mostly from beta_m's INVALID answers (1.00 of its trials, counted wrong; alpha_m 0.00): "
        "beta_m parsed no answer"
    )


def test_no_invalid_lead_without_a_lead_or_without_the_rates():
    assert two(0.004, a=0.5, b=0.5, invalid=(0.0, 0.5)).invalid_lead() == ""  # no lead
    rows = (run("ra", "alpha_m", 0.6, 0.55, 0.65), run("rb", "beta_m", 0.4, 0.35, 0.45, invalid=None))
    assert one_decision(*rows).invalid_lead() == ""  # the runner-up logged no INVALID share


def test_values_equal_at_the_shown_precision_are_no_lead_to_explain_by_invalid_answers():
    # 0.6004 vs 0.6001: a lead of 0.0003 that the runner-up's INVALID answers would explain, shown as 0.600 each
    d = two(0.004, a=0.6004, b=0.6001, invalid=(0.0, 0.5))
    assert d.equal and d.invalid_lead()
    assert d.bottom_line(delta=0.02, power=0.8) == (
        "bench: no model is better on these questions (mcqa: alpha_m 0.600, beta_m 0.600, p_holm 0.004); 1766 "
        "questions would tell a difference of 0.02 (power 0.8; these runs asked 50); every model is above chance on "
        "mcqa; INVALID share above 0.10 (counted wrong): beta_m 0.50."
    )


def test_a_no_pick_line_below_chance_names_the_invalid_cause_after_the_difference():
    rows = (
        run("ra", "alpha_m", 0.22, 0.16, 0.28),
        run("rb", "beta_m", 0.08, 0.04, 0.12, invalid=0.6),
    )
    d = one_decision(*rows)
    line = d.bottom_line(delta=0.02, power=0.8)
    assert "; chance 0.250); no paired test, and the lead comes mostly from beta_m's INVALID answers (0.60" in line
    assert line.endswith("; INVALID share above 0.10 (counted wrong): beta_m 0.60.")


def test_a_tie_says_how_many_questions_would_tell_a_difference_of_delta():
    d = two(0.3, sd=0.3, benchmark_size=5000)
    expected = QuestionsVerdict.of(50, 0.3, 5000, delta=0.05, alpha=0.05, power=0.9).sentence()
    assert d.bottom_line(delta=0.05, power=0.9) == (
        f"bench: no model is better on these questions (mcqa: alpha_m 0.600, beta_m 0.400, p_holm 0.300); {expected}; "
        "every model is above chance on mcqa."
    )
    assert expected.startswith(f"{QuestionsVerdict.of(50, 0.3, 5000, delta=0.05, power=0.9).needed} questions would")


def test_the_questions_needed_are_capped_by_the_smaller_benchmark_size_and_use_alpha():
    rows = (
        run("ra", "alpha_m", 0.60, 0.55, 0.65, benchmark_size=80),
        run("rb", "beta_m", 0.40, 0.35, 0.45, benchmark_size=90),
    )
    study = study_of({("ra", "rb"): difference(0.60, 0.40, 0.1, 0.3)}, {("ra", "rb"): 0.02})
    d = one_decision(*rows, study=study, alpha=0.01)
    expected = QuestionsVerdict.of(50, 0.3, 80, delta=0.02, alpha=0.01, power=0.8).sentence()
    assert expected.startswith("no number of its 80 questions")
    assert f"p_holm 0.020); {expected}; every model" in d.bottom_line(delta=0.02, power=0.8)


def test_the_questions_needed_are_not_capped_without_a_known_size():
    d = two(0.3)
    expected = QuestionsVerdict.of(50, 0.3, None, delta=0.02, power=0.8).sentence()
    assert f"p_holm 0.300); {expected}; every model" in d.bottom_line(delta=0.02, power=0.8)


@pytest.mark.parametrize("sd", [0.0, None])
def test_a_difference_without_variation_gives_no_question_count(sd):
    line = two(0.3, sd=sd).bottom_line(delta=0.02, power=0.8)
    assert line == (
        "bench: no model is better on these questions (mcqa: alpha_m 0.600, beta_m 0.400, p_holm 0.300); "
        "every model is above chance on mcqa."
    )


def test_the_summary_table_holds_the_decision_in_numbers_and_in_words():
    d = two(0.004, invalid=(0.0, 0.5))
    built = summary.leader_table(runs_of(), PairedStudy(), found=[d])
    (table,) = built.tables
    assert table.name == "summary" and built.notes == []
    assert table.data.to_dict("records") == [
        {
            "benchmark": "bench",
            "condition": "",
            "metric": "mcqa",
            "models": 2,
            "leader": "alpha_m",
            "first": "alpha_m",
            "first_value": 0.60,
            "first_run": "ra",
            "second": "beta_m",
            "second_value": 0.40,
            "second_run": "rb",
            "difference": pytest.approx(0.2, abs=1e-12),
            "lo": 0.10,
            "hi": 0.30,
            "p_holm": 0.004,
            "tie": False,
            "none_above_chance": False,
            "vs_chance": "alpha_m above, beta_m above",
        }
    ]
    assert table.text.to_dict("records") == [
        {
            "metric": "mcqa",
            "first": "alpha_m 0.600 [0.550, 0.650]",
            "second": "beta_m 0.400 [0.350, 0.450]",
            f"first {MINUS} second [95%]": "+0.200 [+0.100, +0.300]",
            "p (Holm)": "0.004",
            "verdict": "pick alpha_m (p < 0.05; lead mostly beta_m's INVALID)",
            "vs chance": "alpha_m above, beta_m above",
        }
    ]
    assert (
        table.caption.startswith("the headline of a condition is acc mean")
        and "a tie, naming no leader, where that p is not below 0.05;" in table.caption
    )
    assert table.caption.endswith(summary.AT_CHANCE_NOTE)


def test_a_difference_without_an_interval_has_none_in_the_table():
    d = two(0.004, lo=None, hi=None)
    record = shown(d)[0]
    assert math.isnan(record["lo"]) and math.isnan(record["hi"])
    assert record["difference"] == pytest.approx(0.2, abs=1e-12)
    assert shown(d)[1][f"first {MINUS} second [95%]"] == "+0.200"


def test_a_model_whose_interval_holds_chance_is_marked_in_the_table():
    rows = (run("ra", "alpha_m", 0.60, 0.55, 0.65), run("rb", "beta_m", 0.26, 0.20, 0.32))
    text = shown(one_decision(*rows))[1]
    assert text["first"] == "alpha_m 0.600 [0.550, 0.650]"
    assert text["second"] == "beta_m 0.260 [0.200, 0.320] †"


def test_the_p_value_is_the_pairs_own_on_the_headline_among_every_row_of_the_paired_tables():
    """The paired table holds every pair and metric of the condition: the summary's p is the one row of this pair
    (in either order) and this metric, whatever comes before it."""
    rows = (
        run("ra", "alpha_m", 0.60, 0.55, 0.65),
        run("rb", "beta_m", 0.40, 0.35, 0.45),
        run("rc", "gamma_m", 0.30, 0.25, 0.35),
    )
    found = difference(0.60, 0.40, 0.1, 0.3)
    other = {
        "accuracy": {"metric": "accuracy", "run_a": "ra", "run_b": "rb", "p_holm": 0.9},  # same pair, other metric
        "a_c": {"metric": "mcqa", "run_a": "ra", "run_b": "rc", "p_holm": 0.8},  # shares the leader as run_a
        "b_c": {"metric": "mcqa", "run_a": "rb", "run_b": "rc", "p_holm": 0.7},  # shares the runner-up as run_a
        "c_b": {"metric": "mcqa", "run_a": "rc", "run_b": "rb", "p_holm": 0.6},  # shares the runner-up as run_b
    }
    data = pd.DataFrame([*other.values(), {"metric": "mcqa", "run_a": "rb", "run_b": "ra", "p_holm": 0.004}])
    empty = Table(title="paired", data=data.iloc[0:0], text=data.iloc[0:0], name="paired_other")
    table = Table(title="paired", data=data, text=data.astype(str), name="paired_bench")
    study = PairedStudy(differences=Built(tables=[empty, table]), results={("ra", "rb"): {"mcqa": found}})
    d = one_decision(*rows, study=study)
    assert d.p_holm == pytest.approx(0.004, abs=1e-12)
    assert d.verdict() == "pick alpha_m (p < 0.05)"


def test_the_default_alpha_is_five_percent():
    rows = (run("ra", "alpha_m", 0.60, 0.55, 0.65), run("rb", "beta_m", 0.40, 0.35, 0.45))
    pair = {("ra", "rb"): difference(0.60, 0.40, 0.1, 0.3)}
    (tie,) = summary.decisions(runs_of(*rows), study_of(pair, {("ra", "rb"): 0.06}))
    (pick,) = summary.decisions(runs_of(*rows), study_of(pair, {("ra", "rb"): 0.04}))
    assert tie.verdict() == "tie (p ≥ 0.05): no leader" and pick.verdict() == "pick alpha_m (p < 0.05)"


def test_a_benchmark_with_one_model_does_not_hide_the_benchmarks_after_it():
    rows = (
        run("r0", "alpha_m", 0.6, benchmark="a_bench"),  # sorted first, one model: no decision
        run("ra", "alpha_m", 0.6),
        run("rb", "beta_m", 0.4),
    )
    assert [d.where for d in summary.decisions(runs_of(*rows))] == ["bench"]


def test_bottom_lines_size_a_tie_with_a_two_point_delta_at_eighty_percent_power_by_default():
    (line,) = summary.bottom_lines([two(0.3)])
    expected = QuestionsVerdict.of(50, 0.3, None, delta=0.02, alpha=0.05, power=0.8).sentence()
    assert f"; {expected}; " in line and "of 0.02 (power 0.8;" in expected
    (line,) = summary.bottom_lines([two(0.3)], delta=0.05, power=0.9)
    assert "of 0.05 (power 0.9;" in line


def test_the_summary_table_made_from_the_runs_and_the_study_holds_the_studys_difference():
    rows = (run("ra", "alpha_m", 0.60, 0.55, 0.65), run("rb", "beta_m", 0.40, 0.35, 0.45))
    study = study_of({("ra", "rb"): difference(0.60, 0.40, 0.1, 0.3)}, {("ra", "rb"): 0.03})
    built = summary.leader_table(runs_of(*rows), study, alpha=0.01)
    (table,) = built.tables
    assert built.notes == []
    assert table.text.iloc[0][f"first {MINUS} second [95%]"] == "+0.200 [+0.100, +0.300]"
    assert table.text.iloc[0]["verdict"] == "tie (p ≥ 0.01): no leader"  # alpha reaches the decisions
    assert table.title == "the first two models per benchmark"
    assert table.caption == (
        f"{summary.HEADLINE_RULE}; per benchmark and condition the models ranked by it with its 95% interval; the "
        f"paired difference first {MINUS} second on the same questions and the same metric, with its paired "
        "bootstrap 95% interval and its p-value Holm-adjusted over the differences of that condition's table "
        "(section Paired differences); a tie, naming no leader, where that p is not below 0.01; no pick where "
        "every model is at or below chance on the headline; vs chance: every model of the condition (in rank "
        "order) against the chance level of its headline: above it, indistinguishable from it (its interval "
        f"contains chance) or below it; {summary.AT_CHANCE_NOTE}"
    )


def test_every_run_above_the_invalid_flag_is_named_in_rank_order():
    rows = (
        run("ra", "alpha_m", 0.60, 0.55, 0.65),
        run("rb", "beta_m", 0.40, 0.35, 0.45, invalid=0.35),
        run("rc", "gamma_m", 0.30, 0.25, 0.35, invalid=0.40),
    )
    line = one_decision(*rows).bottom_line(delta=0.02, power=0.8)
    assert line.endswith("; INVALID share above 0.10 (counted wrong): beta_m 0.35, gamma_m 0.40.")


def test_a_run_without_a_chance_level_is_undecided_against_chance():
    rows = (run("ra", "alpha_m", 0.60, 0.55, 0.65), run("rb", "beta_m", 0.40, 0.35, 0.45, chance=None))
    d = one_decision(*rows)
    assert d.chance_verdicts() == [("alpha_m", "above chance"), ("beta_m", summary.UNDECIDED)]
    assert d.chance_cell() == "alpha_m above, beta_m undecided"
