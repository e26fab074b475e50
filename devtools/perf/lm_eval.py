"""`python -m devtools.perf` parts that compare with lm-evaluation-harness, and the dtype part."""

from __future__ import annotations

import math
from typing import Any

from devtools.perf.meter import REPO, Meter, build, hf_backend


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
    from src.backends.hf import gguf_cache  # local: loads torch, transformers (slow import)

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
            whitespace.append((i, Instance("loglikelihood", {}, (stripped, context[len(stripped) :]), i)))
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
    return {
        "max_abs": max(gaps),
        "mean_abs": sum(gaps) / len(gaps),
        "same_ranking": sum(rank(x) == rank(y) for x, y in zip(ours, theirs)) / len(ours),
        "same_top1": sum(rank(x)[0] == rank(y)[0] for x, y in zip(ours, theirs)) / len(ours),
    }


def _lm_eval_scores(meter: Meter, shared: dict[str, Any], items, phase: str, headline: str) -> list[list[float]] | None:
    """lm-eval's label log-probabilities of `items`, timed as `phase`; None when lm-eval is not installed."""
    print(headline, flush=True)
    bundle = lm_eval_model(meter, shared)
    if bundle is None:
        return None
    return lm_eval_label_logprobs(bundle, shared["backend"], items, meter, phase)


def part_lmeval(meter: Meter, args, ratios: dict[str, float], shared: dict[str, Any]) -> None:
    from src.answering.trials import answer_items  # local: loads pandas (slow import)
    from src.backends.base import SamplingParams  # local: the part that times it imports it

    subset = shared.get("subset") or build(["variants=cora", "scoring=logprob"], args.compare_limit)[1]
    theirs = _lm_eval_scores(
        meter,
        shared,
        subset,
        "lmeval_scoring (batch 8)",
        f"lmeval: lm-evaluation-harness vs this project on the same {len(subset)} CoRA prompts, both cold",
    )
    if theirs is None:
        return
    backend = shared["backend"]
    with meter.phase("ours_scoring (same prompts)", prompts=len(subset), tokens=lambda: backend.forward_tokens):
        answer_items(backend, subset, scoring="logprob", params=SamplingParams(n=1), progress=False)
    r = meter.results
    ratios["cora_vs_lmeval_scoring"] = (
        r["lmeval_scoring (batch 8)"]["seconds"] / r["ours_scoring (same prompts)"]["seconds"]
    )
    their_total = (
        r["lmeval_scoring (batch 8)"]["seconds"]
        + r["lmeval_model_load"]["seconds"]
        + r.get("lmeval_import", {}).get("seconds", 0.0)
    )
    our_total = r["ours_scoring (same prompts)"]["seconds"] + shared["our_setup_s"]
    ratios["cora_vs_lmeval_with_setup"] = their_total / our_total
    agreement = compare(our_label_logprobs(backend, subset), theirs)
    ratios.update({f"lmeval_prompts_{k}": v for k, v in agreement.items()})


def part_agreement(meter: Meter, args, ratios: dict[str, float], shared: dict[str, Any]) -> None:
    _, items = build(["variants=original", "scoring=logprob"], args.limit)
    theirs = _lm_eval_scores(
        meter,
        shared,
        items,
        "lmeval_agreement_scoring",
        f"agreement: label log-probabilities vs lm-eval on the original prompt of {len(items)} questions",
    )
    if theirs is None:
        return
    agreement = compare(our_label_logprobs(shared["backend"], items), theirs)
    ratios["agreement_max_abs"] = agreement["max_abs"]
    ratios["agreement_mean_abs"] = agreement["mean_abs"]
    ratios["agreement_ranking"] = agreement["same_ranking"]
    ratios["agreement_top1"] = agreement["same_top1"]


TEST_TASK = ("mcq_test_task", "tests/data/lm_eval_task")  # the committed lm-eval task (paths from the repo root)


def part_lmeval_task(meter: Meter, args, ratios: dict[str, float], shared: dict[str, Any]) -> None:
    """benchmark=lm_eval against lm-eval itself: the committed test task asked through `prompt=lm_eval
    scoring=cloze variants=original`, and lm-eval's HFLM on the loglikelihood requests its task manager builds for
    the same documents (same float weights): how many decisions agree, and the largest log-likelihood gap."""
    import os

    from src.answering.trials import answer_items  # local: loads pandas (slow import)
    from src.backends.base import SamplingParams  # local: the part that times it imports it
    from src.benchmarks.lm_eval import load_task  # local: the part that times it imports it

    name, folder = TEST_TASK
    os.chdir(REPO)  # the task's data_files are relative to the repository root, as lm-eval reads them
    _, items = build(
        [
            "prompt=lm_eval",
            "scoring=cloze",
            "variants=original",
            f"benchmark.task={name}",
            f"benchmark.include_path={folder}",
        ],
        None,
        benchmark="lm_eval",
    )
    print(f"lmeval_task: {len(items)} questions of lm-eval task {name}, cloze, ours vs lm-eval's HFLM", flush=True)
    bundle = lm_eval_model(meter, shared)
    if bundle is None:
        return
    lm, Instance, calls, _ = bundle
    backend = hf_backend(shared["model_cfg"], chat=False)  # cloze continuations are never chat-wrapped
    with meter.phase("lmeval_task_ours (cloze)", prompts=len(items), tokens=lambda: backend.forward_tokens):
        ours = answer_items(
            backend, items, scoring="cloze", params=SamplingParams(n=1), cloze_normalise=False, progress=False
        )  # raw log-likelihood: lm-eval's acc, the run's default
    task = load_task(name, folder)
    docs = list(task.eval_docs)
    requests, owner = [], []
    for i, it in enumerate(items):
        doc = docs[int(it.question.id.rsplit("/", 1)[1])]
        for args in (
            r.arguments
            for r in task.construct_requests(doc=doc, ctx=task.fewshot_context(doc, 0), metadata=(name, i, 1))
        ):
            requests.append(Instance("loglikelihood", doc, args, len(requests)))
            owner.append(i)
    with meter.phase("lmeval_task_theirs (loglikelihood)", prompts=len(items), tokens=lambda: calls["tokens"]):
        results = lm.loglikelihood(requests, disable_tqdm=True)
    theirs: list[list[float]] = [[] for _ in items]
    for i, (ll, _) in zip(owner, results):
        theirs[i].append(ll)
    same = sum(a[0].slot == max(range(len(t)), key=t.__getitem__) for a, t in zip(ours, theirs))
    gaps = [abs(u - v) for a, t in zip(ours, theirs) for u, v in zip(a[0].option_loglik, t)]
    ratios["lmeval_task_same_decisions"] = same / len(items)
    ratios["lmeval_task_max_abs_loglik"] = max(gaps)
    print(f"  same decision on {same} of {len(items)} documents, max |log-likelihood gap| {max(gaps):.2e}", flush=True)


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
    gaps = [
        abs(u - v)
        for a, b in pairs
        for u, v in zip(decision_logprobs(a), decision_logprobs(b))
        if math.isfinite(u) and math.isfinite(v)
    ]
    return sum(a.slot == b.slot for a, b in pairs), len(pairs), max(gaps, default=math.nan)


def part_dtype(meter: Meter, args, ratios: dict[str, float], shared: dict[str, Any]) -> None:
    """What `model.dtype=auto` resolves to on this machine, and bfloat16 against float32 on the same prompts:
    CoRA label scoring (logprob, chat prompts) and the main job's option scoring (cloze_shown), both packed.
    bfloat16 is measured even where the hardware lacks it (torch then converts to float32 and back)."""
    from src.answering.trials import answer_items  # local: loads pandas (slow import)
    from src.backends.base import SamplingParams  # local: the part that times it imports it
    from src.backends.hf.loading import (  # local: loads torch, transformers (slow import)
        cpu_has_bf16,
        dtype_name,
        gpu_has_bf16,
        runs_on_gpu,
        torch_dtype,
    )

    model_cfg = shared["model_cfg"]
    device_map = model_cfg.get("device_map")
    device = "GPU" if runs_on_gpu(device_map) else "CPU"
    native = gpu_has_bf16() if device == "GPU" else cpu_has_bf16()
    auto = dtype_name(torch_dtype("auto", device_map=device_map))
    print(
        f"dtype: model.dtype=auto resolves to {auto} here (this {device} {'has' if native else 'lacks'} native "
        f"bfloat16{'' if device == 'GPU' else ': AVX-512 BF16 or AMX'}); {model_cfg['name']} is configured "
        f"{model_cfg['dtype']}",
        flush=True,
    )
    ratios["dtype_auto_is_bf16"] = float(auto == "bfloat16")
    cora = shared.get("subset") or build(["variants=cora", "scoring=logprob"], args.compare_limit)[1]
    main_cfg, main = build(["variants=cora"], args.compare_limit, benchmark="synthetic")
    params, answers = SamplingParams(n=1), {}
    for label, items, scoring, chat in (("cora", cora, "logprob", True), ("mainjob", main, main_cfg.scoring, False)):
        for dtype in ("float32", "bfloat16"):
            backend = hf_backend(model_cfg, chat=chat, dtype=dtype)
            answer_items(backend, items[:4], scoring=scoring, params=params, progress=False)  # warm-up, untimed
            with meter.phase(
                f"{label}_{dtype} ({scoring})", prompts=len(items), tokens=lambda b=backend: b.forward_tokens
            ):
                answers[label, dtype] = answer_items(backend, items, scoring=scoring, params=params, progress=False)
            if not backend.share_prefix:
                print(f"  {dtype}: prefix packing turned itself off (see the warning above)", flush=True)
        same, n, gap = answer_agreement(answers[label, "float32"], answers[label, "bfloat16"])
        r = meter.results
        ratios[f"bf16_speedup_{label}"] = (
            r[f"{label}_float32 ({scoring})"]["seconds"] / r[f"{label}_bfloat16 ({scoring})"]["seconds"]
        )
        ratios[f"bf16_same_decisions_{label}"] = same / n
        ratios[f"bf16_max_abs_logprob_{label}"] = gap
        print(
            f"  bfloat16 vs float32, {label} ({scoring}): same decision on {same} of {n} prompts, max |difference "
            f"of log-prob| {gap:.3g}, bfloat16 {ratios[f'bf16_speedup_{label}']:.2f}x as fast",
            flush=True,
        )
    ratios["bf16_same_decisions"] = min(ratios["bf16_same_decisions_cora"], ratios["bf16_same_decisions_mainjob"])
