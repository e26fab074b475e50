"""Tiny real models for the HF backend's tests: randomly initialised 2-layer causal LMs of several architectures
(llama, GPT-2, OPT, Bloom, GPT-NeoX) and a byte-level tokenizer, saved to a folder as a hub model or a training
loop's checkpoint is."""

from __future__ import annotations

from pathlib import Path
from typing import Any

ARCHITECTURES = ("llama", "gpt2", "opt", "bloom", "gpt_neox")


def tiny_config(arch: str, vocab_size: int) -> Any:
    """A 2-layer config of `arch`, each under its own field names (GPT-2's n_embd, OPT's ffn_dim, Bloom's n_head:
    no intermediate_size for most of them), the special ids of the byte-level tokenizer (pad 0, end 1)."""
    import transformers as tf

    ids = dict(vocab_size=vocab_size, pad_token_id=0, eos_token_id=1, bos_token_id=None)
    if arch == "llama":
        return tf.LlamaConfig(
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            max_position_embeddings=512,
            initializer_range=0.2,
            **ids,
        )
    if arch == "gpt2":
        return tf.GPT2Config(n_embd=32, n_layer=2, n_head=4, n_positions=512, initializer_range=0.2, **ids)
    if arch == "opt":
        return tf.OPTConfig(
            hidden_size=32, ffn_dim=64, num_hidden_layers=2, num_attention_heads=4, max_position_embeddings=512, **ids
        )
    if arch == "bloom":
        return tf.BloomConfig(hidden_size=32, n_layer=2, n_head=4, initializer_range=0.2, **ids)
    if arch == "gpt_neox":
        return tf.GPTNeoXConfig(
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=4,
            max_position_embeddings=512,
            initializer_range=0.2,
            **ids,
        )
    raise ValueError(f"no tiny config for {arch!r}; the architectures are {', '.join(ARCHITECTURES)}")


def save_tiny_model(path: Path, *, arch: str = "llama", seed: int, chat_template: str | None = None) -> Path:
    """Save a tiny `arch` model (weights from `seed`: another seed is other weights, same sizes and file names) and
    its tokenizer (with `chat_template` where given) to `path`."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import AutoModelForCausalLM, PreTrainedTokenizerFast

    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    vocab = {"<pad>": 0, "<eos>": 1, **{c: i + 2 for i, c in enumerate(alphabet)}}
    core = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=core, pad_token="<pad>", eos_token="<eos>")
    if chat_template is not None:
        tokenizer.chat_template = chat_template
    torch.manual_seed(seed)
    AutoModelForCausalLM.from_config(tiny_config(arch, len(vocab))).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def save_tiny_llama(path: Path, *, seed: int, chat_template: str | None = None) -> Path:
    """The tiny llama most tests use (`save_tiny_model` with arch llama)."""
    return save_tiny_model(path, arch="llama", seed=seed, chat_template=chat_template)
