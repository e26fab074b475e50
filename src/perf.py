"""`python -m src.perf`: speed, memory and agreement numbers on the real default model (SmolLM2-135M, CPU), not a test.

`python -m src.bench`, its old name, still runs it. Not to be confused with `src/benchmarks/`, the question sets.

On the same model (one float copy of the GGUF, shared with lm-evaluation-harness) and the same ARC-Challenge
questions, in one process, it times and prints wall time, prompts/s, forward tokens and peak memory (RSS,
sampled), and the cost per token fed (ms/token, padding included) for:

- load        whole commands from fresh processes: the first model load into an empty models cache (hash +
              de-quantise the GGUF + save + load) vs a second process reading that cache
- mainjob     the README's main job (synthetic, CoRA set, the model's cloze_shown scoring): its answering phase,
              and option texts packed after their prompts vs padded batches on the same prompts
- cora        the CoRA divergent set with logprob scoring: the optimised path (prefix-tree packing, response
              cache cold, then warm: the answering phase of a rerun) vs padded batches of 16 (the primary
              baseline: what batched harnesses do) and the naive path (one call per trial, batch size 1, no
              cache, no sharing); padded and naive on the first --compare-limit questions
- dtype       what `model.dtype=auto` resolves to here, and bfloat16 against float32 on the same CoRA label
              scoring (--compare-limit questions) and main-job option scoring: time, decisions that agree out
              of N and max |difference| of the log-probabilities
- rerun       whole commands from fresh processes: `python -m src.run variants=cora limit=--rerun-limit` on a
              fresh store and response cache (models cache warm), the same command again (resume finds the
              finished run) and again with resume=false (every answer from the response cache)
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
- generation  label scoring vs generate R=1 greedy vs generate R=10 at T=0.7 (max_new_tokens of the config) on
              the same CoRA prompts of --limit ARC-Challenge questions, prefix-shared and padded
              (model.share_prefix=false): wall, tokens fed and peak RSS of each, every phase in a fresh process
              that loads the model and warms up the same way, so that the RSS peaks compare; `--only generation`
- intervals   the headline metrics' intervals (src/metrics/intervals.py) on a full MMLU x CoRA records table of
              the simulated model (no model load; building the table takes 4-7 minutes, --intervals-records
              keeps it for the next run): --resamples cluster
              resamples, vectorised, against the naive path (the family functions on explicitly resampled
              records, timed on --naive-resamples and extrapolated); `--only intervals` runs it alone
- startup     whole commands from fresh processes, no model: `python -m src.run model=simulated limit=1` on a
              temporary SQLite store (median of --startup-repeats), the import of the entry point, and the
              24-job smoke sweep under the joblib launcher against the summed `seconds` (compute) of its jobs;
              `--only startup` runs it alone (about a minute on 2 quiet cores)
- review_scale the review at the scale of a real sweep (docs/review_at_scale.md): 8 simulated models (success
              rates 0.30 to 0.86) x 4 benchmarks x 2 temperatures x 2 variant sets (original, CoRA) = 128 jobs of
              --scale-limit questions into one SQLite store (the smoke sweep's file, its axes replaced on the
              command line), then `python -m src.compare` on all of it from a fresh process: its wall and CPU
              seconds and the size of report.html; `--only review_scale` runs it alone (~6 minutes on 2 cores)

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
PARTS = ("load", "mainjob", "cora", "repetition", "lmeval", "agreement", "adaptive", "dtype", "rerun", "intervals",
         "startup", "generation", "review_scale")
# the parts that use the model loaded in this process (generation loads it in a fresh process per phase)
MODEL_PARTS = tuple(p for p in PARTS if p not in ("load", "rerun", "intervals", "startup", "generation",
                                                  "review_scale"))
TARGETS = {  # the targets, checked on the printed numbers
    "cora_vs_padded": ("CoRA label scoring: >= 3x faster than padded batches of 16 on the same prompts",
                       lambda r: r >= 3.0),
    "cora_vs_lmeval_scoring": ("CoRA logprob: faster than lm-eval scoring the same prompts", lambda r: r > 1.0),
    "exact10_vs_greedy": ("10 repetitions, exact first-token sampling: <= 1.3x one greedy pass", lambda r: r <= 1.3),
    "agreement_max_abs": ("label log-probs equal lm-eval's within 1e-4", lambda r: r <= 1e-4),
    "agreement_ranking": ("same option ranking on every question", lambda r: r == 1.0),
    "load_cold_vs_warm": ("fresh process: first model load >= 3x a load from the models cache", lambda r: r >= 3.0),
    "rerun_vs_first": ("fresh process: rerun of a finished `python -m src.run` < 10% of its first time",
                       lambda r: r < 0.1),
    "bf16_same_decisions": ("bfloat16: the same decision as float32 on every prompt (what dtype=auto as the "
                            "default model's setting would need)", lambda r: r == 1.0),
    "adaptive_same_verdicts": ("adaptive repetitions: every SURE/UNSURE x right/wrong cell as the full run's",
                               lambda r: r == 1.0),
    "startup_run_wall_s": ("fresh process: `python -m src.run model=simulated limit=1` <= 3 s wall", lambda r: r <= 3.0),
    "startup_sweep_vs_compute": ("24-job simulated sweep under joblib: < 2x the summed compute of its jobs",
                                 lambda r: r < 2.0),
    "gen_greedy_vs_labels": ("generate R=1 greedy: <= 1.5x the wall of label scoring on the same prompts",
                             lambda r: r <= 1.5),
    "gen_r10_vs_labels": ("generate R=10 at T=0.7: <= 2.5x the wall of label scoring on the same prompts",
                          lambda r: r <= 2.5),
    "gen_r10_vs_r1_peak_rss": ("generate: peak RSS at R=10 <= 1.2x R=1 on the same prompts", lambda r: r <= 1.2),
    "gen_shared_same_samples": ("generate: prefix-shared samples identical to padded batches'", lambda r: r == 1.0),
    "review_scale_compare_cpu_s": ("review at scale: `python -m src.compare` on 128 runs < 60 s of CPU (its wall on "
                                   "a quiet machine; wall under load is printed beside it)", lambda r: r < 60.0),
    "review_scale_html_mb": ("review at scale: report.html of 128 runs < 5 MB", lambda r: r < 5.0),
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
            fed = tokens() - tokens_before
            out.update(seconds=seconds, prompts=prompts, prompts_per_s=prompts / seconds if seconds > 0 else math.nan,
                       forward_tokens=fed, ms_per_token=1000 * seconds / fed if fed else math.nan,
                       peak_rss_mib=peak[0], peak_rss_growth_mib=peak[0] - start_rss)
            self.results[name] = out
            per_token = f"{out['ms_per_token']:6.2f} ms/token" if fed else " " * 15
            print(f"  {name:28s} {seconds:8.2f} s  {out['prompts_per_s']:8.2f} prompts/s  {per_token}  "
                  f"{fed:>9,} tokens  peak {peak[0]:7.0f} MiB (+{peak[0] - start_rss:.0f})", flush=True)


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


LOAD_CHILD = """
import json, time
from src.config_schema import compose_job
from src.perf import hf_backend, model_config
import src.backends.hf
start = time.perf_counter()
hf_backend(model_config(compose_job([])))
print(json.dumps({"load_s": time.perf_counter() - start}))
"""  # a fresh process: imports, then the default model built and loaded; its own load time is its last line


def fresh_process(meter: Meter, name: str, command: list[str], **env: str) -> str:
    """Run `command` from the repository in a new process, timed whole as phase `name`; its stdout. With psutil
    installed, the peak RSS of the process and its children (sampled) is kept as `process_peak_rss_mib` and printed:
    the phase's own RSS columns are this process's."""
    import subprocess

    peak, stop = [0.0], threading.Event()
    with meter.phase(name) as out:
        proc = subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env={**os.environ, "TQDM_DISABLE": "1", **env})
        watcher = threading.Thread(target=_watch_rss, args=(proc.pid, peak, stop), daemon=True)
        watcher.start()
        stdout, stderr = proc.communicate()
        stop.set()
        watcher.join()
    if peak[0]:
        out["process_peak_rss_mib"] = peak[0]
        print(f"  {'':28s} process peak RSS {peak[0]:.0f} MiB", flush=True)
    if proc.returncode != 0:
        raise SystemExit(f"perf: {name} exited {proc.returncode}: {stderr.strip()[-2000:]}")
    return stdout


def _watch_rss(pid: int, peak: list[float], stop: threading.Event) -> None:
    """Sample the RSS of process `pid` and its children into peak[0] (MiB) until `stop` (nothing without psutil)."""
    try:
        import psutil

        process = psutil.Process(pid)
    except (ImportError, OSError):
        return
    while not stop.wait(0.05):
        try:
            family = [process, *process.children(recursive=True)]
        except psutil.Error:  # the process has ended
            return
        rss = 0
        for member in family:
            try:
                rss += member.memory_info().rss
            except psutil.Error:  # a child that ended meanwhile
                pass
        peak[0] = max(peak[0], rss / 2**20)


def part_load(meter: Meter, args, ratios: dict[str, float], shared: dict[str, Any]) -> None:
    """Two fresh processes on one empty models cache: the first hashes and de-quantises the GGUF and saves the
    float copy, the second reads it. Whole-process wall times (imports included, as a user waits) and each
    process's own load time."""
    print("load: fresh processes, first model load into an empty models cache vs a second process reading it",
          flush=True)
    loads = {}
    with tempfile.TemporaryDirectory() as cold:
        for name in ("load_cold (process, convert)", "load_warm (process, cached)"):
            out = fresh_process(meter, name, [sys.executable, "-c", LOAD_CHILD], MCQ_CACHE_DIR=cold)
            loads[name] = json.loads(out.strip().splitlines()[-1])["load_s"]
            print(f"  {'':28s} of which the load itself {loads[name]:.2f} s", flush=True)
    cold_name, warm_name = loads
    ratios["load_cold_vs_warm"] = meter.results[cold_name]["seconds"] / meter.results[warm_name]["seconds"]
    ratios["load_cold_vs_warm_load_only"] = loads[cold_name] / loads[warm_name]


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
    optimised, padded = r["cora_optimised_subset"], r["cora_padded_subset (batch 16)"]
    ratios["cora_vs_padded"] = padded["seconds"] / optimised["seconds"]
    # where the speed comes from: fewer tokens fed, and the cost of each (the tree mask makes packed tokens dearer)
    ratios["cora_padded_vs_optimised_tokens"] = padded["forward_tokens"] / optimised["forward_tokens"]
    ratios["cora_optimised_vs_padded_ms_per_token"] = optimised["ms_per_token"] / padded["ms_per_token"]
    ratios["cora_vs_naive"] = r["cora_naive_subset (1 call/trial)"]["seconds"] / optimised["seconds"]
    ratios["rerun_vs_first_answering"] = r["cora_rerun (warm cache)"]["seconds"] / r["cora_optimised (cold cache)"]["seconds"]
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


def decision_logprobs(answer) -> list[float]:
    """The log-probabilities an answer's decision was taken on: option log-likelihoods, else label log-probs."""
    if answer.option_loglik is not None:
        return list(answer.option_loglik)
    mass = answer.label_mass if answer.label_mass is not None else 1.0
    return [math.log(p * mass) if p * mass > 0 else -math.inf for p in answer.label_probs]


def answer_agreement(ours, theirs) -> tuple[int, int, float]:
    """(prompts with the same decision, prompts, max |difference| of the decision log-probs) of two runs of
    `answer_items` on the same items."""
    pairs = [(a, b) for x, y in zip(ours, theirs) for a, b in zip(x, y)]
    gaps = [abs(u - v) for a, b in pairs for u, v in zip(decision_logprobs(a), decision_logprobs(b))
            if math.isfinite(u) and math.isfinite(v)]
    return sum(a.slot == b.slot for a, b in pairs), len(pairs), max(gaps, default=math.nan)


def part_dtype(meter: Meter, args, ratios: dict[str, float], shared: dict[str, Any]) -> None:
    """What `model.dtype=auto` resolves to on this machine, and bfloat16 against float32 on the same prompts:
    CoRA label scoring (logprob, chat prompts) and the main job's option scoring (cloze_shown), both packed.
    bfloat16 is measured even where the hardware lacks it (torch then converts to float32 and back)."""
    from .backends.base import SamplingParams
    from .backends.hf.loading import cpu_has_bf16, dtype_name, gpu_has_bf16, runs_on_gpu, torch_dtype
    from .trials import answer_items

    model_cfg = shared["model_cfg"]
    device_map = model_cfg.get("device_map")
    device = "GPU" if runs_on_gpu(device_map) else "CPU"
    native = gpu_has_bf16() if device == "GPU" else cpu_has_bf16()
    auto = dtype_name(torch_dtype("auto", device_map=device_map))
    print(f"dtype: model.dtype=auto resolves to {auto} here (this {device} {'has' if native else 'lacks'} native "
          f"bfloat16{'' if device == 'GPU' else ': AVX-512 BF16 or AMX'}); {model_cfg['name']} is configured "
          f"{model_cfg['dtype']}", flush=True)
    ratios["dtype_auto_is_bf16"] = float(auto == "bfloat16")
    cora = shared.get("subset") or build(["variants=cora", "scoring=logprob"], args.compare_limit)[1]
    main_cfg, main = build(["variants=cora"], args.compare_limit, benchmark="synthetic")
    params, answers = SamplingParams(n=1), {}
    for label, items, scoring, chat in (("cora", cora, "logprob", True), ("mainjob", main, main_cfg.scoring, False)):
        for dtype in ("float32", "bfloat16"):
            backend = hf_backend(model_cfg, chat=chat, dtype=dtype)
            answer_items(backend, items[:4], scoring=scoring, params=params, progress=False)  # warm-up, untimed
            with meter.phase(f"{label}_{dtype} ({scoring})", prompts=len(items), tokens=lambda: backend.forward_tokens):
                answers[label, dtype] = answer_items(backend, items, scoring=scoring, params=params, progress=False)
            if not backend.share_prefix:
                print(f"  {dtype}: prefix packing turned itself off (see the warning above)", flush=True)
        same, n, gap = answer_agreement(answers[label, "float32"], answers[label, "bfloat16"])
        r = meter.results
        ratios[f"bf16_speedup_{label}"] = r[f"{label}_float32 ({scoring})"]["seconds"] / \
            r[f"{label}_bfloat16 ({scoring})"]["seconds"]
        ratios[f"bf16_same_decisions_{label}"] = same / n
        ratios[f"bf16_max_abs_logprob_{label}"] = gap
        print(f"  bfloat16 vs float32, {label} ({scoring}): same decision on {same} of {n} prompts, max |difference "
              f"of log-prob| {gap:.3g}, bfloat16 {ratios[f'bf16_speedup_{label}']:.2f}x as fast", flush=True)
    ratios["bf16_same_decisions"] = min(ratios["bf16_same_decisions_cora"], ratios["bf16_same_decisions_mainjob"])


def part_rerun(meter: Meter, args, ratios: dict[str, float], shared: dict[str, Any]) -> None:
    """Whole commands from fresh processes: `python -m src.run variants=cora limit=N` on a new store and response
    cache, the same command again (resume finds the finished run and asks nothing), and again with resume=false
    (every answer from the response cache; metrics and logging redone). The models cache is made warm first, and
    the store's tables are made before timing, as a store that has been used has them."""
    from mlflow.tracking import MlflowClient

    from .backends.hf import HFBackend, gguf_cache

    backend = HFBackend.from_config(shared["model_cfg"], chat=True, progress=False)
    if backend.gguf_path is not None:
        gguf_cache.ensure_float_copy(backend.gguf_path)
    print(f"rerun: fresh processes, `python -m src.run variants=cora limit={args.rerun_limit}` first, again, and "
          f"again with resume=false", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        store = f"sqlite:///{tmp}/mlflow.db"
        MlflowClient(tracking_uri=store).search_experiments()
        command = [sys.executable, "-m", "src.run", "variants=cora", f"limit={args.rerun_limit}",
                   f"tracking.uri={store}", f"cache.path={tmp}/responses.db"]
        names = ("run_first (process)", "run_again (process, resume)", "run_again (process, resume=false)")
        for i, (name, extra) in enumerate(zip(names, ([], [], ["resume=false"]))):
            fresh_process(meter, name, [*command, *extra, f"hydra.run.dir={tmp}/out{i}"])
    r = meter.results
    ratios["rerun_vs_first"] = r[names[1]]["seconds"] / r[names[0]]["seconds"]
    ratios["rerun_cached_answers_vs_first"] = r[names[2]]["seconds"] / r[names[0]]["seconds"]


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


def _child_cpu_s() -> float:
    import resource

    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def part_startup(meter: Meter, args, ratios: dict[str, float], shared: dict[str, Any]) -> None:
    """The fixed cost of a job, from fresh processes on a temporary SQLite store: `python -m src.run
    model=simulated limit=1` (its store made by a first, untimed run), the entry point's import alone, and the
    committed smoke sweep (24 simulated jobs) under the joblib launcher against the `seconds` its jobs logged.
    The CPU seconds beside the wall seconds do not grow with other processes' load as wall seconds do."""
    import statistics

    from mlflow.tracking import MlflowClient

    repeats = max(1, args.startup_repeats)
    print(f"startup: fresh processes, no model ({repeats} repeats, median), load average {os.getloadavg()[0]:.1f}",
          flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        uri = f"sqlite:///{tmp}/mlflow.db"
        run = [sys.executable, "-m", "src.run", "model=simulated", "limit=1", f"tracking.uri={uri}",
               f"cache.path={tmp}/responses.db", "resume=false"]
        fresh_process(meter, "startup_first_run (new store)", [*run, f"hydra.run.dir={tmp}/run0"])
        walls, cpus, imports = [], [], []
        for k in range(repeats):
            cpu = _child_cpu_s()
            fresh_process(meter, f"startup_run_{k + 1}", [*run, f"hydra.run.dir={tmp}/run{k + 1}"])
            walls.append(meter.results[f"startup_run_{k + 1}"]["seconds"])
            cpus.append(_child_cpu_s() - cpu)
            fresh_process(meter, f"startup_import_{k + 1} (src.run)", [sys.executable, "-c", "import src.run"])
            imports.append(meter.results[f"startup_import_{k + 1} (src.run)"]["seconds"])
        cpu = _child_cpu_s()
        fresh_process(meter, "startup_sweep (smoke, joblib)", [
            sys.executable, "-m", "src.run", "-m", "-cd", "sweeps", "-cn", "smoke", "hydra/launcher=joblib",
            f"tracking.uri={uri}", f"hydra.sweep.dir={tmp}/sweep", f"cache.path={tmp}/sweep-responses.db"])
        sweep_cpu = _child_cpu_s() - cpu  # the sweep's main process and the workers it waited for
        client = MlflowClient(tracking_uri=uri)
        experiment = client.get_experiment_by_name("smoke")
        jobs = client.search_runs([experiment.experiment_id], "tags.kind = 'job'")
        compute = sum(r.data.metrics.get("seconds", 0.0) for r in jobs)
    sweep = meter.results["startup_sweep (smoke, joblib)"]["seconds"]
    print(f"  run: median {statistics.median(walls):.2f} s wall, {statistics.median(cpus):.2f} s CPU; import of "
          f"src.run {statistics.median(imports):.2f} s; sweep: {len(jobs)} jobs, {sweep:.1f} s wall, "
          f"{sweep_cpu:.1f} s CPU, their compute {compute:.1f} s; load average {os.getloadavg()[0]:.1f}", flush=True)
    ratios["startup_run_wall_s"] = statistics.median(walls)
    ratios["startup_run_cpu_s"] = statistics.median(cpus)
    ratios["startup_import_s"] = statistics.median(imports)
    ratios["startup_sweep_jobs"] = float(len(jobs))
    ratios["startup_sweep_compute_s"] = compute
    ratios["startup_sweep_vs_compute"] = sweep / compute if compute else math.nan


# --only review_scale: the axes of the 128-job sweep, given on the command line of the smoke sweep's file
SCALE_AXES = {"model.success_rate": "0.3,0.38,0.46,0.54,0.62,0.7,0.78,0.86",
              "benchmark": "arc_challenge,commonsenseqa,mmlu,hellaswag", "temperature": "0.3,0.7",
              "variants": "original,cora"}


def scale_commands(root: Path, limit: int, axes: dict[str, str] = SCALE_AXES) -> tuple[list[str], list[str]]:
    """(the sweep, the comparison): the commands `part_review_scale` times, on a store under `root`."""
    uri = f"sqlite:///{root}/mlflow.db"
    sweep = [sys.executable, "-m", "src.run", "-m", "-cd", "sweeps", "-cn", "smoke",
             *[f"{key}={value}" for key, value in axes.items()], f"limit={limit}", "repetitions=1",
             "tracking.experiment=review_scale", f"tracking.uri={uri}", f"cache.path={root}/responses.db",
             f"hydra.sweep.dir={root}/sweep"]
    compare = [sys.executable, "-m", "src.compare", "--experiment", "review_scale", "--tracking-uri", uri,
               "--out", str(root / "report"), "--no-mlflow"]
    return sweep, compare


def part_review_scale(meter: Meter, args, ratios: dict[str, float], shared: dict[str, Any]) -> None:
    """The 128-job simulated sweep into one store, then `python -m src.compare` on it from a fresh process: wall
    and CPU seconds (CPU: what the wall would be on a quiet machine; the wall grows with other processes' load)
    and the size of report.html."""
    root = Path(args.scale_dir) if args.scale_dir else Path(tempfile.mkdtemp(prefix="review-scale-"))
    root.mkdir(parents=True, exist_ok=True)
    sweep, compare = scale_commands(root.resolve(), args.scale_limit)
    print(f"review_scale: 128 jobs of {args.scale_limit} questions into {root}, load average "
          f"{os.getloadavg()[0]:.1f}", flush=True)
    if not (root / "mlflow.db").is_file():  # --scale-dir keeps the store for the next measurement
        fresh_process(meter, "review_scale_sweep (128 jobs)", sweep)
    cpu = _child_cpu_s()
    fresh_process(meter, "review_scale_compare", compare)
    compare_cpu = _child_cpu_s() - cpu
    html_mb = (root / "report" / "report.html").stat().st_size / 1e6
    wall = meter.results["review_scale_compare"]["seconds"]
    print(f"  compare: {wall:.1f} s wall, {compare_cpu:.1f} s CPU; report.html {html_mb:.2f} MB; load average "
          f"{os.getloadavg()[0]:.1f}", flush=True)
    ratios["review_scale_compare_wall_s"] = wall
    ratios["review_scale_compare_cpu_s"] = compare_cpu
    ratios["review_scale_html_mb"] = html_mb


# --only generation: one fresh process per phase (name -> share_prefix, sampling settings; None: label scoring)
GENERATION_PHASES = {
    "labels": (True, None),
    "greedy": (True, {"n": 1}),
    "r10": (True, {"n": 10, "temperature": 0.7}),
    "greedy_padded": (False, {"n": 1}),
    "r10_padded": (False, {"n": 10, "temperature": 0.7}),
}


def generation_phase(args) -> int:
    """A child of `part_generation`: load the model, warm up (first passes, the packing check), time one phase of
    GENERATION_PHASES on the CoRA prompts, and write its numbers and samples to --out."""
    from .backends.base import SamplingParams

    share, sampling = GENERATION_PHASES[args.generation_phase]
    cfg, items = build(["variants=cora", "scoring=generate"], args.limit)
    backend = hf_backend(model_config(cfg), share_prefix=share)
    requests = [it.request for it in items]
    backend.score_labels(requests[:2])
    backend.generate(requests[:2], SamplingParams(max_new_tokens=1))
    meter, cpu = Meter(), time.process_time()
    with meter.phase(args.generation_phase, prompts=len(requests), tokens=lambda: backend.forward_tokens):
        if sampling is None:
            backend.score_labels(requests)
            samples = []
        else:
            params = SamplingParams(**sampling, max_new_tokens=cfg.max_new_tokens)
            samples = [[str(c) for c in row] for row in backend.generate(requests, params)]
    meter.results[args.generation_phase]["cpu_s"] = time.process_time() - cpu  # less swayed by other processes' load
    Path(args.out).write_text(json.dumps({"phase": meter.results[args.generation_phase], "samples": samples}))
    return 0


def part_generation(meter: Meter, args, ratios: dict[str, float], shared: dict[str, Any]) -> None:
    """Label scoring vs generation at R=1 and R=10 on the same CoRA prompts, prefix-shared and padded, each phase
    in a fresh process (RSS peaks never come down within one), started from the same model load."""
    import subprocess

    print(f"generation: CoRA prompts of {args.limit} ARC-Challenge questions, one fresh process per phase", flush=True)
    samples = {}
    for phase in GENERATION_PHASES:
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "phase.json"
            subprocess.run([sys.executable, "-m", "src.perf", "--generation-phase", phase, "--limit", str(args.limit),
                            "--out", str(out)], cwd=REPO, check=True)
            result = json.loads(out.read_text())
        meter.results[f"generation_{phase}"] = result["phase"]
        samples[phase] = result["samples"]
    r = {phase: meter.results[f"generation_{phase}"] for phase in GENERATION_PHASES}
    ratios["gen_greedy_vs_labels"] = r["greedy"]["seconds"] / r["labels"]["seconds"]
    ratios["gen_r10_vs_labels"] = r["r10"]["seconds"] / r["labels"]["seconds"]
    ratios["gen_greedy_vs_labels_cpu"] = r["greedy"]["cpu_s"] / r["labels"]["cpu_s"]
    ratios["gen_r10_vs_labels_cpu"] = r["r10"]["cpu_s"] / r["labels"]["cpu_s"]
    ratios["gen_r10_vs_r1_peak_rss"] = r["r10"]["peak_rss_mib"] / r["greedy"]["peak_rss_mib"]
    ratios["gen_r10_vs_r1_padded_peak_rss"] = r["r10_padded"]["peak_rss_mib"] / r["greedy_padded"]["peak_rss_mib"]
    ratios["gen_padded_vs_shared_r10_wall"] = r["r10_padded"]["seconds"] / r["r10"]["seconds"]
    ratios["gen_padded_vs_shared_r10_tokens"] = r["r10_padded"]["forward_tokens"] / r["r10"]["forward_tokens"]
    ratios["gen_shared_same_samples"] = float(samples["greedy"] == samples["greedy_padded"]
                                              and samples["r10"] == samples["r10_padded"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m src.perf", description=__doc__.split("\n\n")[0])
    parser.add_argument("--limit", type=int, default=50, help="ARC-Challenge questions (default 50)")
    parser.add_argument("--compare-limit", type=int, default=5,
                        help="questions for the naive-path and lm-eval comparisons (default 5: 100 CoRA prompts)")
    parser.add_argument("--only", action="append", choices=PARTS, help="run only this part (repeatable)")
    parser.add_argument("--rerun-limit", type=int, default=10,
                        help="rerun: synthetic questions of the timed `python -m src.run variants=cora` (default 10)")
    parser.add_argument("--resamples", type=int, default=1000, help="intervals: bootstrap resamples (default 1000)")
    parser.add_argument("--naive-resamples", type=int, default=3,
                        help="intervals: resamples the naive path is timed on, then extrapolated (default 3)")
    parser.add_argument("--intervals-records", metavar="PATH",
                        help="intervals: time on this records.parquet (a run's artifact); when absent, the simulated "
                             "MMLU x CoRA table is built and written there for the next run")
    parser.add_argument("--startup-repeats", type=int, default=3,
                        help="startup: fresh `python -m src.run model=simulated limit=1` processes timed (default 3)")
    parser.add_argument("--scale-limit", type=int, default=100,
                        help="review_scale: questions per job of the 128-job sweep (default 100)")
    parser.add_argument("--scale-dir", metavar="DIR",
                        help="review_scale: the store and report folder; a store already there is compared again "
                             "without rerunning the sweep (default: a new temporary folder, kept)")
    parser.add_argument("--generation-phase", choices=sorted(GENERATION_PHASES), help=argparse.SUPPRESS)  # a child
    parser.add_argument("--out", default="bench.json", help="JSON file for the numbers (default bench.json)")
    args = parser.parse_args(argv)
    if args.generation_phase:
        return generation_phase(args)
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
        with meter.phase("model_load (ours)"):
            shared["backend"] = hf_backend(model_cfg)
        shared["our_setup_s"] = meter.results["model_load (ours)"]["seconds"]
    else:
        print(f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}", flush=True)
    for name, fn in (("load", part_load), ("mainjob", part_mainjob), ("cora", part_cora), ("repetition", part_repetition), ("lmeval", part_lmeval),
                     ("agreement", part_agreement), ("adaptive", part_adaptive), ("dtype", part_dtype),
                     ("rerun", part_rerun), ("intervals", part_intervals), ("startup", part_startup),
                     ("generation", part_generation), ("review_scale", part_review_scale)):
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
