"""The assessment protocol (R^2 tables) and the stability study, on hand-computed inputs."""

import itertools
import math
import random

import numpy as np
import pandas as pd
import pytest

from src.metrics import tidy_permutations
from src.metrics.assessment import markdown, points_from_runs, r2, r2_table, r2_wide, stability

from .records_factory import records, trial


@pytest.mark.promise("README.md", "src.assess fits each metric to full_fr and original accuracy (R^2)")
def test_r2_by_hand():
    x = np.array([0.0, 1.0, 2.0, 3.0])
    assert r2(x, 2 * x + 1) == pytest.approx(1.0)
    # cov = 1, var_x = 5, var_y = 1 (sums): R^2 = 1 / 5
    assert r2(x, np.array([0.0, 1.0, 0.0, 1.0])) == pytest.approx(0.2)
    assert r2(x, np.column_stack([2 * x + 1, [0.0, 1.0, 0.0, 1.0]])) == pytest.approx(0.6)  # the mean of the two


def points():
    return pd.DataFrame(
        {
            "model": list("abcd"),
            "benchmark": "b",
            "full_fr": [1.0, 3.0, 5.0, 7.0],
            "accuracy": [0.0, 1.0, 0.0, 1.0],
            "wacc@cyclic": [0.0, 1.0, 2.0, 3.0],
            "aacc@cyclic": [1.0, 0.0, 1.0, np.nan],
        }
    )


def test_r2_table_targets_and_missing_cells():
    table = r2_table(points(), sets=("cyclic", "oi"), metrics=("wacc", "aacc"), min_points=3)
    cell = table.set_index(["target", "perm_set", "metric"])["r2"]
    assert cell[("full_fr", "cyclic", "wacc")] == pytest.approx(1.0)
    assert cell[("accuracy", "cyclic", "wacc")] == pytest.approx(0.2)
    assert cell[("both", "cyclic", "wacc")] == pytest.approx(0.6)
    assert math.isnan(cell[("full_fr", "oi", "wacc")])  # not logged
    n = table.set_index(["target", "perm_set", "metric"])["n_points"]
    assert n[("full_fr", "cyclic", "aacc")] == 3  # the point without the metric is left out
    assert math.isnan(r2_table(points(), sets=("cyclic",), metrics=("wacc",), min_points=5)["r2"].iloc[0])
    wide = r2_wide(table)
    assert list(wide) == ["full_fr", "accuracy", "both"] and list(wide["both"].index) == ["cyclic", "oi"]
    text = markdown(wide["both"])
    assert text.splitlines()[0] == "| perm_set | wacc | aacc |" and "| oi | – | – |" in text


def test_points_merge_runs_and_pick_the_accuracy_target():
    runs = [
        {"model": "m", "benchmark": "b", "start_time": 2, "metrics": {"wacc@oi": 0.4}},
        {"model": "m", "benchmark": "b", "start_time": 1, "metrics": {"wacc@oi": 0.9, "mcqa": 0.7}},
        {"model": "n", "benchmark": "b", "start_time": 1, "metrics": {"aacc@original": 0.5, "mcqa": 0.1}},
    ]
    table = points_from_runs(runs).set_index("model")
    assert table.loc["m", "wacc@oi"] == 0.4 and table.loc["m", "accuracy"] == 0.7
    assert table.loc["n", "accuracy"] == 0.5


def full_records(answer_of):
    """perm_full rows for two 3-option questions; answer_of(question, order) -> chosen option."""
    rows = []
    for qid in ("q1", "q2"):
        for pos, order in enumerate(itertools.permutations(range(3))):
            rows.append(
                trial(
                    qid,
                    answer=answer_of(qid, order),
                    kind="permutation",
                    order=order,
                    correct_option=0,
                    variant_id="perm_" + "-".join(map(str, order)),
                    perm_sets=[f"full:{pos}"],
                )
            )
    return tidy_permutations(records(rows))


def test_stability_is_zero_for_a_model_that_never_fluctuates():
    table = stability(full_records(lambda q, o: 0), n_draws=10).set_index(["draw", "metric"])
    assert (table["std"] == 0).all()
    assert table.loc[("pairs", "aacc"), "mean"] == 1.0 and table.loc[("tuples", "fr"), "mean"] == 0.0


@pytest.mark.promise(
    "docs/metrics.md", "src.assess measures each metric's stability over random pairs and A-tuples of permutations"
)
def test_stability_matches_an_independent_reading():
    # q1 always right; q2 picks whatever its first slot shows

    def answer_of(q, order):
        return 0 if q == "q1" else order[0]

    table = stability(full_records(answer_of), n_draws=20, seed=5).set_index(["draw", "metric"])
    every = list(itertools.permutations(range(3)))
    for draw, size in (("pairs", 2), ("tuples", 3)):
        rng = random.Random(5)
        aacc, fr = [], []
        for _ in range(20):
            chosen = rng.sample(every, size)
            q2 = [order[0] for order in chosen]
            aacc.append((1.0 + np.mean([a == 0 for a in q2])) / 2)
            fr.append((0.0 + float(len(set(q2)) > 1)) / 2)
        assert table.loc[(draw, "aacc"), "std"] == pytest.approx(np.std(aacc, ddof=1))
        assert table.loc[(draw, "fr"), "std"] == pytest.approx(np.std(fr, ddof=1))
        assert table.loc[(draw, "aacc"), "mean"] == pytest.approx(np.mean(aacc))


def test_stability_needs_the_full_set():
    assert stability(records([trial("q1")]).assign(perm_set=None, perm_pos=None)).empty
