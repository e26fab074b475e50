"""`python -m devtools.perf` parts that time this project's own work: load, main job, CoRA, repetition, adaptive,
rerun."""

from __future__ import annotations

import json
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

from devtools.perf.gpu import forward_flops
from devtools.perf.meter import LOAD_CHILD, Meter, build, fresh_process, hf_backend


def part_load(meter: Meter, args, ratios: dict[str, float], shared: dict[str, Any]) -> None:
    """Two fresh processes on one empty models cache: the first hashes and de-quantises the GGUF and saves the
    float copy, the second reads it. Whole-process wall times (imports included, as a user waits) and each
    process's own load time."""
    print(
        "load: fresh processes, first model load into an empty models cache vs a second process reading it", flush=True
    )
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
    from src.answering.cache import ResponseCache  # local: the part that times it imports it
    from src.answering.trials import answer_items  # local: loads pandas (slow import)
    from src.backends.base import SamplingParams  # local: the part that times it imports it

    cfg, items = build(["variants=cora", "scoring=logprob"], args.limit)
    _, subset = build(["variants=cora", "scoring=logprob"], args.compare_limit)
    backend = shared["backend"]
    print(
        f"cora: {len(items)} prompts ({args.limit} questions x CoRA divergent set); naive and padded on "
        f"{len(subset)} prompts ({args.compare_limit} questions)",
        flush=True,
    )
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
    ratios["rerun_vs_first_answering"] = (
        r["cora_rerun (warm cache)"]["seconds"] / r["cora_optimised (cold cache)"]["seconds"]
    )
    shared["subset"] = subset


ROUNDS = (1, 2, 3, 4)  # of the main job's subset phases: the budget and one-pack-per-pass feed the same passes there
# (one pack of at most 1,024 tokens each), so their ratio is ~1 plus the machine's drift, which four rounds average


def part_mainjob(meter: Meter, args, ratios: dict[str, float], shared: dict[str, Any]) -> None:
    """The README's main job (`python -m src.run variants=cora`: synthetic, the model's cloze_shown scoring), its
    answering phase with option texts packed after their prompts vs padded batches that encode each prompt once
    for all its options, on the same prompts; and batches sized by tokens against the fixed batches they replaced
    (one 1,024-token pack per pass; 16 prompts per padded batch), with the CPU default budget against larger ones."""
    from src.answering.trials import answer_items  # local: loads pandas (slow import)
    from src.backends.base import SamplingParams  # local: the part that times it imports it
    from src.backends.batch_tokens import CPU_BATCH_TOKENS  # local: the part that times it imports it

    cfg, items = build(["variants=cora"], None, benchmark="synthetic")
    backend = hf_backend(shared["model_cfg"], chat=False)  # option texts are never chat-wrapped
    print(
        f"mainjob: {len(items)} prompts (synthetic x CoRA divergent set, scoring={cfg.scoring}), "
        f"padded on the first {args.compare_limit} questions' prompts",
        flush=True,
    )
    subset = [it for it in items if int(it.question.id.rsplit("/", 1)[1]) < args.compare_limit]
    tokens = lambda: backend.forward_tokens  # noqa: E731
    params = SamplingParams(n=1)

    def answer(name: str, work: list, *, budget: int | None = None, rows: int | None = None) -> float:
        backend.budget.tokens = budget or CPU_BATCH_TOKENS
        backend.batch_size = rows
        with meter.phase(name, prompts=len(work), tokens=tokens):
            answer_items(backend, work, scoring=cfg.scoring, params=params, cache=None, progress=False)
        return meter.results[name]["seconds"]

    pairs, rows = backend.lm.attention_pairs, backend.lm.head_rows
    with time_in_matmuls_and_attention(backend.model) as spent:
        answer("mainjob_answering (packed)", items)  # the CPU default budget, as the job runs
    main = meter.results["mainjob_answering (packed)"]
    pairs, rows = backend.lm.attention_pairs - pairs, backend.lm.head_rows - rows
    flops = forward_flops(backend.model.config, main["forward_tokens"], pairs, rows)
    model_rate = flops / main["seconds"]
    peak = matmul_rate(backend.model.get_input_embeddings().weight.dtype)
    ceiling = flops / (spent["matmuls"] + spent["attention"]) / peak
    print(
        f"  main job: {model_rate / 1e9:.1f} GFLOP/s of model FLOPs, a {peak / 1e9:.1f} GFLOP/s matmul in this "
        f"process: {model_rate / peak:.0%} of it; {spent['matmuls']:.1f} s in the matrix products "
        f"({flops / spent['matmuls'] / peak:.0%} of the matmul's rate), {spent['attention']:.1f} s in attention's "
        f"SDPA kernel: {ceiling:.0%} if nothing else took time",
        flush=True,
    )
    ratios["mainjob_model_gflops"], ratios["matmul_gflops"] = model_rate / 1e9, peak / 1e9
    ratios["mainjob_share_of_matmul_rate"] = model_rate / peak
    ratios["mainjob_share_ceiling"] = ceiling
    fixed, default = {}, {}

    def budgeted(round_: int) -> None:
        default[round_] = answer(f"mainjob_subset (packed, {CPU_BATCH_TOKENS}-token budget) #{round_}", subset)

    def one_pack(round_: int) -> None:
        with one_pack_per_pass():  # before budgets: each pack of model.pack_tokens in a pass of its own
            fixed[round_] = answer(f"mainjob_subset (packed, one pack per pass) #{round_}", subset)

    for round_ in ROUNDS:  # alternated, each first in turn: this machine's speed drifts within minutes by ~5%
        for phase in (budgeted, one_pack) if round_ % 2 else (one_pack, budgeted):
            phase(round_)
        for larger in (2 * CPU_BATCH_TOKENS, 4 * CPU_BATCH_TOKENS):
            answer(f"mainjob_subset (packed, {larger}-token budget) #{round_}", subset, budget=larger)
    backend.share_prefix = False
    padded_fixed = answer("mainjob_subset (padded batches of 16)", subset, budget=1 << 30, rows=16)
    padded_tokens = answer(f"mainjob_subset (padded, {CPU_BATCH_TOKENS}-token batches)", subset)
    backend.share_prefix, backend.batch_size = True, shared["model_cfg"].get("batch_size")
    r = meter.results
    ratios["mainjob_padded_vs_packed"] = padded_fixed / default[1]
    ratios["mainjob_answering_seconds"] = r["mainjob_answering (packed)"]["seconds"]
    ratios["mainjob_token_vs_fixed_batches"] = sum(default.values()) / sum(fixed.values())
    ratios["mainjob_padded_token_vs_fixed_batches"] = padded_tokens / padded_fixed
    for larger in (2 * CPU_BATCH_TOKENS, 4 * CPU_BATCH_TOKENS):
        ratios[f"mainjob_budget_{larger}_vs_{CPU_BATCH_TOKENS}"] = sum(
            r[f"mainjob_subset (packed, {larger}-token budget) #{k}"]["seconds"] for k in ROUNDS
        ) / sum(default.values())


def matmul_rate(dtype: Any, size: int = 1024, seconds: float = 1.0) -> float:
    """FLOP/s of a (size x size) @ (size x size) matmul in `dtype` on this process's threads, repeated for about
    `seconds` after a warm-up: the CPU's practical peak that the model's FLOP/s is measured against."""
    import time

    import torch

    a, b = torch.randn(size, size).to(dtype), torch.randn(size, size).to(dtype)
    torch.mm(a, b)
    done, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        torch.mm(a, b)
        done += 1
    return 2.0 * size**3 * done / (time.perf_counter() - start)


@contextmanager
def time_in_matmuls_and_attention(model: Any) -> Iterator[dict[str, float]]:
    """Seconds spent inside the model's `nn.Linear` modules (every matrix product of the layers and the output
    head) and inside torch's SDPA kernel calls while in the block. The FLOPs counted over these seconds alone bound
    the share of the matmul rate that fusing or removing all the other work (norms, rotary, activations, grouped
    KV heads' copies, gathers, Python) could reach; `spent` also counts the calls timed. Forward hooks and one
    wrapped function: no measurable cost (the main job's first 10 questions took 0.99x their time without them,
    four interleaved rounds, 2026-11-27)."""
    import time
    from unittest import mock

    import torch

    spent = {"matmuls": 0.0, "attention": 0.0, "matmul_calls": 0, "attention_calls": 0}
    started: list[float] = []

    def before(module: Any, args: Any) -> None:
        started.append(time.perf_counter())

    def after(module: Any, args: Any, output: Any) -> None:
        spent["matmuls"] += time.perf_counter() - started.pop()
        spent["matmul_calls"] += 1

    kernel = torch.nn.functional.scaled_dot_product_attention

    def timed_kernel(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return kernel(*args, **kwargs)
        finally:
            spent["attention"] += time.perf_counter() - start
            spent["attention_calls"] += 1

    linears = [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
    hooks = [h for m in linears for h in (m.register_forward_pre_hook(before), m.register_forward_hook(after))]
    try:  # transformers looks the kernel up in torch.nn.functional at each call
        with mock.patch.object(torch.nn.functional, "scaled_dot_product_attention", timed_kernel):
            yield spent
    finally:
        for hook in hooks:
            hook.remove()


@contextmanager
def one_pack_per_pass() -> Iterator[None]:
    """The packed passes as they were before budgets: one pack per pass (scoring's `pack_batches` with max_units=1)."""
    from unittest import mock

    from src.backends.hf import scoring  # local: loads torch, transformers (slow import)

    with mock.patch.object(scoring, "pack_batches", partial(scoring.pack_batches, max_units=1)):
        yield


def part_repetition(meter: Meter, args, ratios: dict[str, float], shared: dict[str, Any]) -> None:
    from src.answering.trials import answer_items  # local: loads pandas (slow import)
    from src.backends.base import SamplingParams  # local: the part that times it imports it

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
    ratios["exact10_vs_greedy"] = (
        r["exact_sampling (R=10, T=0.7)"]["seconds"] / r["greedy_pass (logprob, R=1)"]["seconds"]
    )
    ratios["generate10_vs_exact10"] = (
        r["generate (R=10, T=0.7, 3 tok)"]["seconds"] / r["exact_sampling (R=10, T=0.7)"]["seconds"]
    )
    ratios["exact_invalid_share"] = sum(a.slot is None for row in answers for a in row) / (10 * len(items))


def part_adaptive(meter: Meter, args, ratios: dict[str, float], shared: dict[str, Any]) -> None:
    """Adaptive repetitions against asking all R, on the real model: samples saved, wall ratio, same verdicts."""
    from src.answering.trials import answer_items, to_records  # local: loads pandas (slow import)
    from src.backends.base import SamplingParams  # local: the part that times it imports it
    from src.metrics import question_outcomes  # local: loads numpy, pandas (slow import)

    _, items = build(["variants=original", "prompt=repetition", "scoring=generate"], args.limit)
    backend, R = shared["backend"], 10
    params = SamplingParams(n=R, temperature=0.7, max_new_tokens=3)
    print(f"adaptive: {len(items)} prompts, {R} generated repetitions at T=0.7 (response cache off)", flush=True)
    records = {}
    for name, adaptive in (("full", False), ("adaptive", True)):
        with meter.phase(
            f"adaptive_{name} (generate R={R})", prompts=len(items), tokens=lambda: backend.forward_tokens
        ):
            answers = answer_items(backend, items, scoring="generate", params=params, progress=False, adaptive=adaptive)
        records[name] = to_records(items, answers, run_info={}, planned=R if adaptive else None)
    same = all(
        question_outcomes(records["full"], sure_rule=rule)[["sure", "right"]].equals(
            question_outcomes(records["adaptive"], sure_rule=rule)[["sure", "right"]]
        )
        for rule in ("answer", "correctness")
    )
    on = ["question_id", "variant_id", "repetition"]
    drawn = records["adaptive"].merge(records["full"], on=on, suffixes=("", "_full"))
    r = meter.results
    ratios["adaptive_saved_share"] = 1.0 - len(records["adaptive"]) / len(records["full"])
    ratios["adaptive_vs_full_wall"] = (
        r[f"adaptive_adaptive (generate R={R})"]["seconds"] / r[f"adaptive_full (generate R={R})"]["seconds"]
    )
    ratios["adaptive_vs_full_tokens"] = r[f"adaptive_adaptive (generate R={R})"]["forward_tokens"] / max(
        1.0, r[f"adaptive_full (generate R={R})"]["forward_tokens"]
    )  # forward tokens: the load-independent cost
    ratios["adaptive_same_verdicts"] = float(same)
    ratios["adaptive_same_samples"] = float(
        len(drawn) == len(records["adaptive"]) and bool((drawn["raw_output"] == drawn["raw_output_full"]).all())
    )
    print(
        f"  samples saved {ratios['adaptive_saved_share']:.1%} ({len(records['adaptive'])} of {len(records['full'])} "
        f"asked), wall ratio adaptive/full {ratios['adaptive_vs_full_wall']:.2f} (forward tokens "
        f"{ratios['adaptive_vs_full_tokens']:.2f}), verdicts identical (both SURE "
        f"rules): {same}, asked samples identical: {bool(ratios['adaptive_same_samples'])}",
        flush=True,
    )


def part_rerun(meter: Meter, args, ratios: dict[str, float], shared: dict[str, Any]) -> None:
    """Whole commands from fresh processes: `python -m src.run variants=cora limit=N` on a new store and response
    cache, the same command again (resume finds the finished run and asks nothing), and again with resume=false
    (every answer from the response cache; metrics and logging redone). The models cache is made warm first, and
    the store's tables are made before timing, as a store that has been used has them."""
    from mlflow.tracking import MlflowClient

    from src.backends.hf import HFBackend, gguf_cache  # local: loads torch, transformers (slow import)

    backend = HFBackend.from_config(shared["model_cfg"], chat=True, progress=False)
    if backend.gguf_path is not None:
        gguf_cache.ensure_float_copy(backend.gguf_path)
    print(
        f"rerun: fresh processes, `python -m src.run variants=cora limit={args.rerun_limit}` first, again, and "
        f"again with resume=false",
        flush=True,
    )
    with tempfile.TemporaryDirectory() as tmp:
        store = f"sqlite:///{tmp}/mlflow.db"
        MlflowClient(tracking_uri=store).search_experiments()
        command = [
            sys.executable,
            "-m",
            "src.run",
            "variants=cora",
            f"limit={args.rerun_limit}",
            f"tracking.uri={store}",
            f"cache.path={tmp}/responses.db",
        ]
        names = ("run_first (process)", "run_again (process, resume)", "run_again (process, resume=false)")
        for i, (name, extra) in enumerate(zip(names, ([], [], ["resume=false"]))):
            fresh_process(meter, name, [*command, *extra, f"hydra.run.dir={tmp}/out{i}"])
    r = meter.results
    ratios["rerun_vs_first"] = r[names[1]]["seconds"] / r[names[0]]["seconds"]
    ratios["rerun_cached_answers_vs_first"] = r[names[2]]["seconds"] / r[names[0]]["seconds"]
