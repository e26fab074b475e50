"""The token budget's memory estimate and its out-of-memory recovery (src/backends/hf/budget.py), on what the mutation
check (docs/mutation.md) found no fast test checking:

- a config without a head count or a layer count (`ModelDims.of`'s fallbacks): one head per 128 hidden units, at
  least one; the layers counted from the model's parameters (~12 x hidden^2 per block beside the embedding);
- `tokens_for_memory`: the most tokens whose estimate fits in the GiB asked (2^30 bytes each), not one more;
- a pass that ran out of memory is freed (its reference cycles collected) before the smaller pass runs;
- auto's first budget on a GPU is read from its free memory, not its total, and a GPU's chunks of prompts hold
  what one pass of the budget holds; a config field of 1 (one KV head: multi-query attention) is read as 1; a
  generation pass's tokens count its samples' tokens, so that its out-of-memory recovery halves the budget below
  them."""

from __future__ import annotations

import gc
import weakref
from types import SimpleNamespace

import pytest

torch = pytest.importorskip("torch")

from src.backends.hf.budget import (  # noqa: E402
    ModelDims,
    TokenBudget,
    activation_bytes_per_token,
    chunk_prompts,
    kv_bytes_per_token,
    run_in_batches,
    start_tokens,
    tokens_for_memory,
)
from src.backends.hf.packing import pack_batches  # noqa: E402
from src.common.errors import UserError  # noqa: E402


class Blocks(torch.nn.Module):
    """A model the config says little about: an embedding of `vocab` x `hidden` and `layers` blocks of exactly
    12 x hidden^2 parameters (a transformer block's attention and MLP, as the estimate counts them)."""

    def __init__(self, vocab: int, hidden: int, layers: int) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, hidden)
        self.blocks = torch.nn.ModuleList(torch.nn.Linear(hidden, 12 * hidden, bias=False) for _ in range(layers))

    def get_input_embeddings(self) -> torch.nn.Embedding:
        return self.embed


@pytest.mark.promise("docs/speed.md", "auto's estimate never fails on a missing config field")
@pytest.mark.parametrize("layers", [1, 3, 30])
def test_a_config_without_a_layer_count_counts_the_models_blocks(layers):
    model = Blocks(vocab=100, hidden=16, layers=layers)
    dims = ModelDims.of(SimpleNamespace(), model)  # the config names no size at all
    assert (dims.vocab, dims.hidden, dims.layers) == (100, 16, layers)


def test_a_config_without_a_head_count_takes_one_head_per_128_hidden_units_and_at_least_one():
    assert ModelDims.of(SimpleNamespace(hidden_size=1024, num_hidden_layers=2)).heads == 8
    small = ModelDims.of(SimpleNamespace(hidden_size=64, num_hidden_layers=2))
    assert (small.heads, small.kv_heads, small.head_dim) == (1, 1, 64)  # below 128 units: still one head
    nothing = ModelDims.of(SimpleNamespace())  # no config field and no model: a 7B llama's sizes
    assert (nothing.layers, nothing.hidden, nothing.heads, nothing.vocab) == (32, 4096, 32, 32_000)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("memory_gb", [0.25, 1.0, 6.0])
def test_the_tokens_a_budget_holds_are_the_most_whose_estimate_fits_in_its_gib(memory_gb, dtype):
    """n x (KV cache + one layer's activations per token) + n^2 x (each head's scores and probabilities, the mask,
    the tree's boolean matrix per pair of tokens) fits in memory_gb x 2^30 bytes; n + 1 tokens do not."""
    config = SimpleNamespace(
        num_hidden_layers=30,
        num_attention_heads=9,
        num_key_value_heads=3,
        hidden_size=576,
        intermediate_size=1536,
        vocab_size=49152,
    )  # SmolLM2-135M's sizes
    size = torch.empty((), dtype=dtype).element_size()
    per_token = kv_bytes_per_token(config, dtype) + activation_bytes_per_token(config, dtype)
    per_pair = 2 * 9 * size + size + 1

    def estimate(n: int) -> int:
        return n * per_token + n * n * per_pair

    n = tokens_for_memory(config, dtype, memory_gb)
    assert estimate(n) <= memory_gb * 2**30 < estimate(n + 1)


def test_a_pass_that_ran_out_of_memory_is_freed_before_the_smaller_pass_runs():
    """What the failed pass held stays alive through reference cycles (a forward's frames, its traceback) until the
    garbage collector runs: run_in_batches collects it before trying again, or on a GPU the halved pass finds no
    more room than the failed one. Automatic collection is off here, so only that collection can free it."""

    class PassTensors:
        pass

    held: list[weakref.ref] = []
    freed_before: list[bool] = []

    def run(batch):
        if not held:
            tensors = PassTensors()
            tensors.cycle = tensors
            held.append(weakref.ref(tensors))
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        freed_before.append(held[0]() is None)
        return list(batch)

    automatic = gc.isenabled()
    gc.disable()
    try:
        out = [
            u for _, result in run_in_batches(TokenBudget(8, name="m"), [4, 4], run, width=lambda u: u) for u in result
        ]
    finally:
        if automatic:
            gc.enable()
    assert out == [4, 4]  # the pair failed, then each alone
    assert freed_before == [True, True]


@pytest.mark.promise("docs/speed.md", "auto starts from the GPU's free memory")
def test_auto_starts_from_the_gpus_free_memory_not_its_total(monkeypatch):
    """Memory that other processes hold is not this job's: 90% of the free bytes over a token's bytes, down to a
    power of two. A stand-in for torch.cuda.mem_get_info, which gives (free, total): 3 of 80 GiB free."""
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (3 * 2**30, 80 * 2**30))
    assert start_tokens(torch.device("cuda"), 2**20) == 2048  # 0.9 x 3,072 one-MiB tokens = 2,764: down to 2,048


@pytest.mark.promise("docs/speed.md", "on a GPU a chunk holds the prompts one pass of the budget holds, 64 to 8,192")
def test_a_gpus_chunk_holds_the_prompts_one_pass_of_the_budget_holds():
    """On a GPU, the prompts per chunk: the budget's tokens over the tokens each prompt fed so far, at least the
    default and at most CHUNK_MAX_PROMPTS (8,192); the default before any prompt fed a token, or on a CPU."""
    assert chunk_prompts(64, tokens=4096, fed_per_prompt=40.0, on_gpu=True) == 102
    assert chunk_prompts(64, tokens=1024, fed_per_prompt=40.0, on_gpu=True) == 64
    assert chunk_prompts(64, tokens=131072, fed_per_prompt=0.5, on_gpu=True) == 8192  # shared prefixes: < 1 each
    assert chunk_prompts(64, tokens=131072, fed_per_prompt=0.0, on_gpu=True) == 64  # nothing fed yet
    assert chunk_prompts(64, tokens=None, fed_per_prompt=40.0, on_gpu=True) == 64  # the budget not yet resolved
    assert chunk_prompts(64, tokens=131072, fed_per_prompt=40.0, on_gpu=False) == 64


def test_a_field_of_one_is_read_as_one():
    """Multi-query attention keeps one KV head (Falcon-7B's `num_kv_heads`, StarCoder's `multi_query`): a KV cache
    a ninth of what the query heads would hold; a one-layer model has one layer."""
    falcon_like = SimpleNamespace(num_hidden_layers=1, num_attention_heads=9, num_kv_heads=1, hidden_size=576)
    dims = ModelDims.of(falcon_like)
    assert (dims.layers, dims.heads, dims.kv_heads, dims.head_dim) == (1, 9, 1, 64)
    assert kv_bytes_per_token(falcon_like, torch.float32) == 1 * 2 * 1 * 64 * 4


def test_a_generation_pass_counts_its_samples_tokens_when_it_runs_out_of_memory():
    """Generation packs reserve room for the tokens their samples add (`reserve` per member). A pass that runs out
    of memory is counted with them, so the budget halves below what the pass really held, and the prompts are
    packed again smaller; counted without them, the budget would fall to one token and the job stop as if a single
    prompt could not be split. A stand-in for the backend's batching (`in_batches` is run_in_batches with a bar)."""
    budget = TokenBudget(200, name="m")
    lm = SimpleNamespace(
        batch_tokens=lambda: budget.tokens,
        in_batches=lambda queue, run, *, what, unit, counts, **layout: run_in_batches(budget, queue, run, **layout),
    )
    seqs = [[10 * i + t for t in range(10)] for i in range(4)]  # four 10-token prompts, no prefix shared
    reserve, limit, held = 30, 100, []  # 30 sampled tokens per prompt; passes above 100 tokens run out of memory

    def run(packs):
        tokens = sum(len(p.tokens) + reserve * len(p.members) for p in packs)
        if tokens > limit:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory.")
        held.append(tokens)
        return [m for p in packs for m in p.members]

    done = [
        m
        for _, members in pack_batches(lm, seqs, 1000, run, "generate", "prompt", reserve=reserve, max_units=1)
        for m in members
    ]
    assert sorted(done) == [0, 1, 2, 3] and held == [80, 80]  # 160 tokens failed: two passes of two prompts
    assert (budget.tokens, budget.recoveries) == (100, 1)


@pytest.mark.promise("docs/speed.md", "a failed pass no larger than one that ran keeps the budget's ceiling")
def test_a_failed_pass_no_larger_than_one_that_ran_keeps_the_ceiling():
    """Out of memory on a pass no larger than one that already ran is a passing failure (memory held elsewhere):
    the budget halves, and grows back to the ceiling it keeps (a mutant: `budget.py` `shrink`'s `>`)."""
    budget = TokenBudget(1024, name="m")
    budget.fitted_pass(500)
    budget.shrink(500)  # the same size as the pass that ran
    assert (budget.tokens, budget.ceiling) == (256, 1024)
    budget.shrink(600)  # larger than any that ran: the budget was too large, the ceiling drops with it
    assert (budget.tokens, budget.ceiling) == (128, 128)


def test_the_unit_that_cannot_be_split_is_the_one_that_failed_not_the_next():
    """A unit of 2 rows x 100 tokens fails alone; the next is small. The job stops in one line naming the failed
    pass, rather than taking the small unit's size for the failed one's and running the big one again without end
    (a mutant: `run_in_batches`'s `queue[0]`)."""
    calls = []

    def run(batch):
        calls.append(batch)
        assert len(calls) < 50, "the failing unit ran again and again"
        if sum(r * w for r, w in batch) > 50:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory")
        return batch

    queue = [(2, 100), (1, 10)]
    batches = run_in_batches(TokenBudget(400, name="m"), queue, run, width=lambda u: u[1], rows=lambda u: u[0])
    with pytest.raises(UserError, match=r"^model m: out of memory on one pass of 200 tokens that cannot be split"):
        list(batches)
