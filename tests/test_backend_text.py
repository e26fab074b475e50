"""The text rules the hf, vllm and openai backends share (src/backends/text.py), each tested once: the pure rules
by their doctests, the rules that call a tokenizer on a fake one."""

from __future__ import annotations

import doctest
import importlib
import logging

import pytest

from src.backends import text


class FakeTokenizer:
    """Greedy longest match over a small vocabulary; "<s>" is prepended when special tokens are asked for."""

    VOCAB = {"<s>": 0, "A": 1, " A": 2, "B": 3, "Q": 4, ":": 5, " ": 6, "x": 7, ": x": 8, "?": 9}
    chat_template = "{{ messages }}"

    def __call__(self, text, add_special_tokens=True):
        ids = [0] if add_special_tokens else []
        while text:
            token = max((t for t in self.VOCAB if text.startswith(t)), key=len)
            ids.append(self.VOCAB[token])
            text = text[len(token) :]
        return {"input_ids": ids}

    def apply_chat_template(self, messages, add_generation_prompt, tokenize):
        assert add_generation_prompt and not tokenize
        return "".join(f"<{m['role']}>{m['content']}" for m in messages) + "<assistant>"


@pytest.mark.parametrize(
    "module", ["src.backends.text", "src.backends.logprobs", "src.backends.vllm_backend", "src.backends.openai_backend"]
)
def test_doctests_of_the_backend_modules_without_torch(module):
    failures, tried = doctest.testmod(importlib.import_module(module))
    assert tried > 0 and failures == 0


def test_prompt_ids_add_special_tokens_only_to_raw_prompts():
    tok = FakeTokenizer()
    assert text.prompt_ids(tok, "Q?", chat=False) == [0, 4, 9]
    assert text.prompt_ids(tok, "Q?", chat=True) == [4, 9], "a chat-templated text carries its own special tokens"
    assert text.plain_ids(tok, "Q?") == [4, 9]


def test_chat_wrapping_needs_a_template_and_says_when_there_is_none(caplog):
    tok = FakeTokenizer()
    assert text.chat_text(tok, "Q?") == "<user>Q?<assistant>"
    assert text.uses_chat(tok, chat=True, name="m") and not text.uses_chat(tok, chat=False, name="m")
    bare = FakeTokenizer()
    bare.chat_template = None
    with caplog.at_level(logging.WARNING):
        assert not text.uses_chat(bare, chat=True, name="m")
    assert "no chat template" in caplog.text


def test_option_continuations_keep_the_prompts_own_tokens_where_the_boundary_merges():
    tok = FakeTokenizer()
    assert text.option_continuations(tok, "Q?", ["A", "x"], chat=False) == ([0, 4, 9], [[2], [6, 7]])
    # "Q:" + " x" encodes as "Q", ": x": the prompt's last token is merged away, so " x" is encoded alone
    assert text.option_continuations(tok, "Q:", ["x"], chat=True) == ([4, 5], [[6, 7]])
