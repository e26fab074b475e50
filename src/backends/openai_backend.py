"""OpenAI-compatible HTTP backend: hosted models, `vllm serve`, llama.cpp's server, ... (stdlib only: urllib).

- generate: one request per prompt with `n` samples, `temperature`, `top_p`, `max_tokens` and the trial seed
  (`seed`, honoured best-effort by servers); `top_k` is sent only when set (vLLM accepts it, OpenAI does not).
- score_labels: `max_tokens=1` with `logprobs`/`top_logprobs`: label probabilities from the first token's top
  log-probabilities (src/backends/logprobs.py); a label outside the top K counts 0.
- score_options (cloze): the completions endpoint with `echo` and `logprobs` (prompt log-probabilities), and
  `max_tokens=1` as lm-evaluation-harness sends (servers refuse 0); the generated token is not counted.

A server that ignores one of these fields (`transformers serve` ignores `n`, `logprobs`, `top_logprobs` and
`echo`: docs/serving.md) is refused in one line naming the field, never scored from what it did return.

Requests run in a thread pool of `max_concurrency`; 429 and 5xx answers and network errors (a timeout, a
connection refused or cut) are retried with exponential backoff capped at `max_backoff_s` (honouring Retry-After,
capped the same), each request with a timeout; a refusal (another 4xx) or a body that is not a JSON reply is not.
Each final error is one line whose hint names what was found: the key, the URL, the timeout or the retries.

The API key is read from the environment variable that `api_key_env` names, at call time; it is kept out of
`identity`, logs and error messages (masked before a server's answer is cut short), so it never reaches MLflow params,
tags or artifacts.
"""

from __future__ import annotations

import email.utils
import http.client
import json
import logging
import math
import os
import random
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import tenacity

from src.backends.base import Backend, LabelScores, OptionScores, Request, SamplingParams
from src.backends.logprobs import label_scores_from_top
from src.backends.text import chat_messages, completion, continuation_text, option_scores, text_label_keys
from src.common.errors import UserError
from src.common.progress import step_bar

log = logging.getLogger(__name__)

_NOT_SENT = object()  # what a request queued behind a failed one returns instead of being sent

RETRY_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504})
# what a request meets when the server is away or cut off (HTTPException: a reply cut off, a server killed mid-answer)
NETWORK_ERRORS = (urllib.error.URLError, TimeoutError, ConnectionError, http.client.HTTPException)


def _pause(seconds: float) -> None:
    """The wait between two attempts of a request (tests record it instead)."""
    time.sleep(seconds)


def transient(error: BaseException) -> bool:
    """Whether a request that failed with `error` is worth sending again: a busy or failing server (429, 5xx), a
    network error. A refusal (another 4xx) is not.

    >>> transient(TimeoutError()), transient(ValueError("not JSON"))
    (True, False)
    """
    if isinstance(error, urllib.error.HTTPError):
        return error.code in RETRY_STATUS
    return isinstance(error, NETWORK_ERRORS)


@dataclass(frozen=True)
class OpenAISettings:
    """A `model` config node with backend=openai, less `backend`: its keys are these fields."""

    name: str = "openai"
    model: str | None = None  # the server's model name
    base_url: str = "https://api.openai.com/v1"
    api_key_env: str | None = "OPENAI_API_KEY"  # environment variable holding the key; null = no key (local)
    endpoint: str = "chat"  # chat | completions
    max_concurrency: int = 8
    max_retries: int = 6
    backoff_s: float = 1.0  # first retry wait; doubles each retry (Retry-After wins when the server sends it)
    max_backoff_s: float = 60.0
    timeout_s: float = 60.0
    top_logprobs: int = 20  # OpenAI allows at most 20; vllm serve up to its --max-logprobs
    n_per_request: bool = True  # false for servers without `n`: one request per sample
    chat: bool = True  # set by load_backend from the prompt config; the endpoint decides the wrapping
    revision: str | None = None  # what the user knows of the served weights (a checkpoint's hash or date)
    progress: bool = True

    def __post_init__(self) -> None:
        if not self.model:
            raise UserError(f"model {self.name}: set model.model to the server's model name")
        if self.endpoint not in ("chat", "completions"):
            raise UserError(f"model.endpoint={self.endpoint!r} must be chat or completions")
        # a config's values as their fields' types (a number given as text on the command line), set once here
        plain: dict[str, Callable[[Any], Any]] = {
            "max_concurrency": int,
            "max_retries": int,
            "backoff_s": float,
            "max_backoff_s": float,
            "timeout_s": float,
            "top_logprobs": int,
            "n_per_request": bool,
        }
        for key, kind in plain.items():
            try:
                object.__setattr__(self, key, kind(getattr(self, key)))
            except (TypeError, ValueError):
                raise UserError(f"model.{key}={getattr(self, key)!r} must be a number") from None
        object.__setattr__(self, "base_url", self.base_url.rstrip("/"))
        object.__setattr__(self, "revision", None if self.revision is None else str(self.revision))
        if self.max_concurrency < 1:
            raise UserError(f"model.max_concurrency={self.max_concurrency} must be at least 1")
        for key in ("max_retries", "backoff_s", "max_backoff_s"):
            if getattr(self, key) < 0:
                raise UserError(f"model.{key}={getattr(self, key)} must be at least 0")
        if self.timeout_s <= 0:  # 0 would make every socket non-blocking: each request failing at once
            raise UserError(f"model.timeout_s={self.timeout_s} must be more than 0")

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any], *, chat: bool) -> OpenAISettings:
        """The settings of a config node; `chat` (the prompt config's) unless the node sets its own."""
        options = {k: v for k, v in cfg.items() if k != "backend"}
        try:
            return cls(**{"chat": chat, **options})
        except TypeError as err:
            raise UserError(f"model config for backend openai: {err}; check the keys under model") from None


class OpenAIBackend(Backend):
    """A model behind an OpenAI-compatible `/chat/completions` or `/completions` endpoint."""

    def __init__(self, settings: OpenAISettings) -> None:
        self.settings = settings
        self.name = settings.name
        self._identity: str | None = None
        self._fingerprint: str | None = None  # the first `system_fingerprint` a reply carried
        self.retries = 0  # retried calls so far (tests and logs read it)
        self._warned_inexact = False
        self._warned_fingerprint = False

    # -- identity ------------------------------------------------------------------------------

    @property
    def identity(self) -> str:
        """The server, the model name and what the server reports of the model it serves under that name
        (`served_identity`), with `model.revision`: asked once, on first use (the response cache's key)."""
        if self._identity is None:
            served = self.served_identity()
            if not served.get("created") and not served.get("meta") and self.settings.revision is None:
                log.warning(
                    "model %s: the server at %s reports nothing that changes with the weights it serves as "
                    "%s, so new weights under that name would get the answers cached for the old ones; set "
                    "model.revision (e.g. the checkpoint's hash or date) and change it with the weights",
                    self.name,
                    self.settings.base_url,
                    self.settings.model,
                )
            reported = json.dumps(served, sort_keys=True, separators=(",", ":"))
            self._identity = (
                f"openai:{self.settings.base_url}|model={self.settings.model}|endpoint={self.settings.endpoint}"
                f"|served={reported}|revision={self.settings.revision}"
            )
        return self._identity

    def served_identity(self) -> dict[str, Any]:
        """What `GET /models` says of this model: its `root` (vLLM: the weights served under the name), `owned_by`,
        llama.cpp's `meta` (parameters, size) and `created` where it is the model's (a server that writes the
        current time there, as vLLM does, reports nothing by it). {} where the server lists nothing (404)."""
        headers = {}
        key = (
            os.environ.get(self.settings.api_key_env) if self.settings.api_key_env else None
        )  # none: the first request says so
        if key:
            headers["Authorization"] = f"Bearer {key}"
        try:
            request = urllib.request.Request(f"{self.settings.base_url}/models", headers=headers, method="GET")
            with urllib.request.urlopen(request, timeout=min(self.settings.timeout_s, 10.0)) as response:
                listed = json.loads(response.read().decode())
        except (OSError, ValueError, http.client.HTTPException) as err:  # no list: the warning says what it means
            log.info("model %s: GET %s/models: %s", self.name, self.settings.base_url, self._scrub(str(err)))
            return {}
        entries = listed.get("data", []) if isinstance(listed, dict) else []
        entry = next((e for e in entries if isinstance(e, dict) and e.get("id") == self.settings.model), None)
        if entry is None:
            return {}
        served = {k: entry[k] for k in ("root", "owned_by", "meta") if entry.get(k) is not None}
        created = entry.get("created")
        if isinstance(created, (int, float)) and abs(created - time.time()) > 300:  # not the server's clock
            served["created"] = int(created)
        return served

    def _note_fingerprint(self, reply: dict[str, Any]) -> None:
        """One line when the `system_fingerprint` a server returns changes while this process uses it (a sweep):
        the answers before and after may come from other weights or another serving setup."""
        fingerprint = reply.get("system_fingerprint") if isinstance(reply, dict) else None
        if not fingerprint:
            return
        if self._fingerprint is None:
            self._fingerprint = fingerprint
        elif fingerprint != self._fingerprint and not self._warned_fingerprint:
            self._warned_fingerprint = True
            log.warning(
                "model %s: the server's system_fingerprint changed from %s to %s during this sweep: answers "
                "before and after may come from other weights; set model.revision and run again to keep "
                "them apart",
                self.name,
                self._fingerprint,
                fingerprint,
            )

    # -- HTTP ----------------------------------------------------------------------------------

    def _key(self) -> str | None:
        if not self.settings.api_key_env:
            return None
        key = os.environ.get(self.settings.api_key_env)
        if not key:
            raise UserError(
                f"model {self.name}: set the environment variable {self.settings.api_key_env} to the API key "
                f"(model.api_key_env names it; null for a server without keys)"
            )
        return key

    def _scrub(self, text: str) -> str:
        """`text` without the API key, on one line (a server's HTML error page is many): what a message may quote
        of what a server said. Scrubbed before anything cuts it short, so no part of the key is left."""
        key = os.environ.get(self.settings.api_key_env) if self.settings.api_key_env else None
        return " ".join((text.replace(key, "***") if key else text).split())

    def _refused(self, code: int, attempts: int) -> str:
        """What a final HTTP `code` after `attempts` attempts says to do: the cause the status names."""
        s = self.settings
        if code in RETRY_STATUS:
            return (
                f"still busy or failing after {attempts} attempts: run again later, or raise model.max_retries "
                f"({s.max_retries}) or model.max_backoff_s, or lower model.max_concurrency ({s.max_concurrency})"
            )
        if code in (401, 403):
            if s.api_key_env:
                return f"the server refused the key: check the environment variable {s.api_key_env}"
            return "the server wants a key: set model.api_key_env to the environment variable that holds it"
        if code == 404:
            return "check model.base_url (it ends where the server's /v1 does) and model.model"
        return "the server refused the request; its answer says why"

    def _post(self, path: str, payload: dict[str, Any]) -> dict[str, Any]:
        """POST JSON with retries on 429/5xx/network errors; a 4xx is a UserError naming the config key."""
        url = f"{self.settings.base_url}/{path}"
        headers = {"Content-Type": "application/json"}
        key = self._key()
        if key:
            headers["Authorization"] = f"Bearer {key}"
        body = json.dumps(payload).encode()

        attempts = 0

        def once() -> dict[str, Any]:
            nonlocal attempts
            attempts += 1
            request = urllib.request.Request(url, data=body, headers=headers, method="POST")
            with urllib.request.urlopen(request, timeout=self.settings.timeout_s) as response:
                text = response.read().decode(errors="replace")
            try:
                reply = json.loads(text)
            except ValueError:
                reply = None
            if not isinstance(reply, dict):  # an HTML page (a proxy's, a wrong path's): not retried, it comes again
                raise UserError(
                    f"model {self.name}: {url} answered with a body that is not JSON ({self._scrub(text)[:200]}); "
                    f"check model.base_url: it ends where the server's OpenAI-compatible /v1 does"
                )
            if not isinstance(reply.get("choices"), list) or not reply["choices"]:
                said = self._scrub(json.dumps(reply.get("error") or reply))[:300]
                raise UserError(f"model {self.name}: {url} answered with no choices ({said})")
            self._note_fingerprint(reply)
            return reply

        retrying = tenacity.Retrying(
            stop=tenacity.stop_after_attempt(self.settings.max_retries + 1),
            wait=self._wait,
            sleep=lambda seconds: _pause(seconds),  # looked up at each wait
            retry=tenacity.retry_if_exception(transient),
            before_sleep=lambda state: self._note_retry(url, state),
            reraise=True,  # the last error itself, said in one line below
        )
        try:
            return retrying(once)
        except urllib.error.HTTPError as err:  # refused, or still failing once the retries are spent
            detail = self._scrub(err.read().decode(errors="replace"))[:300]
            raise UserError(
                f"model {self.name}: {url} answered HTTP {err.code}: {detail} ({self._refused(err.code, attempts)})"
            ) from None
        except NETWORK_ERRORS as err:
            reason = err.reason if isinstance(err, urllib.error.URLError) else err
            if isinstance(reason, TimeoutError):  # connected, or not, but no answer in time
                raise UserError(
                    f"model {self.name}: {url} did not answer within model.timeout_s={self.settings.timeout_s:g} s "
                    f"in {attempts} attempts; raise model.timeout_s, or lower model.max_concurrency "
                    f"({self.settings.max_concurrency}) on a slow server"
                ) from None
            if isinstance(err, urllib.error.URLError | http.client.InvalidURL):  # no connection made: nothing
                # listens there, no such host, or a URL that names none
                raise UserError(
                    f"model {self.name}: cannot reach {url} ({self._scrub(str(reason))}) in {attempts} attempts; "
                    f"check model.base_url and that the server is up"
                ) from None
            raise UserError(  # connected, then cut off: the server closed the connection or its answer mid-way
                f"model {self.name}: {url} closed the connection before answering ({type(err).__name__}: "
                f"{self._scrub(str(err))}) in {attempts} attempts; check the server at model.base_url and its log"
            ) from None

    def _wait(self, state: tenacity.RetryCallState) -> float:
        """Seconds before the next attempt: `backoff_s` doubled per attempt up to `max_backoff_s`, with 10% jitter;
        a server's Retry-After (capped the same) instead where it sends one."""
        s = self.settings
        error = state.outcome.exception() if state.outcome is not None else None
        retry_after = (
            error.headers.get("Retry-After") if isinstance(error, urllib.error.HTTPError) and error.headers else None
        )
        wait = retry_after_s(retry_after) if retry_after else None
        if wait is None:  # the jitter keeps parallel jobs apart; the cap holds with it
            wait = s.backoff_s * 2.0 ** (state.attempt_number - 1) * (1 + 0.1 * random.random())
        return min(s.max_backoff_s, max(0.0, wait))

    def _note_retry(self, url: str, state: tenacity.RetryCallState) -> None:
        """Count the retry and say it in one line: what failed, which retry of how many, and the wait."""
        error = state.outcome.exception() if state.outcome is not None else None
        reason = f"HTTP {error.code}" if isinstance(error, urllib.error.HTTPError) else type(error).__name__
        self.retries += 1
        log.warning(
            "model %s: %s from %s; retry %d/%d in %.1f s",
            self.name,
            reason,
            url,
            state.attempt_number,
            self.settings.max_retries,
            state.next_action.sleep if state.next_action is not None else 0.0,
        )

    def _map(self, fn: Callable[[Request], Any], requests: Sequence[Request], what: str) -> list[Any]:
        failed = threading.Event()  # set by the worker whose request failed, before it takes the next one

        def unless_failed(r: Request) -> Any:
            # A worker takes its next request before the caller sees the failure and cancels the queue: without
            # this, a refused or dead server would still be sent up to `max_concurrency` more requests.
            if failed.is_set():
                return _NOT_SENT
            try:
                return fn(r)
            except BaseException:
                failed.set()
                raise

        with (
            ThreadPoolExecutor(max_workers=self.settings.max_concurrency) as pool,
            step_bar(len(requests), f"{self.name} {what}", enabled=self.settings.progress) as bar,
        ):  # src/common/progress.py
            futures = [pool.submit(unless_failed, r) for r in requests]
            out = []
            try:
                for future in futures:
                    result = future.result()  # the first failed request raises here
                    if result is not _NOT_SENT:  # not sent: queued behind a failed one, which raises when reached
                        out.append(result)
                        bar.update(1)
            except BaseException:  # a refusal or a dead server: the queued requests are not sent
                for future in futures:
                    future.cancel()
                raise
            return out

    def _lacks(self, field: str, what: str, got: str, fix: str) -> UserError:
        """The one-line refusal of a server that ignored a request field `what` needs (docs/serving.md)."""
        return UserError(
            f"model {self.name}: {what} needs the request field `{field}`, which the server at "
            f"{self.settings.base_url} ignores ({got}; docs/serving.md says what each server returns); {fix}"
        )

    def _complete(self, prompt: str, **fields: Any) -> dict[str, Any]:
        if self.settings.endpoint == "chat":
            return self._post(
                "chat/completions", {"model": self.settings.model, "messages": chat_messages(prompt), **fields}
            )
        return self._post("completions", {"model": self.settings.model, "prompt": prompt, **fields})

    # -- the Backend interface -----------------------------------------------------------------

    def generate(self, requests: Sequence[Request], params: SamplingParams) -> list[list[str]]:
        greedy = params.temperature <= 0
        n = 1 if greedy else params.n

        def one(r: Request) -> list[str]:
            fields: dict[str, Any] = {
                "temperature": params.temperature,
                "top_p": params.top_p,
                "max_tokens": params.max_new_tokens,
            }
            if params.top_k is not None:
                fields["top_k"] = params.top_k
            if n == 1 or self.settings.n_per_request:
                texts = _texts(self._complete(r.prompt, n=n, seed=r.seed, **fields))
                if len(texts) < n:
                    raise self._lacks(
                        "n",
                        f"{n} samples per request",
                        f"{len(texts)} choice(s) came back",
                        "set model.n_per_request=false (one request per sample)",
                    )
            else:
                texts = [_texts(self._complete(r.prompt, n=1, seed=r.seed + k, **fields))[0] for k in range(n)]
            return texts[:1] * params.n if greedy else texts[:n]

        return self._map(one, requests, "generate")

    def score_labels(self, requests: Sequence[Request], sampling: SamplingParams | None = None) -> list[LabelScores]:

        def one(r: Request) -> LabelScores:
            if self.settings.endpoint == "chat":
                reply = self._complete(
                    r.prompt, max_tokens=1, temperature=0, logprobs=True, top_logprobs=self.settings.top_logprobs
                )
            else:
                reply = self._complete(r.prompt, max_tokens=1, temperature=0, logprobs=self.settings.top_logprobs)
            field = missing_logprobs_field(reply)
            if field:
                raise self._lacks(
                    field,
                    "scoring=logprob",
                    f"its reply has no {field}",
                    "use scoring=generate, or a server that returns them",
                )
            top = first_token_top_logprobs(reply)
            scores, exact = label_scores_from_top(top, text_label_keys(top, r.labels), sampling)
            if not exact and not self._warned_inexact:
                self._warned_inexact = True
                log.warning(
                    "model %s: the first-token distribution is rebuilt from the top %d tokens; with a "
                    "temperature and no top_k <= %d it is approximate (tail as one token)",
                    self.name,
                    self.settings.top_logprobs,
                    self.settings.top_logprobs,
                )
            return scores

        return self._map(one, requests, "score_labels")

    def score_options(self, requests: Sequence[Request]) -> list[OptionScores]:
        if self.settings.endpoint != "completions":
            raise UserError(
                f"model {self.name}: scoring=cloze needs prompt log-probabilities: set "
                f"model.endpoint=completions (a server that supports echo), or use scoring=logprob"
            )

        def one(r: Request) -> OptionScores:
            loglik = []
            for option in r.options:
                prompt = r.prompt + continuation_text(r.prompt, option, r.continuation_prefix)
                reply = self._post(
                    "completions",
                    {
                        "model": self.settings.model,
                        "prompt": prompt,
                        "max_tokens": 1,
                        "echo": True,
                        "logprobs": 0,
                        "temperature": 0,
                    },
                )
                if not (_choice_logprobs(reply).get("text_offset")):
                    raise self._lacks(
                        "echo",
                        "scoring=cloze",
                        "its reply has no prompt logprobs",
                        "use scoring=generate, or a server that echoes the prompt's logprobs",
                    )
                loglik.append(echo_loglik(reply, start=len(r.prompt), end=len(prompt)))
            return option_scores(loglik, r.options)

        return self._map(one, requests, "score_options")


def retry_after_s(value: str) -> float | None:
    """Seconds a Retry-After header asks to wait: a number of seconds or an HTTP date (RFC 9110); None when it is
    neither.

    >>> retry_after_s("3"), retry_after_s("Thu, 01 Jan 1970 00:00:00 GMT"), retry_after_s("soon")
    (3.0, 0.0, None)
    """
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _texts(reply: dict[str, Any]) -> list[str]:
    """The choices' texts; truncated where `finish_reason` is "length" (max_tokens hit), unknown where absent."""
    choices = sorted(reply.get("choices") or [], key=lambda c: c.get("index", 0))
    texts = [(c.get("message") or {}).get("content") if "message" in c else c.get("text") for c in choices]
    reasons = [c.get("finish_reason") for c in choices]
    return [completion(t or "", reason) for t, reason in zip(texts, reasons)]


def _choice_logprobs(reply: dict[str, Any]) -> dict[str, Any]:
    """The first choice's `logprobs` object; {} where the server sent none."""
    return (reply.get("choices") or [{}])[0].get("logprobs") or {}


def missing_logprobs_field(reply: dict[str, Any]) -> str | None:
    """Which field a reply to a `logprobs`/`top_logprobs` request lacks: "logprobs" (none sent), "top_logprobs"
    (no alternatives for the first token), or None (a chat or a completions reply with both).

    >>> missing_logprobs_field({"choices": [{"message": {"content": "A"}}]})
    'logprobs'
    >>> missing_logprobs_field({"choices": [{"logprobs": {"content": [{"token": "A", "logprob": -0.1}]}}]})
    'top_logprobs'
    >>> missing_logprobs_field({"choices": [{"logprobs": {"tokens": ["A"], "top_logprobs": [{"A": -0.2}]}}]})
    """
    logprobs = _choice_logprobs(reply)
    if not logprobs:
        return "logprobs"
    if "content" in logprobs:  # chat
        alternatives = (logprobs.get("content") or [{}])[0].get("top_logprobs")
    else:  # completions
        alternatives = (logprobs.get("top_logprobs") or [None])[0]
    return None if alternatives else "top_logprobs"


def first_token_top_logprobs(reply: dict[str, Any]) -> dict[str, float]:
    """token text -> logprob of the first generated token's alternatives, from a chat or a completions reply.

    >>> first_token_top_logprobs({"choices": [{"logprobs": {"content": [{"token": "A", "logprob": -0.1,
    ...     "top_logprobs": [{"token": "A", "logprob": -0.1}, {"token": " B", "logprob": -2.5}]}]}}]})
    {'A': -0.1, ' B': -2.5}
    >>> first_token_top_logprobs(
    ...     {"choices": [{"logprobs": {"tokens": ["A"], "top_logprobs": [{"A": -0.2, "C": -3.0}]}}]})
    {'A': -0.2, 'C': -3.0}
    """
    logprobs = _choice_logprobs(reply)
    if "content" in logprobs:  # chat
        first = (logprobs.get("content") or [{}])[0]
        top = {item["token"]: float(item["logprob"]) for item in first.get("top_logprobs") or []}
        if "token" in first:
            top.setdefault(first["token"], float(first["logprob"]))
        return top
    tops = logprobs.get("top_logprobs") or [{}]  # completions
    top = {token: float(lp) for token, lp in (tops[0] or {}).items()}
    tokens, token_logprobs = logprobs.get("tokens") or [], logprobs.get("token_logprobs") or []
    if tokens and token_logprobs and token_logprobs[0] is not None:  # a log-probability not sent is not 0 (certain)
        top.setdefault(tokens[0], float(token_logprobs[0]))
    return top


def echo_loglik(reply: dict[str, Any], *, start: int, end: int) -> float:
    """Sum of the echoed prompt's token log-probabilities at character offsets `start` <= offset < `end` (the
    continuation; from `end` on lies the token the server generated).

    >>> echo_loglik({"choices": [{"logprobs": {"tokens": ["Q", ":", " yes", "!"],
    ...     "token_logprobs": [None, -1.0, -0.5, -3.0], "text_offset": [0, 1, 2, 6]}}]}, start=2, end=6)
    -0.5
    """
    logprobs = _choice_logprobs(reply)
    total = 0.0
    for offset, lp in zip(logprobs.get("text_offset") or [], logprobs.get("token_logprobs") or []):
        if start <= offset < end and lp is not None and not math.isnan(lp):
            total += float(lp)
    return total
