"""`python -m src.perf`: speed, memory and agreement numbers on the real default model (SmolLM2-135M, CPU), not a test.

`python -m src.bench`, its old name, still runs it. Not to be confused with `src/benchmarks/`, the question sets.

On the same model (one float copy of the GGUF, shared with lm-evaluation-harness) and the same ARC-Challenge
questions, in one process, it times and prints wall time, prompts/s, forward tokens and peak memory (RSS,
sampled) for:

- load        first GGUF load into a cold cache dir (de-quantise + save + load) vs the second load
- mainjob     the README's main job (synthetic, CoRA set, the model's cloze_shown scoring): its answering phase,
              and option texts packed after their prompts vs padded batches on the same prompts
- cora        the CoRA divergent set with logprob scoring: the optimised path (prefix-tree packing, response
              cache cold, then warm for a rerun) vs the naive path (one call per trial, batch size 1, no cache,
              no sharing) vs padded batches; naive and padded on the first --compare-limit questions
- repetition  10 repetitions at T=0.7 with exact first-token sampling vs one greedy pass (and vs generating
              the 10 samples, the path it replaces)
- lmeval      lm-evaluation-harness 0.4.x (`HFLM.loglikelihood` on `Instance`s) on the same CoRA prompts
              (--compare-limit questions) vs this project, both cold
- agreement   label log-probabilities of this project vs lm-eval on the original prompt of every question
              (--limit): max |difference| and the option ranking per question
- adaptive    10 generated repetitions at T=0.7 (repetition prompt, --limit questions, response cache off), all
              of them vs adaptive repetitions (src/adaptive.py): the share of samples saved, the wall-time ratio,
              and whether every question's SURE/UNSURE x right/wrong cell (both SURE rules) is the same;
              `--only adaptive` runs it alone
- intervals   the headline metrics' intervals (src/metrics/intervals.py) on a full MMLU x CoRA records table of
              the simulated model (no model load; building the table takes 4-7 minutes, --intervals-records
              keeps it for the next run): --resamples cluster
              resamples, vectorised, against the naive path (the family functions on explicitly resampled
              records, timed on --naive-resamples and extrapolated); `--only intervals` runs it alone

lm-eval is optional (`pip install .[bench]`); without it the lmeval and agreement parts say so and are skipped.
Ratios and targets go to --out (JSON). A full run takes about 15-20 minutes on 2 CPU cores.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any, Iterator

REPO = Path(__file__).resolve().parents[1]
PARTS = ("load", "mainjob", "cora", "repetition", "lmeval", "agreement", "adaptive", "intervals")
MODEL_PARTS = PARTS[:-1]  # the parts that need the real model loaded
TARGETS = {  # the targets, checked on the printed numbers
    "cora_vs_naive": ("CoRA logprob: optimised >= 3x faster than the naive per-prompt path", lambda r: r >= 3.0),
    "cora_vs_lmeval_scoring": ("CoRA logprob: faster than lm-eval scoring the same prompts", lambda r: r > 1.0),
    "exact10_vs_greedy": ("10 repetitions, exact first-token sampling: <= 1.3x one greedy pass", lambda r: r <= 1.3),
    "agreement_max_abs": ("label log-probs equal lm-eval's within 1e-4", lambda r: r <= 1e-4),
    "agreement_ranking": ("same option ranking on every question", lambda r: r == 1.0),
    "load_cold_vs_warm": ("first GGUF load >= 3x the second (conversion cache)", lambda r: r >= 3.0),
    "rerun_vs_first": ("rerun of a finished run < 10% of its first time (cache)", lambda r: r < 0.1),
    "adaptive_same_verdicts": ("adaptive repetitions: every SURE/UNSURE x right/wrong cell as the full run's",
                               lambda r: r == 1.0),
    "intervals_bootstrap_seconds": ("intervals: 1000 resamples (--resamples) of a full MMLU CoRA records table < 30 s",
                                    lambda r: r < 30.0),
}


class Meter:
    """Wall time, forward tokens and peak RSS of one phase (psutil sampling when installed, else ru_maxrss)."""

    def __init__(self) -> None:
        self.results: dict[str, dict[str, float]] = {}
        try:
            import psutil

            self._process = psutil.Process()
        except ImportError:
            self._process = None

    def _rss(self) -> float:
        if self._process is not None:
            return self._process.memory_info().rss / 2**20
        import resource

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # peak so far, KiB on Linux

    @contextmanager
    def phase(self, name: str, *, prompts: int = 0, tokens=lambda: 0) -> Iterator[dict[str, float]]:
        start_rss, peak, stop = self._rss(), [self._rss()], threading.Event()

        def sample() -> None:
            while not stop.wait(0.02):
                peak[0] = max(peak[0], self._rss())

        thread = threading.Thread(target=sample, daemon=True)
        thread.start()
        tokens_before = tokens()
        out: dict[str, float] = {}
        start = time.perf_counter()
        try:
            yield out
        finally:
            seconds = time.perf_counter() - start
            stop.set()
            thread.join()
            peak[0] = max(peak[0], self._rss())
            out.update(seconds=seconds, prompts=prompts, prompts_per_s=prompts / seconds if seconds > 0 else math.nan,
                       forward_tokens=tokens() - tokens_before, peak_rss_mib=peak[0],
                       peak_rss_growth_mib=peak[0] - start_rss)
            self.results[name] = out
            print(f"  {name:28s} {seconds:8.2f} s  {out['prompts_per_s']:8.2f} prompts/s  "
                  f"{out['forward_tokens']:>9,} tokens  peak {peak[0]:7.0f} MiB (+{peak[0] - start_rss:.0f})", flush=True)


def build(overrides: list[str], limit: int | None, benchmark: str = "arc_challenge"):
    """(config, items) for ARC-Challenge (or `benchmark`) with the given overrides, as `python -m src.run` builds
    them."""
    from omegaconf import OmegaConf

    from .benchmarks import load_benchmark
    from .prompts import PromptTemplate
    from .config_schema import compose_job
    from .job import build_items

    cfg = compose_job([f"benchmark={benchmark}", f"limit={'null' if limit is None else limit}", *overrides])
    bench = OmegaConf.to_container(cfg.benchmark, resolve=True)
    questions = load_benchmark(bench.pop("name"), path=bench.pop("path", None), split=bench.pop("split", None),
                               data_dir=cfg.data_dir, seed=cfg.seed, limit=cfg.limit, options=bench)
    template = PromptTemplate.from_config(OmegaConf.to_container(cfg.prompt, resolve=True))
    return cfg, build_items(cfg, questions, template)


def model_config(cfg) -> dict[str, Any]:
    from omegaconf import OmegaConf

    return {k: v for k, v in OmegaConf.to_container(cfg.model, resolve=True).items() if k != "scoring"}


def hf_backend(model_cfg: dict[str, Any], *, chat: bool = True, **overrides: Any):
    from .backends.hf import HFBackend

    backend = HFBackend.from_config({**model_cfg, **overrides}, chat=chat, progress=False)
    backend.load()
    return backend


def part_load(meter: Meter, model_cfg: dict[str, Any], ratios: dict[str, float]) -> None:
    from .backends.hf import HFBackend

    print("load: first GGUF load into a cold cache dir vs the second load", flush=True)
    old = os.environ.get("MCQ_CACHE_DIR")
    with tempfile.TemporaryDirectory() as cold:
        os.environ["MCQ_CACHE_DIR"] = cold
        try:
            with meter.phase("load_cold (hash+convert+load)"):
                HFBackend.from_config(model_cfg, chat=True, progress=False).load()
            with meter.phase("load_warm (cached float copy)"):
                HFBackend.from_config(model_cfg, chat=True, progress=False).load()
        finally:
            if old is None:
                os.environ.pop("MCQ_CACHE_DIR", None)
            else:
                os.environ["MCQ_CACHE_DIR"] = old
    ratios["load_cold_vs_warm"] = meter.results["load_cold (hash+convert+load)"]["seconds"] / \
        meter.results["load_warm (cached float copy)"]["seconds"]


def part_cora(meter: Meter, args, ratios: dict[str, float], shared: dict[str, Any]) -> None:
    from .backends.base import SamplingParams
    from .cache import ResponseCache
    from .trials import answer_items

    cfg, items = build(["variants=cora", "scoring=logprob"], args.limit)
    _, subset = build(["variants=cora", "scoring=logprob"], args.compare_limit)
    backend = shared["backend"]
    print(f"cora: {len(items)} prompts ({args.limit} questions x CoRA divergent set); naive and padded on "
          f"{len(subset)} prompts ({args.compare_limit} questions)", flush=True)
    params = SamplingParams(n=1)
    tokens = lambda: backend.forward_tokens  # noqa: E731
    with tempfile.TemporaryDirectory() as tmp:
        cache = ResponseCache(Path(tmp) / "responses.db")
        with meter.phase("cora_optimised (cold cache)", prompts=len(items), tokens=tokens):
            answer_items(backend, items, scoring="logprob", params=params, cache=cache, progress=False)
        with meter.phase("cora_rerun (warm cache)", prompts=len(items), tokens=tokens):
            answer_items(backend, items, scoring="logprob", params=params, cache=cache, progress=False)
        cache.close()
    with meter.phase("cora_optimised_subset", prompts=len(subset), tokens=tokens):
        answer_items(backend, subset, scoring="logprob", params=params, cache=None, progress=False)
    backend.share_prefix, batch_size = False, backend.batch_size
    try:
        with meter.phase("cora_padded_subset (batch 16)", prompts=len(subset), tokens=tokens):
            answer_items(backend, subset, scoring="logprob", params=params, cache=None, progress=False)
        backend.batch_size = 1
        with meter.phase("cora_naive_subset (1 call/trial)", prompts=len(subset), tokens=tokens):
            for it in subset:
                backend.score_labels([it.request])
    finally:
        backend.share_prefix, backend.batch_size = True, batch_size
    r = meter.results
    ratios["cora_vs_naive"] = r["cora_naive_subset (1 call/trial)"]["seconds"] / r["cora_optimised_subset"]["seconds"]
    ratios["cora_vs_padded"] = r["cora_padded_subset (batch 16)"]["seconds"] / r["cora_optimised_subset"]["seconds"]
    ratios["rerun_vs_first"] = r["cora_rerun (warm cache)"]["seconds"] / r["cora_optimised (cold cache)"]["seconds"]
    shared["subset"] = subset


def part_mainjob(meter: Meter, args, ratios: dict[str, float], shared: dict[str, Any]) -> None:
    """The README's main job (`python -m src.run variants=cora`: synthetic, the model's cloze_shown scoring), its
    answering phase with option texts packed after their prompts vs padded batches that encode each prompt once
    for all its options, on the same prompts."""
    from .backends.base import SamplingParams
    from .trials import answer_items

    cfg, items = build(["variants=cora"], None, benchmark="synthetic")
    backend = hf_backend(shared["model_cfg"], chat=False)  # option texts are never chat-wrapped
    print(f"mainjob: {len(items)} prompts (synthetic x CoRA divergent set, scoring={cfg.scoring}), "
          f"padded on the first {args.compare_limit} questions' prompts", flush=True)
    subset = [it for it in items if int(it.question.id.rsplit("/", 1)[1]) < args.compare_limit]
    tokens = lambda: backend.forward_tokens  # noqa: E731
    params = SamplingParams(n=1)
    with meter.phase("mainjob_answering (packed)", prompts=len(items), tokens=tokens):
        answer_items(backend, items, scoring=cfg.scoring, params=params, cache=None, progress=False)
    with meter.phase("mainjob_subset (packed)", prompts=len(subset), tokens=tokens):
        answer_items(backend, subset, scoring=cfg.scoring, params=params, cache=None, progress=False)
    backend.share_prefix = False
    with meter.phase("mainjob_subset (padded batches of 16)", prompts=len(subset), tokens=tokens):
        answer_items(backend, subset, scoring=cfg.scoring, params=params, cache=None, progress=False)
    r = meter.results
    ratios["mainjob_padded_vs_packed"] = r["mainjob_subset (padded batches of 16)"]["seconds"] / \
        r["mainjob_subset (packed)"]["seconds"]
    ratios["mainjob_answering_seconds"] = r["mainjob_answering (packed)"]["seconds"]


def part_repetition(meter: Meter, args, ratios: dict[str, float], shared: dict[str, Any]) -> None:
    from .backends.base import SamplingParams
    from .trials import answer_items

    _, items = build(["variants=original", "prompt=repetition", "scoring=logprob"], args.limit)
    backend = shared["backend"]
    print(f"repetition: {len(items)} prompts, 10 repetitions at T=0.7 (response cache off)", flush=True)
    tokens = lambda: backend.forward_tokens  # noqa: E731
    with meter.phase("greedy_pass (logprob, R=1)", prompts=len(items), tokens=tokens):
        answer_items(backend, items, scoring="logprob", params=SamplingParams(n=1), progress=False)
    exact = SamplingParams(n=10, temperature=0.7)
    with meter.phase("exact_sampling (R=10, T=0.7)", prompts=len(items), tokens=tokens):
        answers = answer_items(backend, items, scoring="logprob", params=exact, progress=False)
    with meter.phase("generate (R=10, T=0.7, 3 tok)", prompts=len(items), tokens=tokens):
        answer_items(backend, items, scoring="generate", params=replace(exact, max_new_tokens=3), progress=False)
    r = meter.results
    ratios["exact10_vs_greedy"] = r["exact_sampling (R=10, T=0.7)"]["seconds"] / r["greedy_pass (logprob, R=1)"]["seconds"]
    ratios["generate10_vs_exact10"] = r["generate (R=10, T=0.7, 3 tok)"]["seconds"] / \
        r["exact_sampling (R=10, T=0.7)"]["seconds"]
    ratios["exact_invalid_share"] = sum(a.slot is None for row in answers for a in row) / (10 * len(items))


def part_adaptive(meter: Meter, args, ratios: dict[str, float], shared: dict[str, Any]) -> None:
    """Adaptive repetitions against asking all R, on the real model: samples saved, wall ratio, same verdicts."""
    from .backends.base import SamplingParams
    from .metrics import question_outcomes
    from .trials import answer_items, to_records

    _, items = build(["variants=original", "prompt=repetition", "scoring=generate"], args.limit)
    backend, R = shared["backend"], 10  # noqa: N806
    params = SamplingParams(n=R, temperature=0.7, max_new_tokens=3)
    print(f"adaptive: {len(items)} prompts, {R} generated repetitions at T=0.7 (response cache off)", flush=True)
    records = {}
    for name, adaptive in (("full", False), ("adaptive", True)):
        with meter.phase(f"adaptive_{name} (generate R={R})", prompts=len(items),
                         tokens=lambda: backend.forward_tokens):
            answers = answer_items(backend, items, scoring="generate", params=params, progress=False, adaptive=adaptive)
        records[name] = to_records(items, answers, run_info={}, planned=R if adaptive else None)
    same = all(question_outcomes(records["full"], sure_rule=rule)[["sure", "right"]].equals(
        question_outcomes(records["adaptive"], sure_rule=rule)[["sure", "right"]]) for rule in ("answer", "correctness"))
    on = ["question_id", "variant_id", "repetition"]
    drawn = records["adaptive"].merge(records["full"], on=on, suffixes=("", "_full"))
    r = meter.results
    ratios["adaptive_saved_share"] = 1.0 - len(records["adaptive"]) / len(records["full"])
    ratios["adaptive_vs_full_wall"] = r[f"adaptive_adaptive (generate R={R})"]["seconds"] / \
        r[f"adaptive_full (generate R={R})"]["seconds"]
    ratios["adaptive_vs_full_tokens"] = r[f"adaptive_adaptive (generate R={R})"]["forward_tokens"] / \
        max(1.0, r[f"adaptive_full (generate R={R})"]["forward_tokens"])  # forward tokens: the load-independent cost
    ratios["adaptive_same_verdicts"] = float(same)
    ratios["adaptive_same_samples"] = float(len(drawn) == len(records["adaptive"])
                                            and bool((drawn["raw_output"] == drawn["raw_output_full"]).all()))
    print(f"  samples saved {ratios['adaptive_saved_share']:.1%} ({len(records['adaptive'])} of {len(records['full'])} "
          f"asked), wall ratio adaptive/full {ratios['adaptive_vs_full_wall']:.2f} (forward tokens "
          f"{ratios['adaptive_vs_full_tokens']:.2f}), verdicts identical (both SURE "
          f"rules): {same}, asked samples identical: {bool(ratios['adaptive_same_samples'])}", flush=True)


def lm_eval_model(meter: Meter, shared: dict[str, Any]):
    """lm-eval's HFLM on the same float copy of the GGUF (identical weights), built once."""
    if "lm" in shared:
        return shared["lm"]
    try:
        with meter.phase("lmeval_import"):
            from lm_eval.api.instance import Instance
            from lm_eval.models.huggingface import HFLM
    except ImportError:
        print("  lm-eval is not installed: pip install .[bench]  (skipping lm-eval parts)", flush=True)
        shared["lm"] = None
        return None
    from .backends.hf import gguf_cache

    folder = gguf_cache.ensure_float_copy(shared["backend"].gguf_path)
    with meter.phase("lmeval_model_load"):
        lm = HFLM(pretrained=str(folder), device="cpu", dtype="float32", batch_size=8)
    calls = {"tokens": 0}
    model_call = lm._model_call

    def counting_call(inps, *a, **kw):  # forward tokens, padding included, as ours are counted
        calls["tokens"] += int(inps.numel())
        return model_call(inps, *a, **kw)

    lm._model_call = counting_call
    shared["lm"] = (lm, Instance, calls, str(folder))
    return shared["lm"]


def lm_eval_label_logprobs(lm_bundle, backend, items, meter: Meter, name: str) -> list[list[float]]:
    """Per item, log P(label) with the label's spellings merged ("A" or " A" as the first answer token), from
    lm-eval's loglikelihood of each spelling after the chat-wrapped prompt, exactly the text our backend scores.

    lm-eval moves a context's trailing whitespace into the continuation (the chat template ends in "\n"), so
    it scores P("\n" | prompt without it) * P("A" | prompt). The first factor is asked of lm-eval on its own,
    outside the timed phase, and divided out: what remains is lm-eval's P("A" | prompt), the quantity we score."""
    lm, Instance, calls, _ = lm_bundle
    requests, index, whitespace = [], [], []
    for i, it in enumerate(items):
        context = backend._prompt_text(it.request.prompt)
        stripped = context.rstrip()
        if stripped != context:
            whitespace.append((i, Instance("loglikelihood", {}, (stripped, context[len(stripped):]), i)))
        for k, label in enumerate(it.request.labels):
            for spelling in (label, " " + label):
                requests.append(Instance("loglikelihood", {}, (context, spelling), len(requests)))
                index.append((i, k))
    with meter.phase(name, prompts=len(items), tokens=lambda: calls["tokens"]):
        results = lm.loglikelihood(requests, disable_tqdm=True)
    moved = [0.0] * len(items)
    if whitespace:
        tokens_before = calls["tokens"]
        for (i, _), (ll, _) in zip(whitespace, lm.loglikelihood([r for _, r in whitespace], disable_tqdm=True)):
            moved[i] = ll
        calls["tokens"] = tokens_before
    merged = [[0.0] * len(it.request.labels) for it in items]
    for (i, k), (ll, _) in zip(index, results):
        merged[i][k] += math.exp(ll - moved[i])
    return [[math.log(p) if p > 0 else -math.inf for p in row] for row in merged]


def our_label_logprobs(backend, items) -> list[list[float]]:
    scores = backend.score_labels([it.request for it in items])
    return [[math.log(p * s.mass) if p * s.mass > 0 else -math.inf for p in s.probs] for s in scores]


def compare(ours: list[list[float]], theirs: list[list[float]]) -> dict[str, float]:
    gaps = [abs(a - b) for x, y in zip(ours, theirs) for a, b in zip(x, y) if math.isfinite(a) and math.isfinite(b)]
    rank = lambda row: sorted(range(len(row)), key=lambda k: -row[k])  # noqa: E731
    return {"max_abs": max(gaps), "mean_abs": sum(gaps) / len(gaps),
            "same_ranking": sum(rank(x) == rank(y) for x, y in zip(ours, theirs)) / len(ours),
            "same_top1": sum(rank(x)[0] == rank(y)[0] for x, y in zip(ours, theirs)) / len(ours)}


def _lm_eval_scores(meter: Meter, shared: dict[str, Any], items, phase: str, headline: str) -> list[list[float]] | None:
    """lm-eval's label log-probabilities of `items`, timed as `phase`; None when lm-eval is not installed."""
    print(headline, flush=True)
    bundle = lm_eval_model(meter, shared)
    if bundle is None:
        return None
    return lm_eval_label_logprobs(bundle, shared["backend"], items, meter, phase)


def part_lmeval(meter: Meter, args, ratios: dict[str, float], shared: dict[str, Any]) -> None:
    from .backends.base import SamplingParams
    from .trials import answer_items

    subset = shared.get("subset") or build(["variants=cora", "scoring=logprob"], args.compare_limit)[1]
    theirs = _lm_eval_scores(meter, shared, subset, "lmeval_scoring (batch 8)",
                             f"lmeval: lm-evaluation-harness vs this project on the same {len(subset)} CoRA prompts, both cold")
    if theirs is None:
        return
    backend = shared["backend"]
    with meter.phase("ours_scoring (same prompts)", prompts=len(subset), tokens=lambda: backend.forward_tokens):
        answer_items(backend, subset, scoring="logprob", params=SamplingParams(n=1), progress=False)
    r = meter.results
    ratios["cora_vs_lmeval_scoring"] = r["lmeval_scoring (batch 8)"]["seconds"] / r["ours_scoring (same prompts)"]["seconds"]
    their_total = r["lmeval_scoring (batch 8)"]["seconds"] + r["lmeval_model_load"]["seconds"] + \
        r.get("lmeval_import", {}).get("seconds", 0.0)
    our_total = r["ours_scoring (same prompts)"]["seconds"] + shared["our_setup_s"]
    ratios["cora_vs_lmeval_with_setup"] = their_total / our_total
    agreement = compare(our_label_logprobs(backend, subset), theirs)
    ratios.update({f"lmeval_prompts_{k}": v for k, v in agreement.items()})


def part_agreement(meter: Meter, args, ratios: dict[str, float], shared: dict[str, Any]) -> None:
    _, items = build(["variants=original", "scoring=logprob"], args.limit)
    theirs = _lm_eval_scores(meter, shared, items, "lmeval_agreement_scoring",
                             f"agreement: label log-probabilities vs lm-eval on the original prompt of {len(items)} questions")
    if theirs is None:
        return
    agreement = compare(our_label_logprobs(shared["backend"], items), theirs)
    ratios["agreement_max_abs"] = agreement["max_abs"]
    ratios["agreement_mean_abs"] = agreement["mean_abs"]
    ratios["agreement_ranking"] = agreement["same_ranking"]
    ratios["agreement_top1"] = agreement["same_top1"]


def part_intervals(meter: Meter, args, ratios: dict[str, float], shared: dict[str, Any]) -> None:
    """Intervals of every headline metric (overall and per subject) of a full MMLU x CoRA run of the simulated model:
    the vectorised cluster bootstrap (every metric resampled, Wilson off: the worst case), the intervals as a run
    logs them (Wilson where exact), and the naive bootstrap (compute_metrics on explicitly resampled records)
    timed on a few resamples and extrapolated to the same count."""
    import numpy as np

    from .backends.base import SamplingParams
    from .backends.simulated import SimulatedBackend
    from .metrics import applicable_families, compute_metrics
    from .metrics.intervals import bootstrap_values, decompose, metric_intervals, resample_counts, resample_records
    from .trials import answer_items, to_records

    import pandas as pd

    saved = Path(args.intervals_records) if args.intervals_records else None
    if saved is not None and saved.is_file():
        print(f"intervals: the records table in {saved}", flush=True)
        records = pd.read_parquet(saved)
    else:
        print("intervals: a full MMLU x CoRA records table of the simulated model (success_rate 0.7)", flush=True)
        with meter.phase("intervals_records (build+answer)"):
            cfg, items = build(["variants=cora", "model=simulated", "model.success_rate=0.7"], None, benchmark="mmlu")
            answers = answer_items(SimulatedBackend(success_rate=0.7), items, scoring="generate",
                                   params=SamplingParams(n=1), cache=None, progress=False)
            records = to_records(items, answers, run_info={"run_id": "perf", "model": "simulated", "benchmark": "mmlu",
                                                           "variant_set": "cora", "temperature": 0.0, "seed": 0,
                                                           "scoring": "generate"})
        if saved is not None:
            saved.parent.mkdir(parents=True, exist_ok=True)
            records.to_parquet(saved)
    families = applicable_families(records)
    with meter.phase("intervals_point_metrics"):
        point = compute_metrics(records, families=families)
    n_questions = records["question_id"].nunique()
    print(f"  {len(records):,} records, {n_questions:,} questions, {records['subject'].nunique()} subjects", flush=True)
    with meter.phase("intervals_decompose (once per run)"):
        decomposition = decompose(records, families=families)
    names = [name for name in decomposition.names if name in point]
    with meter.phase(f"intervals_resample ({args.resamples} x {len(names)} metrics)"):
        bootstrap_values(decomposition, n_resamples=args.resamples, seed=0, names=names)
    with meter.phase(f"intervals_bootstrap (all, {args.resamples} resamples)") as timed:
        every = metric_intervals(records, point, n_resamples=args.resamples, seed=0, families=families,
                                 closed_form=False)
    vectorised = timed["seconds"]
    with meter.phase("intervals_as_logged (Wilson where exact)"):
        logged = metric_intervals(records, point, n_resamples=args.resamples, seed=0, families=families)
    ids = decomposition.question_ids
    with meter.phase(f"intervals_naive ({args.naive_resamples} resamples)") as timed:
        for counts in resample_counts(np.random.default_rng(0), len(ids), args.naive_resamples):
            compute_metrics(resample_records(records, counts.astype(int), ids), families=families)
    naive = timed["seconds"] / args.naive_resamples * args.resamples
    print(f"  {len(every) // 2} intervals by the bootstrap ({len(logged) // 2} as a run logs them); naive path "
          f"{timed['seconds'] / args.naive_resamples:.1f} s per resample, ~{naive:.0f} s for {args.resamples}",
          flush=True)
    ratios["intervals_bootstrap_seconds"] = vectorised
    ratios["intervals_resamples"] = float(args.resamples)
    ratios["intervals_logged_seconds"] = meter.results["intervals_as_logged (Wilson where exact)"]["seconds"]
    ratios["intervals_naive_vs_vectorised"] = naive / vectorised
    ratios["intervals_records"] = float(len(records))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m src.perf", description=__doc__.split("\n\n")[0])
    parser.add_argument("--limit", type=int, default=50, help="ARC-Challenge questions (default 50)")
    parser.add_argument("--compare-limit", type=int, default=5,
                        help="questions for the naive-path and lm-eval comparisons (default 5: 100 CoRA prompts)")
    parser.add_argument("--only", action="append", choices=PARTS, help="run only this part (repeatable)")
    parser.add_argument("--resamples", type=int, default=1000, help="intervals: bootstrap resamples (default 1000)")
    parser.add_argument("--naive-resamples", type=int, default=3,
                        help="intervals: resamples the naive path is timed on, then extrapolated (default 3)")
    parser.add_argument("--intervals-records", metavar="PATH",
                        help="intervals: time on this records.parquet (a run's artifact); when absent, the simulated "
                             "MMLU x CoRA table is built and written there for the next run")
    parser.add_argument("--out", default="bench.json", help="JSON file for the numbers (default bench.json)")
    args = parser.parse_args(argv)
    parts = args.only or list(PARTS)
    os.environ.setdefault("MCQ_DATA_DIR", str(REPO.parent / "shared" / "data"))
    os.environ.setdefault("TQDM_DISABLE", "1")

    import logging

    from .config_schema import compose_job

    logging.basicConfig(level=logging.WARNING)
    meter = Meter()
    ratios: dict[str, float] = {}
    cfg = compose_job([])
    model_cfg = model_config(cfg)
    shared: dict[str, Any] = {"model_cfg": model_cfg}
    threads = os.cpu_count()
    if set(parts) & set(MODEL_PARTS):
        with meter.phase("import torch+transformers+project"):
            import torch

            from .backends import hf  # noqa: F401
        threads = torch.get_num_threads()
        print(f"model {model_cfg['name']}, torch {torch.__version__}, {threads} threads, "
              f"load average {os.getloadavg()[0]:.1f}", flush=True)
        if "load" in parts:
            part_load(meter, model_cfg, ratios)
        with meter.phase("model_load (ours)"):
            shared["backend"] = hf_backend(model_cfg)
        shared["our_setup_s"] = meter.results["model_load (ours)"]["seconds"]
    else:
        print(f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}", flush=True)
    for name, fn in (("mainjob", part_mainjob), ("cora", part_cora), ("repetition", part_repetition), ("lmeval", part_lmeval),
                     ("agreement", part_agreement), ("adaptive", part_adaptive), ("intervals", part_intervals)):
        if name in parts:
            fn(meter, args, ratios, shared)

    print("\nratios and targets:")
    targets = {}
    for key, value in ratios.items():
        line = f"  {key:30s} {value:10.4g}"
        if key in TARGETS:
            text, check = TARGETS[key]
            targets[key] = bool(check(value))
            line += f"   {'MET' if targets[key] else 'NOT MET'}: {text}"
        print(line)
    report = {"model": model_cfg["name"], "limit": args.limit, "compare_limit": args.compare_limit, "parts": parts,
              "threads": threads, "load_average": os.getloadavg()[0], "phases": meter.results,
              "ratios": ratios, "targets_met": targets}
    Path(args.out).write_text(json.dumps(report, indent=2, sort_keys=True))
    print(f"\nwrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
