"""`python -m src.export [config overrides] --out DIR`: the exact prompts of a study, for inference elsewhere.

A study is any job config (`model=... benchmark=... variants=... fewshot=... prompt=... limit=...`, composed and
checked as `python -m src.run` does); its prompts are the ones `src.job.runner.plan_items` renders for a native run.
Writes into DIR:

- `prompts.jsonl`: one row per trial (question x variant x repetition) in the generic format of
  `python -m src.ingest --format generic` (`src/ingest/generic.py`) without the answer: ids, the displayed
  option order, labels and texts, the correct label, the prompt (chat template not applied, as the records hash
  it) and `custom_id`, the batch request that answers the row;
- `batch_requests.jsonl`: an OpenAI-style batch request file (OpenAI Batch API, `vllm run-batch`): one POST per
  `custom_id` to `/v1/chat/completions` (the prompt as the one user turn: the server applies its chat template;
  the default when the prompt config asks for chat) or `/v1/completions` (the prompt as it is, or with
  `--apply-chat-template` already wrapped in the model's template by its tokenizer, hf model configs), with the
  run's temperature, top_p, top_k, max_tokens and a seed per trial (the trial seed + repetition, as the openai
  backend sends). At temperature 0 each prompt is asked once and its answer serves every repetition, as in a
  native run;
- `export.json`: the composed config, the counts, and the ingest command for the answers.

The answers come back as the batch output file: `python -m src.ingest --format generic --path DIR/prompts.jsonl
--answers OUTPUT.jsonl`. Only `scoring=generate` studies are exported: a batch API returns text.

`python -m src.export model=NAME --print-weights` prints the local folder or hub id of an hf model config's
weights (a GGUF's float copy, made once: src/backends/hf/gguf_cache.py), for a server to load (docs/serving.md).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from omegaconf import DictConfig, OmegaConf

from src.cli import entry, user_error
from src.common.errors import UserError
from src.config import plain_dict
from src.core.prompts import PromptTemplate

from .backends import load_backend
from .backends.text import chat_text

if TYPE_CHECKING:
    from src.answering.items import Item
    from src.config.spec import JobSpec

    from .backends.hf.backend import HFBackend

PROMPTS_FILE = "prompts.jsonl"
BATCH_FILE = "batch_requests.jsonl"
MANIFEST_FILE = "export.json"


def effective_chat(cfg: DictConfig) -> bool:
    """Whether a native run wraps the prompts in the chat template: the prompt config asks for it and the model
    config does not refuse it (a base model's `chat: false`), as `src.job.runner` and the hf backend decide."""
    return bool(cfg.prompt.get("chat", False)) and bool(cfg.model.get("chat", True))


def served_model(cfg: DictConfig) -> str:
    """The model name a server knows: the openai config's `model`, else the hub path, else the config's name."""
    return str(cfg.model.get("model") or cfg.model.get("path") or cfg.model.name)


def check_exportable(cfg: DictConfig) -> JobSpec:
    """The spec of a valid job config (`src.config.checks.job_spec`) whose answers are generated text, which a
    batch API returns."""
    from src.config.checks import job_spec  # local: loads hydra (slow import)

    spec = job_spec(cfg)
    if spec.scoring != "generate":
        raise UserError(
            f"config key scoring: {spec.scoring} scores the model's own probabilities, which a batch API "
            "does not return; export a scoring=generate study"
        )
    return spec


def plan(cfg: DictConfig) -> tuple[list[Item], dict[str, list[str]], PromptTemplate]:
    """(items, left_out, template) of a job config: the questions loaded and planned exactly as
    `src.job.runner.run_job` does."""
    from src.job.runner import job_questions, plan_items  # local: loads hydra (slow import)

    spec = check_exportable(cfg)
    questions = job_questions(spec)
    template = PromptTemplate.from_config(dict(spec.prompt))
    items, left_out = plan_items(spec, questions, template)
    return list(items), left_out, template


def export_rows(cfg: DictConfig, items: Sequence[Item], *, template_hash: str) -> list[dict[str, Any]]:
    """The generic-format rows of every trial of `items` (no answers), in the order a native run records them."""
    from src.answering.trials import prompt_hash  # local: loads pandas (slow import)

    from .answer_formats import FORMATS  # local: loads pandas (slow import)

    greedy = float(cfg.temperature) == 0
    rows = []
    for it in items:
        q, v, r = it.question, it.variant, it.request
        columns = FORMATS[v.fmt].columns(q, v, r.labels, slot=None, slots=None)
        for rep in range(int(cfg.repetitions)):
            rows.append(
                {
                    "custom_id": f"{r.key}#{0 if greedy else rep}",
                    "question_id": q.id,
                    "subject": q.subject,
                    "question": q.question,
                    "variant_kind": v.kind,
                    "variant_id": v.variant_id,
                    "option_order": list(v.option_order),
                    "labels": list(r.labels),
                    "options": list(v.option_texts),
                    "correct_label": r.labels[v.correct_slot],
                    "correct_option": columns["correct_option"],
                    "fmt": v.fmt,
                    "variant_level": v.level,
                    "perm_sets": [f"{name}:{pos}" for name, pos in v.memberships],
                    "asked_option": v.asked_option,
                    "repetition": rep,
                    "prompt": r.prompt,
                    "prompt_hash": prompt_hash(r.prompt),
                    "trial_seed": r.seed,
                    "model": cfg.model.name,
                    "benchmark": cfg.benchmark.name,
                    "variant_set": cfg.variants.name,
                    "temperature": float(cfg.temperature),
                    "seed": int(cfg.seed),
                    "scoring": cfg.scoring,
                    "prompt_name": cfg.prompt.name,
                    "fewshot": int(cfg.fewshot),
                    "repetitions": int(cfg.repetitions),
                    "limit": cfg.limit,
                    "template_hash": template_hash,
                }
            )
    return rows


def batch_requests(
    cfg: DictConfig,
    items: Sequence[Item],
    *,
    endpoint: str,
    model_name: str,
    render: Callable[[str], str] | None = None,
) -> list[dict[str, Any]]:
    """One OpenAI-style batch request per custom_id of `export_rows`. `render` wraps a prompt in the chat
    template (completions endpoint only)."""
    from .answer_formats import FORMATS  # local: loads pandas (slow import)

    greedy = float(cfg.temperature) == 0
    out = []
    for it in items:
        r = it.request
        max_tokens = max(int(cfg.max_new_tokens), FORMATS[it.variant.fmt].min_new_tokens)  # as trials does
        for rep in [0] if greedy else range(int(cfg.repetitions)):
            body: dict[str, Any] = {
                "model": model_name,
                "temperature": float(cfg.temperature),
                "top_p": float(cfg.top_p),
                "max_tokens": max_tokens,
                "seed": r.seed + rep,
            }
            if cfg.top_k is not None:
                body["top_k"] = int(cfg.top_k)  # not an OpenAI parameter; vLLM and others read it
            if endpoint == "chat":
                body["messages"] = [{"role": "user", "content": r.prompt}]
            else:
                body["prompt"] = render(r.prompt) if render else r.prompt
            out.append(
                {
                    "custom_id": f"{r.key}#{rep}",
                    "method": "POST",
                    "url": "/v1/chat/completions" if endpoint == "chat" else "/v1/completions",
                    "body": body,
                }
            )
    return out


def hf_weights(cfg: DictConfig, option: str) -> tuple[str, dict[str, Any]]:
    """(local folder or hub id, from_pretrained's extra arguments) of an hf model config's weights: a GGUF's float
    copy (converted once), else the config's path. `option` names the command-line flag that needs them."""
    model_cfg = {k: v for k, v in plain_dict(cfg.model).items() if k != "scoring"}
    if model_cfg.get("backend") != "hf":
        raise UserError(f"{option}: model {cfg.model.name} is not an hf model config, so its weights are not here")
    backend = cast("HFBackend", load_backend(model_cfg, chat=True))  # backend=hf; locates the weights, loads nothing
    from .backends.hf import gguf_cache  # local: loads torch, transformers (slow import)

    if backend.gguf_path is not None:
        return str(gguf_cache.ensure_float_copy(backend.gguf_path)), {}
    return backend.location, {
        "revision": backend.settings.revision,
        "trust_remote_code": backend.settings.trust_remote_code,
    }


def chat_renderer(cfg: DictConfig) -> Callable[[str], str]:
    """The model's chat template as a function of the prompt, from its tokenizer (hf model configs)."""
    if cfg.model.get("backend") != "hf":
        raise UserError(
            f"--apply-chat-template: model {cfg.model.name} is not an hf model config, so its tokenizer "
            "is not here; send the prompts to /v1/chat/completions (the server applies its template)"
        )
    source, extra = hf_weights(cfg, "--apply-chat-template")
    import transformers

    tokenizer = transformers.AutoTokenizer.from_pretrained(source, **extra)
    if not getattr(tokenizer, "chat_template", None):
        raise UserError(
            f"--apply-chat-template: model {cfg.model.name}'s tokenizer has no chat template; export "
            "without it (prompt.chat=false) or send to /v1/chat/completions"
        )
    return lambda prompt: chat_text(tokenizer, prompt)


def write_jsonl(path: Path, rows: Sequence[dict[str, Any]]) -> None:
    with open(path, "w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")


def export(
    cfg: DictConfig,
    out: Path,
    *,
    endpoint: str | None = None,
    model_name: str | None = None,
    render: Callable[[str], str] | None = None,
) -> dict[str, Any]:
    """Write prompts.jsonl, batch_requests.jsonl and export.json for the study `cfg` into `out`; returns the
    manifest. `render` (the model's chat template) sends the templated text to the completions endpoint."""
    from src.answering.trials import prompt_hash  # local: loads pandas (slow import)

    chat = effective_chat(cfg)
    endpoint = endpoint or ("completions" if render is not None or not chat else "chat")
    if render is not None and endpoint == "chat":
        raise UserError(
            "--apply-chat-template: the chat endpoint applies the server's template; use --endpoint completions"
        )
    items, left_out, template = plan(cfg)
    template_hash = prompt_hash(template.texts_for(cfg.scoring)[0])  # the native run's prompt_hash tag
    rows = export_rows(cfg, items, template_hash=template_hash)
    requests = batch_requests(cfg, items, endpoint=endpoint, model_name=model_name or served_model(cfg), render=render)
    out.mkdir(parents=True, exist_ok=True)
    write_jsonl(out / PROMPTS_FILE, rows)
    write_jsonl(out / BATCH_FILE, requests)
    manifest = {
        "config": OmegaConf.to_container(cfg, resolve=True),
        "prompts": len(items),
        "trials": len(rows),
        "requests": len(requests),
        "endpoint": endpoint,
        "chat": chat,
        "chat_template_applied": render is not None,
        "template_hash": template_hash,
        "left_out": {reason: len(ids) for reason, ids in sorted(left_out.items())},
        "ingest": f"python -m src.ingest --format generic --path {out / PROMPTS_FILE} --answers BATCH_OUTPUT.jsonl "
        f"--experiment {cfg.tracking.experiment} --tracking-uri {cfg.tracking.uri}"
        + (f" --sure-rule {cfg.metrics.sure_rule}" if cfg.get("metrics") else ""),
    }
    (out / MANIFEST_FILE).write_text(json.dumps(manifest, indent=2, default=str))
    return manifest


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m src.export", description=__doc__.splitlines()[0])
    parser.add_argument("overrides", nargs="*", help="job config overrides, as python -m src.run takes them")
    parser.add_argument("--out", type=Path, help="folder for prompts.jsonl, batch_requests.jsonl, export.json")
    parser.add_argument(
        "--print-weights",
        action="store_true",
        help="print the local folder (a GGUF's float copy) or hub id of the hf model's weights, for a "
        "server to load (docs/serving.md), and export nothing",
    )
    parser.add_argument(
        "--endpoint",
        choices=("chat", "completions"),
        help="batch endpoint (default: chat when the prompt config asks for the chat template)",
    )
    parser.add_argument(
        "--served-model", help="the model name in each request body (default: the model config's model or path)"
    )
    parser.add_argument(
        "--apply-chat-template",
        action="store_true",
        help="wrap each prompt in the model's chat template here (hf configs) and send it to /v1/completions",
    )
    args = parser.parse_args(argv)
    if args.out is None and not args.print_weights:
        parser.error("--out DIR is required (or --print-weights)")
    try:
        from src.config.compose import compose_job  # local: loads hydra (slow import)

        cfg = compose_job(args.overrides)
        if args.print_weights:
            print(hf_weights(cfg, "--print-weights")[0])
            return 0
        check_exportable(cfg)  # before a tokenizer is loaded
        render = chat_renderer(cfg) if args.apply_chat_template else None
        manifest = export(cfg, args.out, endpoint=args.endpoint, model_name=args.served_model, render=render)
    except UserError as err:
        return user_error(err)
    print(json.dumps({k: manifest[k] for k in ("prompts", "trials", "requests", "endpoint", "chat_template_applied")}))
    print(f"ingest the answers with: {manifest['ingest']}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    entry(main)
