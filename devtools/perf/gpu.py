"""`python -m devtools.perf --only gpu`: the device check. An 8B model's shape on a GPU, timed on MedQA-sized CoRA work.

It downloads nothing. The model has Llama-3-8B's shape (32 layers, hidden 4096, MLP 14,336, 32 attention heads,
8 KV heads) with random bfloat16 weights built on the GPU from the config, the vocabulary of the embedded
SmolLM2's tokenizer (49,152 tokens; Llama-3's is 128,256, which changes the head's cost only: 1-2% of the
FLOPs here); the prompts are MedQA's (the first --gpu-questions questions of ../shared/data/medqa, the CoRA
divergent set: 26 variants of a 5-option question, label scoring) through SmolLM2's chat template. The project's
own HF backend answers them with `model.max_batch_tokens=auto`, and the figures are extrapolated to the whole
job (1,273 questions x 26 variants): prompts/s, tokens/s (tokens fed: the packed prefix trees' nodes, padding
included), the share of the device's bf16 peak that the model FLOPs took, peak GPU memory, the budget auto found,
and one out-of-memory recovery forced by a budget set far too high (its records compared with auto's).

Without a GPU (or with --tiny) the same code runs a tiny shape (2 layers, hidden 64) on the CPU, where the
out-of-memory recovery is forced by a pass that raises CUDA's out-of-memory error above a token count: a check
that the path works, not a measurement.
"""

from __future__ import annotations

import math
import os
from typing import Any

from devtools.perf.meter import Meter, build, model_config
from src.common.errors import UserError

MEDQA_QUESTIONS, CORA_VARIANTS = 1273, 26  # the whole job the slice is extrapolated to
TARGET_S = 120.0  # the target for the whole job on one H100: a GPU study's turnaround
# Dense bfloat16 peaks (no sparsity), TFLOP/s, by the name torch reports; others print the share as unknown.
BF16_PEAK_TFLOPS = {
    "H100 80GB HBM3": 989.0,
    "H100 SXM": 989.0,
    "H200": 989.0,
    "H100 PCIe": 756.0,
    "H100 NVL": 835.0,
    "A100": 312.0,
    "L40S": 362.0,
    "L4": 121.0,
}
LLAMA3_8B = dict(
    num_hidden_layers=32,
    hidden_size=4096,
    intermediate_size=14336,
    num_attention_heads=32,
    num_key_value_heads=8,
    rope_theta=500000.0,
    max_position_embeddings=8192,
)
TINY = dict(
    num_hidden_layers=2,
    hidden_size=64,
    intermediate_size=224,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=4096,
)
TINY_OOM_ABOVE = 4096  # --tiny: passes above this many tokens raise CUDA's out-of-memory error


def bf16_peak(device_name: str) -> float | None:
    """The dense bf16 peak (TFLOP/s) of a GPU by its name (`H100 80GB HBM3` is the SXM part), None if unknown."""
    hits = [peak for key, peak in BF16_PEAK_TFLOPS.items() if key in device_name]
    return hits[0] if hits else None


def forward_flops(config: Any, tokens: int, attended: int, head_rows: int = 0) -> float:
    """Model FLOPs of forward passes: 2 x the matrix parameters per token fed (attention projections, MLP), 2 x
    hidden x vocabulary per position the output head computed logits for (`head_rows`: one per prompt in label
    scoring, one per continuation token in cloze), plus attention's scores and weighted sum, 4 x hidden per (query,
    key) pair over the `attended` pairs that attention computed (`LoadedModel.attention_pairs`: a padded or
    one-call packed row's every pair, seen or not, as SDPA computes them; a packed pass in blocks, each block's
    queries x the keys they see)."""
    h, layers = config.hidden_size, config.num_hidden_layers
    kv = h * config.num_key_value_heads // config.num_attention_heads
    per_layer = 2 * h * h + 2 * h * kv + 3 * h * config.intermediate_size  # q, o; k, v; gate, up, down
    return 2.0 * layers * per_layer * tokens + 2.0 * h * config.vocab_size * head_rows + 4.0 * layers * h * attended


def build_model(tokenizer: Any, *, tiny: bool, device: str) -> Any:
    """A LlamaForCausalLM of Llama-3-8B's shape (or TINY's) with random weights, built in bfloat16 (float32 when
    tiny on a CPU) on `device` from its config, nothing downloaded; SDPA attention."""
    import torch
    import transformers

    config = transformers.LlamaConfig(
        vocab_size=len(tokenizer),
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        tie_word_embeddings=False,
        attn_implementation="sdpa",
        **(TINY if tiny else LLAMA3_8B),
    )
    dtype = torch.bfloat16 if device != "cpu" else torch.float32
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with torch.device(device):
            torch.manual_seed(0)
            model = transformers.LlamaForCausalLM(config)
    finally:
        torch.set_default_dtype(previous)
    return model.eval()


def medqa_items(questions: int) -> tuple[list[Any], str]:
    """The CoRA items (label scoring) of the first `questions` MedQA questions, and which benchmark they are: MedQA
    when ../shared/data holds it, else the synthetic benchmark (shorter prompts: the figures say so)."""
    try:
        return build(["variants=cora", "scoring=logprob"], questions, benchmark="medqa")[1], "medqa"
    except (UserError, FileNotFoundError):
        return build(["variants=cora", "scoring=logprob"], questions, benchmark="synthetic")[1], "synthetic"


def load_tokenizer(path: str | None) -> Any:
    """The tokenizer at `path` (a folder with tokenizer files), else the embedded SmolLM2's (its models-cache copy)."""
    import transformers

    if path is None:
        from src.backends.hf import HFBackend, gguf_cache  # local: loads torch, transformers (slow import)
        from src.config.compose import compose_job  # local: loads hydra, omegaconf (slow import)

        backend = HFBackend.from_config(model_config(compose_job([])), chat=True, progress=False)
        path = str(gguf_cache.ensure_float_copy(backend.gguf_path))
    return transformers.AutoTokenizer.from_pretrained(path)


def part_gpu(meter: Meter, args, ratios: dict[str, float], shared: dict[str, Any]) -> None:
    """The device check (module docstring): on a GPU the 8B shape, else (or with --tiny) the tiny shape on the CPU."""
    import torch

    from src.answering.trials import answer_items  # local: loads pandas (slow import)
    from src.backends.base import SamplingParams  # local: the part that times it imports it
    from src.backends.hf import HFBackend, HFSettings  # local: loads torch, transformers (slow import)

    on_gpu = torch.cuda.is_available() and not args.tiny
    device = "cuda" if on_gpu else "cpu"
    name = torch.cuda.get_device_name() if on_gpu else "CPU (tiny shape: a check of the path, not a measurement)"
    tokenizer = load_tokenizer(args.tokenizer)
    with meter.phase("gpu_build (random weights)"):
        model = build_model(tokenizer, tiny=not on_gpu, device=device)
    n_questions = args.gpu_questions if on_gpu else min(args.gpu_questions, 4)
    items, benchmark = medqa_items(n_questions + 2)
    warm, timed = items[: 2 * CORA_VARIANTS], items[2 * CORA_VARIANTS :]  # warm-up: the first two questions
    params = SamplingParams(n=1)
    backend = HFBackend.in_memory(
        model,
        tokenizer,
        HFSettings(
            name="llama3-8b-shape" if on_gpu else "tiny-llama", chat=True, max_batch_tokens="auto", batch_size=None
        ),
        progress=False,
    )
    prompt_tokens = [len(backend._encode(backend._prompt_text(it.request.prompt))) for it in timed]
    print(
        f"gpu: {name}; {len(timed)} prompts ({benchmark}, {len(timed) // CORA_VARIANTS} questions x CoRA, label "
        f"scoring, mean prompt {sum(prompt_tokens) / len(prompt_tokens):.0f} tokens through the chat template), "
        f"torch {torch.__version__}, load average {os.getloadavg()[0]:.1f}",
        flush=True,
    )
    requests = [it.request for it in timed]
    with meter.phase("gpu_warmup (first questions)", prompts=len(warm), tokens=lambda: backend.forward_tokens):
        answer_items(backend, warm, scoring="logprob", params=params, cache=None, progress=False)
    if on_gpu:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    sync = torch.cuda.synchronize if on_gpu else (lambda: None)
    figures = {}
    # the slice in one call: passes as large as auto's budget (its search runs on these first, largest passes),
    # then as the job asks: chunks (the response cache's unit) as many prompts as a pass of the budget holds on a GPU,
    # 64 on a CPU (`budget.chunk_prompts`), each packed and passed on its own
    for phase_name, key in (
        ("gpu_cora (one call: auto's passes)", "one_call"),
        ("gpu_cora (job path: chunks the budget sizes)", "job"),
    ):
        pairs_before, rows_before = backend.lm.attention_pairs, backend.lm.head_rows
        with meter.phase(phase_name, prompts=len(timed), tokens=lambda: backend.forward_tokens) as phase:
            if key == "one_call":
                scores = backend.score_labels(requests)
            else:
                answer_items(backend, timed, scoring="logprob", params=params, cache=None, progress=False)
            sync()
        flops = forward_flops(
            model.config,
            phase["forward_tokens"],
            backend.lm.attention_pairs - pairs_before,
            backend.lm.head_rows - rows_before,
        )
        figures[key] = (phase["seconds"], phase["forward_tokens"], flops / phase["seconds"] / 1e12)
    found, searched = backend.budget.tokens, backend.budget.recoveries
    peak_gib = torch.cuda.max_memory_allocated() / 2**30 if on_gpu else math.nan
    peak = bf16_peak(name) if on_gpu else None
    for key, (seconds, fed, tflops) in figures.items():
        whole = seconds * MEDQA_QUESTIONS * CORA_VARIANTS / len(timed)
        share = f"{tflops / peak:.1%} of the dense bf16 peak {peak:g} TFLOP/s" if peak else "bf16 peak unknown"
        print(
            f"  {key}: {len(timed) / seconds:.1f} prompts/s, {fed / seconds:,.0f} tokens/s, {tflops:.1f} TFLOP/s "
            f"({share}); whole job {MEDQA_QUESTIONS:,} x {CORA_VARIANTS} extrapolated {whole:.0f} s",
            flush=True,
        )
        ratios.update(
            {
                f"gpu_{key}_prompts_per_s": len(timed) / seconds,
                f"gpu_{key}_tokens_per_s": fed / seconds,
                f"gpu_{key}_tflops": tflops,
                f"gpu_{key}_whole_job_s": whole,
            }
        )
        if peak:
            ratios[f"gpu_{key}_share_of_bf16_peak"] = tflops / peak
    print(
        f"  peak GPU memory {peak_gib:.1f} GiB; auto's budget {found} tokens per pass after {searched} halvings",
        flush=True,
    )

    # One out-of-memory recovery: a budget far above what fits, on padded rows (the pass that needs the most memory:
    # every prompt whole) of the whole slice in one call; on the CPU's tiny shape passes above TINY_OOM_ABOVE tokens
    # raise CUDA's error, as the GPU would. Its decisions are compared with auto's packed ones.
    high = HFBackend.in_memory(
        model,
        tokenizer,
        HFSettings(
            name=backend.name,
            chat=True,
            batch_size=None,
            share_prefix=False,
            max_batch_tokens=1 << 20 if on_gpu else 1 << 16,
        ),
        progress=False,
    )
    restore = None if on_gpu else _oom_above(model, TINY_OOM_ABOVE)
    try:
        with meter.phase(
            "gpu_oom_recovery (budget 2^20, padded)" if on_gpu else "gpu_oom_recovery (budget 2^16)",
            prompts=len(timed),
            tokens=lambda: high.forward_tokens,
        ):
            recovered = high.score_labels(requests)
            sync()
    finally:
        if restore:
            restore()
    same = sum(
        max(range(len(a.probs)), key=a.probs.__getitem__) == max(range(len(b.probs)), key=b.probs.__getitem__)
        for a, b in zip(recovered, scores)
    )
    gap = max(abs(x - y) for a, b in zip(recovered, scores) for x, y in zip(a.probs, b.probs))
    print(
        f"  out-of-memory recovery: budget {high.budget.setting} -> {high.budget.tokens} tokens after "
        f"{high.budget.recoveries} halvings, {len(recovered)} of {len(timed)} prompts answered, each once; "
        f"{same}/{len(timed)} the same decision as auto's packed passes, max |difference| of label probabilities "
        f"{gap:.2g}",
        flush=True,
    )
    ratios.update(
        {
            "gpu_auto_budget_tokens": float(found),
            "gpu_auto_halvings": float(searched),
            "gpu_peak_memory_gib": peak_gib,
            "gpu_oom_recoveries": float(high.budget.recoveries),
            "gpu_oom_answered": len(recovered) / len(timed),
            "gpu_oom_same_decisions": same / len(timed),
        }
    )
    if on_gpu and "H100" in name:
        ratios["gpu_medqa_cora_8b_h100_s"] = ratios["gpu_job_whole_job_s"]
    shared["gpu_device"] = name
    if on_gpu and args.only and "vllm" not in args.only:  # `--only gpu` on a GPU measures both backends
        from devtools.perf.vllm import part_vllm  # local: imports vLLM's backend only where it runs

        part_vllm(meter, args, ratios, shared)


def _oom_above(model: Any, limit: int):
    """Make `model` raise CUDA's out-of-memory error on a pass of more than `limit` tokens; returns the undo."""
    import torch

    forward = model.forward

    def limited(input_ids=None, **kwargs):
        if input_ids is not None and input_ids.numel() > limit:
            raise torch.cuda.OutOfMemoryError(f"CUDA out of memory (forced above {limit} tokens)")
        return forward(input_ids=input_ids, **kwargs)

    model.forward = limited
    return lambda: setattr(model, "forward", forward)
