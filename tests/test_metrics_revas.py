"""REVAS metrics on hand-computed record tables, the perm_sets explosion, per-subject names and properties."""

import math

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from src.core.records import write_records
from src.metrics import applicable_families, compute_metrics, revas_metrics, sc_distribution, tidy_permutations

from .conftest import examples
from .records_factory import cyclic_orders, permuted, records, trial

ORDERS4 = [(0, 1, 2, 3), (1, 2, 3, 0), (3, 2, 1, 0), (2, 0, 3, 1)]


def reorder(qid, answers, *, correct=0, orders=ORDERS4, level=None, kind="reorder", prefix="reorder", subject=None):
    """One question's orders: position 0 is the original (kind `original`) unless `kind` names a leveled set."""
    return [
        trial(
            qid,
            answer=a,
            kind=("original" if j == 0 and kind == "reorder" else kind),
            variant_id=f"{prefix}_{j}",
            order=order,
            correct_option=correct,
            variant_level=level,
            subject=subject,
        )
        for j, (order, a) in enumerate(zip(orders, answers))
    ]


def tf_row(qid, asked, says, *, correct=0, p_yes=None, subject=None):
    """A true/false trial about option `asked`; `says` is "Yes", "No" or None (INVALID)."""
    row = trial(
        qid,
        answer=asked,
        kind="true_false",
        variant_id=f"true_false_{asked}",
        order=(asked,),
        correct_option=asked,
        subject=subject,
    )
    expected = "Yes" if asked == correct else "No"
    row.update(
        fmt="true_false",
        asked_option=asked,
        correct_option=correct,
        correct_label=expected,
        parsed_label=says,
        raw_output=says or "??",
        correct=says == expected,
        chosen_option=asked if says == "Yes" else None,
        n_options=1,
        label_probs=None if p_yes is None else [p_yes, 1 - p_yes],
    )
    return row


def multi_row(qid, named, *, correct=0, order=(0, 1, 2, 3)):
    """A select-all trial naming the original options `named` (None: INVALID)."""
    row = trial(qid, answer=None, kind="multi_select", variant_id="multi_select", order=order, correct_option=correct)
    labels = None if named is None else ["ABCD"[order.index(o)] for o in sorted(named, key=order.index)]
    row.update(
        fmt="multi_select",
        parsed_labels=labels,
        chosen_options=None if named is None else list(named),
        parsed_label=None if labels is None else ", ".join(labels),
        correct=named is not None and set(named) == {correct},
    )
    return row


def reorder_table():
    return records(
        reorder("q1", [0, 0, 0, 0])
        + reorder("q2", [0, 1, 0, 2])
        + reorder("q3", [1, 1, 1, 2])
        + reorder("q4", [0, 1, 2, 3])
        + reorder("q5", [None, None, 0, 1])
    )


@pytest.mark.promise("docs/metrics.md", "sc_mean, acc_h and the sc_bin distribution follow their definitions")
def test_sc_mean_acc_h_and_the_sc_distribution():
    m = compute_metrics(reorder_table())
    assert m["sc_mean"] == pytest.approx((1 + 0.5 + 0.75 + 0.25 + 0.5) / 5)
    assert m["acc_h"] == pytest.approx(1 / 5)
    assert m["mcqa"] == pytest.approx(3 / 5)  # the paper's Acc: the original order
    assert {k: m[k] for k in m if k.endswith("_share")} == pytest.approx(
        {"sc_bin_4_of_4_share": 0.2, "sc_bin_3_of_4_share": 0.2, "sc_bin_2_of_4_share": 0.4, "sc_bin_1_of_4_share": 0.2}
    )
    # bin accuracy: the unique most frequent answer is right; q5's mode is INVALID; no accuracy where nothing repeats
    assert m["sc_bin_4_of_4_acc"] == 1.0 and m["sc_bin_3_of_4_acc"] == 0.0 and m["sc_bin_2_of_4_acc"] == 0.5
    assert "sc_bin_1_of_4_acc" not in m
    assert "cora" not in m and applicable_families(reorder_table()) == ["mcqa", "revas", "slots"]


def test_a_tied_mode_is_not_a_right_mode():
    table = sc_distribution(records(reorder("q", [0, 0, 1, 1])))
    assert table.set_index("j").loc[2, "acc"] == 0.0


@pytest.mark.promise("docs/metrics.md", "acc@n, sc_mean@n and acc_h@n are computed per option count n")
def test_option_count_levels():
    orders6 = [(0, 1, 2, 3, -2, -2), (-2, 3, 2, 1, 0, -2), (1, 0, -2, 2, -2, 3)]
    rows = (
        reorder(
            "q1",
            [0, 0, 2],
            orders=[(0, 1, 2), (2, 0, 1), (1, 2, 0)],
            level=3,
            kind="fewer_options",
            prefix="fewer_options_3",
        )
        + reorder(
            "q2",
            [2, 0, 0],
            orders=[(0, 1, 2), (2, 0, 1), (1, 2, 0)],
            level=3,
            kind="fewer_options",
            prefix="fewer_options_3",
        )
        + reorder("q1", [0, 0], orders=[(0, 1), (1, 0)], level=2, kind="fewer_options", prefix="fewer_options_2")
        + reorder("q2", [0, 0], orders=[(0, 1), (1, 0)], level=2, kind="fewer_options", prefix="fewer_options_2")
        + reorder("q1", [-2, 0, 0], orders=orders6, level=6, kind="more_options", prefix="more_options_6")
    )
    m = revas_metrics(records(rows))
    assert m["acc@3"] == 0.5 and m["sc_mean@3"] == pytest.approx(2 / 3) and m["acc_h@3"] == 0.0
    assert m["acc@2"] == m["sc_mean@2"] == m["acc_h@2"] == 1.0
    assert m["acc@6"] == 0.0 and m["sc_mean@6"] == pytest.approx(2 / 3) and m["acc_h@6"] == 0.0  # a filler chosen first
    assert "sc_mean" not in m  # no base-level reorders in this table


@pytest.mark.promise(
    "docs/metrics.md", "nota_acc and nota_acc_h score NOTA as the answer once it replaced the right option"
)
def test_nota_replaces_correct():
    orders = [(1, 2, 3, -1), (-1, 3, 1, 2), (2, -1, 3, 1), (3, 1, -1, 2)]
    rows = []
    for qid, answers in (("q1", [-1] * 4), ("q2", [-1, 2, -1, -1]), ("q3", [1, -1, -1, -1])):
        rows += reorder(
            qid, answers, correct=-1, orders=orders, kind="nota_replaces_correct", prefix="nota_replaces_correct"
        )
    m = compute_metrics(records(rows))
    assert m["nota_acc"] == pytest.approx(2 / 3) and m["nota_acc_h"] == pytest.approx(1 / 3)


def tf_table(with_reorder=True):
    rows = []
    if with_reorder:
        rows += reorder("q1", [0, 0, 0, 0]) + reorder("q2", [0, 1, 0, 0]) + reorder("q3", [0, 0, 0, 0])
    rows += [
        tf_row("q1", 0, "Yes", p_yes=0.8),
        tf_row("q1", 1, "Yes", p_yes=0.6),
        tf_row("q1", 2, "No", p_yes=0.3),
        tf_row("q1", 3, "No", p_yes=0.2),
    ]
    rows += [
        tf_row("q2", 0, "No", p_yes=0.4),
        tf_row("q2", 1, "No", p_yes=0.3),
        tf_row("q2", 2, "No", p_yes=0.2),
        tf_row("q2", 3, "Yes", p_yes=0.5),
    ]
    rows += [
        tf_row("q3", 0, "Yes", p_yes=0.9),
        tf_row("q3", 1, "No", p_yes=0.1),
        tf_row("q3", 2, "No", p_yes=0.5),
        tf_row("q3", 3, "No", p_yes=0.2),
    ]
    return records(rows)


@pytest.mark.promise(
    "docs/metrics.md", "tf_correct_yes and tf_distractor_no on the sc = 1 subset, the _all names over every question"
)
def test_true_false_on_the_consistent_subset_and_on_all():
    m = compute_metrics(tf_table())
    # subset: q1 and q3 are right on every reorder (sc = 1 and right)
    assert m["tf_subset_share"] == pytest.approx(2 / 3)
    assert m["tf_correct_yes"] == 1.0 and m["tf_distractor_no"] == pytest.approx((2 / 3 + 1) / 2)
    assert m["tf_correct_yes_all"] == pytest.approx(2 / 3) and m["tf_distractor_no_all"] == pytest.approx(7 / 9)
    assert m["conf_correct"] == pytest.approx(0.85) and m["conf_distractor"] == pytest.approx(0.55)
    assert m["conf_ratio"] == pytest.approx(0.55 / 0.85)
    assert m["conf_correct_all"] == pytest.approx(0.7) and m["conf_distractor_all"] == pytest.approx(1.6 / 3)
    assert m["conf_ratio_all"] == pytest.approx((1.6 / 3) / 0.7)


def test_true_false_without_reorders_only_has_the_all_names():
    m = compute_metrics(tf_table(with_reorder=False))
    assert "tf_correct_yes" not in m and "tf_subset_share" not in m and "conf_correct" not in m
    assert m["tf_correct_yes_all"] == pytest.approx(2 / 3)
    no_probs = tf_table(with_reorder=False).assign(label_probs=None)
    assert "conf_correct_all" not in compute_metrics(no_probs)


def test_true_false_invalid_is_neither_yes_nor_no():
    m = revas_metrics(records([tf_row("q", 0, None), tf_row("q", 1, None), tf_row("q", 2, "No"), tf_row("q", 3, "No")]))
    assert m["tf_correct_yes_all"] == 0.0 and m["tf_distractor_no_all"] == pytest.approx(2 / 3)


@pytest.mark.promise(
    "docs/metrics.md", "multi_rate, recall_correct and recall_misleading on the questions first answered wrong"
)
def test_multi_select_on_originally_wrong_questions():
    rows = [
        trial("q1", answer=1),
        multi_row("q1", [0, 1]),
        trial("q2", answer=2),
        multi_row("q2", [2]),
        trial("q3", answer=0),
        multi_row("q3", [0, 3]),  # right originally: left out
        trial("q4", answer=None),
        multi_row("q4", [0, 1]),  # INVALID originally: no misleading option
        trial("q5", answer=3),
        multi_row("q5", None),
    ]
    m = compute_metrics(records(rows))
    assert m["multi_rate"] == pytest.approx(1 / 3)
    assert m["recall_correct"] == pytest.approx(1 / 3)
    assert m["recall_misleading"] == pytest.approx(2 / 3)
    assert m["mcqa"] == pytest.approx(1 / 5)
    assert revas_metrics(records([trial("q3", answer=0), multi_row("q3", [0])])) == {}


@pytest.mark.promise(
    "docs/metrics.md",
    "misleading_fix_rate is the share of wrong questions answered right once the chosen option is a filler",
)
def test_misleading_fix_rate():
    order = (0, -2, 2, 3)
    rows = [
        trial(q, answer=a, kind="misleading_replaced", variant_id="misleading_replaced", order=order, asked_option=1)
        for q, a in (("q1", 0), ("q2", 2), ("q3", None))
    ]
    m = compute_metrics(records(rows))
    assert m["misleading_fix_rate"] == pytest.approx(1 / 3)
    assert "mcqa" not in m


def memberships_table():
    """q1 on perm_all-style rows: the identity is in original, oi and cyclic; the others in one set each."""
    answers = {(0, 1, 2, 3): 0, (3, 2, 1, 0): 0, (1, 2, 3, 0): 2, (2, 3, 0, 1): 0, (3, 0, 1, 2): 1}
    members = {
        (0, 1, 2, 3): ["original:0", "oi:0", "cyclic:0"],
        (3, 2, 1, 0): ["oi:1"],
        (1, 2, 3, 0): ["cyclic:1"],
        (2, 3, 0, 1): ["cyclic:2"],
        (3, 0, 1, 2): ["cyclic:3"],
    }
    rows = [
        trial(
            "q1",
            answer=a,
            kind="permutation",
            variant_id="perm_" + "-".join(map(str, o)),
            order=o,
            perm_sets=members[o],
        )
        for o, a in answers.items()
    ]
    return records(rows), answers


def test_perm_sets_explode_into_the_tidy_rows_fluctuation_reads():
    table, answers = memberships_table()
    tidy = tidy_permutations(table)
    assert len(tidy) == 7 and sorted(tidy.perm_set.unique()) == ["cyclic", "oi", "original"]
    assert "fluctuation" in applicable_families(table)
    m = compute_metrics(table)
    expected = records(
        permuted("q1", "oi", [(0, 1, 2, 3), (3, 2, 1, 0)], [0, 0])
        + permuted("q1", "cyclic", cyclic_orders(4), [answers[o] for o in cyclic_orders(4)])
        + permuted("q1", "original", [(0, 1, 2, 3)], [0])
    )
    want = compute_metrics(expected, families=["fluctuation"])
    for name, value in want.items():
        if "@" in name:
            assert m[name] == pytest.approx(value), name
    assert m["fr@cyclic"] == 1.0 and m["wacc@oi"] == 1.0 and m["aacc@cyclic"] == 0.5
    assert m["n_trials"] == 5  # the explosion feeds the fluctuation family only


def test_records_without_memberships_have_no_fluctuation():
    assert "fluctuation" not in applicable_families(reorder_table())
    assert tidy_permutations(reorder_table()) is not None


def test_per_subject_headlines_with_mlflow_safe_names():
    rows = reorder("q1", [0, 0, 0, 0], subject="step1") + reorder("q2", [1, 0, 0, 0], subject="step2&3")
    m = compute_metrics(records(rows))
    assert m["acc_h/step1"] == 1.0 and m["acc_h/step2_3"] == 0.0
    assert m["mcqa/step1"] == 1.0 and m["sc_mean/step2_3"] == 0.75
    assert not any(k.startswith("sc_bin") and "/" in k for k in m)
    assert not any("/" in k for k in compute_metrics(records(rows), by_subjects=False))


def test_parquet_roundtrip_with_list_columns(tmp_path):
    table = pd.concat(
        [tf_table(), memberships_table()[0], records([trial("q1", answer=1), multi_row("q1", [0, 1])])],
        ignore_index=True,
    )
    a, b = compute_metrics(table), compute_metrics(pd.read_parquet(write_records(table, tmp_path)))
    assert a.keys() == b.keys()
    for k in a:
        assert b[k] == pytest.approx(a[k], nan_ok=True), k


@st.composite
def revas_records(draw):
    rows = []
    answer = st.one_of(st.none(), st.integers(0, 3))
    for i in range(draw(st.integers(1, 6))):
        correct = draw(st.integers(0, 3))
        rows += reorder(f"q{i}", [draw(answer) for _ in ORDERS4], correct=correct)
        for asked in range(4):
            rows.append(
                tf_row(
                    f"q{i}",
                    asked,
                    draw(st.sampled_from(["Yes", "No", None])),
                    correct=correct,
                    p_yes=draw(st.floats(0.01, 0.99)),
                )
            )
    return records(rows)


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(revas_records(), st.randoms(use_true_random=False))
def test_revas_bounds_orderings_and_row_order(table, rnd):
    m = revas_metrics(table)
    for name, value in m.items():
        assert isinstance(value, float) and not math.isnan(value), name
        if not name.startswith("conf_ratio"):
            assert 0.0 <= value <= 1.0, name
    assert m["acc_h"] <= m["sc_bin_4_of_4_share"] + 1e-12
    assert 0.25 <= m["sc_mean"] <= 1.0
    assert sum(m[f"sc_bin_{j}_of_4_share"] for j in range(1, 5)) == pytest.approx(1.0)
    shuffled = table.sample(frac=1, random_state=rnd.randint(0, 2**31)).reset_index(drop=True)
    assert revas_metrics(shuffled) == pytest.approx(m)
