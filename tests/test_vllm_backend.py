"""vLLM backend without vLLM: the pure parts (label tokens, logprobs -> label scores) and the glue, on fake engine
objects."""

from __future__ import annotations

import contextlib
import importlib.util
import math
import os
import signal
import time
from types import SimpleNamespace as NS

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

    def get_tokenizer(self):
        return FakeTokenizer()

    def generate(self, prompts, sampling, use_tqdm=False):
        self.calls.append((prompts, sampling))
        params = sampling if isinstance(sampling, list) else [sampling] * len(prompts)
        out = []
        for prompt, sp in zip(prompts, params):
            top = {
                1: NS(logprob=math.log(0.5)),
                2: NS(logprob=math.log(0.1)),
                3: NS(logprob=math.log(0.2)),
                10: NS(logprob=math.log(0.2)),
            }
            ids = prompt["prompt_token_ids"]
            prompt_lp = [None] + [{t: NS(logprob=-0.25)} for t in ids[1:]]
            outputs = [NS(index=k, text=f"s{sp.get('seed')}-{k}", logprobs=[top]) for k in range(sp["n"])]
            out.append(NS(outputs=outputs, prompt_logprobs=prompt_lp))
        return out


@pytest.fixture
def fake_backend():
    b = VLLMBackend(VLLMSettings(name="v", path="org/model", top_logprobs=-1))
    b.llm, b.tokenizer = FakeLLM(), FakeTokenizer()
    b._vllm = NS(SamplingParams=lambda **kw: kw)  # SamplingParams as a plain dict
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
    assert first_token_logprobs(NS(outputs=[NS(logprobs=[{3: NS(logprob=-1.0)}])])) == {3: -1.0}
    assert first_token_logprobs(NS(outputs=[NS(logprobs=None)])) == {}
    entries = [None, {2: NS(logprob=-1.0)}, {3: NS(logprob=-2.0), 9: NS(logprob=-0.1)}]
    assert continuation_loglik(entries, [1, 2, 3], start=2) == -2.0


def test_backend_glue_on_a_fake_engine(fake_backend):
    reqs = [Request(prompt="Q?", labels=("A", "B"), options=("x", "y"), seed=5)]
    samples = fake_backend.generate(reqs, SamplingParams(n=3, temperature=0.7, top_p=0.9, max_new_tokens=2))
    assert samples == [["s5-0", "s5-1", "s5-2"]]
    sp = fake_backend.llm.calls[-1][1][0]
    assert sp["n"] == 3 and sp["seed"] == 5 and sp["top_k"] == -1 and sp["max_tokens"] == 2
    assert fake_backend.generate(reqs, SamplingParams(n=2, temperature=0.0)) == [["sNone-0"] * 2]
    scores = fake_backend.score_labels(reqs, temperature=1.0)[0]
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
        self.llm_engine = NS(engine_core=NS(shutdown=self._shutdown))

    def _shutdown(self):
        self.shutdowns += 1


@pytest.fixture
def fake_vllm(monkeypatch):
    """vLLM's module as the backend sees it: `LLM` and `SamplingParams`, the platform a CPU unless a test says not;
    atexit's registrations recorded instead of made."""
    from src.backends import vllm_backend

    FakeEngineLLM.made = []
    platform = NS(cpu=True)
    monkeypatch.setattr(vllm_backend, "import_vllm", lambda: NS(LLM=FakeEngineLLM, SamplingParams=lambda **kw: kw))
    monkeypatch.setattr(vllm_backend, "on_cpu", lambda: platform.cpu)
    exits = []
    monkeypatch.setattr(vllm_backend.atexit, "register", exits.append)
    monkeypatch.setattr(vllm_backend.atexit, "unregister", lambda fn: exits.remove(fn))
    return NS(platform=platform, exits=exits)


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


def test_an_engine_that_does_not_start_is_one_line_naming_the_memory_setting(fake_vllm, monkeypatch):
    """vLLM's engine refuses a setting in a child process (its traceback there) and raises a RuntimeError here."""

    def refused(**args):
        raise RuntimeError("Engine core initialization failed. See root cause above. Failed core proc(s): {}")

    from src.backends import vllm_backend

    monkeypatch.setattr(vllm_backend, "import_vllm", lambda: NS(LLM=refused, SamplingParams=dict))
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

    monkeypatch.setattr(vllm_backend, "import_vllm", lambda: NS(LLM=Interrupted, SamplingParams=dict))
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
