"""Property tests over the metric registry: row order, question relabelling, bounds, NaN handling, imports."""

import math
import pkgutil
import subprocess
import sys

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import src.metrics
import src.variants
from src.core.records import write_records
from src.metrics import METRIC_FAMILIES, compute_metrics

from .conftest import REPO, examples
from .records_factory import cyclic_orders, permuted, records, trial

SHARE_SUFFIXES = (
    "fr",
    "aacc",
    "sacc",
    "wacc",
    "bacc",
    "sensg",
    "one_minus_sensg",
    "prob_mass",
    "one_minus_entropy",
    "pride_acc",
    "full_fr",
)
SHARES = {
    "invalid_rate",
    "accuracy",
    "mcqa",
    "mcqa_plus",
    "mv",
    "ci",
    "cora",
    "sure_right",
    "unsure_right",
    "unsure_wrong",
    "sure_wrong",
    "rws",
    "st",
    "acc_mean",
}
# PriDe draws its calibration questions from the sorted ids, by design, and so its prior too
ID_DEPENDENT = ("pride_acc@", "pride_prior_")


def without_slot_bounds(metrics: dict) -> dict:
    """The metrics but the slot shares' bounds and the flag read from them: where a question gave several choices
    the bounds come from a cluster bootstrap, whose draws follow the sorted question ids (the shares themselves do
    not), so a lower bound right at the margin may fall either side of it once the ids change."""
    return {
        k: v
        for k, v in metrics.items()
        if not (k.startswith("slot_share_") and k.endswith(("_lo", "_hi"))) and k != "slot_bias_flag"
    }


@st.composite
def run_records(draw):
    n_questions = draw(st.integers(1, 5))
    kinds = draw(
        st.sampled_from(
            [
                ("original",),
                ("original", "shuffled"),
                ("original", "nota", "shuffled"),
                ("shuffled",),
                ("nota", "shuffled"),
            ]
        )
    )
    n_repetitions = draw(st.integers(1, 4))
    answer = st.one_of(st.none(), st.integers(0, 3))
    rows = []
    for q in range(n_questions):
        correct, subject = draw(st.integers(0, 3)), draw(st.sampled_from(["law", "art", None]))
        for kind in kinds:
            order = tuple(draw(st.permutations(range(4))))
            for r in range(n_repetitions):
                rows.append(
                    trial(
                        f"q{q}",
                        kind=kind,
                        order=order,
                        correct_option=correct,
                        answer=draw(answer),
                        repetition=r,
                        subject=subject,
                    )
                )
    if draw(st.booleans()):  # permutation sets with label probabilities
        for q in range(n_questions):
            correct = draw(st.integers(0, 3))
            for perm_set, orders in (("oi", [(0, 1, 2, 3), (3, 2, 1, 0)]), ("cyclic", cyclic_orders(4))):
                answers = [draw(answer) for _ in orders]
                probs = [draw(st.lists(st.floats(0.01, 1.0), min_size=4, max_size=4)) for _ in orders]
                rows += permuted(f"q{q}", perm_set, orders, answers, correct_option=correct, probs=probs)
    return records(rows)


def same(a: dict, b: dict, skip=()) -> None:
    keys = {k for k in a if not k.startswith(skip)}
    assert keys == {k for k in b if not k.startswith(skip)}
    for k in keys:
        if math.isnan(a[k]):
            assert math.isnan(b[k]), k
        else:
            assert b[k] == pytest.approx(a[k], rel=1e-9, abs=1e-12), k


def all_metrics(table):
    return compute_metrics(table, bootstrap=True, n_resamples=50, k_slots=7, seed=0)


FAST = settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FAST
@given(run_records(), st.randoms(use_true_random=False))
def test_invariant_to_row_order_and_to_relabelling_questions(table, rnd):
    """Both transformations of each drawn table, against one computation of its metrics (3 computations, not 4)."""
    metrics = all_metrics(table)
    shuffled = table.sample(frac=1, random_state=rnd.randint(0, 2**31)).reset_index(drop=True)
    same(metrics, all_metrics(shuffled))
    ids = sorted(table["question_id"].unique())
    new = [f"x{i:03d}" for i in rnd.sample(range(1000), len(ids))]
    relabelled = table.assign(question_id=table["question_id"].map(dict(zip(ids, new))))
    same(without_slot_bounds(metrics), without_slot_bounds(all_metrics(relabelled)), skip=ID_DEPENDENT)


@FAST
@given(run_records())
def test_bounds_and_nan_handling(table):
    m = all_metrics(table)
    for name, value in m.items():
        assert isinstance(value, float), name
        if math.isnan(value):
            assert name == "rws" and m["st"] == 0.0, name  # the only unknown a family reports is RWS with nothing SURE
            continue
        base = name.split("@")[0]
        if name in SHARES or base in SHARE_SUFFIXES or name.startswith("bmca_") or name.endswith("_boot_mean"):
            assert -1e-12 <= value <= 1 + 1e-12, name
        if base == "one_minus_brier":
            assert -1 - 1e-12 <= value <= 1 + 1e-12, name
        if name.endswith("_std"):
            assert value >= 0, name


@FAST
@given(run_records())
def test_internal_orderings(table):
    m = compute_metrics(table)
    if "sure_right" in m:
        assert sum(m[k] for k in ("sure_right", "unsure_right", "unsure_wrong", "sure_wrong")) == pytest.approx(1.0)
        assert m["st"] == pytest.approx(m["sure_right"] + m["sure_wrong"])
    if "mcqa_plus" in m:
        levels = [m[f"bmca_{c}"] for c in ("0.5", "0.6", "0.7", "0.8", "0.9", "1.0")]
        assert levels == sorted(levels, reverse=True)
        assert m["mv"] <= m["bmca_0.5"]
    if "cora" in m:
        assert m["bmca_1.0"] <= m["mcqa"] + 1e-12  # the original is in every divergent set
        assert m["cora"] <= m["mcqa"] + 1e-12
    for perm_set in ("oi", "cyclic"):
        if f"wacc@{perm_set}" in m:
            w, s, a, b = (m[f"{k}@{perm_set}"] for k in ("wacc", "sacc", "aacc", "bacc"))
            assert w <= s + 1e-12 and s <= a + 1e-12 and a <= b + 1e-12
            assert m[f"sensg@{perm_set}"] == pytest.approx(b - w)


@pytest.mark.parametrize("family", sorted(METRIC_FAMILIES))
def test_every_family_gives_nothing_for_empty_records(family):
    assert METRIC_FAMILIES[family](records([])) == {}


def test_unknown_family_or_option_is_refused_with_the_choices():
    table = records([trial("q1")])
    with pytest.raises(ValueError, match="choose from"):
        compute_metrics(table, families=["nope"])
    with pytest.raises(TypeError, match="consistncy"):
        compute_metrics(table, consistncy=0.9)
    with pytest.raises(ValueError, match="correct"):
        compute_metrics(table.drop(columns=["correct"]))


def test_empty_records_report_counts_and_unknown_rates():
    m = compute_metrics(records([]))
    assert m["n_questions"] == 0 and m["n_trials"] == 0
    assert math.isnan(m["invalid_rate"]) and math.isnan(m["accuracy"])


def test_all_invalid_run():
    table = records([trial("q1", answer=None), trial("q2", answer=None)])
    m = compute_metrics(table)
    assert m["invalid_rate"] == 1.0 and m["accuracy"] == 0.0 and m["mcqa"] == 0.0


@pytest.mark.slow
def test_pure_packages_import_no_heavy_frameworks():
    """Importing metrics, variants, parsing, prompts and records, in a fresh interpreter, loads no hydra, mlflow
    or torch (an import anywhere in their import chain counts, as it would for a user)."""
    modules = [
        "src.metrics",
        "src.variants",
        "src.core.parsing",
        "src.core.prompts",
        "src.core.records",
        *(
            f"{package.__name__}.{m.name}"
            for package in (src.metrics, src.variants)
            for m in pkgutil.iter_modules(package.__path__)
        ),
    ]
    code = (
        f"import importlib, sys\nfor m in {modules!r}: importlib.import_module(m)\n"
        "print(' '.join(h for h in ('hydra', 'omegaconf', 'mlflow', 'torch') if h in sys.modules))"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert proc.stdout.split() == []


def test_records_frame_roundtrip_keeps_metrics(tmp_path):
    """Metrics recomputed from the logged parquet equal the in-memory ones (lists come back as arrays)."""
    pytest.importorskip("pyarrow")
    table = records(
        permuted("q1", "oi", [(0, 1, 2, 3), (3, 2, 1, 0)], [0, 3], probs=[[0.7, 0.1, 0.1, 0.1]] * 2)
        + [trial("q1", kind="original"), trial("q1", kind="nota", variant_id="nota_1", answer=None)]
    )
    same(compute_metrics(table), compute_metrics(pd.read_parquet(write_records(table, tmp_path))))
