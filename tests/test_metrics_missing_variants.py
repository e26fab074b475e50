"""Metrics when the option_refs policy left some variants out for some questions (plan_variants): each family
computes over the questions that have the variants it needs, and none crashes."""

import pytest

from src.core.questions import Question
from src.metrics import compute_metrics, cora_bootstrap, cora_metrics, fluctuation_metrics, pride_acc, revas_metrics
from src.variants import plan_variants

from .records_factory import cyclic_orders, permuted, records, trial
from .test_metrics_revas import reorder


def test_cora_family_with_a_shorter_divergent_set():
    full = [trial("q1", answer=0, kind="original", variant_id="original")] + [
        trial("q1", answer=0 if j else 1, kind="nota", variant_id=f"nota_{j}") for j in range(3)
    ]  # rc 3/4
    short = [
        trial("q2", answer=0, kind="original", variant_id="original"),
        trial("q2", answer=0, kind="shuffled", variant_id="shuffled_0"),
    ]  # everything else left out: rc 1
    m = cora_metrics(records(full + short))
    assert m["mcqa"] == 1.0 and m["mcqa_plus"] == pytest.approx((0.75 + 1.0) / 2)
    assert m["bmca_1.0"] == 0.5 and m["ci"] == 0.5 and m["cora"] == 0.5
    boot = cora_bootstrap(records(full + short), n_resamples=200, k_slots=10)
    assert 0.75 <= boot["mcqa_plus_boot_mean"] <= 1.0


def test_cora_family_on_planned_variants():
    """A run where one question keeps all 20 CoRA variants and one ("None of the above") keeps 6."""
    plain = Question(id="plain", question="?", options=("a", "b", "c", "d"), answer=1)
    nota = Question(id="nota", question="?", options=("a", "b", "c", "None of the above"), answer=1)
    rows = []
    for question in (plain, nota):
        for v in plan_variants({"name": "cora"}, question, seed=0).variants:
            rows.append(
                trial(
                    question.id,
                    answer=question.answer,
                    kind=v.kind,
                    variant_id=v.variant_id,
                    order=[o if o >= 0 else 9 for o in v.option_order],
                    correct_option=question.answer,
                )
            )
    table = records(rows)
    assert table.groupby("question_id").size().to_dict() == {"nota": 6, "plain": 20}
    m = compute_metrics(table)
    assert m["mcqa"] == m["mcqa_plus"] == m["bmca_1.0"] == m["cora"] == 1.0


def test_revas_with_missing_orders_and_levels():
    rows = (
        reorder("q1", [0, 0, 1, 0])  # four orders: sc 3/4, not right in all
        + reorder("q2", [0, 0], orders=[(0, 1, 2, 3), (0, 1, 3, 2)])  # two free options: two orders, sc 1
        + reorder("q3", [1])  # every slot fixed: its one order says nothing about consistency
        + reorder(
            "q1",
            [0, 0, 0],
            orders=[(0, 1, 2), (2, 1, 0), (1, 0, 2)],
            level=3,
            kind="fewer_options",
            prefix="fewer_options_3",
        )
        + reorder("q2", [2, 0], orders=[(0, 2, 1), (1, 2, 0)], level=3, kind="fewer_options", prefix="fewer_options_3")[
            1:
        ]  # its reference order _0 was left out
        + reorder("q1", [0, 0, 0, 0], kind="nota_replaces_correct", prefix="nota_replaces_correct")
    )
    for row in rows:
        if row["variant_kind"] == "nota_replaces_correct":
            row["correct"] = True
    m = revas_metrics(records(rows))
    assert m["sc_mean"] == pytest.approx((0.75 + 1.0) / 2)  # q3 left out
    assert m["acc_h"] == 0.5
    assert m["sc_bin_3_of_4_share"] == 1.0 and m["sc_bin_2_of_2_share"] == 1.0
    assert "sc_bin_1_of_1_share" not in m
    assert m["acc@3"] == 1.0  # q1 only: q2 has no reference order at level 3
    assert m["sc_mean@3"] == 1.0  # q1's three orders; q2's one order is left out of consistency
    assert m["nota_acc"] == m["nota_acc_h"] == 1.0  # only q1 was asked the NOTA set


def test_revas_with_k_one_keeps_every_question():
    m = revas_metrics(
        records(
            reorder("q1", [0], prefix="more_options_6", kind="more_options", level=6)
            + reorder("q2", [1], prefix="more_options_6", kind="more_options", level=6)
        )
    )
    assert m["acc@6"] == 0.5 and m["sc_mean@6"] == 1.0


def test_fluctuation_with_missing_members():
    rows = (
        permuted("q1", "cyclic", cyclic_orders(4), [0, 0, 0, 1])  # all four rotations: fr 1
        + permuted("q2", "cyclic", [(0, 1, 2, 3), (1, 2, 0, 3), (2, 0, 1, 3)], [0, 0, 0])  # three free options
        + permuted("q3", "cyclic", [(0, 1, 2, 3)], [2])  # one order: cannot fluctuate, left out
        + permuted("q4", "cyclic", cyclic_orders(4), [1, 1, 1, 1])[1:]
    )  # reference order missing: left out
    m = fluctuation_metrics(records(rows))
    assert m["fr@cyclic"] == 0.5 and m["wacc@cyclic"] == 0.5 and m["aacc@cyclic"] == pytest.approx((0.75 + 1) / 2)
    single = fluctuation_metrics(
        records(permuted("q1", "original", [(0, 1, 2, 3)], [0]) + permuted("q2", "original", [(0, 1, 2, 3)], [1]))
    )
    assert single["fr@original"] == 0.0 and single["aacc@original"] == 0.5  # a one-order set keeps its questions


def test_pride_calibrates_on_full_cycles_only():
    def probs(order, favourite):
        return [0.7 if o == favourite else 0.1 for o in order]

    rows = []
    for i in range(30):
        orders = cyclic_orders(4) if i % 3 else [(0, 1, 2, 3), (1, 2, 0, 3), (2, 0, 1, 3)]
        rows += permuted(f"q{i:02d}", "cyclic", orders, [0] * len(orders), probs=[probs(o, 0) for o in orders])
    rows += permuted("q99", "cyclic", cyclic_orders(4), [0] * 4, probs=[probs(o, 0) for o in cyclic_orders(4)])[1:]
    table = records(rows)
    assert pride_acc(table) == 1.0  # no crash; q99 (no reference order) is not scored
    assert "pride_acc@cyclic" in fluctuation_metrics(table)
    only_partial = records([r for r in rows if int(r["question_id"][1:]) % 3 == 0 and r["question_id"] != "q99"])
    assert "pride_acc@cyclic" not in fluctuation_metrics(only_partial)  # no full cycle to estimate a prior from
