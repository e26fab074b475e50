"""Every backend keeps one contract (tests/backend_contract.py): simulated, hf on a tiny llama, openai against a fake
OpenAI-compatible server on 127.0.0.1, vllm on a fake engine whose core is a real child process. Then what each
backend's settings promise: the openai backend's retries, backoff, timeouts and concurrency counted against a server
that answers 429, 5xx, drops the connection or sends a malformed body (waits recorded, never slept); its API key in
no message, log line or traceback on any path; and every hint in an error naming the cause that was found."""

from __future__ import annotations

import email.utils
import json
import logging
import math
import multiprocessing
import random
import socket
import sys
import threading
import time
import traceback
from http.server import BaseHTTPRequestHandler
from types import SimpleNamespace as Fake

import pytest

from src.backends import load_backend, openai_backend, vllm_backend, weights
from src.backends.base import Request, SamplingParams
from src.backends.openai_backend import OpenAIBackend, OpenAISettings
from src.common.errors import UserError

from . import backend_contract as contract
from .test_openai_backend import ServedInThread

SECRET = "sk-Zq9vXw2LpT7mKd4RbN8yHc6J"  # no 8 characters of it occur in a path or a word
KEY_ENV = "CONTRACT_OPENAI_KEY"
HELD_S = 1.5  # how long a "slow" answer is held: well past the timeouts these tests set
TRICKLE_S, TRICKLE_PIECES = 0.1, 6  # a "trickle" answer: a piece every 0.1 s, 0.6 s in all


def leaks(text: str) -> bool:
    """Whether any 8 characters of the key appear in `text` (a cut-off key is a leaked key too)."""
    return any(SECRET[i : i + 8] in text for i in range(len(SECRET) - 7))


# -- a fake OpenAI-compatible server -----------------------------------------------------------------------------


class Server(ServedInThread):
    """Answers /v1/chat/completions and /v1/completions as vLLM's server does (n choices, logprobs, echo), each
    sample drawn from the request's seed and sampling settings. `script` holds what the next requests get, one
    each: an HTTP status, "drop" (the connection closed, no answer), "cut" (a 200 whose body stops half-way),
    "junk" (a 200 whose body is not JSON), "slow" (answered after HELD_S), "trickle" (a 200 whose body comes in
    TRICKLE_PIECES pieces, TRICKLE_S apart). `gate` holds each request until that
    many are in flight (or a second passed)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict, str | None]] = []
        self.script: list[int | str] = []
        self.error_body = json.dumps({"error": {"message": "try again"}})
        self.retry_after: str | None = None
        self.reason: str | None = None  # the status line's reason phrase, where a test sets one
        self.gate = 0
        self.in_flight = self.max_in_flight = 0
        self.cond = threading.Condition()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):  # GET /models: refused, its reason phrase echoing the key
                self.send_response(401, f"unknown key {SECRET}")
                self.end_headers()

            def do_POST(self):
                payload = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with server.cond:
                    server.calls.append((self.path, payload, self.headers.get("Authorization")))
                    what = server.script.pop(0) if server.script else 200
                    server.in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server.in_flight)
                    server.cond.notify_all()
                    server.cond.wait_for(lambda: server.in_flight >= server.gate, timeout=1.0)
                counted = [True]

                def done():  # before the answer leaves: the client may send its next request at once
                    with server.cond:
                        server.in_flight -= counted.pop() if counted else 0

                try:
                    server.answer(self, what, payload, done)
                except (BrokenPipeError, ConnectionResetError):  # the client gave up first (its timeout)
                    pass
                finally:
                    done()

        self.serve(Handler)
        self.url = f"http://127.0.0.1:{self.port}/v1"

    def answer(self, handler: BaseHTTPRequestHandler, what: int | str, payload: dict, done) -> None:
        if what == "drop":
            return  # nothing sent: the client sees the connection closed
        if what == "slow":
            threading.Event().wait(HELD_S)
        if isinstance(what, int) and what != 200:
            body = self.error_body.encode()
            handler.send_response(what, self.reason)
            if self.retry_after is not None:
                handler.send_header("Retry-After", self.retry_after)
        else:
            body = (
                b"<html>\n<body>502 Bad Gateway</body>\n</html>"
                if what == "junk"
                else json.dumps(self.reply(handler.path, payload)).encode()
            )
            handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(body) * (4 if what == "cut" else 1)))
        done()
        handler.end_headers()
        if what == "trickle":  # never silent for TRICKLE_S, though the whole answer takes longer than that
            step = -(-len(body) // TRICKLE_PIECES)
            for start in range(0, len(body), step):
                handler.wfile.write(body[start : start + step])
                handler.wfile.flush()
                threading.Event().wait(TRICKLE_S)
            return
        handler.wfile.write(body[: len(body) // 2] if what == "cut" else body)

    @staticmethod
    def reply(path: str, payload: dict) -> dict:
        if payload.get("echo"):  # the prompt's tokens (split at spaces), each -0.5, then the one generated token
            text = payload["prompt"]
            offsets = [0] + [i + 1 for i, ch in enumerate(text) if ch == " "]
            tokens = [text[a:b] for a, b in zip(offsets, offsets[1:] + [len(text)])] + ["!"]
            logprobs = {"tokens": tokens, "text_offset": [*offsets, len(text)]}
            logprobs["token_logprobs"] = [None] + [-0.5] * (len(tokens) - 2) + [-9.0]
            return {"choices": [{"index": 0, "text": text + "!", "logprobs": logprobs}]}
        top = {"A": math.log(0.5), " B": math.log(0.2), "C": math.log(0.1), " D": math.log(0.1)}
        if payload.get("logprobs") and path.endswith("/chat/completions"):
            alternatives = [{"token": t, "logprob": lp} for t, lp in top.items()]
            content = [{"token": "A", "logprob": top["A"], "top_logprobs": alternatives}]
            return {"choices": [{"index": 0, "message": {"content": "A"}, "logprobs": {"content": content}}]}
        if payload.get("logprobs"):
            logprobs = {"tokens": ["A"], "token_logprobs": [top["A"]], "top_logprobs": [top]}
            return {"choices": [{"index": 0, "text": "A", "logprobs": logprobs}]}
        choices = []
        for i in range(payload.get("n", 1)):
            sampled = random.Random(f"{payload.get('seed')}|{i}|{payload['temperature']}|{payload['top_p']}")
            text = "A" if payload["temperature"] == 0 else "".join(sampled.choice("ABCD .") for _ in range(3))
            choice = {"index": i, "finish_reason": "length"}
            choice.update({"message": {"content": text}} if path.endswith("/chat/completions") else {"text": text})
            choices.append(choice)
        return {"choices": choices}

    def sampling_seen(self) -> list[dict]:
        """What the sampled requests sent since last asked (the contract's probe)."""
        with self.cond:
            calls, self.calls = self.calls, []
        return [p for _, p, _ in calls if p.get("temperature")]


@pytest.fixture
def server(monkeypatch):
    monkeypatch.setenv(KEY_ENV, SECRET)
    with Server() as fake:
        yield fake


@pytest.fixture
def waits(monkeypatch) -> list[float]:
    """The waits between attempts, recorded instead of slept."""
    recorded: list[float] = []
    monkeypatch.setattr(openai_backend, "_pause", recorded.append)
    return recorded


def client(server: Server, **settings) -> OpenAIBackend:
    options = dict(name="fake", model="fake-model", base_url=server.url, api_key_env=KEY_ENV, progress=False)
    return OpenAIBackend(OpenAISettings(**{**options, **settings}))


ONE = [Request(prompt="Q?\nA. x\nB. y\nAnswer:", labels=("A", "B"), options=("x", "y"), seed=7)]
MANY = [Request(prompt=f"Q{i}?\nA. x\nB. y\nAnswer:", labels=("A", "B"), options=("x", "y"), seed=i) for i in range(12)]


# -- a fake vLLM engine --------------------------------------------------------------------------------------------


class CharTokenizer:
    """One token per character, its code point."""

    chat_template = None

    def __call__(self, text, add_special_tokens=False):
        return {"input_ids": [ord(ch) for ch in text]}


class FakeEngine:
    """vllm.LLM as the backend uses it: its engine core a real child process, ended by `engine_core.shutdown()`;
    each sample drawn from its request's seed; the first token's log-probabilities A 0.5, B 0.2, C 0.1, D 0.1,
    "!" 0.1 (the whole vocabulary)."""

    def __init__(self, **args):
        self.args = args
        self.seen: list[dict] = []
        self.core = multiprocessing.get_context("fork").Process(target=time.sleep, args=(60,), daemon=True)
        self.core.start()
        self.llm_engine = Fake(engine_core=Fake(shutdown=self.shutdown))

    def shutdown(self):
        self.core.kill()
        self.core.join()

    def get_tokenizer(self):
        return CharTokenizer()

    def generate(self, prompts, sampling, use_tqdm=True):
        params = sampling if isinstance(sampling, list) else [sampling] * len(prompts)
        top = {ord("A"): 0.5, ord("B"): 0.2, ord("C"): 0.1, ord("D"): 0.1, ord("!"): 0.1}
        out = []
        for prompt, sp in zip(prompts, params):
            self.seen.append(sp)
            ids = prompt["prompt_token_ids"]
            samples = []
            for k in range(sp["n"]):
                rng = random.Random(f"{sp.get('seed')}|{k}|{sp['temperature']}|{sp.get('top_p')}|{sp['top_k']}")
                text = "A" if sp["temperature"] == 0 else "".join(rng.choice("ABCD .") for _ in range(3))
                logprobs = [{t: Fake(logprob=math.log(p)) for t, p in top.items()}]
                samples.append(Fake(index=k, text=text, finish_reason="length", logprobs=logprobs))
            prompt_logprobs = [None] + [{t: Fake(logprob=-0.25)} for t in ids[1:]]
            out.append(Fake(outputs=samples, prompt_logprobs=prompt_logprobs))
        return out


# -- the contract, on every backend ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny_llama(tmp_path_factory):
    pytest.importorskip("transformers")
    from tests.tiny_model import save_tiny_llama

    return save_tiny_llama(tmp_path_factory.mktemp("contract-llama"), seed=0)


def simulated_subject(request, monkeypatch):
    node = {"backend": "simulated", "name": "sim"}
    return load_backend(node, chat=False), node, None  # no engine: top-k and top-p are not simulated (its docstring)


def hf_subject(request, monkeypatch):
    from src.backends.hf import HFBackend, HFSettings, generation

    seen: list[dict] = []
    filtered, generators = generation.filtered_logits, generation.row_generators

    def filtered_logits(logits, params):
        seen.append({"temperature": params.temperature, "top_p": params.top_p, "top_k": params.top_k})
        return filtered(logits, params)

    def row_generators(seeds, params):
        seen.extend({"seed": s, **vars(params)} for s in seeds)
        return generators(seeds, params)

    monkeypatch.setattr(generation, "filtered_logits", filtered_logits)
    monkeypatch.setattr(generation, "row_generators", row_generators)

    def sampling_seen():
        got = [e for e in seen if "seed" in e]
        assert all(e["temperature"] == got[0]["temperature"] for e in seen if got), "each step samples as its rows"
        seen.clear()
        return got

    path = str(request.getfixturevalue("tiny_llama"))
    backend = HFBackend(HFSettings(name="tiny", path=path, batch_size=2), progress=False)
    return backend, {"backend": "hf", "name": "tiny", "path": path}, sampling_seen


def openai_subject(request, monkeypatch):
    server = request.getfixturevalue("server")
    return client(server, endpoint="completions"), {"backend": "openai", "model": "m"}, server.sampling_seen


def vllm_subject(request, monkeypatch):
    engines: list[FakeEngine] = []

    def engine(**args):
        engines.append(FakeEngine(**args))
        return engines[-1]

    monkeypatch.setattr(vllm_backend, "import_vllm", lambda: Fake(LLM=engine, SamplingParams=lambda **kw: kw))
    monkeypatch.setattr(vllm_backend, "on_cpu", lambda: False)
    monkeypatch.setattr(vllm_backend.atexit, "register", lambda fn: None)
    monkeypatch.setattr(vllm_backend.atexit, "unregister", lambda fn: None)

    def sampling_seen():
        got = [sp for e in engines for sp in e.seen if sp["temperature"]]
        for e in engines:
            e.seen.clear()
        return got

    monkeypatch.setitem(weights._COMMITS, ("org/model", None), "c" * 40)  # the hub is not asked
    node = {"backend": "vllm", "name": "v", "path": "org/model"}
    return vllm_backend.VLLMBackend.from_config(node, chat=False), node, sampling_seen


SUBJECTS = {"simulated": simulated_subject, "hf": hf_subject, "openai": openai_subject, "vllm": vllm_subject}


@pytest.fixture(params=list(SUBJECTS))
def subject(request, monkeypatch):
    return SUBJECTS[request.param](request, monkeypatch)


def test_every_backend_answers_the_same_requests_in_the_same_shapes(subject):
    backend, _, _ = subject
    contract.check_answer_shapes(backend)


@pytest.mark.promise("docs/serving.md", "sampled answers repeat: the same seeds give the same samples on every backend")
def test_the_same_seeds_give_the_same_samples_on_every_backend(subject):
    backend, _, seen = subject
    contract.check_seeded_samples(backend)
    if seen is not None:
        contract.check_sampling_reaches_engine(backend, seen)


def test_a_misspelled_setting_is_one_line_naming_it_on_every_backend(subject):
    _, node, _ = subject
    contract.check_bad_setting_is_one_line(node)


@pytest.mark.promise("docs/serving.md", "stdout is data: no backend or engine writes to it")
def test_no_backend_writes_to_stdout(subject, capfd):
    backend, _, _ = subject
    contract.check_stdout_clean(backend, capfd, contract.SCORINGS)


@pytest.mark.promise("docs/serving.md", "the engine's child processes end when the backend is closed")
def test_closing_a_backend_ends_what_it_started(subject):
    backend, _, _ = subject
    before = contract.running_now()
    contract.check_close_ends_children(backend, contract.SCORINGS, before)


def test_the_contract_sees_an_engine_core_that_close_leaves_running(monkeypatch, request):
    """The check above can fail: a backend whose close forgets its engine core is caught."""
    backend, _, _ = vllm_subject(request, monkeypatch)
    before = contract.running_now()
    backend.generate(ONE, SamplingParams())
    core = backend.llm.core
    monkeypatch.setattr(contract, "END_BOUND_S", 0.2)
    monkeypatch.setattr(backend, "close", lambda: None)
    try:
        with pytest.raises(AssertionError, match="outlived close"):
            contract.check_close_ends_children(backend, ["generate"], before)
    finally:
        core.kill()
        core.join()


# -- the openai backend's settings do what they say -----------------------------------------------------------------

RETRIED = [429, 500, 502, 503, 504, "drop", "cut", "slow"]


@pytest.mark.promise("conf/model/openai.yaml", "max_retries: 429, 5xx, timeouts and dropped connections are retried")
@pytest.mark.parametrize("failure", RETRIED)
def test_each_transient_failure_is_retried_and_max_retries_bounds_the_attempts(server, waits, failure):
    server.script = [failure, failure]
    b = client(server, timeout_s=0.2, max_retries=3)
    assert len(b.generate(ONE, SamplingParams(n=1, temperature=0.5))[0]) == 1
    assert b.retries == 2 and len(waits) == 2 and len(server.calls) == 2 + 1, "two failures, then answered"
    server.calls, server.script = [], [failure] * 10
    with pytest.raises(UserError) as err:
        client(server, timeout_s=0.2, max_retries=3).generate(ONE, SamplingParams())
    assert len(server.calls) == 1 + 3, "the first attempt and max_retries more"
    assert "\n" not in str(err.value)


@pytest.mark.promise("conf/model/openai.yaml", "max_retries: 0 sends each request once")
def test_max_retries_zero_sends_each_request_once(server, waits):
    server.script = [503]
    with pytest.raises(UserError, match="HTTP 503"):
        client(server, max_retries=0).generate(ONE, SamplingParams())
    assert len(server.calls) == 1 and waits == []


@pytest.mark.parametrize("failure", [400, 401, 403, 404, 422, "junk"])
def test_a_refusal_or_a_malformed_body_is_not_retried_and_is_one_line(server, waits, failure):
    server.script = [failure]
    with pytest.raises(UserError) as err:
        client(server).generate(ONE, SamplingParams())
    assert len(server.calls) == 1 and waits == []
    assert "\n" not in str(err.value) and server.url in str(err.value)


@pytest.mark.promise("conf/model/openai.yaml", "backoff_s: the first wait; doubles per retry, capped at max_backoff_s")
def test_waits_start_at_backoff_s_double_and_never_pass_max_backoff_s(server, waits, monkeypatch):
    monkeypatch.setattr(openai_backend.random, "random", lambda: 0.999)  # the largest jitter
    server.script = [503] * 7
    with pytest.raises(UserError):
        client(server, backoff_s=1.0, max_backoff_s=5.0, max_retries=6).generate(ONE, SamplingParams())
    expected = [1.0, 2.0, 4.0, 5.0, 5.0, 5.0]
    assert len(waits) == 6
    for got, want in zip(waits, expected):
        assert want <= got <= min(5.0, want * 1.1) + 1e-9, (waits, expected)


@pytest.mark.promise(
    "docs/serving.md", "the default retries ride out about a minute of a server that is down (6 retries from 1 s)"
)
def test_the_default_retries_wait_about_a_minute(waits, monkeypatch):
    with socket.socket() as s:  # a port nothing listens on: every attempt is refused
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    b = OpenAIBackend(OpenAISettings(model="m", base_url=f"http://127.0.0.1:{port}/v1", api_key_env=None))
    with pytest.raises(UserError) as err:
        b.generate(ONE, SamplingParams())
    assert len(waits) == 6 and 63.0 <= sum(waits) <= 63.0 * 1.1, waits  # 1 + 2 + ... + 32 s, jitter at most 10%
    assert "model.base_url" in str(err.value) and "\n" not in str(err.value), "a server that stays down: one line"


def http_date(seconds_ahead: float) -> str:
    return email.utils.formatdate(time.time() + seconds_ahead, usegmt=True)


@pytest.mark.promise("conf/model/openai.yaml", "Retry-After wins over the backoff, capped at max_backoff_s")
@pytest.mark.parametrize(
    ("retry_after", "low", "high"),
    [("3", 3.0, 3.0), ("120", 10.0, 10.0), ("0", 0.0, 0.0), ("-5", 0.0, 0.0), (None, 8.0, 8.0)],
)
def test_retry_after_wins_capped_at_max_backoff_s(server, waits, retry_after, low, high):
    """Retry-After in seconds, or as an HTTP date (RFC 9110), wins over the backoff (8 s here), capped at
    max_backoff_s (10 s here); a negative one is no wait."""
    server.retry_after = retry_after
    server.script = [429]
    b = client(server, backoff_s=8.0, max_backoff_s=10.0)
    b.generate(ONE, SamplingParams())
    assert len(waits) == 1 and low <= waits[0] <= (high * 1.1 if retry_after is None else high), waits


@pytest.mark.promise("conf/model/openai.yaml", "Retry-After wins over the backoff, capped at max_backoff_s")
@pytest.mark.parametrize(("ahead", "want"), [(5.0, 5.0), (600.0, 10.0), (-60.0, 0.0)])
def test_a_retry_after_date_wins_too(server, waits, ahead, want):
    server.retry_after = http_date(ahead)
    server.script = [503]
    client(server, backoff_s=8.0, max_backoff_s=10.0).generate(ONE, SamplingParams())
    assert len(waits) == 1 and waits[0] == pytest.approx(want, abs=1.5), waits  # the date has whole seconds


@pytest.mark.promise("conf/model/openai.yaml", "timeout_s: a request whose server stays silent that long is sent again")
def test_a_request_past_timeout_s_is_abandoned_and_sent_again(server, waits):
    server.script = ["slow"]
    b = client(server, timeout_s=0.2)
    started = time.monotonic()
    assert len(b.generate(ONE, SamplingParams())[0]) == 1
    assert time.monotonic() - started < HELD_S - 0.3, "the first attempt ended at timeout_s, not when it was answered"
    assert len(server.calls) == 2 and b.retries == 1
    server.calls, server.script = [], []
    client(server, timeout_s=5.0).generate(ONE, SamplingParams())
    assert len(server.calls) == 1, "answered within timeout_s: sent once"


@pytest.mark.promise(
    "conf/model/openai.yaml",
    "timeout_s counts the server's silence (connecting, between bytes), not the length of an answer that keeps coming",
)
def test_an_answer_that_keeps_coming_past_timeout_s_is_read_whole_and_sent_once(server, waits):
    server.script = ["trickle"]
    started = time.monotonic()
    assert len(client(server, timeout_s=0.3).generate(ONE, SamplingParams())[0]) == 1
    assert time.monotonic() - started > 0.3, "the answer took longer than timeout_s in all"
    assert len(server.calls) == 1 and waits == [], "read whole, not abandoned and sent again"


@pytest.mark.promise("conf/model/openai.yaml", "max_concurrency: that many requests in flight, no more")
@pytest.mark.parametrize(("setting", "limit"), [({"max_concurrency": 1}, 1), ({"max_concurrency": 3}, 3), ({}, 8)])
def test_max_concurrency_requests_are_in_flight_and_no_more(server, setting, limit):
    server.gate = limit  # each request held until `limit` are in flight: one more would be seen, one fewer waits
    client(server, **setting).generate(MANY, SamplingParams(n=1, temperature=0.5))
    assert server.max_in_flight == limit and len(server.calls) == len(MANY)
    server.calls, server.max_in_flight, server.gate = [], 0, 0
    client(server, **setting, n_per_request=False).generate(MANY[:4], SamplingParams(n=3, temperature=0.5))
    assert server.max_in_flight <= limit and len(server.calls) == 4 * 3, "one request per sample, as many at once"


# -- the key stays out of everything ---------------------------------------------------------------------------------


def everything_said(err: BaseException, caplog) -> str:
    return str(err) + "".join(traceback.format_exception(err)) + caplog.text


@pytest.mark.promise("conf/model/openai.yaml", "the API key never reaches a message, a log line or a traceback")
@pytest.mark.parametrize(
    ("failure", "body"),
    [
        (401, f'{{"error": {{"message": "Incorrect API key provided: {SECRET}"}}}}'),
        (401, json.dumps({"error": {"message": "x" * 265 + SECRET}})),  # the key across the message's 300-char cut
        (503, f"Bearer {SECRET} is over its quota"),  # retried: the retries' log lines
        ("junk", None),
        ("drop", None),
        ("slow", None),
    ],
)
def test_the_key_reaches_no_message_log_line_or_traceback(server, waits, caplog, failure, body):
    server.script = [failure] * 3
    server.reason = f"denied {SECRET}"
    if body is not None:
        server.error_body = body
    b = client(server, max_retries=2, timeout_s=0.2)
    with caplog.at_level(logging.DEBUG), pytest.raises(UserError) as err:
        assert not leaks(b.identity)  # GET /models answers 401 with the key in its reason phrase: logged
        b.generate(ONE, SamplingParams())
    assert server.calls and server.calls[0][2] == f"Bearer {SECRET}", "the key was sent"
    said = everything_said(err.value, caplog)
    assert not leaks(said), said
    assert not leaks(b.identity) and not leaks(repr(b.settings))


@pytest.mark.promise("conf/model/openai.yaml", "the API key never reaches a message, a log line or a traceback")
def test_a_malformed_body_that_echoes_the_key_keeps_it_out(server, caplog):
    server.error_body = "<html>\n" + f"token={SECRET}\n" * 3 + "</html>"
    server.script = [418]
    with pytest.raises(UserError) as err:
        client(server).generate(ONE, SamplingParams())
    assert not leaks(everything_said(err.value, caplog)) and "\n" not in str(err.value)


# -- every hint names the cause that was found -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("failure", "names", "not_named"),
    [
        (429, ["HTTP 429", "model.max_retries"], ["model.model", KEY_ENV]),
        (503, ["HTTP 503", "model.max_retries"], ["model.model", KEY_ENV]),
        (401, ["HTTP 401", KEY_ENV], ["max_retries", "model.model"]),
        (403, ["HTTP 403", KEY_ENV], ["max_retries", "model.model"]),
        (404, ["HTTP 404", "model.base_url", "model.model"], ["max_retries", KEY_ENV]),
        (400, ["HTTP 400", "try again", "the server refused the request"], ["max_retries", KEY_ENV]),  # llama.cpp
        ("slow", ["model.timeout_s"], [KEY_ENV, "model.model"]),
        ("drop", ["closed the connection", "model.base_url"], [KEY_ENV, "model.model", "timeout_s"]),
        ("junk", ["not JSON", "model.base_url"], [KEY_ENV, "max_retries", "timeout_s"]),
    ],
)
def test_each_error_names_the_cause_that_was_found(server, waits, failure, names, not_named):
    server.script = [failure] * 3
    with pytest.raises(UserError) as err:
        client(server, max_retries=2, timeout_s=0.2).generate(ONE, SamplingParams())
    message = str(err.value)
    assert all(n in message for n in names) and not any(n in message for n in not_named), message
    assert "\n" not in message


def test_a_reply_without_choices_is_one_line_saying_so_not_a_hint_about_n(server, monkeypatch):
    monkeypatch.setattr(Server, "reply", staticmethod(lambda path, payload: {"error": {"message": "overloaded"}}))
    with pytest.raises(UserError) as err:
        client(server).generate(ONE, SamplingParams())
    message = str(err.value)
    assert "no choices" in message and "overloaded" in message and "n_per_request" not in message, message


@pytest.mark.parametrize(
    ("setting", "says"),
    [
        ({"max_retries": -1}, "model.max_retries=-1 must be at least 0"),
        ({"backoff_s": -1}, "model.backoff_s=-1.0 must be at least 0"),
        ({"max_backoff_s": -2}, "model.max_backoff_s=-2.0 must be at least 0"),
        ({"timeout_s": 0}, "model.timeout_s=0.0 must be more than 0"),
        ({"max_retries": "many"}, "max_retries"),
    ],
)
def test_a_bad_retry_setting_is_refused_in_one_line(setting, says):
    with pytest.raises(UserError) as err:
        load_backend({"backend": "openai", "model": "m", **setting}, chat=False)
    assert says in str(err.value) and "\n" not in str(err.value), str(err.value)


# -- vLLM: the hint names what failed --------------------------------------------------------------------------------

TORCHVISION = "operator torchvision::nms does not exist"


@pytest.mark.promise(
    "docs/serving.md", "vLLM's CPU build failing on its CUDA torchvision is one line naming the packages to remove"
)
@pytest.mark.parametrize(
    "package",
    [
        f"raise RuntimeError({TORCHVISION!r})\n",  # vLLM that imports its engine when imported
        f"def __getattr__(name):\n    raise RuntimeError({TORCHVISION!r})\n",  # vLLM that imports it on first use
    ],
)
def test_vllm_that_cannot_import_its_engine_says_so_without_a_memory_hint(tmp_path, monkeypatch, package):
    (tmp_path / "vllm").mkdir()
    (tmp_path / "vllm" / "__init__.py").write_text(package)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "vllm", raising=False)  # a vLLM imported before: back after
    monkeypatch.setattr(vllm_backend, "on_cpu", lambda: True)
    monkeypatch.setitem(weights._COMMITS, ("org/model", None), "c" * 40)  # the hub is not asked
    backend = vllm_backend.VLLMBackend(vllm_backend.VLLMSettings(name="v", path="org/model"))
    try:
        with pytest.raises(UserError) as err:
            backend.load()
    finally:
        sys.modules.pop("vllm", None)  # the fake, where it imported
    message = str(err.value)
    assert TORCHVISION in message and "pip uninstall -y torchvision torchaudio torchcodec triton" in message
    assert "memory" not in message and "\n" not in message, message
    assert backend.llm is None


# a vLLM that configures its logger when imported, as vLLM does from its environment (default: stdout at INFO)
VLLM_LOGGER = """\
import logging, os, sys
handler = logging.StreamHandler(sys.stderr if "stderr" in os.environ.get("VLLM_LOGGING_STREAM", "") else sys.stdout)
handler.setLevel(os.environ.get("VLLM_LOGGING_LEVEL", "INFO"))
logger = logging.getLogger("vllm")
logger.addHandler(handler)
logger.setLevel(logging.DEBUG)
logger.propagate = False
LLM = SamplingParams = object
"""


@pytest.mark.promise("docs/serving.md", "stdout is data: vLLM's log goes to stderr at WARNING, even imported earlier")
@pytest.mark.parametrize("imported_first", [False, True])
def test_vllms_log_reaches_stderr_at_warning_however_it_was_imported(tmp_path, monkeypatch, capfd, imported_first):
    """vLLM sets its logging from the environment once, when first imported: imported by another library before the
    backend set that environment, its lines went to stdout at INFO."""
    import importlib

    (tmp_path / "vllm").mkdir()
    (tmp_path / "vllm" / "__init__.py").write_text(VLLM_LOGGER)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "vllm", raising=False)  # a vLLM imported before: back after
    for name in ("VLLM_LOGGING_STREAM", "VLLM_LOGGING_LEVEL"):
        monkeypatch.delenv(name, raising=False)
    logger = logging.getLogger("vllm")
    handlers = list(logger.handlers)
    try:
        if imported_first:
            importlib.import_module("vllm")
        vllm_backend.import_vllm()
        capfd.readouterr()
        logger.info("INFO line")
        logger.warning("WARNING line")
        out, err = capfd.readouterr()
    finally:
        sys.modules.pop("vllm", None)
        for handler in set(logger.handlers) - set(handlers):
            logger.removeHandler(handler)
    assert out == "" and "WARNING line" in err and "INFO line" not in err, (out, err)


@pytest.mark.promise("docs/serving.md", "on vLLM's CPU build an engine that does not start names the memory setting")
@pytest.mark.parametrize("cpu", [True, False])
def test_an_engine_that_does_not_start_gets_the_cpu_memory_hint_on_the_cpu_build_only(monkeypatch, cpu):
    """vLLM's engine fails in its child process and says why in its log; here it raises "Engine core initialization
    failed". The hint that model.gpu_memory_utilization is the machine's memory holds on vLLM's CPU build alone."""

    def refused(**args):
        raise RuntimeError("Engine core initialization failed. See root cause above. Failed core proc(s): {}")

    monkeypatch.setattr(vllm_backend, "import_vllm", lambda: Fake(LLM=refused, SamplingParams=dict))
    monkeypatch.setattr(vllm_backend, "on_cpu", lambda: cpu)
    monkeypatch.setitem(weights._COMMITS, ("org/model", None), "c" * 40)  # the hub is not asked
    with pytest.raises(UserError) as err:
        vllm_backend.VLLMBackend(vllm_backend.VLLMSettings(name="v", path="org/model")).load()
    message = str(err.value)
    assert "Engine core initialization failed" in message and "log above on stderr" in message
    assert ("machine's memory" in message) is cpu and "\n" not in message, message


@pytest.mark.promise("conf/model/openai.yaml", "api_key_env: null for a local server without keys: no key is sent")
def test_api_key_env_null_sends_no_key(server, monkeypatch):
    client(server, api_key_env=None).generate(ONE, SamplingParams())
    assert [auth for _, _, auth in server.calls] == [None]
    monkeypatch.delenv(KEY_ENV)
    with pytest.raises(UserError, match=f"set the environment variable {KEY_ENV}") as err:
        client(server).generate(ONE, SamplingParams())
    assert len(server.calls) == 1 and "\n" not in str(err.value), "asked for and unset: refused before sending"


@pytest.mark.promise(
    "conf/model/vllm.yaml", "each engine setting of the vllm model config reaches vLLM's engine as set"
)
def test_each_engine_setting_of_the_vllm_config_reaches_the_engine(monkeypatch, request):
    from omegaconf import OmegaConf

    node = OmegaConf.to_container(OmegaConf.load(contract.REPO / "conf" / "model" / "vllm.yaml"))
    node.pop("scoring")  # the job's, not the backend's
    as_set = {
        "path": "org/model",
        "dtype": "float16",
        "quantization": "awq",
        "tensor_parallel_size": 2,
        "gpu_memory_utilization": 0.5,
        "max_model_len": 1024,
        "enable_prefix_caching": False,
        "top_logprobs": 50,
        "trust_remote_code": True,
        "seed": 3,
        "enforce_eager": True,
        "enable_chunked_prefill": True,
    }
    assert set(as_set) | {"name", "backend", "revision", "chat"} == set(node), "every setting set here"
    vllm_subject(request, monkeypatch)
    backend = load_backend({**node, **as_set}, chat=False)
    backend.generate(ONE, SamplingParams())
    engine = backend.llm.args
    renamed = {"path": "model", "top_logprobs": "max_logprobs"}
    assert {renamed.get(k, k): engine[renamed.get(k, k)] for k in as_set} == {
        renamed.get(k, k): v for k, v in as_set.items()
    }
    assert engine["revision"] == "c" * 40, "the hub snapshot's commit"
    backend.close()


@pytest.mark.promise("conf/model/simulated.yaml", "latency_ms: milliseconds per prompt, slept")
def test_the_simulated_latency_is_per_prompt_and_slept_whatever_the_method_or_repetitions(monkeypatch):
    from src.backends import simulated

    slept: list[float] = []
    monkeypatch.setattr(simulated.time, "sleep", slept.append)
    backend = load_backend({"backend": "simulated", "latency_ms": 250}, chat=False)
    requests = list(contract.REQUESTS)
    backend.generate(requests, SamplingParams(n=3, temperature=0.7))
    backend.score_labels(requests)
    backend.score_options(requests)
    # one sleep a call, of 0.25 s a prompt less what computing the answers took (well under 50 ms here)
    assert len(slept) == 3, "one sleep per call, whatever its repetitions"
    for seconds in slept:
        assert len(requests) * 0.25 - 0.05 < seconds <= len(requests) * 0.25
