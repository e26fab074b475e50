"""vLLM offline engine (GPU) behind the batched `Backend`: `pip install .[vllm]`.

- Automatic prefix caching is on: the variants of one question share the instruction, few-shot examples
  and question text, and vLLM computes those KV blocks once.
- generate: `n=R` samples per request in one SamplingParams, seeded with the trial seed (vLLM's per-request
  seed), so a rerun reproduces its samples on the same hardware and engine version.
- score_labels: `max_tokens=1` with `logprobs=top_logprobs`; vLLM returns the first token's raw (temperature 1)
  log-probabilities, mapped to labels through the label tokens (src/backends/logprobs.py). `top_logprobs: -1`
  asks for the whole vocabulary (vLLM >= 0.10), which makes exact first-token sampling exact at any setting.
- score_options (cloze): `prompt_logprobs` of prompt + option, summed over the option's tokens.
- Both scorings read log-probabilities by token id, so they ask vLLM for no text (`detokenize=False`): vLLM
  otherwise decodes every token it returns, the whole vocabulary per prompt with `top_logprobs: -1`, which made
  label scoring three times slower on vLLM's CPU build for the same numbers.
- `tensor_parallel_size` spreads a large model over GPUs.
- The engine runs in a child process of vLLM's (its engine core). `close()` ends it; the runner closes the
  backends it kept when the command ends (on success, an error, SIGTERM or Ctrl-C), and an exit handler does it for
  any other caller, so no job waits forever at exit on an idle engine and no engine outlives its job. A SIGTERM or
  Ctrl-C while the engine starts takes effect once it has started (`signals_held`).
- stdout is data: vLLM logs to stdout at INFO unless told otherwise, so before vLLM is imported its log stream is set
  to stderr and its level to WARNING (`VLLM_LOGGING_LEVEL=INFO` in the environment brings its lines back, on stderr);
  a vLLM that another library imported first has its handlers moved so after.
- Seeded sampling on vLLM's CPU build: a prompt that chunked prefill splits makes the CPU sampler rewind a seeded
  generator, which torch's CPU generator cannot do (`CPU Generator does not use offset`, the engine dies). On a CPU,
  chunked prefill is therefore off unless `model.enable_chunked_prefill=true`, and that setting with sampling at a
  temperature is refused in one line before any request is sent. GPUs keep vLLM's default.

vLLM is imported only when the model loads; without it the backend says `pip install .[vllm]` in one line.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import signal
import sys
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

from src.backends import weights
from src.backends.base import (
    Backend,
    Completion,
    LabelScores,
    OptionScores,
    Request,
    SamplingParams,
    refuse_unknown_keys,
)
from src.backends.logprobs import label_scores_from_top
from src.backends.text import (
    chat_text,
    completion,
    label_token_ids,
    option_continuations,
    option_scores,
    plain_ids,
    prompt_ids,
    uses_chat,
)
from src.common import stdout_data
from src.common.errors import UserError

log = logging.getLogger(__name__)

# vLLM reads these when it is first imported (vllm.envs, vllm.logger): its stream is always stderr (its default would
# mix its lines with the JSON lines scripts read), its level the user's where set
LOG_STREAM, LOG_LEVEL = "ext://sys.stderr", "WARNING"
HELD_SIGNALS = (signal.SIGTERM, signal.SIGINT)  # what stops a job (Slurm's cancel, Ctrl-C): `signals_held`


@dataclass(frozen=True)
class VLLMSettings:
    """A `model` config node with backend=vllm, less `backend`: build it with `from_config`."""

    name: str = "vllm"
    path: str | None = None  # hub id or local folder
    revision: str | None = None
    tokenizer: str | None = None
    dtype: str = "auto"
    quantization: str | None = None
    tensor_parallel_size: int = 1  # GPUs one model is split over
    gpu_memory_utilization: float = 0.9
    max_model_len: int | None = None
    enable_prefix_caching: bool = True  # shared prompt prefixes computed once (the variants of a question)
    top_logprobs: int = 20  # first-token alternatives for label scoring; -1 = whole vocabulary (exact)
    trust_remote_code: bool = False
    seed: int = 0  # engine seed; requests carry their own trial seeds
    enforce_eager: bool = False
    enable_chunked_prefill: bool | None = None  # None: off on a CPU (seeded sampling), vLLM's default on a GPU
    chat: bool = False

    def __post_init__(self) -> None:
        if not self.path:
            raise UserError(f"model {self.name}: set model.path to a hub id or a local model folder")
        if int(self.tensor_parallel_size) < 1:
            raise UserError(f"model.tensor_parallel_size={self.tensor_parallel_size} must be at least 1")

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any], *, chat: bool) -> VLLMSettings:
        """`chat` comes from the prompt config; a model config with `chat: false` (a base model) overrides it."""
        refuse_unknown_keys(cfg, CONFIG_KEYS, "vllm")
        kwargs = {k: v for k, v in cfg.items() if k not in ("backend", "chat")}
        return cls(**kwargs, chat=chat and bool(cfg.get("chat", True)))


# Keys of a `model` config node with backend=vllm: the settings' fields and the node's own `backend`.
CONFIG_KEYS = frozenset({"backend", *(f.name for f in fields(VLLMSettings))})


class VLLMBackend(Backend):
    """A model served by an in-process `vllm.LLM`. Build it with `VLLMBackend.from_config(cfg, chat=...)`."""

    def __init__(self, settings: VLLMSettings) -> None:
        s = self.settings = settings
        self.name = s.name
        top_logprobs = int(s.top_logprobs)
        self.engine_args: dict[str, Any] = dict(
            model=s.path,
            revision=s.revision,
            tokenizer=s.tokenizer,
            dtype=s.dtype,
            quantization=s.quantization,
            tensor_parallel_size=int(s.tensor_parallel_size),
            gpu_memory_utilization=float(s.gpu_memory_utilization),
            max_model_len=s.max_model_len,
            enable_prefix_caching=bool(s.enable_prefix_caching),
            max_logprobs=-1 if top_logprobs < 0 else max(20, top_logprobs),
            trust_remote_code=bool(s.trust_remote_code),
            seed=int(s.seed),
            enforce_eager=bool(s.enforce_eager),
            enable_chunked_prefill=None if s.enable_chunked_prefill is None else bool(s.enable_chunked_prefill),
        )
        self.top_logprobs = top_logprobs
        self.chat = bool(s.chat)
        # what it loads, by content alone (src/backends/weights.py): a folder, a local .gguf file or a hub snapshot
        self.content: weights.ModelContent = weights.model_content(str(s.path), revision=s.revision)
        if self.content.repo is None:  # a local folder or file: the engine gets its path with `~` expanded
            self.engine_args["model"] = self.content.source
        elif self.content.commit:  # a hub id: the snapshot's commit, which the engine then loads
            self.engine_args["revision"] = self.content.commit
        head = self.content.identity_fields("vllm")
        if s.tokenizer:  # a tokenizer of its own: part of what answers, a local one given as the identity read it
            tokenizer = weights.model_content(s.tokenizer)
            head += f"|tokenizer=sha256:{tokenizer.digest}"
            if tokenizer.repo is None:
                self.engine_args["tokenizer"] = tokenizer.source
        self._identity = f"{head}|revision={s.revision}|dtype={s.dtype}|quantization={s.quantization}|chat={self.chat}"
        self.llm: Any = None
        self._vllm: Any = None
        self._label_ids: dict[tuple[str, ...], list[set[int]]] = {}
        self._warned_inexact = False

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any], *, chat: bool) -> VLLMBackend:
        """The backend of a `model` config node (`VLLMSettings.from_config`)."""
        return cls(VLLMSettings.from_config(cfg, chat=chat))

    @property
    def identity(self) -> str:
        return self._identity

    def load(self) -> None:
        if self.llm is not None:
            return
        self._vllm = import_vllm()
        args = {k: v for k, v in self.engine_args.items() if v is not None}
        if args.get("enable_chunked_prefill") is None and on_cpu():
            args["enable_chunked_prefill"] = False  # seeded sampling on the CPU build (the module docstring)
        log.info("model %s: starting vLLM's engine on %s", self.name, self.content.source)
        engine: Any = None
        refused: Exception | None = None
        with signals_held() as held:
            try:
                engine = self.llm = self._vllm.LLM(**args)
            except (RuntimeError, ValueError) as err:  # a setting the engine refuses: its own lines say which
                refused = err
        if engine is not None:
            # registered after vLLM's imports, so it runs before multiprocessing's own exit handler, which would
            # wait forever on the idle engine process
            atexit.register(self.close)
        if held:  # told to stop while the engine started: end it, then stop as the signal asks (its handler)
            self.close()
            signal.raise_signal(held[0])
            return self.load()  # a handler that let the job go on: start again
        if refused is not None:  # else the engine started (a stop signal returned above)
            raise UserError(
                f"model {self.name}: vLLM's engine did not start ({first_line(refused)}); its log above on stderr says "
                f"why.{start_hint(refused, share=float(args['gpu_memory_utilization']), cpu=on_cpu())}"
            )
        self.tokenizer = engine.get_tokenizer()
        self.chat = uses_chat(self.tokenizer, chat=self.chat, name=self.name)

    def close(self) -> None:
        """End the engine and its processes; the backend loads again if asked again. Idempotent."""
        llm, self.llm = self.llm, None
        if llm is None:
            return
        atexit.unregister(self.close)
        engine_core = getattr(getattr(llm, "llm_engine", None), "engine_core", None)
        if engine_core is not None:
            engine_core.shutdown()

    def check_sampling(self, params: SamplingParams) -> None:
        """Refuse, before any request, sampling that this engine cannot repeat from its seeds (the module
        docstring): seeded requests with chunked prefill on vLLM's CPU build."""
        if params.temperature <= 0 or not self.engine_args.get("enable_chunked_prefill"):
            return
        if on_cpu():
            raise UserError(
                f"model {self.name}: vLLM's CPU build cannot sample seeded requests with chunked prefill (torch's CPU "
                f"generator cannot rewind; the engine dies); set model.enable_chunked_prefill=false or leave it unset"
            )

    # -- the Backend interface -----------------------------------------------------------------

    def generate(self, requests: Sequence[Request], params: SamplingParams) -> list[list[str]]:
        if not requests:
            return []
        self.check_sampling(params)
        self.load()
        greedy = params.temperature <= 0
        n = 1 if greedy else params.n
        sampling = [
            self._sampling(
                n=n,
                temperature=params.temperature,
                top_k=params.top_k,
                top_p=params.top_p,
                max_tokens=params.max_new_tokens,
                seed=None if greedy else r.seed,
            )
            for r in requests
        ]
        outputs = self._run(requests, sampling)
        # finish_reason "length": generation stopped at max_tokens (truncated); "stop": at an end token
        texts: list[list[str]] = [[_completion(c) for c in sorted(o.outputs, key=lambda c: c.index)] for o in outputs]
        return [t * params.n if greedy else t for t in texts]

    def score_labels(self, requests: Sequence[Request], sampling: SamplingParams | None = None) -> list[LabelScores]:
        if not requests:
            return []
        self.load()
        first_token = self._sampling(
            n=1,
            temperature=0.0,
            max_tokens=1,
            logprobs=self.top_logprobs if self.top_logprobs >= 0 else -1,
            detokenize=False,  # label scores are read by token id: no text wanted (module docstring)
        )
        outputs = self._run(requests, [first_token] * len(requests))
        out = []
        for r, o in zip(requests, outputs):
            top = first_token_logprobs(o)
            scores, exact = label_scores_from_top(
                top, self._label_token_ids(r.labels), sampling, complete=self.top_logprobs < 0
            )
            if not exact and not self._warned_inexact:
                self._warned_inexact = True
                log.warning(
                    "model %s: the first-token distribution is rebuilt from the top %d tokens; set "
                    "model.top_logprobs=-1 (whole vocabulary) or a top_k <= it to make it exact",
                    self.name,
                    self.top_logprobs,
                )
            out.append(scores)
        return out

    def score_options(self, requests: Sequence[Request]) -> list[OptionScores]:
        if not requests:
            return []
        self.load()
        pairs, spans = [], []
        for r in requests:
            text = self._prompt_text(r.prompt)
            context, conts = option_continuations(
                self.tokenizer, text, r.options, chat=self.chat, prefix=r.continuation_prefix
            )
            pairs += [context + cont for cont in conts]
            spans += [len(context)] * len(conts)
        sampling = self._sampling(n=1, temperature=0.0, max_tokens=1, prompt_logprobs=0, detokenize=False)
        outputs = self.llm.generate([self._vllm_tokens(ids) for ids in pairs], sampling, use_tqdm=False)
        logliks = [continuation_loglik(o.prompt_logprobs, ids, start) for o, ids, start in zip(outputs, pairs, spans)]
        results, k = [], 0
        for r in requests:
            results.append(option_scores(logliks[k : k + len(r.options)], r.options))
            k += len(r.options)
        return results

    # -- helpers -------------------------------------------------------------------------------

    def _sampling(self, **kwargs: Any) -> Any:
        if kwargs.get("top_k") is None:
            kwargs["top_k"] = -1  # all tokens (vLLM's "off")
        if kwargs.get("seed") is None:
            kwargs.pop("seed", None)
        return self._vllm.SamplingParams(**kwargs)

    def _run(self, requests: Sequence[Request], sampling: list[Any]) -> list[Any]:
        prompts = [self._vllm_tokens(self._encode(self._prompt_text(r.prompt))) for r in requests]
        outputs: list[Any] = self.llm.generate(prompts, sampling, use_tqdm=False)  # the job's one bar counts
        return outputs

    def _vllm_tokens(self, ids: list[int]) -> Any:
        return {"prompt_token_ids": ids}  # vllm.inputs.TokensPrompt is a TypedDict of this shape

    def model_input(self, prompt: str) -> str | None:
        """The text the model is given for `prompt` (chat template applied when used); None before loading."""
        return self._prompt_text(prompt) if self.tokenizer is not None else None

    def _prompt_text(self, prompt: str) -> str:
        return chat_text(self.tokenizer, prompt) if self.chat else prompt

    def _encode(self, text: str) -> list[int]:
        return prompt_ids(self.tokenizer, text, chat=self.chat)

    def _label_token_ids(self, labels: tuple[str, ...]) -> list[set[int]]:
        if labels not in self._label_ids:
            self._label_ids[labels] = label_token_ids(lambda s: plain_ids(self.tokenizer, s), labels)
        return self._label_ids[labels]


def _completion(output: Any) -> Completion:
    """A vLLM CompletionOutput's text, truncated when it finished by length (None when it does not say)."""
    return completion(output.text, getattr(output, "finish_reason", None))


@contextlib.contextmanager
def signals_held() -> Iterator[list[int]]:
    """SIGTERM and SIGINT that arrive while vLLM starts its engine, held (their numbers, in order) for the caller to
    deliver once it has started. The start waits in pyzmq's poll, which retries when a signal interrupts it and drops
    the exception the Python handler raised: without this, Slurm's cancel or Ctrl-C during the start is lost and the
    job runs on. Signal handlers can be set only from the main thread; elsewhere nothing is held.
    """
    held: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield held
        return
    previous = {sig: signal.signal(sig, lambda signum, frame: held.append(signum)) for sig in HELD_SIGNALS}
    try:
        yield held
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def quiet_vllm_logging(environ: dict[str, str] | os._Environ[str] = os.environ) -> None:
    """vLLM's log lines on stderr always (stdout is data: vLLM's default stream is the other one), at WARNING
    unless the environment sets `VLLM_LOGGING_LEVEL`.

    >>> env = {"VLLM_LOGGING_STREAM": "ext://sys.stderr", "VLLM_LOGGING_LEVEL": "INFO"}
    >>> quiet_vllm_logging(env); env["VLLM_LOGGING_STREAM"], env["VLLM_LOGGING_LEVEL"]
    ('ext://sys.stderr', 'INFO')
    """
    environ["VLLM_LOGGING_STREAM"] = LOG_STREAM
    environ.setdefault("VLLM_LOGGING_LEVEL", LOG_LEVEL)


def on_cpu() -> bool:
    """Whether the installed vLLM runs on the CPU (its CPU build)."""
    import_vllm()  # first: its logging set, or one line saying how to install it
    from vllm.platforms import current_platform  # local: vLLM is optional

    return bool(current_platform.is_cpu())


def import_vllm() -> Any:
    """vLLM with its engine imported (its `LLM`, which recent versions import on first use), its logging set; one
    line naming what failed where it cannot be imported."""
    quiet_vllm_logging()
    try:
        import vllm

        vllm.LLM, vllm.SamplingParams  # noqa: B018 - imported here, so that a broken install fails here
    except ImportError:
        raise UserError("model.backend=vllm needs vLLM (a GPU machine): pip install .[vllm]") from None
    except RuntimeError as err:  # an extension that does not load (a torch operator missing), not a setting
        reason = first_line(err)
        if "torchvision" in reason:  # vLLM's CPU build pulls torchvision's CUDA build (docs/serving.md)
            fix = "on vLLM's CPU build, remove the CUDA builds it pulls: pip uninstall -y torchvision torchaudio "
            fix += "torchcodec triton (docs/serving.md)"
        else:
            fix = "check its install (docs/serving.md)"
        raise UserError(f"model.backend=vllm: vLLM could not be imported ({reason}); {fix}") from None
    quiet_vllm_logger()
    return vllm


def quiet_vllm_logger() -> None:
    """vLLM's handlers moved to stderr, at the level `quiet_vllm_logging` set: vLLM reads its environment once, when
    first imported, and another library may have imported it before this backend set it (its lines then went to
    stdout at INFO). Where this backend imported it first, its handlers are already so."""
    level = os.environ.get("VLLM_LOGGING_LEVEL", LOG_LEVEL).upper()
    for handler in logging.getLogger("vllm").handlers:
        if isinstance(handler, logging.StreamHandler):
            if stdout_data.is_stdout(handler.stream):
                handler.setStream(sys.stderr)
            handler.setLevel(level)


def first_line(err: BaseException) -> str:
    """An exception's first line, or its type's name where it says nothing.

    >>> first_line(RuntimeError("Engine core initialization failed.\\nSee root cause above.")), first_line(ValueError())
    ('Engine core initialization failed.', 'ValueError')
    """
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__


CPU_SHARE = 0.25  # of the machine's memory, on vLLM's CPU build: what docs/serving.md starts the engine with
SPAWNED_TOO_EARLY = "bootstrapping phase"  # multiprocessing's error for a process started while a module imports


def start_hint(err: BaseException, *, share: float, cpu: bool) -> str:
    """What to try after vLLM's engine did not start: only for a cause its error or the settings show.

    >>> start_hint(RuntimeError("Engine core initialization failed."), share=0.9, cpu=True)[:60]
    " On vLLM's CPU build model.gpu_memory_utilization is the sha"
    >>> start_hint(RuntimeError("Engine core initialization failed."), share=0.25, cpu=True)
    ''
    >>> start_hint(RuntimeError("Engine core initialization failed."), share=0.9, cpu=False)
    ''
    """
    if SPAWNED_TOO_EARLY in str(err):
        return (
            " vLLM starts its engine in a new process, which imports the script again: put the script's code under "
            '`if __name__ == "__main__":`'
        )
    if cpu and share > CPU_SHARE:  # the share asked for (vLLM's default 0.9) is refused while others hold memory
        return (
            f" On vLLM's CPU build model.gpu_memory_utilization is the share of the machine's memory: try {CPU_SHARE} "
            "(docs/serving.md)"
        )
    return ""


def first_token_logprobs(output: Any) -> dict[int, float]:
    """token id -> logprob of the first generated token's alternatives, from a vLLM RequestOutput.

    >>> from types import SimpleNamespace as NS
    >>> o = NS(outputs=[NS(logprobs=[{7: NS(logprob=-0.5, rank=1), 9: NS(logprob=-1.5, rank=2)}])])
    >>> first_token_logprobs(o)
    {7: -0.5, 9: -1.5}
    """
    steps = output.outputs[0].logprobs or [{}]
    return {int(token): float(getattr(lp, "logprob", lp)) for token, lp in (steps[0] or {}).items()}


def continuation_loglik(prompt_logprobs: Sequence[Any] | None, ids: Sequence[int], start: int) -> float:
    """Sum of the log-probabilities of ids[start:] from vLLM's `prompt_logprobs` (one dict per prompt token; the
    token's own entry is always present, the first position is None).

    >>> from types import SimpleNamespace as NS
    >>> continuation_loglik([None, {5: NS(logprob=-1.0)}, {6: NS(logprob=-0.25), 2: NS(logprob=-3.0)}], [4, 5, 6], 1)
    -1.25
    """
    total = 0.0
    for position in range(max(start, 1), len(ids)):
        entry = (prompt_logprobs or [])[position] or {}
        lp = entry[ids[position]]
        total += float(getattr(lp, "logprob", lp))
    return total
