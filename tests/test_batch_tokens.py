"""Batches sized by tokens (`model.max_batch_tokens`): a model double that runs out of memory above a token count.

The tiny random llama of test_hf_backend.py, its forward wrapped to raise `torch.cuda.OutOfMemoryError` when a
pass feeds more than LIMIT token positions, as a GPU with that much room would: `auto` must settle on the largest
budget that passes, answer every trial once, and write the records of a run given that budget from the start.
"""

from __future__ import annotations

import functools

import pandas as pd
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from src.backends.base import SamplingParams  # noqa: E402
from src.backends.batch_tokens import CPU_BATCH_TOKENS  # noqa: E402
from src.backends.hf.budget import TokenBudget, fit, is_out_of_memory  # noqa: E402
from src.common.errors import UserError  # noqa: E402
from tests.golden_records import canonical  # noqa: E402

from .test_hf_backend import requests, tiny, tiny_model_dir  # noqa: E402,F401  (fixture)

LIMIT = 1500  # token positions one pass of the double may feed


@pytest.fixture
def runs_out_above(monkeypatch):
    """`runs_out_above(limit)`: from then on, a pass of the llama feeding more than `limit` positions raises CUDA's
    out-of-memory error before computing anything; returns the list of (tokens, ran) of every pass."""
    passes: list[tuple[int, bool]] = []
    original = transformers.LlamaForCausalLM.forward

    def install(limit: int) -> list[tuple[int, bool]]:
        @functools.wraps(original)
        def forward(self, input_ids=None, **kwargs):
            tokens = int(input_ids.numel())
            passes.append((tokens, tokens <= limit))
            if tokens > limit:
                raise torch.cuda.OutOfMemoryError(f"CUDA out of memory. Tried to allocate a pass of {tokens} tokens")
            return original(self, input_ids=input_ids, **kwargs)

        monkeypatch.setattr(transformers.LlamaForCausalLM, "forward", forward)
        return passes

    return install


JOB = (
    "benchmark=synthetic",
    "variants=cora",
    "limit=4",
    "model=hf",
    "model.name=tiny",
    "cache.enabled=false",
    "stats.bootstrap=0",
)


@pytest.mark.slow  # 3 jobs of the tiny model per case, ~10-15 s each on 2 cores
@pytest.mark.parametrize(
    "scoring,share_prefix,sampling",
    [
        ("cloze_shown", True, ()),
        ("logprob", False, ()),
        ("generate", True, ("temperature=0.7", "repetitions=3")),
        ("generate", False, ("temperature=0.7", "repetitions=3")),
    ],
    ids=["packed-options", "padded-labels", "packed-generation", "padded-generation"],
)
def test_auto_settles_on_the_largest_passing_budget_and_keeps_every_record(
    run_job_in, tiny_model_dir, runs_out_above, scoring, share_prefix, sampling
):
    from mlflow.tracking import MlflowClient

    passes = runs_out_above(LIMIT)
    job = (
        *JOB,
        f"model.path={tiny_model_dir}",
        f"scoring={scoring}",
        f"+model.share_prefix={share_prefix}",
        "model.batch_size=null",
        *sampling,
    )
    auto = run_job_in(*job, "model.max_batch_tokens=auto")
    params = MlflowClient(auto.tracking_uri).get_run(auto.run_id).data.params
    found = int(params["batch_tokens"])
    assert int(params["batch_token_halvings"]) >= 1 and any(not ran for _, ran in passes), "the double ran out"
    last_failure = max(k for k, (_, ran) in enumerate(passes) if not ran)
    assert all(ran for _, ran in passes[last_failure + 1 :]), "settled: no pass after the last halving runs out"
    auto_passes = [tokens for tokens, ran in passes if ran]

    passes.clear()
    fixed = run_job_in(*job, f"model.max_batch_tokens={found}")
    assert all(ran for _, ran in passes), "the budget auto found, given from the start, never runs out"
    assert "batch_token_halvings" not in MlflowClient(fixed.tracking_uri).get_run(fixed.run_id).data.params
    # every trial answered once: the passes that ran are the fixed run's, no batch fed twice, none left out
    assert sorted(auto_passes) == sorted(tokens for tokens, _ in passes)
    records = {
        name: pd.read_parquet(r.out_dir / "artifacts" / "records.parquet")
        for name, r in (("auto", auto), ("fixed", fixed))
    }
    repetitions = 3 if sampling else 1
    assert (
        len(records["auto"])
        == len(records["fixed"])
        == records["fixed"].groupby("question_id").variant_id.nunique().sum() * repetitions
    )
    assert not records["auto"].duplicated(["question_id", "variant_id", "repetition"]).any()
    assert canonical(records["auto"]) == canonical(records["fixed"])

    passes.clear()  # largest: twice the found budget runs out on this work
    doubled = run_job_in(*job, f"model.max_batch_tokens={2 * found}")
    assert int(MlflowClient(doubled.tracking_uri).get_run(doubled.run_id).data.params["batch_token_halvings"]) >= 1


def test_a_pass_that_cannot_be_split_stops_in_one_line(tiny_model_dir, runs_out_above):
    runs_out_above(5)  # no prompt is that short
    backend = tiny(tiny_model_dir, batch_size=None)
    backend.budget = TokenBudget("auto", name="tiny")
    with pytest.raises(UserError, match=r"^model tiny: out of memory on one pass of \d+ tokens that cannot be split"):
        backend.score_labels(requests())


def test_the_cpu_allocator_failure_counts_as_out_of_memory_and_other_errors_do_not():
    assert is_out_of_memory(torch.cuda.OutOfMemoryError("CUDA out of memory"))
    assert is_out_of_memory(
        RuntimeError(
            "[enforce fail at alloc_cpu.cpp:117] DefaultCPUAllocator: can't allocate "
            "memory: you tried to allocate 99 bytes"
        )
    )
    assert not is_out_of_memory(RuntimeError("shape mismatch"))
    assert not is_out_of_memory(ValueError("out of memory"))


def test_fit_keeps_rows_times_the_widest_within_the_budget():
    widths = [9, 8, 8, 5, 5, 5, 1]
    assert fit(widths, 30, width=lambda w: w, rows=lambda w: 1, max_units=None) == 3  # 3 x 9 = 27
    assert fit(widths, 30, width=lambda w: w, rows=lambda w: 2, max_units=None) == 1  # 2 x 9 = 18, 4 x 9 = 36
    assert fit(widths, 4, width=lambda w: w, rows=lambda w: 1, max_units=None) == 1  # one unit always goes
    assert fit(widths, 1000, width=lambda w: w, rows=lambda w: 1, max_units=4) == 4


def test_budget_defaults_by_device_and_halves_to_what_was_tried():
    cpu = TokenBudget(None, name="m")
    assert cpu.resolve(torch.device("cpu"), lambda: 1) == CPU_BATCH_TOKENS  # measured fastest on the main job
    auto = TokenBudget("auto", name="m")
    start = auto.resolve(torch.device("cpu"), lambda: 10**12)  # a huge token: the floor
    assert start == 256
    auto.shrink(100)  # a short batch at the queue's end failed: half of what it fed, not of the budget
    assert (auto.tokens, auto.recoveries) == (50, 1)
    auto.shrink(1)
    assert auto.tokens == 1


@pytest.mark.parametrize("value", ["lots", 0, -4, 1.5, True])
def test_a_bad_budget_is_one_line_at_the_config_check(value, run_job_in):
    with pytest.raises(UserError, match=r"^config key model\.max_batch_tokens: .* is not a budget; give a positive"):
        run_job_in("model=hf", "model.path=/nonexistent", f"model.max_batch_tokens={value}")


def test_generation_with_a_small_budget_gives_the_same_samples(tiny_model_dir):
    params = SamplingParams(n=3, temperature=1.0, max_new_tokens=4)
    wide = tiny(tiny_model_dir, batch_size=None).generate(requests(), params)
    narrow = tiny(tiny_model_dir, batch_size=None)
    narrow.budget = TokenBudget(64, name="tiny")
    assert narrow.generate(requests(), params) == wide


@pytest.mark.parametrize("keeps_logits", [True, False], ids=["logits_to_keep", "every-position"])
def test_several_packs_in_one_pass_score_as_one_pack_per_pass(tiny_model_dir, keeps_logits):
    from .test_prefix_sharing import variant_requests

    reqs = variant_requests()
    one = tiny(tiny_model_dir, batch_size=None)
    one.pack_tokens, one.budget = 150, TokenBudget(150, name="tiny")  # small packs, one per pass
    many = tiny(tiny_model_dir, batch_size=None)
    many.pack_tokens, many.budget = 150, TokenBudget(4096, name="tiny")  # the same packs, many to a pass
    many.load()
    if not keeps_logits:
        many.lm.keep_kw = None  # a model that returns every position's logits
    several = []  # passes that held more than one pack
    forward_at = many.lm.forward_at
    many.lm.forward_at = lambda ids, *args: several.append(ids.shape[0]) or forward_at(ids, *args)
    for a, b in zip(many.score_labels(reqs), one.score_labels(reqs)):
        assert a.probs == pytest.approx(b.probs, abs=1e-5) and a.mass == pytest.approx(b.mass, abs=1e-5)
    for a, b in zip(many.score_options(reqs), one.score_options(reqs)):
        assert a.loglik == pytest.approx(b.loglik, abs=1e-4)
    assert several and max(several) > 1, "several packs went to one pass"
