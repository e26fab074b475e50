"""Shared-prefix scoring: prompts packed into prefix trees give the same label scores as padded batches."""

from __future__ import annotations

import random

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from src.backends.base import Request, SamplingParams  # noqa: E402
from src.backends.hf import pack_prefix_trees  # noqa: E402

from .test_hf_backend import tiny, tiny_model_dir  # noqa: E402,F401  (fixture)

HEADER = "Answer the following multiple choice question. Reply with one of {letters}.\n\nQuestion: {question}\n"


def variant_requests() -> list[Request]:
    """Variants of a few questions (reordered, fewer and more options), a duplicate, and a prompt that is a
    prefix of another, as a CoRA chunk has them."""
    rng = random.Random(0)
    out = []
    for q, question in enumerate(["What is 2+2?", "Which colour is the sky?", "Name a fruit."]):
        options = ["one", "four", "seven", "blue", "apple"][: 4 + q % 2]
        for v in range(5):
            shown = rng.sample(options, k=len(options) - v % 3)
            labels = tuple("ABCDE"[: len(shown)])
            choices = "".join(f"{lab}. {text}\n" for lab, text in zip(labels, shown))
            prompt = HEADER.format(letters="".join(labels), question=question) + choices + "Answer:"
            out.append(Request(prompt=prompt, labels=labels, options=tuple(shown), seed=q * 10 + v, key=f"q{q}/v{v}"))
    out.append(out[3])  # an identical prompt
    out.append(Request(prompt=out[0].prompt[: -len("Answer:")], labels=out[0].labels, options=out[0].options, seed=1))
    return out


@pytest.mark.promise("docs/speed.md", "shared-prefix label scores equal padded batches' within 1e-5")
@pytest.mark.parametrize("chat,pack_tokens", [(False, 1024), (True, 1024), (False, 150)])
def test_packed_scores_equal_padded_scores(tiny_model_dir, chat, pack_tokens):
    reqs = variant_requests()
    padded = tiny(tiny_model_dir, batch_size=4, chat=chat)
    padded.share_prefix = False
    packed = tiny(tiny_model_dir, batch_size=4, chat=chat)
    packed.pack_tokens = pack_tokens
    want = padded.score_labels(reqs, SamplingParams(temperature=0.7, top_k=30))
    got = packed.score_labels(reqs, SamplingParams(temperature=0.7, top_k=30))
    assert packed.share_prefix, "the packing self-check passed on a model that honours 4D masks"
    for a, b in zip(got, want):
        assert a.probs == pytest.approx(b.probs, abs=1e-5)
        assert a.mass == pytest.approx(b.mass, abs=1e-5)
        assert a.answer_dist == pytest.approx(b.answer_dist, abs=1e-5)
    if pack_tokens >= 1024:
        padded.forward_tokens = packed.forward_tokens = 0  # leave out the first call's packing self-check
        padded.score_labels(reqs)
        packed.score_labels(reqs)
        assert packed.forward_tokens < padded.forward_tokens / 2, "shared prefixes are computed once"


@pytest.mark.promise(
    "docs/speed.md", "each prefix tree holds at most model.pack_tokens tokens and rebuilds every prompt"
)
def test_pack_prefix_trees_rebuild_every_prompt_within_the_budget():
    rng = random.Random(1)
    stem = [rng.randrange(50) for _ in range(30)]
    seqs = [stem[: rng.randrange(5, 30)] + [rng.randrange(50) for _ in range(rng.randrange(0, 20))] for _ in range(40)]
    seqs.append(list(range(100)))  # longer than the budget: a pack of its own
    packs = pack_prefix_trees(seqs, budget=80)
    assert sorted(i for p in packs for i in p.members) == list(range(len(seqs)))
    for pack in packs:
        assert len(pack.tokens) <= 80 or len(pack.members) == 1
        for i, last in zip(pack.members, pack.last):
            path, node = [], last
            while node >= 0:
                path.append(pack.tokens[node])
                assert pack.positions[node] == len(seqs[i]) - len(path)
                node = pack.parents[node]
            assert path[::-1] == seqs[i]
    assert sum(len(p.tokens) for p in packs) < sum(map(len, seqs))
    with pytest.raises(ValueError, match="empty"):
        pack_prefix_trees([[1], []], budget=10)


@pytest.mark.promise("docs/speed.md", "packed option log-likelihoods equal the padded path's within 1e-4")
@pytest.mark.parametrize("chat,pack_tokens", [(False, 1024), (True, 1024), (False, 40)])
def test_packed_option_scores_equal_padded_option_scores(tiny_model_dir, chat, pack_tokens):
    """cloze / cloze_shown: every option text as a branch of its prompt's tree gives the padded log-likelihoods,
    feeding each prompt (and the question text its variants share) once for all options."""
    reqs = variant_requests()
    padded = tiny(tiny_model_dir, batch_size=4, chat=chat)
    padded.share_prefix = False
    packed = tiny(tiny_model_dir, batch_size=4, chat=chat)
    packed.pack_tokens = pack_tokens
    want = padded.score_options(reqs)
    got = packed.score_options(reqs)
    assert packed.share_prefix
    for a, b in zip(got, want):
        assert a.loglik == pytest.approx(b.loglik, abs=1e-4)
        assert a.loglik_norm == pytest.approx(b.loglik_norm, abs=1e-4)
        assert max(range(len(a.loglik)), key=a.loglik.__getitem__) == max(
            range(len(b.loglik)), key=b.loglik.__getitem__
        )
    if pack_tokens >= 1024:
        padded.forward_tokens = packed.forward_tokens = 0
        padded.score_options(reqs)
        packed.score_options(reqs)
        assert packed.forward_tokens < padded.forward_tokens, "prompts shared by their options and variants"


def test_pack_nodes_list_every_token_of_a_member():
    packs = pack_prefix_trees([[1, 2, 3], [1, 2, 4, 5], [7]], budget=16)
    (pack,) = packs
    for member, nodes in zip(pack.members, pack.nodes):
        seq = [[1, 2, 3], [1, 2, 4, 5], [7]][member]
        assert [pack.tokens[n] for n in nodes] == seq
        assert [pack.positions[n] for n in nodes] == list(range(len(seq)))
