"""Hugging Face transformers causal LMs behind the batched `Backend`; one job a file:

- settings.py: `HFSettings`, its config keys: the `model` config node as one typed value
- backend.py: `HFBackend`, its identity, wiring the parts below
- loading.py: where the weights come from (package, local path, hub) and loading them
- gguf_cache.py: the float copy of a GGUF on disk, converted once per file
- forward.py: forward passes in left-padded batches, counting the tokens fed
- packing.py: prompts packed into prefix trees and their tree-masked pass
- tree_attention.py: a packed pass's attention in blocks of queries, each against the keys it sees (CPU)
- scoring.py: label probabilities and continuation log-likelihoods from logits
- generation.py: the seeded sampling loop

The text rules it shares with the vllm and openai backends (chat wrapping, continuations, label spellings)
are in src/backends/text.py.
"""

from src.backends.hf.backend import HFBackend
from src.backends.hf.packing import PrefixPack, pack_prefix_trees
from src.backends.hf.settings import CONFIG_KEYS, HFSettings

__all__ = ["CONFIG_KEYS", "HFBackend", "HFSettings", "PrefixPack", "pack_prefix_trees"]
