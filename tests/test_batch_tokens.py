"""Batches sized by tokens (`model.max_batch_tokens`): a model double that runs out of memory above a token count.

The tiny random llama of test_hf_backend.py, its forward wrapped to raise `torch.cuda.OutOfMemoryError` when a
pass feeds more than LIMIT token positions, as a GPU with that much room would: `auto` must settle on the largest
budget that passes, answer every trial once, and write the records of a run given that budget from the start.
"""

from __future__ import annotations

import functools
from unittest import mock

import pandas as pd
import pytest
from hypothesis import given, settings, strategies as st

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from src.backends.base import SamplingParams  # noqa: E402
from src.backends.batch_tokens import CPU_BATCH_TOKENS  # noqa: E402
from src.backends.hf import budget as budget_module  # noqa: E402
from src.backends.hf.budget import GROW_AFTER, TokenBudget, fit, is_out_of_memory, run_in_batches  # noqa: E402
from src.common.errors import UserError  # noqa: E402
from tests.golden_records import canonical  # noqa: E402

from .test_hf_backend import requests, tiny, tiny_model_dir  # noqa: E402,F401  (fixture)

LIMIT = 1500  # token positions one pass of the double may feed


@pytest.fixture
def runs_out_above(monkeypatch):
    """`runs_out_above(limit, after=0)`: from then on, a pass of the llama feeding more than `limit` positions (once
    `after` passes have run) raises CUDA's out-of-memory error before computing anything; returns the list of
    (tokens, ran) of every pass."""
    passes: list[tuple[int, bool]] = []
    original = transformers.LlamaForCausalLM.forward

    def install(limit: int, after: int = 0) -> list[tuple[int, bool]]:
        @functools.wraps(original)
        def forward(self, input_ids=None, **kwargs):
            tokens = int(input_ids.numel())
            fits = tokens <= limit or sum(ran for _, ran in passes) < after
            passes.append((tokens, fits))
            if not fits:
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
        f"model.share_prefix={share_prefix}",
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


@pytest.mark.promise("docs/speed.md", "one prompt that does not fit the budget alone stops the job in one line")
def test_a_pass_that_cannot_be_split_stops_in_one_line(tiny_model_dir, runs_out_above):
    runs_out_above(5)  # no prompt is that short
    backend = tiny(tiny_model_dir, batch_size=None)
    backend.budget = TokenBudget("auto", name="tiny")
    with pytest.raises(UserError, match=r"^model tiny: out of memory on one pass of \d+ tokens that cannot be split"):
        backend.score_labels(requests())


@pytest.mark.promise("docs/speed.md", "the CPU allocator's failure counts as out of memory; other errors do not")
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


@pytest.mark.promise("docs/speed.md", "a padded batch keeps rows x the longest prompt within max_batch_tokens")
def test_fit_keeps_rows_times_the_widest_within_the_budget():
    widths = [9, 8, 8, 5, 5, 5, 1]
    assert fit(widths, 30, width=lambda w: w, rows=lambda w: 1, max_units=None) == 3  # 3 x 9 = 27
    assert fit(widths, 30, width=lambda w: w, rows=lambda w: 2, max_units=None) == 1  # 2 x 9 = 18, 4 x 9 = 36
    assert fit(widths, 4, width=lambda w: w, rows=lambda w: 1, max_units=None) == 1  # one unit always goes
    assert fit(widths, 1000, width=lambda w: w, rows=lambda w: 1, max_units=4) == 4


@pytest.mark.promise(
    "docs/speed.md", "the budget defaults to auto on a GPU, 1,024 on a CPU; it halves on OOM and grows back"
)
def test_budget_defaults_by_device_halves_from_the_budget_in_force_and_grows_back():
    cpu = TokenBudget(None, name="m")
    assert cpu.resolve(torch.device("cpu"), lambda: 1) == CPU_BATCH_TOKENS  # measured fastest on the main job
    auto = TokenBudget("auto", name="m")
    start = auto.resolve(torch.device("cpu"), lambda: 10**12)  # a huge token: the floor
    assert start == 256
    auto.shrink(100)  # nothing ran yet: the budget was too large; halved from 256 until below what failed
    assert (auto.tokens, auto.ceiling, auto.recoveries) == (64, 64, 1)
    fixed = TokenBudget(1024, name="m")
    fixed.fitted_pass(1000)
    fixed.shrink(100)  # a short batch failed after larger passes ran: halved from the budget in force, not from 100
    assert (fixed.tokens, fixed.ceiling) == (64, 1024)
    for _ in range(GROW_AFTER - 1):
        fixed.fitted_pass(60)
    assert fixed.tokens == 64
    fixed.fitted_pass(60)  # a run of passes that all fit: doubled, and so on up to the ceiling
    assert (fixed.tokens, fixed.doublings) == (128, 1)
    for _ in range(10 * GROW_AFTER):
        fixed.fitted_pass(60)
    assert (fixed.tokens, fixed.doublings) == (1024, 4)
    auto.shrink(1)
    assert auto.tokens == 1
    fixed.new_job()  # the next job on a reused backend: from the ceiling, with its own counts
    assert (fixed.tokens, fixed.recoveries, fixed.doublings) == (1024, 0, 0)


@settings(max_examples=200, deadline=None)
@given(
    widths=st.lists(st.integers(1, 40), min_size=1, max_size=30),
    rows=st.integers(1, 3),
    room=st.integers(0, 400),
    start=st.integers(1, 2000),
)
@pytest.mark.promise("docs/speed.md", "after an out-of-memory no trial is lost or answered twice")
def test_run_in_batches_gives_every_unit_once_in_order_whatever_runs_out(widths, rows, room, start):
    """A double that runs out of memory above `limit` tokens: every unit leaves once, in order, only from passes
    that fit, and a budget set from the start to where the recovery settled never runs out (each unit fits alone:
    `room` tokens above the widest)."""
    limit = rows * max(widths) + room
    budget = TokenBudget(start, name="m")
    ran: list[int] = []

    def run(batch):
        tokens = rows * len(batch) * max(batch)
        if tokens > limit:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory.")
        ran.append(tokens)
        return list(batch)

    # the garbage collection after each failed pass is left out here (it is checked in test_memory_budget.py): in the
    # whole suite's process a collection walks every test's leftovers, 30 s over this test's examples
    with mock.patch.object(budget_module, "clear_device_cache"):
        out = [
            u
            for batch, result in run_in_batches(budget, list(widths), run, width=lambda u: u, rows=lambda u: rows)
            for u in result
        ]
    assert out == widths and all(tokens <= limit for tokens in ran)
    assert budget.tokens <= budget.ceiling <= start
    settled = TokenBudget(budget.tokens, name="m")
    with mock.patch.object(budget_module, "clear_device_cache"):
        again = [
            u
            for _, result in run_in_batches(settled, list(widths), run, width=lambda u: u, rows=lambda u: rows)
            for u in result
        ]
    assert again == widths and settled.recoveries == 0


@pytest.mark.promise("docs/speed.md", "a bad model.max_batch_tokens is one line at the config check")
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


def packed_backend(tiny_model_dir, *, budget, pack_tokens=1024):
    """The tiny llama packing prefixes under a token budget, its packing check already done on one prompt (so the
    double counts only the passes under test)."""
    from .test_prefix_sharing import variant_requests

    backend = tiny(tiny_model_dir, batch_size=None)
    backend.pack_tokens, backend.budget = pack_tokens, TokenBudget(budget, name="tiny")
    backend.score_labels(variant_requests()[:1])
    return backend


def test_wrong_answers_after_an_out_of_memory_recovery(tiny_model_dir, runs_out_above):
    """Bug class "wrong answers after an out-of-memory recovery": after a pass of two packs fits, the next
    pass of packs runs out of memory, and the pending packs (8 prompts, none in its first place) are packed again;
    every answer must equal a run that never ran out of memory (packing.py `repacked` maps the new packs' members
    back to request indices)."""
    from .test_prefix_sharing import variant_requests

    reqs = variant_requests()
    want_labels = packed_backend(tiny_model_dir, budget=600, pack_tokens=300).score_labels(reqs)
    want_options = packed_backend(tiny_model_dir, budget=600, pack_tokens=300).score_options(reqs)
    labels, options = (packed_backend(tiny_model_dir, budget=600, pack_tokens=300) for _ in range(2))
    passes = runs_out_above(500, after=1)  # the first pass (two packs, 572 tokens) fits, the second (540) does not
    got = labels.score_labels(reqs)
    assert [ran for _, ran in passes[:2]] == [True, False] and labels.budget.recoveries == 1
    for a, b in zip(got, want_labels):
        assert a.probs == pytest.approx(b.probs, abs=1e-6) and a.mass == pytest.approx(b.mass, abs=1e-6)
    passes.clear()  # the same for option texts: the first pass fits, a later one does not
    for a, b in zip(options.score_options(reqs), want_options):
        assert a.loglik == pytest.approx(b.loglik, abs=1e-5)
    assert options.budget.recoveries >= 1


@pytest.mark.promise("docs/speed.md", "a pack that can be split after an out-of-memory is split")
def test_a_pack_that_could_be_split_is_split_instead_of_stopping_the_job(tiny_model_dir, runs_out_above):
    """Bug class "a pack that could be split stops the job instead": all 17 prompts make one 767-token pack,
    alone in its pass, which runs out of memory above 600 tokens; `run_in_batches` must let the repack split it
    (packs of 509 and 385 tokens under the halved budget) rather than stop as for one prompt that cannot be split."""
    from .test_prefix_sharing import variant_requests

    reqs = variant_requests()
    want = packed_backend(tiny_model_dir, budget=1024).score_labels(reqs)
    backend = packed_backend(tiny_model_dir, budget=1024)
    passes = runs_out_above(600)
    got = backend.score_labels(reqs)
    assert passes[0] == (767, False) and all(ran for _, ran in passes[1:]) and backend.budget.tokens == 512
    for a, b in zip(got, want):
        assert a.probs == pytest.approx(b.probs, abs=1e-6)


@pytest.mark.parametrize("limit", [300, 900])
def test_recovered_answers_equal_a_run_given_the_settled_budget_from_the_start(tiny_model_dir, runs_out_above, limit):
    """auto under a double that runs out above `limit` tokens, on labels (packed and padded), options and
    generation: the same answers as a backend given, from the start, the budget the recovery settled on."""
    params = SamplingParams(n=3, temperature=1.0, max_new_tokens=4)

    def answers(backend):
        out = [backend.score_labels(requests()), backend.score_options(requests())]
        backend.share_prefix = False  # padded rows too
        return [*out, backend.score_labels(requests()), backend.generate(requests(), params)]

    auto = tiny(tiny_model_dir, batch_size=None)
    auto.budget = TokenBudget("auto", name="tiny")
    passes = runs_out_above(limit)
    got = answers(auto)
    assert auto.budget.recoveries >= 1 and any(not ran for _, ran in passes)
    passes.clear()
    settled = tiny(tiny_model_dir, batch_size=None)
    settled.budget = TokenBudget(auto.budget.tokens, name="tiny")
    want = answers(settled)
    assert all(ran for _, ran in passes) and settled.budget.recoveries == 0
    for a, b in zip([*got[0], *got[2]], [*want[0], *want[2]]):
        assert a.probs == pytest.approx(b.probs, abs=1e-5)
    for a, b in zip(got[1], want[1]):
        assert a.loglik == pytest.approx(b.loglik, abs=1e-4)
    assert got[3] == want[3]


@pytest.mark.slow  # two jobs of the tiny model, ~10 s each on 2 cores
def test_a_sweep_on_one_reused_backend_logs_each_jobs_own_recoveries(run_job_in, tiny_model_dir, runs_out_above):
    from mlflow.tracking import MlflowClient

    from src.job import runner

    passes = runs_out_above(LIMIT)
    jobs = run_job_in.sweep(
        *JOB, f"model.path={tiny_model_dir}", "scoring=cloze_shown", "model.max_batch_tokens=auto", "seed=1,2"
    )
    assert len(jobs) == 2 and len(runner._LOADED) == 1, "one backend served both jobs"
    params = [MlflowClient(job.tracking_uri).get_run(job.run_id).data.params for job in jobs]
    halvings = [int(p.get("batch_token_halvings", 0)) for p in params]
    assert halvings[0] >= 1 and sum(halvings) == sum(not ran for _, ran in passes), "each pass that failed, once"
