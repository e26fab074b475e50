"""Text rules the model backends (hf, vllm, openai) share: how a prompt is wrapped and encoded, how an option
follows its prompt, how a label is spelled, how an option's log-likelihood is normalised, when a generated
text was cut short. Each rule is written here once; no torch, no server.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from src.backends.base import Completion, OptionScores

log = logging.getLogger(__name__)

Encode = Callable[[str], Sequence[int]]  # text -> token ids, no special tokens


# -- prompts -------------------------------------------------------------------------------------


def chat_messages(prompt: str) -> list[dict[str, str]]:
    """The prompt as the one user turn of a chat.

    >>> chat_messages("Q?")
    [{'role': 'user', 'content': 'Q?'}]
    """
    return [{"role": "user", "content": prompt}]


def chat_text(tokenizer: Any, prompt: str) -> str:
    """The prompt wrapped in the tokenizer's chat template, ending where the assistant's answer starts."""
    text: str = tokenizer.apply_chat_template(chat_messages(prompt), add_generation_prompt=True, tokenize=False)
    return text


def uses_chat(tokenizer: Any, *, chat: bool, name: str) -> bool:
    """Whether prompts are wrapped: asked for (`chat`) and the tokenizer has a template; warns when it has none."""
    if chat and not getattr(tokenizer, "chat_template", None):
        log.warning(
            "model %s: the prompt asks for chat but the tokenizer has no chat template; sending raw prompts", name
        )
        return False
    return chat


def prompt_ids(tokenizer: Any, text: str, *, chat: bool) -> list[int]:
    """Token ids of a prompt; a chat-templated text already carries its special tokens (BOS included)."""
    return list(tokenizer(text, add_special_tokens=not chat)["input_ids"])


def plain_ids(tokenizer: Any, text: str) -> list[int]:
    """Token ids of a piece of text (a label, a continuation) without special tokens."""
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


# -- options as continuations --------------------------------------------------------------------


def continuation_text(prompt: str, option: str, prefix: str | None = None) -> str:
    """The option as the prompt's continuation: " " + option unless the prompt ends in whitespace; with a
    `prefix` (a request's `continuation_prefix`: lm-eval's own pair), prefix + option.

    >>> continuation_text("Answer:", "Paris"), continuation_text("Answer: ", "Paris"), continuation_text("", "Paris")
    (' Paris', 'Paris', 'Paris')
    >>> continuation_text("<|im_start|>assistant", "Paris", "\\n")
    '\\nParis'
    """
    if prefix is not None:
        return prefix + option
    return option if not prompt or prompt[-1].isspace() else " " + option


def continuation_ids(
    tokenizer: Any, text: str, context: Sequence[int], option: str, *, chat: bool, prefix: str | None = None
) -> list[int]:
    """Token ids of the option after the prompt `text` (encoded as `context`): the tail of the encoded whole,
    or, where the tokenizer merges across the boundary, the prompt's own tokens kept and the continuation
    encoded alone. With a `prefix` (lm-eval's own pair) the tail, always, as lm-eval's `_encode_pair` takes it."""
    continuation = continuation_text(text, option, prefix)
    whole = prompt_ids(tokenizer, text + continuation, chat=chat)
    if prefix is not None or whole[: len(context)] == list(context):
        return whole[len(context) :]
    return plain_ids(tokenizer, continuation)


def option_continuations(
    tokenizer: Any, text: str, options: Sequence[str], *, chat: bool, prefix: str | None = None
) -> tuple[list[int], list[list[int]]]:
    """(token ids of the prompt `text`, token ids of each option as its continuation): what cloze scoring feeds."""
    context = prompt_ids(tokenizer, text, chat=chat)
    return context, [continuation_ids(tokenizer, text, context, o, chat=chat, prefix=prefix) for o in options]


def option_scores(loglik: Sequence[float], options: Sequence[str]) -> OptionScores:
    """OptionScores with each log-likelihood also divided by its option's length in UTF-8 bytes (lm-eval's
    acc_bytes; its acc_norm divides by characters, the same on ASCII; an empty option counts one byte).

    >>> option_scores([-2.0, -3.0], ["ab", "é"]).loglik_norm
    (-1.0, -1.5)
    """
    norm = tuple(x / max(1, len(option.encode("utf-8"))) for x, option in zip(loglik, options))
    return OptionScores(loglik=tuple(loglik), loglik_norm=norm)


# -- labels --------------------------------------------------------------------------------------


def label_spellings(label: str) -> tuple[str, str]:
    """The texts a model may write a label as: bare and after a space ("A", " A").

    >>> label_spellings("A")
    ('A', ' A')
    """
    return label, " " + label


def label_token_ids(encode: Encode, labels: Sequence[str]) -> list[set[int]]:
    """Per label, the first token of each spelling, less tokens that start several labels' spellings (" " when
    " 1" splits as " ", "1": it says nothing about which label). A label may be left with none.

    >>> vocab = {"A": [1], " A": [2], "B": [3], " B": [4, 3]}
    >>> label_token_ids(vocab.__getitem__, ["A", "B"])
    [{1, 2}, {3, 4}]
    >>> label_token_ids({"1": [1], " 1": [9, 1], "2": [2], " 2": [9, 2]}.__getitem__, ["1", "2"])
    [{1}, {2}]
    """
    firsts = [{ids[0] for ids in map(encode, label_spellings(label)) if ids} for label in labels]
    shared = {i for k, a in enumerate(firsts) for b in firsts[k + 1 :] for i in a & b}
    return [ids - shared for ids in firsts]


def label_spelling_ids(encode: Encode, labels: Sequence[str]) -> list[list[tuple[int, ...]]]:
    """Per label, the distinct token sequences of its spellings, sorted: the whole strings a label is scored by
    when one first token cannot tell the labels apart (labels 1 and 10 both start with "1").

    >>> vocab = {"1": [1], " 1": [9, 1], "10": [1, 0], " 10": [9, 1, 0]}
    >>> label_spelling_ids(vocab.__getitem__, ["1", "10"])
    [[(1,), (9, 1)], [(1, 0), (9, 1, 0)]]
    """
    return [sorted({tuple(encode(text)) for text in label_spellings(label)} - {()}) for label in labels]


def text_label_keys(top: Mapping[str, Any], labels: Sequence[str]) -> list[set[str]]:
    """Per label, the token texts a server returned that spell it: the label with surrounding whitespace.

    >>> [sorted(keys) for keys in text_label_keys({" A": -0.1, "A": -3.0, "B": -4.0, "Answer": -5.0}, "ABC")]
    [[' A', 'A'], ['B'], []]
    """
    return [{token for token in top if token.strip() == label} for label in labels]


# -- generated text ------------------------------------------------------------------------------


def completion(text: str, finish_reason: str | None) -> Completion:
    """A generated text, truncated when it finished by length (max tokens hit), unknown when the server did not say.

    >>> [completion("B", reason).truncated for reason in ("length", "stop", None)]
    [True, False, None]
    """
    return Completion(text, truncated=None if finish_reason is None else finish_reason == "length")
