"""What the openai backend puts on the wire and what it reads back, request by request: each method's exact fields
(docs/serving.md's table) on each endpoint, the headers, the one request per sample where `n` is not served, the
model listing's own short timeout, the identity that keys the response cache, the fingerprint line, the retry lines,
the progress bar, and the error lines for bodies that are not what a server should send (not UTF-8, cut to length).
A strict fake server records every request whole; nothing here sleeps."""

from __future__ import annotations

import json
import logging
import math
import re
import socket
import threading
from http.server import BaseHTTPRequestHandler

import pytest

from src.backends import openai_backend
from src.backends.base import Request, SamplingParams
from src.backends.openai_backend import OpenAIBackend, OpenAISettings
from src.backends.text import chat_messages
from src.common.errors import UserError

from .test_openai_backend import ServedInThread

KEY = "sk-wire-7Qm2Xv9LpR4tZ8"
KEY_ENV = "WIRE_OPENAI_KEY"


class Wire(ServedInThread):
    """Records each request whole: (method, path, headers, JSON body or None). Answers from `script` first (each a
    (status, headers, body bytes), or "drop": the connection closed unanswered), then a well-formed reply to what
    was asked, with `fingerprints` (one per reply, in turn) as its `system_fingerprint` and `extra_choices` more
    choices than asked."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str, dict[str, str], dict | None]] = []
        self.script: list[tuple[int, dict[str, str], bytes] | str] = []
        self.fingerprints: list[str | None] = []
        self.extra_choices = 0
        self.models: list[dict] = []
        self.lock = threading.Lock()
        wire = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                self.respond(json.dumps({"object": "list", "data": wire.models}).encode(), None)

            def do_POST(self):
                payload = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                self.respond(None, payload)

            def respond(self, body: bytes | None, payload: dict | None) -> None:
                with wire.lock:
                    wire.seen.append((self.command, self.path, dict(self.headers.items()), payload))
                    scripted = wire.script.pop(0) if wire.script else None
                    fingerprint = wire.fingerprints.pop(0) if wire.fingerprints else None
                status, headers = 200, {"Content-Type": "application/json"}
                if scripted == "drop":
                    return  # nothing sent: the client sees the connection closed
                if isinstance(scripted, tuple):
                    status, headers, body = scripted
                elif body is None:
                    body = json.dumps(wire.reply(self.path, payload or {}, fingerprint)).encode()
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.serve(Handler)
        self.url = f"http://127.0.0.1:{self.port}/v1"

    def reply(self, path: str, payload: dict, fingerprint: str | None) -> dict:
        if payload.get("echo"):
            text = payload["prompt"]
            offsets = [0] + [i + 1 for i, ch in enumerate(text) if ch.isspace()]  # a token after each space
            tokens = [text[a:b] for a, b in zip(offsets, offsets[1:] + [len(text)])] + ["!"]
            logprobs = {"tokens": tokens, "text_offset": [*offsets, len(text)]}
            logprobs["token_logprobs"] = [None] + [-0.5] * (len(tokens) - 2) + [-9.0]
            reply: dict = {"choices": [{"index": 0, "text": text + "!", "logprobs": logprobs}]}
        elif payload.get("logprobs") and path.endswith("/chat/completions"):
            top = [{"token": "A", "logprob": math.log(0.5)}, {"token": "B", "logprob": math.log(0.3)}]
            content = [{"token": "A", "logprob": math.log(0.5), "top_logprobs": top}]
            reply = {"choices": [{"index": 0, "message": {"content": "A"}, "logprobs": {"content": content}}]}
        elif payload.get("logprobs"):
            top_ = {"A": math.log(0.5), "B": math.log(0.3)}
            logprobs = {"tokens": ["A"], "token_logprobs": [math.log(0.5)], "top_logprobs": [top_]}
            reply = {"choices": [{"index": 0, "text": "A", "logprobs": logprobs}]}
        else:
            chat = path.endswith("/chat/completions")
            choices = []
            for i in range(payload.get("n", 1) + self.extra_choices):
                text = f"s{payload.get('seed')}.{i}"
                choices.append({"index": i, **({"message": {"content": text}} if chat else {"text": text})})
            reply = {"choices": choices}
        if fingerprint is not None:
            reply["system_fingerprint"] = fingerprint
        return reply

    def payloads(self) -> list[dict | None]:
        return [payload for _, _, _, payload in self.seen]


@pytest.fixture
def wire(monkeypatch):
    monkeypatch.setenv(KEY_ENV, KEY)
    monkeypatch.setattr(openai_backend, "_pause", lambda seconds: None)  # no test here waits between attempts
    with Wire() as fake:
        yield fake


def client(wire: Wire, **settings) -> OpenAIBackend:
    options = dict(name="wired", model="wire-model", base_url=wire.url, api_key_env=KEY_ENV, progress=False)
    return OpenAIBackend(OpenAISettings(**{**options, **settings}))


PROMPT = "Q?\nA. x\nB. y\nAnswer:"
ONE = [Request(prompt=PROMPT, labels=("A", "B"), options=("x", "y"), seed=7)]
SAMPLED = SamplingParams(n=3, temperature=0.7, top_k=5, top_p=0.9, max_new_tokens=12)


# -- what each method sends ----------------------------------------------------------------------------------------


@pytest.mark.promise(
    "docs/serving.md", "generate sends max_tokens, temperature, top_p, n and the trial's seed, top_k only where set"
)
@pytest.mark.parametrize("endpoint", ["chat", "completions"])
def test_generate_sends_exactly_the_sampling_fields_on_each_endpoint(wire, endpoint):
    texts = client(wire, endpoint=endpoint).generate(ONE, SAMPLED)
    assert texts == [["s7.0", "s7.1", "s7.2"]]
    ((method, path, headers, payload),) = wire.seen
    sent = {"messages": chat_messages(PROMPT)} if endpoint == "chat" else {"prompt": PROMPT}
    assert (method, path) == ("POST", "/v1/chat/completions" if endpoint == "chat" else "/v1/completions")
    assert payload == {
        "model": "wire-model",
        **sent,
        "n": 3,
        "seed": 7,
        "temperature": 0.7,
        "top_p": 0.9,
        "max_tokens": 12,
        "top_k": 5,
    }
    assert headers["Content-Type"] == "application/json" and headers["Authorization"] == f"Bearer {KEY}"
    client(wire, endpoint=endpoint).generate(ONE, SamplingParams(n=2, temperature=0.7))
    assert "top_k" not in wire.payloads()[-1], "top_k unset is not sent: OpenAI refuses it"


@pytest.mark.promise(
    "docs/serving.md", "model.n_per_request=false sends R requests of one sample, with seeds seed, seed+1, ..."
)
def test_without_n_per_request_each_sample_is_its_own_request_with_the_next_seed(wire):
    texts = client(wire, n_per_request=False).generate(ONE, SamplingParams(n=2, temperature=0.7, max_new_tokens=4))
    assert texts == [["s7.0", "s8.0"]]
    fields = {"temperature": 0.7, "top_p": 1.0, "max_tokens": 4, "model": "wire-model"}
    fields["messages"] = chat_messages(PROMPT)
    assert wire.payloads() == [{**fields, "n": 1, "seed": 7}, {**fields, "n": 1, "seed": 8}]


def test_greedy_generation_asks_one_sample_and_repeats_it_keeping_only_what_was_asked(wire):
    wire.extra_choices = 1  # a server that sends more choices than asked for
    texts = client(wire).generate(ONE, SamplingParams(n=3, temperature=0.0))
    assert texts == [["s7.0"] * 3]
    assert [p["n"] for p in wire.payloads()] == [1]
    assert client(wire).generate(ONE, SamplingParams(n=2, temperature=0.7)) == [["s7.0", "s7.1"]]


def test_a_server_returning_fewer_samples_than_n_is_refused_naming_both_counts_and_the_setting(wire):
    wire.script = [(200, {}, json.dumps({"choices": [{"index": 0, "message": {"content": "A"}}]}).encode())]
    with pytest.raises(UserError) as err:
        client(wire).generate(ONE, SamplingParams(n=2, temperature=0.7))
    message = str(err.value)
    for part in ("2 samples per request", "1 choice(s) came back"):
        assert part in message, message
    assert message.endswith("; set model.n_per_request=false (one request per sample)"), message


@pytest.mark.promise(
    "docs/serving.md", "scoring=logprob sends max_tokens=1, logprobs and top_logprobs=model.top_logprobs, greedy"
)
@pytest.mark.parametrize("endpoint", ["chat", "completions"])
def test_label_scoring_sends_exactly_one_greedy_token_with_its_top_alternatives(wire, endpoint):
    (scores,) = client(wire, endpoint=endpoint, top_logprobs=7).score_labels(ONE)
    assert scores.probs == pytest.approx([0.5 / 0.8, 0.3 / 0.8], abs=1e-12)
    (payload,) = wire.payloads()
    if endpoint == "chat":
        want = {"messages": chat_messages(PROMPT), "logprobs": True, "top_logprobs": 7}
    else:
        want = {"prompt": PROMPT, "logprobs": 7}
    assert payload == {"model": "wire-model", "max_tokens": 1, "temperature": 0, **want}


@pytest.mark.promise(
    "docs/serving.md", "scoring=cloze sends each option on /v1/completions with echo, logprobs and max_tokens=1"
)
def test_cloze_sends_each_option_as_the_prompts_continuation_with_echo_and_one_token(wire):
    # lm-eval's own pair: the continuation starts with its prefix, not the space the prompt would get
    prefixed = Request(prompt="Q: it is", labels=("A", "B"), options=("yes", "no"), seed=1, continuation_prefix="\n")
    (scores,) = client(wire, endpoint="completions").score_options([prefixed])
    base = {"model": "wire-model", "max_tokens": 1, "echo": True, "logprobs": 0, "temperature": 0}
    assert wire.payloads() == [{**base, "prompt": "Q: it is\nyes"}, {**base, "prompt": "Q: it is\nno"}]
    assert [path for _, path, _, _ in wire.seen] == ["/v1/completions"] * 2
    # each echoed token is -0.5 and the generated one -9: only the option's token counts
    assert scores.loglik == pytest.approx((-0.5, -0.5), abs=1e-12)


# -- what it reads back ----------------------------------------------------------------------------------------------


def test_the_inexact_label_distribution_is_said_once_and_never_when_greedy(wire, caplog):
    caplog.set_level(logging.WARNING, logger=openai_backend.__name__)
    backend = client(wire, top_logprobs=2)
    backend.score_labels(ONE * 3, SamplingParams(temperature=0.0))
    assert not caplog.records, "greedy: the most likely token decides, exactly"
    backend.score_labels(ONE * 3, SamplingParams(temperature=0.7))
    backend.score_labels(ONE, SamplingParams(temperature=0.7))
    (record,) = caplog.records
    assert record.getMessage() == (
        "model wired: the first-token distribution is rebuilt from the top 2 tokens; with a temperature and no "
        "top_k <= 2 it is approximate (tail as one token)"
    )


@pytest.mark.promise(
    "docs/serving.md", "a system_fingerprint that changes while a sweep runs is said in one line, once"
)
def test_a_changing_system_fingerprint_is_said_once_naming_the_first_and_the_new_one(wire, caplog):
    caplog.set_level(logging.WARNING, logger=openai_backend.__name__)
    backend = client(wire)
    wire.fingerprints = ["fp-1", None, "fp-1", "fp-1"]
    backend.generate(ONE * 4, SamplingParams())
    assert not caplog.records, "the same fingerprint, or none, is nothing to say"
    wire.fingerprints = ["fp-2", "fp-3"]
    backend.generate(ONE, SamplingParams())
    backend.generate(ONE, SamplingParams())
    (record,) = caplog.records
    assert record.getMessage() == (
        "model wired: the server's system_fingerprint changed from fp-1 to fp-2 during this sweep: answers before "
        "and after may come from other weights; set model.revision and run again to keep them apart"
    )


@pytest.mark.promise(
    "docs/serving.md",
    "the model's identity holds the server, the model name, the endpoint, what GET /models says and model.revision",
)
def test_the_identity_names_the_server_model_endpoint_listing_and_revision_asked_once(wire):
    wire.models = [{"id": "wire-model", "root": "/weights/step-9", "owned_by": "me"}, {"id": "other", "root": "x"}]
    backend = client(wire, endpoint="completions", revision=20261203)
    assert backend.settings.revision == "20261203", "a revision given as a number is its text"
    assert backend.identity == (
        f"openai:{wire.url}|model=wire-model|endpoint=completions"
        '|served={"owned_by":"me","root":"/weights/step-9"}|revision=20261203'
    )
    assert backend.identity and [(m, p) for m, p, _, _ in wire.seen] == [("GET", "/v1/models")], "asked once"
    assert wire.seen[0][2]["Authorization"] == f"Bearer {KEY}"
    assert client(wire).settings.revision is None


@pytest.mark.parametrize(("timeout_s", "waited"), [(60.0, 10.0), (3.0, 3.0)])
def test_the_model_listing_waits_at_most_ten_seconds_or_timeout_s_when_shorter(wire, monkeypatch, timeout_s, waited):
    timeouts: list[float | None] = []
    urlopen = openai_backend.urllib.request.urlopen

    def recorded(request, *args, **kwargs):
        timeouts.append(kwargs.get("timeout"))
        return urlopen(request, *args, **kwargs)

    monkeypatch.setattr(openai_backend.urllib.request, "urlopen", recorded)
    client(wire, timeout_s=timeout_s).served_identity()
    assert timeouts == [waited]


def test_a_base_url_loses_its_trailing_slashes_and_nothing_else():
    settings = OpenAISettings(model="m", base_url="http://127.0.0.1:1/vX//")
    assert settings.base_url == "http://127.0.0.1:1/vX"


@pytest.mark.parametrize(
    ("setting", "says"),
    [
        ({"endpoint": "responses"}, "model.endpoint='responses' must be chat or completions"),
        ({"max_concurrency": "eight"}, "model.max_concurrency='eight' must be a number"),
        ({"timeout_s": None}, "model.timeout_s=None must be a number"),
        ({"max_retries": -2}, "model.max_retries=-2 must be at least 0"),
        ({"timeout_s": -1}, "model.timeout_s=-1.0 must be more than 0"),
    ],
)
def test_a_bad_setting_is_one_line_naming_the_key_and_the_value_given(setting, says):
    with pytest.raises(UserError) as err:
        OpenAISettings(model="m", **setting)
    assert str(err.value) == says


def test_each_retry_is_one_line_naming_the_failure_the_url_the_count_and_the_wait(wire, caplog):
    caplog.set_level(logging.WARNING, logger=openai_backend.__name__)
    wire.script = [(503, {"Retry-After": "2"}, b"{}"), (429, {"Retry-After": "0"}, b"{}")]
    backend = client(wire, max_retries=3)
    assert backend.generate(ONE, SamplingParams()) == [["s7.0"]]
    url = f"{wire.url}/chat/completions"
    assert [r.getMessage() for r in caplog.records] == [
        f"model wired: HTTP 503 from {url}; retry 1/3 in 2.0 s",
        f"model wired: HTTP 429 from {url}; retry 2/3 in 0.0 s",
    ]
    assert backend.retries == 2


def test_a_retry_waits_what_retry_after_asks_and_backs_off_from_the_second_attempts_wait(wire, monkeypatch):
    waits: list[float] = []
    monkeypatch.setattr(openai_backend, "_pause", waits.append)
    monkeypatch.setattr(openai_backend.random, "random", lambda: 0.5)  # the jitter at its middle: +5 %
    wire.script = [(503, {"Retry-After": "3"}, b"{}"), (502, {}, b"{}"), (500, {}, b"{}")]
    client(wire, backoff_s=2.0, max_backoff_s=100.0).generate(ONE, SamplingParams())
    assert waits == pytest.approx([3.0, 2.0 * 2 * 1.05, 2.0 * 4 * 1.05], abs=1e-9)
    waits.clear()
    wire.script = [(503, {}, b"{}")]
    client(wire, backoff_s=0.25, max_backoff_s=100.0).generate(ONE, SamplingParams())
    assert waits == pytest.approx([0.25 * 1.05], abs=1e-9), "a wait under a second is kept, not rounded up"


# -- bodies a server should not send ---------------------------------------------------------------------------------


def test_a_body_that_is_not_utf8_is_one_line_quoting_it_never_a_decoding_crash(wire):
    wire.script = [(200, {"Content-Type": "text/html"}, b"<p>\xff\xfe bad gateway</p>")]
    with pytest.raises(UserError) as err:
        client(wire).generate(ONE, SamplingParams())
    assert "answered with a body that is not JSON (<p>\ufffd\ufffd bad gateway</p>)" in str(err.value)
    wire.script = [(400, {}, b"\xff refused: prompt too long")]
    with pytest.raises(UserError) as err:
        client(wire, max_retries=0).generate(ONE, SamplingParams())
    assert "answered HTTP 400: \ufffd refused: prompt too long" in str(err.value)


@pytest.mark.parametrize(
    ("status", "body", "quoted", "cap"),
    [
        (200, b"a" * 200 + b"Z" * 800, "not JSON (", 200),
        (400, b"a" * 300 + b"Z" * 700, "HTTP 400: ", 300),
        (200, json.dumps({"error": "a" * 400}).encode(), "no choices (", 300),
    ],
    ids=["not-json", "refused", "no-choices"],
)
def test_what_a_server_said_is_quoted_up_to_its_cap_and_no_further(wire, status, body, quoted, cap):
    wire.script = [(status, {}, body)]
    with pytest.raises(UserError) as err:
        client(wire, max_retries=0).generate(ONE, SamplingParams())
    message = str(err.value)
    start = message.index(quoted) + len(quoted)
    said = message[start : start + cap + 1]
    assert len(said) == cap + 1 and said[-1] in "); " and "Z" not in message, message


@pytest.mark.parametrize(
    ("reply", "said"),
    [
        ({"error": {"message": "overloaded"}}, '{"message": "overloaded"}'),
        ({"object": "chat.completion"}, '{"object": "chat.completion"}'),
        ({"choices": []}, '{"choices": []}'),
        ({"choices": "A"}, '{"choices": "A"}'),
    ],
    ids=["error", "no-choices-key", "empty-choices", "choices-not-a-list"],
)
def test_a_reply_without_choices_quotes_its_error_or_else_the_whole_reply(wire, reply, said):
    wire.script = [(200, {}, json.dumps(reply).encode())]
    with pytest.raises(UserError) as err:
        client(wire).generate(ONE, SamplingParams())
    assert str(err.value) == f"model wired: {wire.url}/chat/completions answered with no choices ({said})"


def test_a_dropped_connection_is_retried_saying_what_it_was_then_one_line_quoting_it(wire, caplog):
    caplog.set_level(logging.WARNING, logger=openai_backend.__name__)
    wire.script = ["drop", "drop"]
    with pytest.raises(UserError) as err:
        client(wire, max_retries=1, backoff_s=0.0).generate(ONE, SamplingParams())
    url = f"{wire.url}/chat/completions"
    assert [r.getMessage() for r in caplog.records] == [
        f"model wired: RemoteDisconnected from {url}; retry 1/1 in 0.0 s"
    ]
    assert str(err.value) == (
        f"model wired: {url} closed the connection before answering (RemoteDisconnected: Remote end closed "
        "connection without response) in 2 attempts; check the server at model.base_url and its log"
    )


def test_a_server_not_listening_is_one_line_quoting_the_refusal_after_every_attempt(monkeypatch):
    monkeypatch.setattr(openai_backend, "_pause", lambda seconds: None)
    with socket.socket() as closed:  # a port nothing listens on once the socket is closed
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    settings = OpenAISettings(name="wired", model="m", base_url=url, api_key_env=None, max_retries=2, progress=False)
    with pytest.raises(UserError) as err:
        OpenAIBackend(settings).generate(ONE, SamplingParams())
    assert re.fullmatch(
        rf"model wired: cannot reach http://127\.0\.0\.1:{port}/v1/chat/completions \(\[Errno \d+\] Connection "
        r"refused\) in 3 attempts; check model.base_url and that the server is up",
        str(err.value),
    ), str(err.value)


# -- the progress bar ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("progress", [True, False])
def test_each_calls_bar_counts_its_requests_labelled_by_model_and_method(wire, monkeypatch, progress):
    bars: list[dict] = []

    class Bar:
        def __init__(self, total, what, *, enabled=True):
            bars.append({"total": total, "what": what, "enabled": enabled, "done": 0})

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def update(self, n):
            bars[-1]["done"] += n

    monkeypatch.setattr(openai_backend, "step_bar", Bar)
    backend = client(wire, endpoint="completions", progress=progress)
    backend.generate(ONE * 3, SamplingParams())
    backend.score_labels(ONE * 2)
    backend.score_options(ONE)
    assert bars == [
        {"total": 3, "what": "wired generate", "enabled": progress, "done": 3},
        {"total": 2, "what": "wired score_labels", "enabled": progress, "done": 2},
        {"total": 1, "what": "wired score_options", "enabled": progress, "done": 1},
    ]
