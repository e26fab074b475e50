"""OpenAI-compatible backend against a fake server on 127.0.0.1: samples, retries, timeouts, concurrency, logprobs,
and an end-to-end run whose MLflow params, tags and artifacts never hold the API key."""

from __future__ import annotations

import json
import logging
import math
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from src.backends import load_backend
from src.backends.base import Request, SamplingParams
from src.backends.openai_backend import OpenAIBackend, OpenAISettings
from src.common.errors import UserError

from .conftest import mlflow_runs

SECRET = "sk-test-DO-NOT-LEAK-4242"


class ServedInThread:
    """A ThreadingHTTPServer on a free 127.0.0.1 port, answering from a thread inside `with`."""

    def serve(self, handler: type[BaseHTTPRequestHandler]) -> None:
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.port = self.httpd.server_address[1]
        # polled often: `shutdown()` at each test's end waits up to one poll interval (0.5 s by default)
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()


class FakeServer(ServedInThread):
    """Canned completions. `failures` is a list of HTTP codes (or "slow") served, one each, before answering."""

    def __init__(self):
        self.calls: list[tuple[str, dict, str | None]] = []
        self.failures: list[int | str] = []
        self.in_flight = self.max_in_flight = 0
        self.delay_s = 0.0
        self.ignores: set[str] = set()  # request fields answered as `transformers serve` does: as if not sent
        self.error_message = "failure {failure}"  # a failure's body's message, `failure` its code filled in
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep the test output quiet
                pass

            def do_POST(self):
                payload = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with server.lock:
                    server.calls.append((self.path, payload, self.headers.get("Authorization")))
                    failure = server.failures.pop(0) if server.failures else None
                    server.in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server.in_flight)
                counted = True
                try:
                    if failure == "slow":
                        time.sleep(1.0)
                    time.sleep(server.delay_s)
                    status = failure if isinstance(failure, int) else 200
                    body = json.dumps(
                        {"error": {"message": server.error_message.format(failure=failure)}}
                        if status != 200
                        else server.reply(self.path, payload)
                    ).encode()
                    with server.lock:  # the request's work is done before its reply leaves: the client may then
                        server.in_flight -= 1  # send the next one at once, and it must not count as one more in flight
                        counted = False
                    self.send_response(status)
                    if status != 200:
                        self.send_header("Retry-After", "0")
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass
                finally:
                    if counted:
                        with server.lock:
                            server.in_flight -= 1

        self.serve(Handler)
        self.url = f"http://127.0.0.1:{self.port}/v1"

    def reply(self, path: str, payload: dict) -> dict:
        payload = {k: v for k, v in payload.items() if k not in self.ignores}
        if path.endswith("/completions") and payload.get("echo"):
            text = payload["prompt"]
            offsets = [0] + [i + 1 for i, ch in enumerate(text) if ch == " "]
            tokens = [text[a:b] for a, b in zip(offsets, offsets[1:] + [len(text)])]
            tokens.append("!")  # the one token max_tokens=1 generates after the echoed prompt: not the option's
            offsets.append(len(text))
            return {
                "choices": [
                    {
                        "text": text + "!",
                        "logprobs": {
                            "tokens": tokens,
                            "text_offset": offsets,
                            "token_logprobs": [None] + [-0.5] * (len(tokens) - 2) + [-9.0],
                        },
                    }
                ]
            }
        if payload.get("logprobs"):
            top = [
                {"token": "A", "logprob": math.log(0.5)},
                {"token": " A", "logprob": math.log(0.1)},
                {"token": " B", "logprob": math.log(0.2)},
                {"token": "Hello", "logprob": math.log(0.1)},
            ]
            return {
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": "A"},
                        "logprobs": {
                            "content": [
                                {
                                    "token": "A",
                                    "logprob": math.log(0.5),
                                    **({"top_logprobs": top} if "top_logprobs" in payload else {}),
                                }
                            ]
                        },
                    }
                ]
            }
        n = payload.get("n", 1)
        return {"choices": [{"index": i, "message": {"role": "assistant", "content": "ABCD"[i % 4]}} for i in range(n)]}


@pytest.fixture
def server(monkeypatch):
    monkeypatch.setenv("FAKE_OPENAI_KEY", SECRET)
    with FakeServer() as fake:
        yield fake


def backend(server: FakeServer, **kwargs) -> OpenAIBackend:
    options = dict(
        name="fake",
        model="fake-model",
        base_url=server.url,
        api_key_env="FAKE_OPENAI_KEY",
        backoff_s=0.01,
        timeout_s=5.0,
        progress=False,
    )
    return OpenAIBackend(OpenAISettings(**{**options, **kwargs}))


REQUESTS = [
    Request(prompt=f"Q{i}?\nA. x\nB. y\nAnswer:", labels=("A", "B"), options=("x", "y"), seed=10 + i) for i in range(6)
]


def test_generate_sends_n_samples_seed_and_the_key(server):
    out = backend(server).generate(REQUESTS[:2], SamplingParams(n=3, temperature=0.7, max_new_tokens=2))
    assert out == [["A", "B", "C"], ["A", "B", "C"]]
    path, payload, auth = server.calls[0]
    assert path == "/v1/chat/completions" and auth == f"Bearer {SECRET}"
    assert payload["n"] == 3 and payload["temperature"] == 0.7 and payload["max_tokens"] == 2
    assert sorted(c[1]["seed"] for c in server.calls) == [10, 11] and "top_k" not in payload
    greedy = backend(server).generate(REQUESTS[:1], SamplingParams(n=4, temperature=0.0))
    assert greedy == [["A"] * 4] and server.calls[-1][1]["n"] == 1


def test_retries_on_429_and_5xx_then_success(server):
    server.failures = [429, 503, 500]
    b = backend(server)
    assert b.generate(REQUESTS[:1], SamplingParams(n=1, temperature=0.5)) == [["A"]]
    assert b.retries == 3 and len(server.calls) == 4


def test_timeouts_are_retried(server):
    server.failures = ["slow"]
    b = backend(server, timeout_s=0.3)
    assert b.generate(REQUESTS[:1], SamplingParams(n=1, temperature=0.5)) == [["A"]]
    assert b.retries == 1


def test_client_errors_and_exhausted_retries_are_one_line_user_errors_without_the_key(server):
    server.failures = [401]
    with pytest.raises(UserError, match="HTTP 401") as err:
        backend(server).generate(REQUESTS[:1], SamplingParams())
    assert SECRET not in str(err.value) and len(server.calls) == 1
    server.failures = [429] * 3
    with pytest.raises(UserError, match="HTTP 429"):
        backend(server, max_retries=2).generate(REQUESTS[:1], SamplingParams())


def test_concurrency_is_limited(server):
    server.delay_s = 0.1
    backend(server, max_concurrency=3).generate(REQUESTS, SamplingParams(n=1, temperature=0.5))
    assert 1 < server.max_in_flight <= 3


def test_label_scores_from_top_logprobs(server):
    b = backend(server)
    scores = b.score_labels(REQUESTS[:2])
    assert scores[0].probs == pytest.approx((0.75, 0.25)) and scores[0].mass == pytest.approx(0.8)
    payload = server.calls[0][1]
    assert payload["logprobs"] is True and payload["top_logprobs"] == 20 and payload["max_tokens"] == 1
    # top-k within the returned list: exact
    tempered = b.score_labels(REQUESTS[:1], SamplingParams(temperature=1.0, top_k=3))[0]
    assert tempered.answer_dist == pytest.approx((0.6 / 0.8, 0.2 / 0.8, 0.0))


def test_cloze_uses_echoed_prompt_logprobs_on_the_completions_endpoint(server):
    scores = backend(server, endpoint="completions").score_options(REQUESTS[:1])[0]
    assert scores.loglik == (-0.5, -0.5)
    assert server.calls[0][1]["echo"] is True and server.calls[0][0] == "/v1/completions"
    with pytest.raises(UserError, match="endpoint=completions"):
        backend(server).score_options(REQUESTS[:1])


@pytest.mark.parametrize(
    "ignored, endpoint, ask, field",
    [
        ({"logprobs", "top_logprobs"}, "chat", "logprob", "`logprobs`"),
        ({"top_logprobs"}, "chat", "logprob", "`top_logprobs`"),
        ({"logprobs"}, "completions", "logprob", "`logprobs`"),
        ({"echo", "logprobs"}, "completions", "cloze", "`echo`"),
        ({"n"}, "chat", "samples", "`n`"),
    ],
)
def test_a_server_ignoring_a_field_the_scoring_needs_is_refused_in_one_line(server, ignored, endpoint, ask, field):
    """`transformers serve` answers as if `n`, `logprobs`, `top_logprobs` and `echo` were not sent: never scored from
    what came back, and the queued requests are not sent once the first reply shows it."""
    server.ignores = ignored
    b = backend(server, endpoint=endpoint, max_concurrency=1)
    calls = {
        "logprob": lambda: b.score_labels(REQUESTS),
        "cloze": lambda: b.score_options(REQUESTS),
        "samples": lambda: b.generate(REQUESTS, SamplingParams(n=3, temperature=0.7)),
    }
    with pytest.raises(UserError, match=field) as err:
        calls[ask]()
    assert "\n" not in str(err.value) and server.url.removesuffix("/v1") in str(err.value)
    assert len(server.calls) == 1, "one worker: nothing queued behind the refused request is sent"
    if ask == "samples":  # the way out the refusal names: one request per sample
        out = backend(server, n_per_request=False).generate(REQUESTS[:1], SamplingParams(n=3, temperature=0.7))
        assert out == [["A", "A", "A"]] and [c[1]["seed"] for c in server.calls[-3:]] == [10, 11, 12]


def test_missing_key_and_bad_config(monkeypatch, server):
    monkeypatch.delenv("FAKE_OPENAI_KEY")
    with pytest.raises(UserError, match="FAKE_OPENAI_KEY"):
        backend(server).generate(REQUESTS[:1], SamplingParams())
    with pytest.raises(UserError, match="model.api_keyenv|api_keyenv"):
        load_backend({"name": "o", "backend": "openai", "model": "m", "api_keyenv": "X"}, chat=True)
    assert "FAKE" not in backend(server).identity and SECRET not in backend(server).identity


@pytest.mark.slow
def test_run_through_the_cli_never_logs_the_key(server, run_cli, monkeypatch, tmp_path):
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    server.failures = [429]
    proc = run_cli(
        "model=openai",
        f"model.base_url={server.url}",
        "model.backoff_s=0.01",
        "benchmark=synthetic",
        "benchmark.n_questions=4",
        "variants=original",
        "scoring=logprob",
        "repetitions=3",
        "temperature=0.7",
        "cache.enabled=false",
    )
    assert SECRET not in proc.stdout + proc.stderr
    assert any(auth == f"Bearer {SECRET}" for _, _, auth in server.calls)
    assert len(server.calls) == 4 + 1, "four prompts, one retried after a 429"
    client, runs = mlflow_runs(run_cli.store_uri)
    (run,) = runs
    assert run.data.metrics["n_trials"] == 12
    assert "expected_st" in run.data.metrics
    everything = json.dumps([run.data.params, run.data.tags])
    assert SECRET not in everything and "OPENAI_API_KEY" in everything  # the variable's name, not its value
    local = client.download_artifacts(run.info.run_id, "", str(tmp_path / "artifacts"))
    for path in __import__("pathlib").Path(local).rglob("*"):
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path


@pytest.mark.slow
@pytest.mark.promise("conf/model/openai.yaml", "the API key stays out of MLflow: a failed run's tags and artifacts too")
def test_a_run_failed_by_a_server_echoing_the_key_keeps_it_out_of_mlflow_and_stderr(server, run_cli, monkeypatch):
    """The server refuses the key and echoes it back (as OpenAI's "Incorrect API key provided: sk-..." does) after a
    retried 503 that echoes it too: the job fails in one line, and neither its stderr nor the FAILED run's params,
    tags and artifacts hold the key."""
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    server.failures = [503, 401]
    server.error_message = "Incorrect API key provided: " + SECRET + " ({failure})"
    proc = run_cli(
        "model=openai",
        f"model.base_url={server.url}",
        "model.backoff_s=0.01",
        "model.max_concurrency=1",  # the 503, retried, then the 401: nothing queued behind it is sent
        "benchmark=synthetic",
        "benchmark.n_questions=2",
        "variants=original",
        "cache.enabled=false",
        check=False,
    )
    assert proc.returncode == 2 and len(server.calls) == 2, proc.stderr[-3000:]
    assert "HTTP 401" in proc.stderr and SECRET not in proc.stdout + proc.stderr
    client, runs = mlflow_runs(run_cli.store_uri)
    assert [r.info.status for r in runs] == ["FAILED"]
    assert SECRET not in json.dumps([runs[0].data.params, runs[0].data.tags])
    local = client.download_artifacts(runs[0].info.run_id, "", str(run_cli.tmp / "artifacts"))
    for path in __import__("pathlib").Path(local).rglob("*"):
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path


@pytest.mark.parametrize(
    ("failures", "settings", "says"),
    [
        (
            [503] * 3,
            {"max_retries": 2, "max_concurrency": 3},
            "still busy or failing after 3 attempts: run again later, or raise model.max_retries (2) or "
            "model.max_backoff_s, or lower model.max_concurrency (3)",
        ),
        ([401], {}, "the server refused the key: check the environment variable FAKE_OPENAI_KEY"),
        ([403], {}, "the server refused the key: check the environment variable FAKE_OPENAI_KEY"),
        (
            [401],
            {"api_key_env": None},
            "the server wants a key: set model.api_key_env to the environment variable that holds it",
        ),
        ([404], {}, "check model.base_url (it ends where the server's /v1 does) and model.model"),
        ([400], {}, "the server refused the request; its answer says why"),
    ],
)
def test_a_refused_request_is_one_line_quoting_the_server_and_naming_what_to_change(server, failures, settings, says):
    """The whole line: the model, the URL, the status, what the server said (its key scrubbed), and what the status
    says to do: a transient status retried to the end, a key refused or missing, a wrong URL or model, the rest."""
    server.failures = list(failures)
    server.error_message = f"no ({SECRET})"
    with pytest.raises(UserError) as err:
        backend(server, **settings).generate(REQUESTS[:1], SamplingParams())
    scrubbed = "***" if settings.get("api_key_env", "FAKE_OPENAI_KEY") else SECRET  # no key named: none to hide
    body = json.dumps({"error": {"message": f"no ({scrubbed})"}})
    assert str(err.value) == (f"model fake: {server.url}/chat/completions answered HTTP {failures[0]}: {body} ({says})")


class ListingServer(ServedInThread):
    """`GET /v1/models` answered with `listing` (or the HTTP status `status`); the Authorization headers recorded."""

    def __init__(self, listing=None, status=200):
        self.auth: list[str | None] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                server.auth.append(self.headers.get("Authorization"))
                body = json.dumps(listing).encode()
                self.send_response(status if self.path == "/v1/models" else 404)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.serve(Handler)
        self.url = f"http://127.0.0.1:{self.port}/v1"


OLD = 1_600_000_000  # a model's own creation time, long before the test runs


@pytest.mark.parametrize(
    ("listing", "served"),
    [
        (
            {
                "data": [
                    {"id": "other", "root": "elsewhere"},
                    {"id": "fake-model", "root": "/w/m", "owned_by": "me", "meta": {"n_params": 7}, "created": OLD},
                ]
            },
            {"root": "/w/m", "owned_by": "me", "meta": {"n_params": 7}, "created": OLD},
        ),
        ({"data": [{"id": "fake-model", "root": "/w/m", "owned_by": None, "created": "now"}]}, {"root": "/w/m"}),
        ({"data": [{"id": "other", "root": "/w/m"}, "not an entry"]}, {}),
        ({"object": "list"}, {}),
        (["not", "a", "listing"], {}),
    ],
)
def test_what_the_server_lists_of_the_model_is_its_served_identity(monkeypatch, listing, served):
    """The entry whose id is the model's: its root, owner, meta and a creation time that is not the server's clock;
    nothing from another model's entry, and nothing where the server lists no such model. The key goes along."""
    monkeypatch.setenv("FAKE_OPENAI_KEY", SECRET)
    with ListingServer(listing) as fake:
        assert backend(fake).served_identity() == served
        assert fake.auth == [f"Bearer {SECRET}"]
        assert backend(fake, api_key_env=None).served_identity() == served
        assert fake.auth[1] is None, "no key: no header"


def test_a_creation_time_that_is_the_servers_clock_is_not_the_models(monkeypatch):
    """vLLM writes the current time as `created`: within five minutes of now it says nothing of the model."""
    monkeypatch.setattr(time, "time", lambda: OLD + 299.0)
    now = {"data": [{"id": "fake-model", "created": OLD}]}
    with ListingServer(now) as fake:
        assert backend(fake).served_identity() == {}
    monkeypatch.setattr(time, "time", lambda: OLD + 301.0)
    with ListingServer(now) as fake:
        assert backend(fake).served_identity() == {"created": OLD}


def test_a_server_that_lists_no_models_gives_no_served_identity_and_says_why_once(monkeypatch, caplog):
    monkeypatch.setenv("FAKE_OPENAI_KEY", SECRET)
    with ListingServer({"error": SECRET}, status=404) as fake, caplog.at_level(logging.INFO):
        assert backend(fake).served_identity() == {}
    said = [r.getMessage() for r in caplog.records if "/models" in r.getMessage()]
    assert said == [f"model fake: GET {fake.url}/models: HTTP Error 404: Not Found"]


@pytest.mark.parametrize(
    ("ignored", "endpoint", "ask", "says"),
    [
        (
            {"logprobs", "top_logprobs"},
            "chat",
            "logprob",
            "scoring=logprob needs the request field `logprobs`, which the server at {url} ignores (its reply has no "
            "logprobs; docs/serving.md says what each server returns); use scoring=generate, or a server that "
            "returns them",
        ),
        (
            {"echo", "logprobs"},
            "completions",
            "cloze",
            "scoring=cloze needs the request field `echo`, which the server at {url} ignores (its reply has no prompt "
            "logprobs; docs/serving.md says what each server returns); use scoring=generate, or a server that "
            "echoes the prompt's logprobs",
        ),
    ],
)
def test_a_server_ignoring_a_scoring_field_is_told_in_the_whole_line_with_the_way_out(
    server, ignored, endpoint, ask, says
):
    server.ignores = ignored
    b = backend(server, endpoint=endpoint, max_concurrency=1)
    with pytest.raises(UserError) as err:
        (b.score_labels if ask == "logprob" else b.score_options)(REQUESTS[:1])
    assert str(err.value) == "model fake: " + says.format(url=server.url)


def test_label_scoring_asks_for_one_greedy_token_and_its_top_alternatives(server):
    backend(server, top_logprobs=7).score_labels(REQUESTS[:1])
    _, payload, _ = server.calls[-1]
    assert {k: v for k, v in payload.items() if k != "messages"} == {
        "model": "fake-model",
        "max_tokens": 1,
        "temperature": 0,
        "logprobs": True,
        "top_logprobs": 7,
    }
