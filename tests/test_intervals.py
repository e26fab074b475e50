"""Intervals of the headline metrics (src/metrics/intervals.py): the per-question decompositions equal the family
functions (all weights 1, and one explicit resample), MCQA's interval covers and has the binomial width, the
off switch, determinism, and a job that logs them."""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pandas as pd
import pytest

from src.backends.base import Request, SamplingParams
from src.backends.oracle import KnownAnswer
from src.backends.simulated import SimulatedBackend, SimulatedSettings
from src.common.errors import UserError
from src.metrics import HEADLINE_METRICS, HEADLINE_PREFIXES, applicable_families, compute_metrics, mcqa_metrics
from src.metrics.intervals import (
    MIN_BOOTSTRAP_QUESTIONS,
    bootstrap_values,
    decompose,
    interval_names,
    is_interval_name,
    metric_intervals,
    percentile_interval,
    resample_counts,
    resample_records,
    wilson_interval,
)
from tests.golden_records import JOBS, REAL_MODEL_JOBS, stored

from .conftest import mlflow_runs
from .records_factory import permuted, records, trial

Z95 = 1.959963984540054


def is_headline(name: str) -> bool:
    metric = name.partition("/")[0]
    return metric in HEADLINE_METRICS or metric.startswith(HEADLINE_PREFIXES)


# ---- tables: the simulated golden jobs' records (every family the pipeline writes) and hand-built ones ----


def golden_table(name: str) -> pd.DataFrame:
    return pd.DataFrame(stored(name)["records"])


def repeated_cora_table(n: int = 45, seed: int = 1) -> pd.DataFrame:
    """Divergent sets of 1-6 variants, the original asked 10 times (T > 0), two subjects, some INVALID answers."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        q, subject = f"q{i:03d}", f"s{i % 3}"
        skill = rng.uniform(0.2, 1.0)

        def answer(skill=skill):
            return None if rng.random() < 0.05 else (0 if rng.random() < skill else int(rng.integers(1, 4)))

        for r in range(10):
            rows.append(trial(q, answer=answer(), repetition=r, subject=subject))
        for j in range(1, int(rng.integers(1, 7))):
            rows.append(trial(q, answer=answer(), kind="nota", variant_id=f"nota_{j}", subject=subject))
    return records(rows)


def permutation_table(n: int = 30, seed: int = 2) -> pd.DataFrame:
    """The full and cyclic permutation sets of 3 options."""
    rng = np.random.default_rng(seed)
    full = list(itertools.permutations(range(3)))
    cyclic = [(0, 1, 2), (1, 2, 0), (2, 0, 1)]
    rows = []
    for i in range(n):
        for name, orders in (("full", full), ("cyclic", cyclic)):
            answers = [0 if rng.random() < 0.6 else int(rng.integers(0, 3)) for _ in orders]
            rows += permuted(f"q{i:03d}", name, orders, answers)
    return records(rows)


def misleading_table(n: int = 30, seed: int = 3) -> pd.DataFrame:
    """Originals answered, then the misleading-replacement second stage on the wrong ones."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        q = f"q{i:03d}"
        first = 0 if rng.random() < 0.5 else 1
        rows.append(trial(q, answer=first))
        if first != 0:
            rows.append(
                trial(
                    q,
                    answer=0 if rng.random() < 0.4 else 2,
                    kind="misleading_replaced",
                    variant_id="misleading_replaced",
                    order=(0, -2, 2, 3),
                )
            )
    return records(rows)


TABLES = {
    **{name: (lambda name=name: golden_table(name)) for name in JOBS if name not in REAL_MODEL_JOBS},
    "repeated_cora": repeated_cora_table,
    "permutations": permutation_table,
    "misleading": misleading_table,
}


@pytest.fixture(scope="module")
def tables():
    return {name: build() for name, build in TABLES.items()}


@pytest.mark.parametrize("name", list(TABLES))
def test_all_ones_weights_give_every_headline_metric_of_the_families(tables, name):
    table = tables[name]
    point = compute_metrics(table)
    decomposition = decompose(table)
    values = decomposition.values(np.ones((1, len(decomposition.question_ids))))
    headline = {k for k in point if is_headline(k)}
    assert headline, f"{name}: no headline metric to test"
    assert headline <= set(values), (
        f"{name}: headline metrics without a decomposition: {sorted(headline - set(values))}"
    )
    for metric, value in values.items():
        if metric in point:
            assert value[0] == pytest.approx(point[metric], rel=1e-12, abs=1e-12), metric
        else:  # the family leaves out what is undefined (rws with nothing SURE in a subject)
            assert math.isnan(value[0]), metric


@pytest.mark.parametrize("name", list(TABLES))
def test_one_resample_equals_the_families_on_the_resampled_records(tables, name):
    table = tables[name]
    decomposition = decompose(table)
    n = len(decomposition.question_ids)
    counts = resample_counts(np.random.default_rng(7), n, 1)
    assert counts.max() >= 2, "the resample should hold a question twice"
    resampled = resample_records(table, counts[0].astype(int), decomposition.question_ids)
    assert resampled["question_id"].nunique() == n
    expected = compute_metrics(resampled, families=applicable_families(table))
    values = decomposition.values(counts)
    compared = 0
    for metric, value in values.items():
        if metric in expected:
            assert value[0] == pytest.approx(expected[metric], rel=1e-12, abs=1e-12), metric
            compared += 1
        else:
            assert math.isnan(value[0]), metric
    assert compared >= len(values) // 2


def test_the_options_of_compute_metrics_reach_the_decomposition(tables):
    import inspect

    from src.metrics.repetition import question_outcomes

    table = tables["repeated_cora"]
    options = {"consistency": 0.9}
    if "sure_rule" in inspect.signature(question_outcomes).parameters:
        options["sure_rule"] = "correctness"
    point = compute_metrics(table, **options)
    decomposition = decompose(table, **options)
    values = decomposition.values(np.ones((1, len(decomposition.question_ids))), ["rws", "st"])
    assert values["rws"][0] == pytest.approx(point["rws"]) and values["st"][0] == pytest.approx(point["st"])
    assert point["st"] != compute_metrics(table)["st"]


@pytest.mark.promise(
    "docs/metrics.md", "the bootstrap resamples questions: every variant and repetition moves with its question"
)
def test_resample_records_copies_whole_questions():
    table = records([trial("a", answer=0), trial("a", answer=1, kind="nota", variant_id="nota_1"), trial("b")])
    out = resample_records(table, [3, 0])
    assert sorted(out["question_id"]) == ["a", "a", "a#1", "a#1", "a#2", "a#2"]
    assert out.groupby("question_id")["variant_id"].apply(sorted).map(tuple).nunique() == 1


def test_every_question_can_be_drawn_and_each_is_drawn_once_per_resample_on_average():
    """A resample draws n questions uniformly with replacement: over 4000 resamples of 5 questions every one,
    the last included, is drawn, each on average once per resample (binomial(5, 1/5) counts: the mean of 4000
    has sd sqrt(0.8 / 4000) = 0.014; 0.1 is 7 sd)."""
    counts = resample_counts(np.random.default_rng(0), 5, 4000)
    assert counts.shape == (4000, 5) and (counts.sum(axis=1) == 5).all()
    assert (counts > 0).any(axis=0).all()
    assert np.abs(counts.mean(axis=0) - 1).max() < 0.1
    # through the bootstrap a metric sees: the one right answer is the last question's, so some replicates
    # (all but 0.8^5 = 33% of them) have MCQA above 0, on average 1/5
    table = records([trial(f"q{i}", answer=0 if i == 4 else 1) for i in range(5)])
    values = bootstrap_values(decompose(table, by_subjects=False), n_resamples=2000, seed=0, names=["mcqa"])["mcqa"]
    assert (values > 0).mean() == pytest.approx(1 - 0.8**5, abs=0.05)
    assert values.mean() == pytest.approx(0.2, abs=0.02)


# ---- MCQA of a simulated model: coverage and width ----


def simulated_original(seed: int, n: int = 1000, success_rate: float = 0.7) -> pd.DataFrame:
    """The original order of n four-option questions answered by the simulated backend (`model=simulated`)."""
    labels = ("A", "B", "C", "D")
    backend = SimulatedBackend(SimulatedSettings(success_rate=success_rate))
    requests = [
        Request(prompt="", labels=labels, options=labels, seed=seed, key=f"q{i:04d}/original") for i in range(n)
    ]
    backend.know({r.key: KnownAnswer(correct_slot=0) for r in requests})
    slots = np.array([labels.index(str(texts[0])) for texts in backend.generate(requests, SamplingParams(n=1))])
    return pd.DataFrame(
        {
            "question_id": [f"q{i:04d}" for i in range(n)],
            "variant_kind": "original",
            "variant_id": "original",
            "repetition": 0,
            "parsed_label": np.array(labels)[slots],
            "chosen_option": slots,
            "correct": slots == 0,
        }
    )


@pytest.fixture(scope="module")
def simulated_runs():
    return [simulated_original(seed) for seed in range(100)]


def _coverage(runs, **kwargs) -> tuple[int, np.ndarray]:
    covered, widths = 0, []
    for seed, table in enumerate(runs):
        mcqa = mcqa_metrics(table)["mcqa"]
        bounds = metric_intervals(table, {"mcqa": mcqa}, families=["mcqa"], seed=seed, **kwargs)
        covered += bounds["mcqa_lo"] <= 0.7 <= bounds["mcqa_hi"]
        binomial_se = math.sqrt(mcqa * (1 - mcqa) / len(table))
        widths.append((bounds["mcqa_hi"] - bounds["mcqa_lo"]) / (2 * Z95 * binomial_se))
    return covered, np.array(widths)


def test_mcqa_interval_covers_and_has_the_binomial_width(simulated_runs):
    """The interval a run logs for MCQA (one trial per question: Wilson) covers 0.7 in >= 93 of 100 seeds, and
    its width is 2 x 1.96 binomial standard errors within 10%."""
    covered, widths = _coverage(simulated_runs)
    assert covered >= 93, covered
    assert np.all(np.abs(widths - 1) < 0.10), (widths.min(), widths.max())


@pytest.mark.slow
def test_bootstrap_interval_of_mcqa_covers_and_has_the_binomial_width(simulated_runs):
    """The same for the cluster bootstrap itself (closed_form=False): 1000 resamples per seed."""
    covered, widths = _coverage(simulated_runs, closed_form=False)
    assert covered >= 93, covered
    assert abs(np.mean(widths) - 1) < 0.05 and np.all(np.abs(widths - 1) < 0.15), (widths.min(), widths.max())


def test_bootstrap_agrees_with_the_binomial_se_on_a_ratio_metric():
    """RWS on n SURE questions is a share of them: the bootstrap's spread matches its binomial SE."""
    table = repeated_cora_table(n=400, seed=5)
    decomposition = decompose(table, by_subjects=False)
    point = compute_metrics(table, by_subjects=False)
    values = bootstrap_values(decomposition, n_resamples=1000, seed=0, names=["rws"])["rws"]
    n_sure = decomposition.parts("rws").n_questions
    se = math.sqrt(point["rws"] * (1 - point["rws"]) / n_sure)
    assert np.std(values) == pytest.approx(se, rel=0.15)


# ---- wiring: names, off switch, determinism, small scopes ----


def test_interval_names_sort_beside_their_metric():
    assert interval_names("mcqa") == ("mcqa_lo", "mcqa_hi")
    assert interval_names("acc@6/law") == ("acc@6_lo/law", "acc@6_hi/law")
    assert is_interval_name("bmca_1.0_hi/law") and not is_interval_name("cache_hit_rate")


@pytest.mark.promise("docs/metrics.md", "stats.bootstrap=0 turns the bootstrap intervals off")
def test_off_switch_and_defaults(tables):
    table = tables["repeated_cora"]
    assert not any(is_interval_name(k) for k in compute_metrics(table))  # compute_metrics: off unless asked
    assert not any(is_interval_name(k) for k in compute_metrics(table, intervals=0))
    assert metric_intervals(table, compute_metrics(table), n_resamples=0) == {}
    with pytest.raises(ValueError, match="level"):
        metric_intervals(table, {}, level=1.0)


def test_every_headline_metric_gets_an_interval_and_bounds_hold_the_point(tables):
    table = tables["repeated_cora"]
    metrics = compute_metrics(table, intervals=300, interval_seed=3)
    for name in [k for k in metrics if is_headline(k) and not is_interval_name(k) and "/" not in k]:
        lo, hi = interval_names(name)
        assert metrics[lo] <= metrics[name] <= metrics[hi], name
    # per subject (15 questions each): Wilson for shares of questions, no bootstrap below 20 questions
    assert {"mcqa_lo/s0", "bmca_1.0_lo/s0", "st_lo/s0"} <= set(metrics)
    assert "mcqa_plus_lo/s0" not in metrics and "acc_mean_lo/s0" not in metrics
    assert 15 < MIN_BOOTSTRAP_QUESTIONS


@pytest.mark.promise(
    "docs/metrics.md", "yes/no shares get the Wilson interval, every other metric a question bootstrap"
)
def test_wilson_is_chosen_by_the_definition_not_by_the_answers():
    """One variant per question: mcqa_plus is 0/1 per question here too, but it is not a share by definition, so
    it keeps the bootstrap, and a run logs the same interval names whatever its answers."""
    table = records([trial(f"q{i:02d}", answer=0 if i % 3 else 1) for i in range(30)])
    families = ["mcqa", "cora"]  # the definitions on one variant (a run of the original order computes no cora)
    decomposition = decompose(table, families=families)
    assert decomposition.parts("mcqa").binary and decomposition.parts("bmca_1.0").binary
    assert not decomposition.parts("mcqa_plus").binary and not decomposition.parts("cora").binary
    point = compute_metrics(table, families=families)
    bounds = metric_intervals(table, point, n_resamples=500, families=families)
    assert (bounds["mcqa_lo"], bounds["mcqa_hi"]) == wilson_interval(20, 30)
    assert (bounds["mcqa_plus_lo"], bounds["mcqa_plus_hi"]) != wilson_interval(20, 30)


def test_deterministic_given_the_seed(tables):
    table = tables["repeated_cora"]
    point = compute_metrics(table)
    first = metric_intervals(table, point, n_resamples=200, seed=11)
    assert first == metric_intervals(table, point, n_resamples=200, seed=11)
    other = metric_intervals(table, point, n_resamples=200, seed=12)
    assert first["mcqa_plus_lo"] != other["mcqa_plus_lo"]  # bootstrap: the seed draws the resamples
    assert first["mcqa_lo"] == other["mcqa_lo"]  # Wilson: no resampling


@pytest.mark.parametrize(
    "successes, n, lo, hi",
    [(81, 263, 0.2553, 0.3662), (15, 148, 0.0624, 0.1605), (0, 20, 0.0, 0.1611), (1, 29, 0.0061, 0.1718)],
)
@pytest.mark.promise("docs/metrics.md", "the Wilson interval matches Newcombe's published intervals")
def test_wilson_matches_newcombes_published_intervals(successes, n, lo, hi):
    """Newcombe (1998), "Two-sided confidence intervals for the single proportion", Table II, method 3 (score
    interval without continuity correction): four decimals, so within half a unit of the fourth."""
    assert wilson_interval(successes, n) == pytest.approx((lo, hi), abs=5e-5)


def test_wilson_and_undefined_resamples():
    assert wilson_interval(0, 10)[0] == 0.0 and wilson_interval(10, 10)[1] == 1.0
    # exactly, where the formula leaves a residue: 1 - 1e-16 at 13 of 13, 1.4e-17 at 0 of 17
    assert wilson_interval(13, 13)[1] == 1.0 and wilson_interval(0, 17)[0] == 0.0
    with pytest.raises(ValueError, match="needs n > 0"):  # no questions: no interval, said, not a ZeroDivisionError
        wilson_interval(0, 0)
    assert percentile_interval(np.array([1.0] * 98 + [np.nan] * 2), 0.95) is None  # 2% undefined: no interval
    assert percentile_interval(np.array([1.0] * 995 + [np.nan] * 5), 0.95) == (1.0, 1.0)
    assert percentile_interval(np.array([0.25]), 0.95) == (0.25, 0.25)  # one defined replicate is an interval
    # the 2.5th and 97.5th percentiles of 0, 0.001, ..., 1 (numpy's linear interpolation: exact here)
    assert percentile_interval(np.arange(1001) / 1000, 0.95) == pytest.approx((0.025, 0.975), abs=1e-12)
    assert percentile_interval(np.arange(1001) / 1000, 0.9) == pytest.approx((0.05, 0.95), abs=1e-12)
    one = decompose(records([trial("q1", answer=0)]), by_subjects=False)  # one question: every resample is it
    assert bootstrap_values(one, n_resamples=5, names=["mcqa"])["mcqa"].tolist() == [1.0] * 5
    assert bootstrap_values(one, n_resamples=1, names=["mcqa"])["mcqa"].tolist() == [1.0]
    assert bootstrap_values(one, n_resamples=0, names=["mcqa"]) == {}


# ---- a job ----


def test_a_job_logs_intervals_beside_its_headline_metrics(run_job_in):
    result = run_job_in("model=simulated", "model.success_rate=0.7", "variants=original", "benchmark.n_questions=200")
    metrics = result.metrics
    for name in ("mcqa", "slot_share_A"):  # the original order's accuracy, and the share of answers in slot A
        assert metrics[f"{name}_lo"] <= metrics[name] <= metrics[f"{name}_hi"], name
    assert any(k.startswith("mcqa_lo/") for k in metrics)  # per subject
    stored_metrics = json.loads((result.out_dir / "artifacts" / "metrics.json").read_text())
    assert stored_metrics["mcqa_lo"] == metrics["mcqa_lo"] and stored_metrics["mcqa_hi"] == metrics["mcqa_hi"]
    summary = json.loads(result.summary())
    assert summary["mcqa_ci"] == [round(metrics["mcqa_lo"], 4), round(metrics["mcqa_hi"], 4)]
    _, runs = mlflow_runs(run_job_in.store_uri)
    assert runs[0].data.metrics["mcqa_lo"] == pytest.approx(metrics["mcqa_lo"])


def test_stats_config_is_checked_and_turns_intervals_off(run_job_in):
    from src.config.checks import check_config
    from src.config.compose import compose_job

    with pytest.raises(UserError, match=r"^config key stats\.bootstrap: -1 must be >= 0"):
        check_config(compose_job(["stats.bootstrap=-1"]))
    with pytest.raises(UserError, match=r"^config key stats\.level: 1\.5 must be between 0 and 1"):
        check_config(compose_job(["stats.level=1.5"]))
    result = run_job_in("model=simulated", "variants=original", "benchmark.n_questions=30", "stats.bootstrap=0")
    assert "mcqa" in result.metrics and not any(is_interval_name(k) for k in result.metrics)
    assert "mcqa_ci" not in json.loads(result.summary())
