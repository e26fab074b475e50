"""`python -m devtools.perf --only gpu` at its tiny shape on the CPU: the device check's path runs end to end.

On a GPU the same command builds Llama-3-8B's shape (docs/speed.md); here the tiny shape runs with the tiny test
llama's byte-level tokenizer (no model package needed), on MedQA's prompts when ../shared/data holds them, else
on the synthetic benchmark's (the part says which).
"""

from __future__ import annotations

import json
import math
import time

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from devtools.perf import gpu  # noqa: E402
from devtools.perf.__main__ import main  # noqa: E402
from src.backends.hf.budget import AUTO_MIN_TOKENS  # noqa: E402

from .test_hf_backend import tiny_model_dir  # noqa: E402,F401  (fixture)


@pytest.mark.promise(
    "docs/speed.md", "the device check runs at a tiny shape on the CPU and recovers from a forced out-of-memory"
)
def test_the_device_check_runs_at_the_tiny_shape_and_recovers_from_out_of_memory(tiny_model_dir, tmp_path, capsys):
    out, history = tmp_path / "gpu.json", tmp_path / "results.jsonl"  # never the committed results file
    argv = ["--only", "gpu", "--tiny", "--gpu-questions", "1", "--tokenizer", str(tiny_model_dir), "--out", str(out)]
    assert main([*argv, "--results", str(history)]) == 0
    ratios = json.loads(out.read_text())["ratios"]
    for path in ("one_call", "job"):
        assert ratios[f"gpu_{path}_prompts_per_s"] > 0
        assert ratios[f"gpu_{path}_tokens_per_s"] > ratios[f"gpu_{path}_prompts_per_s"]
    assert ratios["gpu_auto_budget_tokens"] >= AUTO_MIN_TOKENS
    assert ratios["gpu_oom_recoveries"] >= 1, "the budget set too high ran out of memory and was halved"
    assert ratios["gpu_oom_answered"] == 1.0 and ratios["gpu_oom_same_decisions"] == 1.0, "as auto's answers"
    printed = capsys.readouterr().out
    assert "out-of-memory recovery: budget 65536 ->" in printed and "job: " in printed and "extrapolated" in printed
    figures = [json.loads(line) for line in history.read_text().splitlines()]
    by_name = {figure["name"]: figure for figure in figures}
    assert by_name["gpu_oom_answered"]["value"] == 1.0 and by_name["gpu_oom_answered"]["unit"] == "ratio"
    finite = {name for name, value in ratios.items() if math.isfinite(value)}  # no GPU here: no GPU memory figure
    assert finite <= set(by_name), "every ratio the bench printed is in the results file"
    first = figures[0]
    assert first["command"].startswith("python -m devtools.perf --only gpu --tiny") and first["machine"]["cpus"] >= 1
    assert {"date", "load_average", "commit", "value", "unit"} <= set(first)


def test_the_flop_count_and_the_peaks():
    from transformers import LlamaConfig

    config = LlamaConfig(vocab_size=49152, **gpu.LLAMA3_8B)
    per_token = gpu.forward_flops(config, 1, 0)
    # Llama-3-8B has 6.98e9 parameters outside its embeddings and head: 2 FLOPs each per token
    assert per_token == pytest.approx(2 * 6.98e9, rel=0.01)
    assert gpu.forward_flops(config, 0, 10) == 4 * 32 * 4096 * 10
    assert gpu.forward_flops(config, 0, 0, head_rows=3) == 2 * 4096 * 49152 * 3  # logits of 3 positions
    assert gpu.bf16_peak("NVIDIA H100 80GB HBM3") == 989.0 and gpu.bf16_peak("NVIDIA GeForce GTX 1080") is None


@pytest.mark.parametrize("share_prefix", [True, False], ids=["packed", "padded"])
def test_a_pass_counts_the_head_rows_it_computed_logits_for(tiny_model_dir, share_prefix):
    from src.backends.hf import HFBackend, HFSettings

    from .test_prefix_sharing import variant_requests

    backend = HFBackend(
        HFSettings(name="tiny", path=str(tiny_model_dir), batch_size=4, share_prefix=share_prefix), progress=False
    )
    backend.score_labels(variant_requests()[:2])  # the first call's packing self-check out of the way
    backend.lm.head_rows = 0
    reqs = variant_requests()
    backend.score_labels(reqs)
    assert backend.lm.head_rows == len(reqs), "label scoring: one position per prompt"


def test_the_share_ceiling_times_every_matrix_product_and_attention_call_and_leaves_the_model_as_it_was(
    tiny_model_dir, monkeypatch
):
    """The bench's ceiling on the main job's share (`time_in_matmuls_and_attention`): time inside every nn.Linear
    (the head's included) and every SDPA kernel call of a packed pass, less than the pass took; nothing left
    hooked or wrapped afterwards."""
    from devtools.perf.study import time_in_matmuls_and_attention
    from src.backends.hf import HFBackend, HFSettings

    from .test_prefix_sharing import variant_requests

    backend = HFBackend(HFSettings(name="tiny", path=str(tiny_model_dir), batch_size=4), progress=False)
    reqs = variant_requests()
    backend.score_labels(reqs[:2])  # the first call's packing self-check out of the way
    linears = [m for m in backend.model.modules() if isinstance(m, torch.nn.Linear)]
    calls = {"linear": 0, "sdpa": 0}
    kernel = torch.nn.functional.scaled_dot_product_attention

    def counted_kernel(*args, **kwargs):
        calls["sdpa"] += 1
        return kernel(*args, **kwargs)

    counting = [m.register_forward_hook(lambda *a: calls.__setitem__("linear", calls["linear"] + 1)) for m in linears]
    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", counted_kernel)
    start = time.perf_counter()
    with time_in_matmuls_and_attention(backend.model) as spent:
        backend.score_labels(reqs)
    wall = time.perf_counter() - start
    for hook in counting:
        hook.remove()
    layers = backend.model.config.num_hidden_layers
    assert calls["linear"] % (7 * layers + 1) == 0 and calls["linear"] > 0, "q, k, v, o, gate, up, down and the head"
    assert spent["matmul_calls"] == calls["linear"] and spent["attention_calls"] == calls["sdpa"] > 0, "every call"
    assert 0 < spent["matmuls"] and 0 < spent["attention"] and spent["matmuls"] + spent["attention"] < wall
    assert torch.nn.functional.scaled_dot_product_attention is counted_kernel
    after = dict(spent)
    backend.score_labels(reqs)
    assert spent == after, "nothing timed once the block is left"
