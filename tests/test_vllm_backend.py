"""vLLM backend without vLLM: the pure parts (label tokens, logprobs -> label scores) and the glue, on fake engine
objects."""

from __future__ import annotations

import contextlib
import importlib.util
import logging
import math
import os
import signal
import sys
import time
from types import SimpleNamespace as Fake  # a stand-in object with just the attributes a test gives it

import pytest

from src.backends import load_backend
from src.backends.base import Request, SamplingParams
from src.backends.logprobs import label_scores_from_top
from src.backends.vllm_backend import VLLMBackend, VLLMSettings, continuation_loglik, first_token_logprobs
from src.common.errors import UserError

VOCAB = {"A": 1, " A": 2, "B": 3, " B": 4, "C": 5, " C": 6, "Q": 7, "?": 8, " x": 9, "!": 10}


class FakeTokenizer:
    chat_template = None

    def __call__(self, text, add_special_tokens=False):
        ids, rest = [], text
        while rest:
            token = max((t for t in VOCAB if rest.startswith(t)), key=len, default=None)
            ids.append(VOCAB[token] if token else 0)
            rest = rest[len(token) if token else 1 :]
        return {"input_ids": ids}


class FakeLLM:
    """Records what it is asked; the first token's logprobs say A 0.5, " A" 0.1, B 0.2, "!" 0.2 (whole vocabulary)."""

    def __init__(self):
        self.calls = []
        self.bars = []  # each call's use_tqdm

    def get_tokenizer(self):
        return FakeTokenizer()

    def generate(self, prompts, sampling, use_tqdm=True):  # vLLM's default: a bar of its own per call
        self.calls.append((prompts, sampling))
        self.bars.append(use_tqdm)
        params = sampling if isinstance(sampling, list) else [sampling] * len(prompts)
        out = []
        for prompt, sp in zip(prompts, params):
            top = {
                1: Fake(logprob=math.log(0.5)),
                2: Fake(logprob=math.log(0.1)),
                3: Fake(logprob=math.log(0.2)),
                10: Fake(logprob=math.log(0.2)),
            }
            ids = prompt["prompt_token_ids"]
            prompt_lp = [None] + [{t: Fake(logprob=-0.25)} for t in ids[1:]]
            outputs = [Fake(index=k, text=f"s{sp.get('seed')}-{k}", logprobs=[top]) for k in range(sp["n"])]
            out.append(Fake(outputs=outputs, prompt_logprobs=prompt_lp))
        return out


@pytest.fixture
def fake_backend():
    b = VLLMBackend(VLLMSettings(name="v", path="org/model", top_logprobs=-1))
    b.llm, b.tokenizer = FakeLLM(), FakeTokenizer()
    b._vllm = Fake(SamplingParams=lambda **kw: kw)  # SamplingParams as a plain dict
    return b


def test_logprobs_map_to_label_probs_mass_and_exact_answer_dist():
    top = {1: math.log(0.5), 2: math.log(0.1), 3: math.log(0.2), 10: math.log(0.2)}
    scores, exact = label_scores_from_top(top, [{1, 2}, {3, 4}], SamplingParams(temperature=0.5), complete=True)
    assert exact and scores.probs == pytest.approx((0.75, 0.25)) and scores.mass == pytest.approx(0.8)
    w = {t: math.exp(lp) ** 2 for t, lp in top.items()}  # temperature 0.5 squares the probabilities
    total = sum(w.values())
    assert scores.answer_dist == pytest.approx(((w[1] + w[2]) / total, w[3] / total, w[10] / total))
    greedy, _ = label_scores_from_top(top, [{1, 2}, {3, 4}], SamplingParams(temperature=0.0))
    assert greedy.answer_dist == (1.0, 0.0, 0.0)
    partial, exact = label_scores_from_top(
        {1: math.log(0.5), 3: math.log(0.2)}, [{1}, {3}], SamplingParams(temperature=1.0)
    )
    assert not exact and partial.answer_dist == pytest.approx((0.5, 0.2, 0.3)), "the tail is INVALID"
    cut, exact = label_scores_from_top(top, [{1, 2}, {3, 4}], SamplingParams(temperature=1.0, top_k=2))
    assert exact and cut.answer_dist == pytest.approx((0.5 / 0.7, 0.2 / 0.7, 0.0))
    nucleus, _ = label_scores_from_top(top, [{1, 2}, {3, 4}], SamplingParams(temperature=1.0, top_p=0.6), complete=True)
    assert nucleus.answer_dist == pytest.approx((0.5 / 0.7, 0.2 / 0.7, 0.0))


def test_request_output_parsing():
    assert first_token_logprobs(Fake(outputs=[Fake(logprobs=[{3: Fake(logprob=-1.0)}])])) == {3: -1.0}
    assert first_token_logprobs(Fake(outputs=[Fake(logprobs=None)])) == {}
    entries = [None, {2: Fake(logprob=-1.0)}, {3: Fake(logprob=-2.0), 9: Fake(logprob=-0.1)}]
    assert continuation_loglik(entries, [1, 2, 3], start=2) == -2.0


def test_backend_glue_on_a_fake_engine(fake_backend):
    reqs = [Request(prompt="Q?", labels=("A", "B"), options=("x", "y"), seed=5)]
    samples = fake_backend.generate(reqs, SamplingParams(n=3, temperature=0.7, top_p=0.9, max_new_tokens=2))
    assert samples == [["s5-0", "s5-1", "s5-2"]]
    sp = fake_backend.llm.calls[-1][1][0]
    assert sp["n"] == 3 and sp["seed"] == 5 and sp["top_k"] == -1 and sp["max_tokens"] == 2
    assert fake_backend.generate(reqs, SamplingParams(n=2, temperature=0.0)) == [["sNone-0"] * 2]
    scores = fake_backend.score_labels(reqs, SamplingParams(temperature=1.0))[0]
    assert scores.probs == pytest.approx((0.75, 0.25)) and scores.answer_dist == pytest.approx((0.6, 0.2, 0.2))
    assert fake_backend.llm.calls[-1][1][0]["logprobs"] == -1
    options = fake_backend.score_options(reqs)[0]
    assert options.loglik == (-0.25, -0.5)  # " x" is one token after "Q?", " y" two (" ", "y")


@pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="vLLM is installed here")
def test_missing_vllm_is_a_one_line_user_error():
    backend = load_backend({"name": "v", "backend": "vllm", "path": "org/model"}, chat=False)
    assert backend.identity.startswith("vllm:org/model")
    with pytest.raises(UserError, match=r"pip install \.\[vllm\]"):
        backend.generate([Request("Q?", ("A",), ("x",), 0)], SamplingParams())
    with pytest.raises(UserError, match="tensorparallel"):
        load_backend({"name": "v", "backend": "vllm", "path": "m", "tensorparallel": 2}, chat=False)


class FakeEngineLLM(FakeLLM):
    """A vllm.LLM whose engine core counts its shutdowns, built with the engine arguments it records."""

    made: list[dict] = []

    def __init__(self, **args):
        super().__init__()
        FakeEngineLLM.made.append(args)
        self.shutdowns = 0
        self.llm_engine = Fake(engine_core=Fake(shutdown=self._shutdown))

    def _shutdown(self):
        self.shutdowns += 1


@pytest.fixture
def fake_vllm(monkeypatch):
    """vLLM's module as the backend sees it: `LLM` and `SamplingParams`, the platform a CPU unless a test says not;
    atexit's registrations recorded instead of made; the hub is not asked (its client registers exit handlers of its
    own), so a hub id resolves to what a test puts in weights._COMMITS or to no commit."""
    from src.backends import vllm_backend, weights

    monkeypatch.setattr(weights, "_online_commit", lambda repo_id, revision: None)
    monkeypatch.setattr(weights, "_cached_commit", lambda repo_id, revision: None)

    FakeEngineLLM.made = []
    platform = Fake(cpu=True)
    monkeypatch.setattr(vllm_backend, "import_vllm", lambda: Fake(LLM=FakeEngineLLM, SamplingParams=lambda **kw: kw))
    monkeypatch.setattr(vllm_backend, "on_cpu", lambda: platform.cpu)
    exits = []
    monkeypatch.setattr(vllm_backend.atexit, "register", exits.append)
    monkeypatch.setattr(vllm_backend.atexit, "unregister", lambda fn: exits.remove(fn))
    return Fake(platform=platform, exits=exits)


def test_close_ends_the_engine_once_and_takes_back_its_exit_handler(fake_vllm):
    """A job whose engine nobody shuts down never exits (multiprocessing's exit handler waits on the idle engine
    process): `close` ends it, and the exit handler `load` registered does so for any caller that did not."""
    backend = VLLMBackend(VLLMSettings(name="v", path="org/model"))
    backend.load()
    llm = backend.llm
    assert fake_vllm.exits == [backend.close], "registered once the engine exists"
    backend.load()
    assert len(FakeEngineLLM.made) == 1 and fake_vllm.exits == [backend.close], "loaded once"
    backend.close()
    assert llm.shutdowns == 1 and backend.llm is None and fake_vllm.exits == []
    backend.close()
    assert llm.shutdowns == 1, "closing twice ends nothing twice"
    backend.load()
    assert len(FakeEngineLLM.made) == 2 and fake_vllm.exits == [backend.close], "asked again, it loads again"


@pytest.mark.parametrize(
    ("cpu", "setting", "engine_gets"),
    [(True, None, False), (True, True, True), (False, None, "unset"), (False, False, False)],
)
def test_chunked_prefill_is_off_on_a_cpu_unless_set(fake_vllm, cpu, setting, engine_gets):
    fake_vllm.platform.cpu = cpu
    backend = VLLMBackend.from_config(
        {"backend": "vllm", "path": "org/m", "enable_chunked_prefill": setting}, chat=False
    )
    backend.load()
    assert FakeEngineLLM.made[-1].get("enable_chunked_prefill", "unset") == engine_gets


def test_seeded_sampling_with_chunked_prefill_on_a_cpu_is_refused_before_the_engine_starts(fake_vllm):
    """vLLM's CPU sampler cannot rewind a seeded generator when chunked prefill splits a prompt: the engine dies
    mid-job. Refused in one line, before the engine is started or any request sent."""
    reqs = [Request(prompt="Q?", labels=("A", "B"), options=("x", "y"), seed=5)]
    backend = VLLMBackend(VLLMSettings(name="v", path="org/model", enable_chunked_prefill=True))
    with pytest.raises(UserError, match="model.enable_chunked_prefill=false") as err:
        backend.generate(reqs, SamplingParams(n=2, temperature=0.7))
    assert "\n" not in str(err.value) and FakeEngineLLM.made == [], "nothing started"
    assert backend.generate(reqs, SamplingParams(n=2, temperature=0.0)) == [["sNone-0"] * 2], "greedy: no seeds"
    fake_vllm.platform.cpu = False  # a GPU's sampler rewinds its generator: both work together
    assert backend.generate(reqs, SamplingParams(n=2, temperature=0.7)) == [["s5-0", "s5-1"]]
    assert VLLMBackend(VLLMSettings(name="v", path="m")).generate(reqs, SamplingParams(n=1, temperature=0.7)) == [
        ["s5-0"]
    ]


@pytest.mark.parametrize(
    ("environ", "stream", "level"),
    [
        ({}, "ext://sys.stderr", "WARNING"),  # vLLM's default is stdout at INFO
        ({"VLLM_LOGGING_STREAM": "ext://sys.stdout"}, "ext://sys.stderr", "WARNING"),  # stdout is data
        ({"VLLM_LOGGING_STREAM": "ext://sys.stderr", "VLLM_LOGGING_LEVEL": "DEBUG"}, "ext://sys.stderr", "DEBUG"),
    ],
)
def test_vllms_log_goes_to_stderr_at_warning_unless_the_environment_says_otherwise(environ, stream, level):
    from src.backends.vllm_backend import quiet_vllm_logging

    quiet_vllm_logging(environ)
    assert (environ["VLLM_LOGGING_STREAM"], environ["VLLM_LOGGING_LEVEL"]) == (stream, level)


def test_the_command_releases_its_backends_however_it_ends(monkeypatch):
    """`python -m src.run` closes what its jobs kept (vLLM's engine) on success, on an error and on SIGTERM (which
    arrives as KeyboardInterrupt and leaves as exit 130)."""
    import src.run as entry

    released = []
    monkeypatch.setattr(entry, "release_backends", lambda: released.append(True))
    for ending in (None, SystemExit(2), KeyboardInterrupt()):

        def checked_main(sweep, ending=ending):
            if ending is not None:
                raise ending

        monkeypatch.setattr(entry, "_checked_main", checked_main)
        with pytest.raises((SystemExit, KeyboardInterrupt)) if ending is not None else contextlib.nullcontext():
            entry.main()
    assert released == [True, True, True]


def test_an_engine_that_does_not_start_is_one_line_naming_the_memory_setting(fake_vllm, hub, monkeypatch):
    """vLLM's engine refuses a setting in a child process (its traceback there) and raises a RuntimeError here."""

    def refused(**args):
        raise RuntimeError("Engine core initialization failed. See root cause above. Failed core proc(s): {}")

    from src.backends import vllm_backend

    monkeypatch.setattr(vllm_backend, "import_vllm", lambda: Fake(LLM=refused, SamplingParams=dict))
    backend = VLLMBackend(VLLMSettings(name="v", path="org/model"))
    with pytest.raises(UserError, match="engine did not start") as err:
        backend.load()
    assert "model.gpu_memory_utilization" in str(err.value) and "\n" not in str(err.value)
    assert backend.llm is None and fake_vllm.exits == [], "nothing to end"


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_stop_signal_during_the_engines_start_ends_the_engine_then_stops_the_job(fake_vllm, monkeypatch, signum):
    """vLLM's start waits in pyzmq's poll, which drops the exception a signal handler raises: a SIGTERM (Slurm's
    cancel) or Ctrl-C then was lost and the job ran on. It is held until the engine has started, which is then
    ended, and the job's own handler stops it."""

    def stop(signum, frame):
        raise KeyboardInterrupt

    class Interrupted(FakeEngineLLM):
        def __init__(self, **args):
            os.kill(os.getpid(), signum)  # arrives mid-start; held, not raised here
            time.sleep(0.05)
            super().__init__(**args)

    from src.backends import vllm_backend

    monkeypatch.setattr(vllm_backend, "import_vllm", lambda: Fake(LLM=Interrupted, SamplingParams=dict))
    previous = signal.signal(signum, stop)
    try:
        backend = VLLMBackend(VLLMSettings(name="v", path="org/model"))
        with pytest.raises(KeyboardInterrupt):
            backend.load()
        engine = FakeEngineLLM.made
        assert len(engine) == 1 and backend.llm is None and fake_vllm.exits == [], "started, then ended"
        assert signal.getsignal(signum) is stop, "the job's own handler is back"
    finally:
        signal.signal(signum, previous)


COMMIT = "c" * 40  # the hub snapshot "org/model" resolves to in these tests


@pytest.fixture
def hub(monkeypatch):
    """ "org/model" resolves to COMMIT without asking the hub."""
    from src.backends import weights

    monkeypatch.setitem(weights._COMMITS, ("org/model", None), COMMIT)


def test_the_engine_gets_the_hub_snapshots_commit_and_these_defaults(fake_vllm, hub):
    backend = load_backend({"name": "v", "backend": "vllm", "path": "org/model"}, chat=False)
    backend.load()
    assert FakeEngineLLM.made == [
        {
            "model": "org/model",
            "revision": COMMIT,  # the snapshot the identity names, not whatever "main" is when the engine starts
            "dtype": "auto",
            "tensor_parallel_size": 1,
            "gpu_memory_utilization": 0.9,
            "enable_prefix_caching": True,  # the variants of a question share their prefix
            "max_logprobs": 20,
            "trust_remote_code": False,
            "seed": 0,
            "enforce_eager": False,
            "enable_chunked_prefill": False,  # on a CPU (seeded sampling)
        }
    ]
    assert backend.identity == f"vllm:org/model|commit={COMMIT}|revision=None|dtype=auto|quantization=None|chat=False"


def test_a_local_folder_reaches_the_engine_as_its_full_path_and_a_tokenizer_of_its_own_is_in_the_identity(
    fake_vllm, monkeypatch, tmp_path
):
    from src.backends.weights import model_content

    monkeypatch.setenv("HOME", str(tmp_path))
    for folder, name in (("m", "config.json"), ("tok", "tokenizer.json")):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / name).write_text("{}", encoding="utf-8")
    backend = load_backend({"name": "v", "backend": "vllm", "path": "~/m", "tokenizer": "~/tok"}, chat=False)
    backend.load()
    assert FakeEngineLLM.made[-1]["model"] == str((tmp_path / "m").resolve()), "vLLM does not expand ~"
    assert FakeEngineLLM.made[-1]["tokenizer"] == str((tmp_path / "tok").resolve()), "nor a tokenizer's ~"
    assert "revision" not in FakeEngineLLM.made[-1], "a folder has no revision"
    model, tokenizer = model_content(tmp_path / "m").digest, model_content(tmp_path / "tok").digest
    assert backend.identity.startswith(f"vllm|weights=sha256:{model}|tokenizer=sha256:{tokenizer}|revision=None")


@pytest.mark.parametrize(
    ("top_logprobs", "engine_max", "asked"),
    [(-1, -1, -1), (-2, -1, -1), (0, 20, 0), (5, 20, 5), (50, 50, 50)],  # < 0: the whole vocabulary; vLLM's floor: 20
)
def test_label_scoring_asks_for_top_logprobs_of_an_engine_that_allows_them(
    fake_vllm, hub, top_logprobs, engine_max, asked
):
    backend = VLLMBackend.from_config(
        {"backend": "vllm", "path": "org/model", "top_logprobs": top_logprobs}, chat=False
    )
    backend.score_labels([Request(prompt="Q?", labels=("A", "B"), options=("x", "y"), seed=5)])
    assert FakeEngineLLM.made[-1]["max_logprobs"] == engine_max
    assert backend.llm.calls[-1][1] == [
        {"n": 1, "temperature": 0.0, "max_tokens": 1, "logprobs": asked, "detokenize": False, "top_k": -1}
    ]


def test_each_scoring_sends_its_own_settings_without_a_progress_bar_of_vllms(fake_backend):
    """What each scoring asks of the engine, request by request: sampled generation carries each trial's seed, greedy
    none; cloze sends every option of every question in one call. vLLM's bar is off on every call (the job's one bar
    counts)."""
    reqs = [Request(prompt="Q?", labels=("A", "B"), options=("x", "y"), seed=s) for s in (5, 6)]
    sampled = fake_backend.generate(reqs, SamplingParams(n=2, temperature=0.7, top_k=5, top_p=0.9, max_new_tokens=4))
    assert sampled == [["s5-0", "s5-1"], ["s6-0", "s6-1"]]
    prompts, sampling = fake_backend.llm.calls[-1]
    assert prompts == [{"prompt_token_ids": [7, 8]}] * 2
    settings = {"n": 2, "temperature": 0.7, "top_k": 5, "top_p": 0.9, "max_tokens": 4}
    assert sampling == [{**settings, "seed": 5}, {**settings, "seed": 6}]
    assert fake_backend.generate(reqs, SamplingParams(n=3, temperature=0.0)) == [["sNone-0"] * 3] * 2
    assert (
        fake_backend.llm.calls[-1][1] == [{"n": 1, "temperature": 0.0, "top_k": -1, "top_p": 1.0, "max_tokens": 3}] * 2
    )
    fake_backend.score_labels(reqs)
    assert (
        fake_backend.llm.calls[-1][1]
        == [{"n": 1, "temperature": 0.0, "max_tokens": 1, "logprobs": -1, "detokenize": False, "top_k": -1}] * 2
    )
    cloze = [
        Request(prompt="Q?", labels=("A", "B"), options=("x", "BC"), seed=5),
        # lm-eval's own pair: its target delimiter ("?" here) put before each option as it is
        Request(prompt="Q", labels=("A", "B", "C"), options=("A", "AB", "ABC"), seed=6, continuation_prefix="?"),
    ]
    calls = len(fake_backend.llm.calls)
    scores = fake_backend.score_options(cloze)
    assert len(fake_backend.llm.calls) == calls + 1, "every option of every question in one engine call"
    prompts, sampling = fake_backend.llm.calls[-1]
    assert [p["prompt_token_ids"] for p in prompts] == [
        [7, 8, 9],
        [7, 8, 4, 5],
        [7, 8, 1],
        [7, 8, 1, 3],
        [7, 8, 1, 3, 5],
    ]
    assert sampling == {
        "n": 1,
        "temperature": 0.0,
        "max_tokens": 1,
        "prompt_logprobs": 0,
        "detokenize": False,
        "top_k": -1,
    }, "scores read token ids: vLLM is asked for no text"
    # each continuation token -0.25 (the fake engine): the sums of each question's own options
    assert [s.loglik for s in scores] == [(-0.25, -0.5), (-0.5, -0.75, -1.0)]
    assert fake_backend.llm.bars == [False] * len(fake_backend.llm.calls)


@pytest.mark.parametrize(
    ("top_logprobs", "temperature", "warnings"), [(20, 1.0, 1), (0, 1.0, 1), (-1, 1.0, 0), (20, None, 0)]
)
def test_an_inexact_first_token_distribution_is_said_once(fake_vllm, hub, caplog, top_logprobs, temperature, warnings):
    """Sampling's answer distribution rebuilt from the top tokens only is inexact: said once per backend, not per
    call; never with the whole vocabulary (-1) or without sampling (temperature None)."""
    backend = VLLMBackend.from_config(
        {"backend": "vllm", "path": "org/model", "top_logprobs": top_logprobs}, chat=False
    )
    reqs = [Request(prompt="Q?", labels=("A", "B"), options=("x", "y"), seed=5)]
    with caplog.at_level(logging.WARNING, logger="src.backends.vllm_backend"):
        for _ in range(2):
            backend.score_labels(reqs, None if temperature is None else SamplingParams(temperature=temperature))
    said = [r.getMessage() for r in caplog.records if "first-token distribution is rebuilt" in r.getMessage()]
    assert (
        said
        == [
            f"model vllm: the first-token distribution is rebuilt from the top {top_logprobs} tokens; set "
            "model.top_logprobs=-1 (whole vocabulary) or a top_k <= it to make it exact"
        ]
        * warnings
    )


class ChatTokenizer(FakeTokenizer):
    chat_template = "<turns>"

    def apply_chat_template(self, messages, add_generation_prompt, tokenize):
        assert add_generation_prompt and not tokenize
        return "!" + "".join(m["content"] for m in messages) + "!"


class ChatEngineLLM(FakeEngineLLM):
    def get_tokenizer(self):
        return ChatTokenizer()


@pytest.mark.parametrize(
    ("prompt_chat", "model_chat", "sent"),
    [(True, None, "!Q?!"), (False, None, "Q?"), (True, False, "Q?"), (True, True, "!Q?!")],
)
def test_the_chat_template_wraps_prompts_when_the_prompt_asks_and_the_model_allows(
    fake_vllm, hub, monkeypatch, prompt_chat, model_chat, sent
):
    from src.backends import vllm_backend

    monkeypatch.setattr(vllm_backend, "import_vllm", lambda: Fake(LLM=ChatEngineLLM, SamplingParams=lambda **kw: kw))
    cfg = {"backend": "vllm", "path": "org/model", **({} if model_chat is None else {"chat": model_chat})}
    backend = VLLMBackend.from_config(cfg, chat=prompt_chat)
    assert backend.identity.endswith(f"|chat={sent != 'Q?'}")
    assert backend.model_input("Q?") is None, "not known before the tokenizer is loaded"
    backend.generate([Request(prompt="Q?", labels=("A", "B"), options=("x", "y"), seed=5)], SamplingParams())
    assert backend.model_input("Q?") == sent
    assert backend.llm.calls[-1][0] == [{"prompt_token_ids": FakeTokenizer()(sent)["input_ids"]}]


def test_a_requests_samples_come_back_in_their_own_order(fake_backend):
    """vLLM numbers a request's samples (`index`); the samples are returned in that order whatever order its
    output lists them in, so repetition r is always the same sample of a seeded request."""

    class Reversed(FakeLLM):
        def generate(self, prompts, sampling, use_tqdm=True):
            out = super().generate(prompts, sampling, use_tqdm)
            return [Fake(outputs=o.outputs[::-1], prompt_logprobs=o.prompt_logprobs) for o in out]

    fake_backend.llm = Reversed()
    reqs = [Request(prompt="Q?", labels=("A", "B"), options=("x", "y"), seed=5)]
    assert fake_backend.generate(reqs, SamplingParams(n=3, temperature=0.7)) == [["s5-0", "s5-1", "s5-2"]]


REFUSAL = "Engine core initialization failed. See root cause above. Failed core proc(s): {}"


MEMORY_HINT = (
    " On vLLM's CPU build model.gpu_memory_utilization is the share of the machine's memory: try 0.25 (docs/serving.md)"
)
SPAWN = (  # multiprocessing's own text (spawn._check_not_importing_main), its first line as the line quotes it
    "\n        An attempt has been made to start a new process before the\n"
    "        current process has finished its bootstrapping phase.\n"
)
SPAWN_HINT = (
    " vLLM starts its engine in a new process, which imports the script again: put the script's code under "
    '`if __name__ == "__main__":`'
)


@pytest.mark.promise("docs/serving.md", "an engine that does not start gets the hint of the cause found, no other")
@pytest.mark.parametrize(
    ("cpu", "share", "refusal", "hint"),
    [
        (True, 0.9, REFUSAL, MEMORY_HINT),  # vLLM's default share, refused while other processes hold memory
        (True, 0.5, REFUSAL, MEMORY_HINT),
        (True, 0.25, REFUSAL, ""),  # already the share the hint would give: the cause is another
        (False, 0.9, REFUSAL, ""),  # a GPU's memory: vLLM's own line says it
        (True, 0.25, SPAWN, SPAWN_HINT),  # a script without its main guard, whatever the share
        (True, 0.9, SPAWN, SPAWN_HINT),
        (False, 0.9, SPAWN, SPAWN_HINT),
    ],
)
def test_an_engine_that_does_not_start_says_which_model_vllms_own_reason_and_the_hint_of_its_cause(
    fake_vllm, hub, monkeypatch, cpu, share, refusal, hint
):
    """The whole line a user reads: the model's name, vLLM's first line, where its own log says why, and a hint only
    where the error or the settings show its cause; a ValueError (a setting vLLM checks before its engine) alike."""
    from src.backends import vllm_backend

    for error in (RuntimeError(refusal + "\nSee the traceback."), ValueError(refusal)):

        def refused(error=error, **args):
            raise error

        monkeypatch.setattr(vllm_backend, "import_vllm", lambda refused=refused: Fake(LLM=refused))
        fake_vllm.platform.cpu = cpu
        with pytest.raises(UserError) as err:
            VLLMBackend(VLLMSettings(name="big", path="org/model", gpu_memory_utilization=share)).load()
        assert str(err.value) == (
            f"model big: vLLM's engine did not start ({refusal.strip().splitlines()[0]}); its log above on stderr "
            f"says why.{hint}"
        )


def test_the_engines_start_is_said_with_the_models_name_and_source(fake_vllm, hub, caplog):
    with caplog.at_level(logging.INFO, logger="src.backends.vllm_backend"):
        VLLMBackend(VLLMSettings(name="v", path="org/model")).load()
    assert "model v: starting vLLM's engine on org/model" in [r.getMessage() for r in caplog.records]


class BrokenVLLM:
    """A vLLM module whose engine does not import (its `LLM` imported on first use, as recent versions do)."""

    def __init__(self, error):
        self.error = error

    def __getattr__(self, name):
        if name in ("LLM", "SamplingParams"):
            raise self.error
        raise AttributeError(name)


@pytest.mark.parametrize(
    ("module", "says"),
    [
        (None, "model.backend=vllm needs vLLM (a GPU machine): pip install .[vllm]"),  # not installed
        (
            BrokenVLLM(RuntimeError("operator torchvision::nms does not exist\nmore lines")),
            "model.backend=vllm: vLLM could not be imported (operator torchvision::nms does not exist); on vLLM's "
            "CPU build, remove the CUDA builds it pulls: pip uninstall -y torchvision torchaudio torchcodec triton "
            "(docs/serving.md)",
        ),
        (
            BrokenVLLM(RuntimeError("undefined symbol: _ZN3c10")),
            "model.backend=vllm: vLLM could not be imported (undefined symbol: _ZN3c10); check its install "
            "(docs/serving.md)",
        ),
    ],
)
def test_a_vllm_that_cannot_be_imported_is_one_line_naming_what_failed_and_the_fix(monkeypatch, module, says):
    from src.backends import vllm_backend

    monkeypatch.setitem(sys.modules, "vllm", module)  # None: `import vllm` raises ImportError
    for name in ("VLLM_LOGGING_STREAM", "VLLM_LOGGING_LEVEL"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(UserError) as err:
        vllm_backend.import_vllm()
    assert str(err.value) == says
    assert err.value.__cause__ is None and err.value.__suppress_context__, "no chained traceback under the line"
    assert (os.environ["VLLM_LOGGING_STREAM"], os.environ["VLLM_LOGGING_LEVEL"]) == ("ext://sys.stderr", "WARNING")


@pytest.mark.parametrize(("level", "handler_gets"), [(None, logging.WARNING), ("error", logging.ERROR)])
def test_a_vllm_imported_earlier_logs_to_stderr_at_the_level_the_environment_sets(monkeypatch, level, handler_gets):
    """Another library imported vLLM first, so its handlers write stdout at INFO: the backend moves them to stderr
    at WARNING (or the environment's level, in any case), and leaves a handler on stderr or a file where it is."""
    import io

    from src.backends import vllm_backend

    monkeypatch.setitem(sys.modules, "vllm", Fake(LLM=object, SamplingParams=object))
    if level is None:
        monkeypatch.delenv("VLLM_LOGGING_LEVEL", raising=False)
    else:
        monkeypatch.setenv("VLLM_LOGGING_LEVEL", level)
    on_stdout, on_stderr, elsewhere = (logging.StreamHandler(s) for s in (sys.stdout, sys.stderr, io.StringIO()))
    not_a_stream = logging.NullHandler()
    logger = logging.getLogger("vllm")
    handlers = (on_stdout, on_stderr, elsewhere, not_a_stream)
    for handler in handlers:
        handler.setLevel(logging.INFO)
    monkeypatch.setattr(logger, "handlers", [*logger.handlers, *handlers])
    vllm_backend.import_vllm()
    assert on_stdout.stream is sys.stderr and on_stderr.stream is sys.stderr
    assert elsewhere.stream is not sys.stderr, "a stream that is not stdout stays"
    assert [h.level for h in handlers] == [handler_gets, handler_gets, handler_gets, logging.INFO]


@pytest.mark.parametrize(
    ("node", "says"),
    [
        ({"name": "m"}, "model m: set model.path to a hub id or a local model folder"),
        ({"path": "org/model", "tensor_parallel_size": 0}, "model.tensor_parallel_size=0 must be at least 1"),
        (
            {"path": "org/model", "tensorparallel": 2},
            "model.tensorparallel is not a setting of backend vllm; the keys are backend, chat, dtype, "
            "enable_chunked_prefill, enable_prefix_caching, enforce_eager, gpu_memory_utilization, max_model_len, "
            "name, path, quantization, revision, seed, tensor_parallel_size, tokenizer, top_logprobs, "
            "trust_remote_code",
        ),
    ],
)
def test_a_bad_vllm_model_config_is_one_line_naming_the_setting_and_what_it_takes(node, says):
    with pytest.raises(UserError) as err:
        VLLMBackend.from_config({"backend": "vllm", **node}, chat=False)
    assert str(err.value) == says


def test_a_revision_reaches_the_engine_as_its_snapshots_commit_or_as_named_where_that_is_unknown(
    fake_vllm, monkeypatch
):
    """A revision is resolved to its own snapshot's commit (not main's), which the engine loads; where the hub cannot
    say (offline, nothing cached) the engine is given the revision as set. A tokenizer of its own on the hub is given
    by its id, and its snapshot is in the identity."""
    from src.backends import weights

    for revision, commit in (("v2", "e" * 40), ("v3", None)):
        monkeypatch.setitem(weights._COMMITS, ("org/model", revision), commit)
    monkeypatch.setitem(weights._COMMITS, ("org/model", None), COMMIT)
    monkeypatch.setitem(weights._COMMITS, ("org/tok", None), "d" * 40)
    tokenizer = weights.model_content("org/tok").digest
    for revision, engine_gets in (("v2", "e" * 40), ("v3", "v3")):
        node = {"name": "v", "backend": "vllm", "path": "org/model", "revision": revision, "tokenizer": "org/tok"}
        backend = load_backend(node, chat=False)
        backend.load()
        engine = FakeEngineLLM.made[-1]
        assert (engine["model"], engine["revision"], engine["tokenizer"]) == ("org/model", engine_gets, "org/tok")
        commit = engine_gets if engine_gets != revision else None
        assert backend.identity == (
            f"vllm:org/model|commit={commit}|tokenizer=sha256:{tokenizer}|revision={revision}|dtype=auto"
            "|quantization=None|chat=False"
        )


def test_a_sample_cut_at_max_tokens_says_it_was_truncated_and_one_that_does_not_say_is_unknown(fake_backend):
    """vLLM's `finish_reason`: "length" at max_tokens, "stop" at an end token; an output without it (an older or
    a stand-in engine) is neither."""

    class Finishing(FakeLLM):
        def generate(self, prompts, sampling, use_tqdm=True):
            out = super().generate(prompts, sampling, use_tqdm)
            for o in out:
                for sample, reason in zip(o.outputs, ("length", "stop")):
                    sample.finish_reason = reason
            return out

    fake_backend.llm = Finishing()
    reqs = [Request(prompt="Q?", labels=("A", "B"), options=("x", "y"), seed=5)]
    samples = fake_backend.generate(reqs, SamplingParams(n=3, temperature=0.7))[0]
    assert samples == ["s5-0", "s5-1", "s5-2"]
    assert [s.truncated for s in samples] == [True, False, None]


def test_closing_an_engine_without_an_engine_core_of_its_own_ends_it_without_error(fake_vllm):
    """An engine object that runs in this process (no `llm_engine`, or one without `engine_core`) has nothing of
    its own to shut down: closing it forgets it and takes back its exit handler."""
    backend = VLLMBackend(VLLMSettings(name="v", path="org/model"))
    for engine in (Fake(), Fake(llm_engine=Fake())):
        backend.llm = engine
        fake_vllm.exits.append(backend.close)
        backend.close()
        assert backend.llm is None and fake_vllm.exits == []


class BosTokenizer(ChatTokenizer):
    """Adds its BOS (id 99) unless told not to, as a Hugging Face tokenizer does; its chat template carries one."""

    def __call__(self, text, add_special_tokens=False):
        ids = super().__call__(text)["input_ids"]
        return {"input_ids": [99, *ids] if add_special_tokens else ids}


class BosEngineLLM(FakeEngineLLM):
    def get_tokenizer(self):
        return BosTokenizer()


@pytest.mark.parametrize(("chat", "first"), [(True, [10]), (False, [99])])
def test_a_prompt_gets_one_bos_whether_its_chat_template_carries_it_or_the_tokenizer_adds_it(
    fake_vllm, hub, monkeypatch, chat, first
):
    """A chat-templated text already has its special tokens (the template's BOS): the tokenizer adds none then, on
    generated and cloze prompts alike; a raw prompt gets the tokenizer's own."""
    from src.backends import vllm_backend

    monkeypatch.setattr(vllm_backend, "import_vllm", lambda: Fake(LLM=BosEngineLLM, SamplingParams=lambda **kw: kw))
    backend = VLLMBackend.from_config({"backend": "vllm", "path": "org/model"}, chat=chat)
    reqs = [Request(prompt="Q?", labels=("A", "B"), options=("x",), seed=5)]
    backend.generate(reqs, SamplingParams())
    backend.score_options(reqs)
    (generated,), (cloze,) = (prompts for prompts, _ in backend.llm.calls)
    assert generated["prompt_token_ids"][:1] == first and cloze["prompt_token_ids"][:1] == first
    assert 99 not in generated["prompt_token_ids"][1:] + cloze["prompt_token_ids"][1:]


def test_each_questions_cloze_scores_are_its_own_options_however_many_questions_are_sent(fake_backend):
    """One engine call for every option of every question: the scores are split back by each question's own count
    of options (the fake engine gives each continuation token -0.25; " x", " y", " z" are 1, 2, 2 tokens)."""
    options = [("x",), ("x", "y"), ("y", "x", "z"), ("x",)]
    reqs = [Request(prompt="Q?", labels=("A", "B", "C")[: len(o)], options=o, seed=5) for o in options]
    scores = fake_backend.score_options(reqs)
    assert [s.loglik for s in scores] == [(-0.25,), (-0.25, -0.5), (-0.5, -0.25, -0.5), (-0.25,)]


def test_the_engine_is_started_with_the_settings_the_config_names(fake_vllm, hub):
    """Every engine setting of a vllm model config, none at its default, reaches vLLM's engine as set (the path as
    `model`, top_logprobs as the engine's `max_logprobs`); on a GPU, chunked prefill as set."""
    fake_vllm.platform.cpu = False
    as_set = {
        "dtype": "float16",
        "quantization": "awq",
        "tensor_parallel_size": 2,
        "gpu_memory_utilization": 0.5,
        "max_model_len": 1024,
        "enable_prefix_caching": False,
        "trust_remote_code": True,
        "seed": 3,
        "enforce_eager": True,
        "enable_chunked_prefill": True,
    }
    backend = load_backend({"backend": "vllm", "path": "org/model", "top_logprobs": 50, **as_set}, chat=False)
    backend.load()
    assert FakeEngineLLM.made == [{"model": "org/model", "revision": COMMIT, "max_logprobs": 50, **as_set}]
    assert backend.identity == f"vllm:org/model|commit={COMMIT}|revision=None|dtype=float16|quantization=awq|chat=False"


def test_logprobs_given_as_plain_numbers_or_missing_are_read_as_such():
    """vLLM gives each alternative as a Logprob object (`.logprob`) or, in some versions, as a plain float; a step
    with no alternatives is an empty distribution, and a prompt's first position (None) has no log-probability."""
    assert first_token_logprobs(Fake(outputs=[Fake(logprobs=[{3: -1.0, "4": Fake(logprob=-2.0)}])])) == {
        3: -1.0,
        4: -2.0,
    }
    assert first_token_logprobs(Fake(outputs=[Fake(logprobs=[None])])) == {}
    assert continuation_loglik([None, {2: -1.0}, {3: -0.5, 9: -4.0}], [1, 2, 3], start=0) == -1.5
    assert continuation_loglik([None, {2: Fake(logprob=-1.0)}], [1, 2], start=2) == 0.0, "nothing after the prompt"


@pytest.mark.parametrize("cpu", [True, False])
def test_the_cpu_build_is_told_apart_by_vllms_own_platform(monkeypatch, cpu):
    from src.backends import vllm_backend

    monkeypatch.setitem(sys.modules, "vllm", Fake(LLM=object, SamplingParams=object))
    monkeypatch.setitem(sys.modules, "vllm.platforms", Fake(current_platform=Fake(is_cpu=lambda: cpu)))
    assert vllm_backend.on_cpu() is cpu


def test_a_chat_prompt_for_a_tokenizer_without_a_template_is_sent_raw_and_said_with_the_models_name(
    fake_vllm, hub, caplog
):
    backend = VLLMBackend(VLLMSettings(name="base-7b", path="org/model", chat=True))
    with caplog.at_level(logging.WARNING):
        backend.load()
    assert backend.model_input("Q?") == "Q?"
    assert "model base-7b: the prompt asks for chat but the tokenizer has no chat template; sending raw prompts" in [
        r.getMessage() for r in caplog.records
    ]
