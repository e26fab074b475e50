"""Packed passes attend in blocks of queries (src/backends/hf/tree_attention.py): each block against the keys its
queries see. Scores, option log-likelihoods and samples equal those of one SDPA call over the whole pack, on every
architecture that packs, with one pack or several per pass; the blocks cover the pass and cost no more than the
layouts they are chosen over; a model that does not run SDPA on a CPU is left as it is."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings, strategies as st

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from src.backends.base import SamplingParams  # noqa: E402
from src.backends.hf import HFBackend, HFSettings, pack_prefix_trees, tree_attention  # noqa: E402  (a module)
from src.backends.hf.packing import tree_sees  # noqa: E402
from src.backends.hf.tree_attention import CALL_COST_FLOPS, GRAIN, TREE_SDPA, block_layout, query_blocks  # noqa: E402
from tests.tiny_model import save_tiny_model, tiny_config  # noqa: E402

from .conftest import examples  # noqa: E402
from .test_prefix_sharing import variant_requests  # noqa: E402

PACKING = ("llama", "gpt2", "opt", "gpt_neox")  # Bloom's ALiBi ignores position ids: it runs padded


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    root = tmp_path_factory.mktemp("tree-attention")
    return {arch: save_tiny_model(root / arch, arch=arch, seed=1) for arch in PACKING}


def backend(path, *, blocks: bool, pack_tokens: int = 1024, budget: int = 1024) -> HFBackend:
    """A packed backend whose passes attend in the finest blocks (every grain that saves a pair is cut: no cost
    per call) or as one call."""
    out = HFBackend(HFSettings(name="tiny", path=str(path), batch_size=None, max_batch_tokens=budget), progress=False)
    out.pack_tokens = pack_tokens
    out.load()
    assert out.model.config._attn_implementation == TREE_SDPA, "SDPA on a CPU runs through tree_sdpa"
    assert out.lm.block_call_cost == pytest.approx(tree_attention.call_cost_pairs(out.model.config)), "switched on"
    out.lm.block_call_cost = 0.0 if blocks else None
    return out


def sdpa_calls(monkeypatch) -> list[tuple[int, int]]:
    """(queries, keys) of every SDPA call tree_sdpa makes from now on."""
    calls: list[tuple[int, int]] = []
    plain = tree_attention.sdpa_attention_forward

    def counted(module, query, key, *args, **kwargs):
        calls.append((query.shape[2], key.shape[2]))
        return plain(module, query, key, *args, **kwargs)

    monkeypatch.setattr(tree_attention, "sdpa_attention_forward", counted)
    return calls


@pytest.mark.promise("docs/speed.md", "blocked tree attention on a CPU scores as one attention call over the pack")
@pytest.mark.parametrize("arch", PACKING)
@pytest.mark.parametrize("pack_tokens,budget", [(1024, 1024), (120, 1024)], ids=["one-pack", "packs-per-pass"])
def test_blocked_attention_scores_as_one_call_over_the_pack(checkpoints, arch, pack_tokens, budget, monkeypatch):
    reqs = variant_requests()
    whole = backend(checkpoints[arch], blocks=False, pack_tokens=pack_tokens, budget=budget)
    blocked = backend(checkpoints[arch], blocks=True, pack_tokens=pack_tokens, budget=budget)
    want = whole.score_labels(reqs, SamplingParams(temperature=0.7, top_k=30))
    whole_pairs = whole.lm.attention_pairs
    calls = sdpa_calls(monkeypatch)
    got = blocked.score_labels(reqs, SamplingParams(temperature=0.7, top_k=30))
    assert blocked.share_prefix and whole.share_prefix
    assert any(q < 100 for q, _ in calls), "the packed passes ran in blocks"
    # the keys of a block are those any row sees: rows of several short packs share fewer of them than one pack's
    assert blocked.lm.attention_pairs < whole_pairs / (2 if pack_tokens >= 1024 else 1.2), "unseen pairs left out"
    for a, b in zip(got, want):
        assert a.probs == pytest.approx(b.probs, abs=1e-5)
        assert a.answer_dist == pytest.approx(b.answer_dist, abs=1e-5)
    for a, b in zip(blocked.score_options(reqs), whole.score_options(reqs)):
        assert a.loglik == pytest.approx(b.loglik, abs=1e-4)
    for sampling in (SamplingParams(n=1, temperature=0.0, max_new_tokens=4), SamplingParams(n=3, temperature=1.0)):
        assert blocked.generate(reqs, sampling) == whole.generate(reqs, sampling)


def test_a_pass_with_another_mask_runs_as_one_call(checkpoints, monkeypatch):
    """The layout belongs to the mask it was made for: a pass given any other tensor (padded batches, decoding
    steps, a mask the model rebuilt) attends as SDPA does, in one call."""
    blocked = backend(checkpoints["llama"], blocks=True)
    blocked.share_prefix = False
    calls = sdpa_calls(monkeypatch)
    blocked.score_labels(variant_requests())
    assert calls and all(q == k for q, k in calls), "padded passes: every query against every key"


@st.composite
def trees(draw):
    """The `sees` of a batch of 1-3 packs of random prompts sharing random prefixes, and a call cost."""
    rng = random.Random(draw(st.integers(0, 10**6)))
    rows = []
    for _ in range(draw(st.integers(1, 3))):
        trunks = [[rng.randrange(50) for _ in range(rng.randrange(1, 40))] for _ in range(rng.randrange(1, 4))]
        seqs = [rng.choice(trunks) + [rng.randrange(50) for _ in range(rng.randrange(0, 30))] for _ in range(12)]
        rows.append(tree_sees(pack_prefix_trees(seqs, budget=10**6)[0].parents))
    width = max(len(s) for s in rows)
    sees = torch.eye(width, dtype=torch.bool).repeat(len(rows), 1, 1)
    for row, s in enumerate(rows):
        sees[row, : len(s), : len(s)] = s
    return sees, draw(st.sampled_from([0.0, 50.0, 500.0, 1e9]))


@settings(max_examples=examples(60), deadline=None)
@given(trees())
def test_query_blocks_cover_the_pass_with_the_keys_each_block_sees_at_the_least_cost(case):
    sees, call_cost = case
    rows, n = sees.shape[0], sees.shape[1]
    blocks = query_blocks(sees, call_cost, grain=4)
    assert [a for a, _, _ in blocks] == [0] + [b for _, b, _ in blocks[:-1]] and blocks[-1][1] == n
    assert all(a % 4 == 0 for a, _, _ in blocks)
    for a, b, keys in blocks:
        assert keys.tolist() == sees[:, a:b].any(0).any(0).nonzero().flatten().tolist()

    def cost(layout):
        return sum(call_cost + rows * (b - a) * len(keys) for a, b, keys in layout)

    one = [(0, n, sees.any(0).any(0).nonzero().flatten())]
    grains = [(a, min(n, a + 4), sees[:, a : a + 4].any(0).any(0).nonzero().flatten()) for a in range(0, n, 4)]
    assert cost(blocks) <= min(cost(one), cost(grains))
    if call_cost >= 1e9:
        assert len(blocks) == 1
    # the least cost of all: grains of n / 8 (at most 9 of them), every one of the 2^8 ways to cut them tried
    grain = max(1, -(-n // 8))
    count = -(-n // grain)

    def cut(bounds):
        return [
            (a * grain, min(n, b * grain), sees[:, a * grain : b * grain].any(0).any(0).nonzero().flatten())
            for a, b in bounds
        ]

    ways = [[g for g in range(1, count) if k >> (g - 1) & 1] for k in range(1 << (count - 1))]
    least = min(cost(cut(zip([0, *w], [*w, count]))) for w in ways)
    assert cost(query_blocks(sees, call_cost, grain=grain)) == least


def test_a_layout_counts_the_pairs_its_blocks_compute_in_every_row():
    """Two rows of two prompts that share nothing, a grain each: two blocks, each against its own prompt's keys,
    in both rows: 2 rows x 2 blocks x 16 queries x 16 keys, half of one call's 2 x 32 x 32."""
    sees = torch.zeros((2, 2 * GRAIN, 2 * GRAIN), dtype=torch.bool)
    for start in (0, GRAIN):
        sees[:, start : start + GRAIN, start : start + GRAIN] = torch.tril(torch.ones(GRAIN, GRAIN, dtype=torch.bool))
    mask = torch.zeros(sees.shape).masked_fill_(~sees, torch.finfo(torch.float32).min)[:, None]
    layout = block_layout(sees, mask, call_cost=0.0)
    assert layout is not None and layout.spans == [(0, GRAIN), (GRAIN, 2 * GRAIN)]
    assert layout.pairs == 2 * 2 * GRAIN * GRAIN
    assert [m.shape for m in layout.masks] == [(2, 1, GRAIN, GRAIN)] * 2
    assert block_layout(sees, mask, call_cost=1e9) is None, "one block: the pass runs as one call"


def test_a_calls_cost_in_pairs_is_its_flops_over_a_pairs_flops():
    """4 x hidden FLOPs a pair (scores and weighted sum over every head): a wider model pays fewer pairs a call."""
    narrow, wide = tiny_config("llama", 258), tiny_config("llama", 258)
    wide.hidden_size = 4 * narrow.hidden_size
    assert tree_attention.call_cost_pairs(narrow) * 4 * narrow.hidden_size == pytest.approx(CALL_COST_FLOPS)
    assert tree_attention.call_cost_pairs(wide) == pytest.approx(tree_attention.call_cost_pairs(narrow) / 4)


def test_a_model_that_does_not_run_sdpa_on_a_cpu_keeps_its_attention():
    model = transformers.AutoModelForCausalLM.from_config(tiny_config("llama", 258), attn_implementation="eager")
    assert not tree_attention.enable(model)
    assert model.config._attn_implementation == "eager"
