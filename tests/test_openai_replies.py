"""How an OpenAI-compatible server's reply is read (docs/serving.md): the first token's log-probabilities for
`logprob` scoring, the echoed prompt's for the cloze scorings, and the wait a `Retry-After` header asks for. On
hand-written replies in the shapes the chat and completions endpoints send."""

from __future__ import annotations

import math

import pytest

from src.backends.openai_backend import echo_loglik, first_token_top_logprobs, retry_after_s


@pytest.mark.promise("docs/serving.md", "logprob scoring reads the first token's top log-probabilities")
def test_the_sampled_first_token_counts_beside_its_alternatives_when_the_server_lists_it_apart():
    chat = {
        "choices": [
            {
                "logprobs": {
                    "content": [
                        {"token": "C", "logprob": -0.3, "top_logprobs": [{"token": "A", "logprob": -1.2}]},
                        {"token": "!", "logprob": -5.0, "top_logprobs": []},
                    ]
                }
            }
        ]
    }
    assert first_token_top_logprobs(chat) == {"A": pytest.approx(-1.2), "C": pytest.approx(-0.3)}
    completions = {
        "choices": [{"logprobs": {"tokens": ["B", "!"], "token_logprobs": [-0.7, -4.0], "top_logprobs": [{"A": -1.5}]}}]
    }
    assert first_token_top_logprobs(completions) == {"A": pytest.approx(-1.5), "B": pytest.approx(-0.7)}
    # a token the model is certain of has log-probability 0 (probability 1)
    sure = {"choices": [{"logprobs": {"tokens": ["B"], "token_logprobs": [0.0], "top_logprobs": [{}]}}]}
    assert first_token_top_logprobs(sure) == {"B": 0.0}
    # one sent without its log-probability is not taken for certain: only the listed alternatives count
    for unsent in ({"tokens": ["B"], "top_logprobs": [{"A": -1.5}]}, {"tokens": ["B"], "token_logprobs": [None]}):
        assert first_token_top_logprobs({"choices": [{"logprobs": {"top_logprobs": [{"A": -1.5}], **unsent}}]}) == {
            "A": pytest.approx(-1.5)
        }


@pytest.mark.promise("docs/serving.md", "logprob scoring reads the first token's top log-probabilities")
def test_a_listed_alternative_keeps_its_own_log_probability():
    chat = {
        "choices": [
            {
                "logprobs": {
                    "content": [{"token": "A", "logprob": -0.2, "top_logprobs": [{"token": "A", "logprob": -0.25}]}]
                }
            }
        ]
    }
    assert first_token_top_logprobs(chat) == {"A": pytest.approx(-0.25)}


@pytest.mark.promise("docs/serving.md", "cloze scoring sums the echoed continuation's token log-probabilities")
def test_the_cloze_log_likelihood_is_the_sum_over_every_token_of_the_continuation():
    reply = {
        "choices": [
            {
                "logprobs": {
                    "tokens": ["Q", ":", " ye", "s", " ok", "!"],
                    "token_logprobs": [None, -1.0, -0.5, -0.25, math.nan, -3.0],
                    "text_offset": [0, 1, 2, 5, 6, 9],
                }
            }
        ]
    }
    # " yes ok" is offsets 2..9: -0.5 - 0.25, the NaN skipped; the prompt before and the generated "!" are not
    assert echo_loglik(reply, start=2, end=9) == pytest.approx(-0.75, abs=1e-12)


@pytest.mark.promise("docs/serving.md", "a 429 or 503 answer is retried after its Retry-After")
def test_retry_after_waits_the_seconds_asked_never_a_negative_wait():
    assert retry_after_s("0.5") == pytest.approx(0.5, abs=1e-12)
    assert retry_after_s("-3") == 0.0


@pytest.mark.promise("docs/serving.md", "generate reads every sampled choice's text, truncated where max_tokens cut it")
@pytest.mark.parametrize("endpoint", ["chat", "completions"])
def test_generated_samples_come_in_the_servers_index_order_each_marked_truncated_or_not(monkeypatch, endpoint):
    from src.backends.base import SamplingParams

    from .test_openai_backend import REQUESTS, SECRET, FakeServer, backend

    def choice(index: int, text: str | None, reason: str | None) -> dict:
        body = {"message": {"role": "assistant", "content": text}} if endpoint == "chat" else {"text": text}
        return {"index": index, **body, **({"finish_reason": reason} if reason else {})}

    monkeypatch.setenv("FAKE_OPENAI_KEY", SECRET)
    with FakeServer() as server:
        # sent out of order, as a server may: the index says which sample each is
        server.reply = lambda path, payload: {
            "choices": [choice(2, "C", None), choice(0, "A long", "length"), choice(1, None, "stop")]
        }
        (samples,) = backend(server, endpoint=endpoint).generate(
            REQUESTS[:1], SamplingParams(n=3, temperature=0.7, max_new_tokens=2)
        )
    assert samples == ["A long", "", "C"]
    assert [s.truncated for s in samples] == [True, False, None]  # None: the server did not say
    with FakeServer() as server:  # a server that numbers no choice: its order is the samples'
        server.reply = lambda path, payload: {"choices": [{"text": "B"}, {"text": "A"}]}
        (samples,) = backend(server, endpoint="completions").generate(
            REQUESTS[:1], SamplingParams(n=2, temperature=0.7, max_new_tokens=2)
        )
    assert samples == ["B", "A"]
