"""`model.max_batch_tokens=auto` on any causal LM: tiny random GPT-2, OPT, Bloom, GPT-NeoX and llama checkpoints
(each config under its own field names; most have no `intermediate_size`) answer label scoring, cloze and
generation with auto's budget as they do with a small fixed one, and the memory estimate reads every config,
nested multimodal ones included, without failing on a missing field."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from src.backends.base import SamplingParams  # noqa: E402
from src.backends.hf import HFBackend, HFSettings  # noqa: E402
from src.backends.hf.budget import AUTO_MAX_TOKENS, AUTO_MIN_TOKENS, ModelDims, pass_bytes_per_token  # noqa: E402
from tests.tiny_model import ARCHITECTURES, save_tiny_model, tiny_config  # noqa: E402

from .test_hf_backend import requests  # noqa: E402


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    """One tiny random checkpoint per architecture, saved like a hub model."""
    root = tmp_path_factory.mktemp("architectures")
    return {arch: save_tiny_model(root / arch, arch=arch, seed=0) for arch in ARCHITECTURES}


@pytest.mark.parametrize(
    "share_prefix", [True, pytest.param(False, marks=pytest.mark.slow)], ids=["packed", "padded"]
)  # padded: ~5 s per architecture on 2 busy cores
@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_auto_budget_runs_every_scoring_on_every_architecture(checkpoints, arch, share_prefix):
    def backend(budget):
        return HFBackend(
            HFSettings(
                name=arch,
                path=str(checkpoints[arch]),
                batch_size=None,
                max_batch_tokens=budget,
                share_prefix=share_prefix,
            ),
            progress=False,
        )

    auto, small = backend("auto"), backend(160)  # 160 tokens: one to three prompts per pass
    sampling = SamplingParams(n=2, temperature=1.0, max_new_tokens=3)
    for a, b in zip(auto.score_labels(requests()), small.score_labels(requests())):
        assert a.probs == pytest.approx(b.probs, abs=1e-5)
    for a, b in zip(auto.score_options(requests()), small.score_options(requests())):
        assert a.loglik == pytest.approx(b.loglik, abs=1e-4)
    assert auto.generate(requests(), sampling) == small.generate(requests(), sampling)
    assert AUTO_MIN_TOKENS <= auto.run_params()["batch_tokens"] <= AUTO_MAX_TOKENS


def test_the_estimate_reads_each_architecture_under_its_own_field_names():
    size = {arch: ModelDims.of(tiny_config(arch, 258)) for arch in ARCHITECTURES}
    assert {(d.layers, d.hidden, d.heads, d.vocab) for d in size.values()} == {(2, 32, 4, 258)}
    assert [size[a].intermediate for a in ARCHITECTURES] == [64, 128, 64, 128, 64]  # GPT-2, Bloom: 4 x hidden
    assert [size[a].kv_heads for a in ARCHITECTURES] == [2, 4, 4, 4, 4]
    assert {d.head_dim for d in size.values()} == {8}


def test_a_multimodal_config_is_read_through_its_text_config():
    text = tiny_config("llama", 258)
    llava = transformers.LlavaConfig(text_config=text.to_dict())
    assert ModelDims.of(llava) == ModelDims.of(text)
    assert pass_bytes_per_token(llava, torch.float32) == pass_bytes_per_token(text, torch.float32)


def test_a_config_without_sizes_falls_back_on_the_model_and_never_raises():
    model = transformers.AutoModelForCausalLM.from_config(tiny_config("gpt2", 258))
    bare = transformers.PretrainedConfig()  # no field the estimate reads
    dims = ModelDims.of(bare, model)
    assert (dims.vocab, dims.hidden) == (258, 32)  # the embedding's shape
    assert dims.layers >= 1 and dims.intermediate == 128
    assert pass_bytes_per_token(bare, torch.float32) > 0  # no model either: fixed defaults, still a number
