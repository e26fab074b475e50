"""Results keyed by what produced them: new weights saved to the same folder, or a benchmark file corrected in place,
run again (resume on or off, the response cache on), say why in one line, and give the new weights' and the new
data's numbers; the response cache's key never lets two requests that differ in model identity, data identity or
anything that changes an answer share an entry."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import given, settings, strategies as st

from src.answering.cache import request_key
from src.backends.base import Request

from .conftest import mlflow_runs
from .tiny_model import save_tiny_llama


def save_tiny_model(path: Path, seed: int) -> None:
    """The tiny llama saved to `path` (as a training loop saves its `.../last` checkpoint): another seed is other
    weights in the same folder, same sizes and file names."""
    save_tiny_llama(path, seed=seed)


def records(result) -> pd.DataFrame:
    frame = pd.read_parquet(result.out_dir / "artifacts" / "records.parquet")
    return frame.sort_values(["question_id", "variant_id", "repetition"]).reset_index(drop=True)


def probs(result) -> list[float]:
    """Every label probability of the run's records, in trial order, one flat list."""
    return [float(x) for p in records(result)["label_probs"] for x in p]


@pytest.fixture
def own_models_cache(tmp_path, monkeypatch):
    """The file-hash index of this test only, so a fingerprint computed elsewhere is never read."""
    monkeypatch.setenv("MCQ_CACHE_DIR", str(tmp_path / "models-cache"))


@pytest.mark.parametrize("resume", ["true", "false"])
def test_new_weights_saved_to_the_same_folder_run_again_with_their_own_numbers(
    run_job_in, tmp_path, capsys, resume, own_models_cache
):
    folder = tmp_path / "last"
    job = [
        "model=hf",
        f"model.path={folder}",
        "model.name=ckpt",
        "model.dtype=float32",
        "benchmark=synthetic",
        "limit=6",
        "scoring=logprob",
        f"resume={resume}",
    ]
    save_tiny_model(folder, seed=0)
    old = run_job_in(*job)
    save_tiny_model(folder, seed=1)  # new weights, same folder, same config
    capsys.readouterr()
    new = run_job_in(*job)
    err = capsys.readouterr().err.splitlines()
    said = [line for line in err if "running again" in line]
    assert said == [f"model weights changed since run {old.run_id}: running again"]
    # this process had the old weights loaded (a sweep's jobs share a model): it says it loads the new ones
    assert len([line for line in err if "its weights changed since the previous job" in line]) == 1
    assert not new.skipped and new.run_id != old.run_id
    assert not records(new)["cache_hit"].any()  # no answer of the old weights was reused
    # the new weights' own numbers: a run on them alone, in another store with the cache off
    alone = run_job_in(*job, f"tracking.uri=sqlite:///{tmp_path}/alone.db", "cache.enabled=false")
    assert probs(new) == pytest.approx(probs(alone), abs=1e-6)
    assert probs(new) != pytest.approx(probs(old), abs=1e-6)
    client, runs = mlflow_runs(run_job_in.store_uri)
    by_id = {r.info.run_id: r for r in runs}
    assert by_id[old.run_id].info.status == "FINISHED"  # the older run stays as it was
    assert by_id[old.run_id].data.tags["model_identity"] != by_id[new.run_id].data.tags["model_identity"]
    # the same weights again: resume skips it, and with the cache every answer is the cached one
    again = run_job_in(*job)
    if resume == "true":
        assert again.skipped and again.run_id == new.run_id
    else:
        assert records(again)["cache_hit"].all() and probs(again) == pytest.approx(probs(new), abs=1e-9)


@pytest.mark.slow
def test_the_same_files_anywhere_are_the_same_model_and_a_changed_part_is_named(
    run_job_in, tmp_path, capsys, own_models_cache
):
    """Resume finds the run of the same files: with a trailing slash, with a log, an optimizer state and a training
    checkpoint added beside them, and in a renamed folder (one line says so); with `resume=false` the renamed
    folder's answers all come from the cache. Only generation_config.json changed: the line names it."""
    folder = tmp_path / "last"
    save_tiny_model(folder, seed=0)

    def job(path, *extra):
        args = ["model=hf", f"model.path={path}", "model.name=ckpt", "model.dtype=float32", "benchmark=synthetic"]
        return run_job_in(*args, "limit=4", "scoring=logprob", *extra)

    first = job(folder)
    assert job(f"{folder}/").run_id == first.run_id  # a trailing slash: the same folder, the same run
    (folder / "train.log").write_text("step 10 loss 1.0")
    (folder / "optimizer.pt").write_bytes(b"0" * 128)
    (folder / "checkpoint-10").mkdir()
    (folder / "checkpoint-10" / "model.safetensors").write_bytes(b"1" * 128)
    again = job(folder)
    assert again.skipped and again.run_id == first.run_id
    moved = folder.rename(tmp_path / "renamed")
    capsys.readouterr()
    found = job(moved)
    said = [line for line in capsys.readouterr().err.splitlines() if "model files unchanged" in line]
    assert found.skipped and found.run_id == first.run_id
    assert said == [
        f"model files unchanged since run {first.run_id}, made with them at {folder}: reused (resume=false "
        "runs it again)"
    ]
    rerun = job(moved, "resume=false")
    assert records(rerun)["cache_hit"].all() and probs(rerun) == pytest.approx(probs(first), abs=1e-9)
    config = moved / "generation_config.json"
    config.write_text(config.read_text().replace("}", ', "temperature": 0.5}', 1) if config.exists() else "{}")
    capsys.readouterr()
    changed = job(moved)
    lines = [line for line in capsys.readouterr().err.splitlines() if "running again" in line]
    assert not changed.skipped and lines == [f"model generation config changed since run {rerun.run_id}: running again"]


@pytest.mark.slow
def test_weights_saved_during_a_run_stop_it_before_any_answer_is_stored(
    run_job_in, tmp_path, monkeypatch, own_models_cache
):
    """A training loop saves new weights into the folder while a job runs on it: the job stops in one line (exit 2
    from the command line), no answer goes into the response cache, its run ends FAILED, and a rerun runs again."""
    from src.answering.cache import ResponseCache
    from src.backends.hf import HFBackend
    from src.common.errors import UserError

    folder = tmp_path / "last"
    save_tiny_model(folder, seed=0)
    answer = HFBackend.score_labels

    def while_training(self, *args, **kwargs):
        scores = answer(self, *args, **kwargs)  # computed by the weights loaded, seed 0
        save_tiny_model(folder, seed=1)  # then the trainer writes seed 1 into the folder
        return scores

    monkeypatch.setattr(HFBackend, "score_labels", while_training)
    job = ["model=hf", f"model.path={folder}", "model.name=ckpt", "model.dtype=float32", "benchmark=synthetic"]
    with pytest.raises(UserError) as stopped:
        run_job_in(*job, "limit=4", "scoring=logprob")
    assert "weights changed" in str(stopped.value) and "before storing" in str(stopped.value)
    assert len(ResponseCache(tmp_path / "cache.db")) == 0
    _, runs = mlflow_runs(run_job_in.store_uri)
    assert [r.info.status for r in runs] == ["FAILED"]


def write_file(path: Path, answers: list[int]) -> None:
    rows = [
        {
            "id": f"q{i}",
            "question": f"Which option is number {i}?",
            "options": [f"o{i}a", f"o{i}b", f"o{i}c"],
            "answer": a,
        }
        for i, a in enumerate(answers)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


@pytest.mark.parametrize("resume", ["true", "false"])
def test_a_benchmark_file_corrected_in_place_runs_again_on_the_new_answers(run_job_in, tmp_path, capsys, resume):
    data = tmp_path / "bench.jsonl"
    answers = [0, 1, 2, 0, 1, 2, 0, 1]
    job = ["model=simulated", "benchmark=generic", f"benchmark.path={data}", "variants=cora", f"resume={resume}"]
    write_file(data, answers)
    old = run_job_in(*job)
    corrected = [2, 0, *answers[2:]]  # the answer key of q0 and q1 fixed, in place
    write_file(data, corrected)
    capsys.readouterr()
    new = run_job_in(*job)
    said = [line for line in capsys.readouterr().err.splitlines() if "running again" in line]
    assert said == [f"benchmark data changed since run {old.run_id}: running again"]
    assert not new.skipped
    hits = records(new).groupby("question_id")["cache_hit"].all()
    assert not hits["q0"] and not hits["q1"]  # the corrected questions are asked again (the oracle reads the key)
    assert hits.drop(["q0", "q1"]).all()  # the unchanged ones keep their cached answers
    alone = run_job_in(*job, f"tracking.uri=sqlite:///{tmp_path}/alone.db", "cache.enabled=false")
    for name in ("mcqa", "cora", "ci"):
        assert new.metrics[name] == pytest.approx(alone.metrics[name], abs=1e-12)
    pd.testing.assert_frame_equal(
        records(new).drop(columns=["run_id", "cache_hit"]), records(alone).drop(columns=["run_id", "cache_hit"])
    )
    _, runs = mlflow_runs(run_job_in.store_uri)
    tags = {r.info.run_id: r.data.tags for r in runs}
    assert tags[old.run_id]["data_identity"] != tags[new.run_id]["data_identity"]
    assert tags[old.run_id]["model_identity"] == tags[new.run_id]["model_identity"]


# -- the response cache's key ------------------------------------------------------------------------------------

texts = st.text(max_size=6)
request_parts = st.fixed_dictionaries(
    {
        "identity": texts,
        "data": texts,
        "mode": st.sampled_from(["generate", "logprob", "cloze"]),
        "prompt": texts,
        "labels": st.lists(texts, max_size=3).map(tuple),
        "options": st.lists(texts, max_size=3).map(tuple),
        "seed": st.integers(0, 3),
        "key": texts,
        "seeded": st.booleans(),
        # each setting of its type in the typed job schema (src/config/schema.py): a float temperature 1.0 and an
        # int 1 are equal in Python but never both reach the key, so the property does not ask them to share one
        "settings": st.fixed_dictionaries(
            {},
            optional={
                "temperature": st.one_of(st.none(), st.floats(0, 2)),
                "top_p": st.one_of(st.none(), st.floats(0, 2)),
                "top_k": st.one_of(st.none(), st.integers(0, 3)),
                "max_new_tokens": st.one_of(st.none(), st.integers(0, 3)),
            },
        ),
        "repetition": st.one_of(st.none(), st.integers(0, 3)),
    }
)
OUTPUT_CHANGING = ("identity", "data", "mode", "prompt", "labels", "options", "settings", "repetition")


def key_of(parts: dict) -> str:
    request = Request(
        parts["prompt"], parts["labels"], parts["options"], parts["seed"], key=parts["key"], data=parts["data"]
    )
    return request_key(
        parts["identity"], parts["mode"], request, parts["settings"], parts["repetition"], seeded=parts["seeded"]
    )


@settings(max_examples=300)
@given(request_parts, request_parts)
def test_requests_that_may_be_answered_differently_never_share_a_cache_key(a, b):
    """Model identity, data identity, scoring mode, prompt, labels, options, decoding settings, repetition and, for
    a seeded answer, the trial's seed: any of them different, the keys differ; all the same, they are one."""
    b = {**b, "seeded": a["seeded"]}  # the backend's kind, the same for both requests of one backend
    differs = any(a[f] != b[f] for f in OUTPUT_CHANGING) or (
        a["seeded"] and (a["seed"], a["key"]) != (b["seed"], b["key"])
    )
    assert (key_of(a) != key_of(b)) == differs


# -- a model behind a server: what it reports, and model.revision ------------------------------------------------


class ModelServer:
    """GET /models lists `model` (what the test sets), POST /chat/completions answers "A" with the next
    `system_fingerprint` of `fingerprints` (none once they run out), and with `top` (token -> logprob, when the
    test sets it) as the first token's top log-probabilities."""

    def __init__(self):
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        self.model: dict = {}
        self.fingerprints: list[str] = []
        self.top: dict[str, float] = {}
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def answer(self, body: dict) -> None:
                data = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                self.answer({"object": "list", "data": [{"id": "other", "created": 1}, server.model]})

            def do_POST(self):
                self.rfile.read(int(self.headers["Content-Length"]))
                reply: dict = {"choices": [{"index": 0, "message": {"role": "assistant", "content": "A"}}]}
                if server.top:
                    top = [{"token": t, "logprob": lp} for t, lp in server.top.items()]
                    first = {"token": top[0]["token"], "logprob": top[0]["logprob"], "top_logprobs": top}
                    reply["choices"][0]["logprobs"] = {"content": [first]}
                if server.fingerprints:
                    reply["system_fingerprint"] = server.fingerprints.pop(0)
                self.answer(reply)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        import threading

        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def model_server():
    server = ModelServer()
    yield server
    server.close()


def served(server: ModelServer, **extra):
    from src.backends.openai_backend import OpenAIBackend, OpenAISettings

    return OpenAIBackend(
        OpenAISettings(name="served", model="m", base_url=server.url, api_key_env=None, progress=False, **extra)
    )


def test_a_server_model_is_known_by_what_the_server_reports_and_model_revision(model_server, caplog):
    import time

    model_server.model = {"id": "m", "created": int(time.time()), "root": "/ckpt/last"}  # vLLM: created is "now"
    with caplog.at_level("WARNING", logger="src.backends.openai_backend"):
        first = served(model_server).identity
    warned = [r.getMessage() for r in caplog.records if "reports nothing that changes" in r.getMessage()]
    assert len(warned) == 1 and "model.revision" in warned[0]
    assert "/ckpt/last" in first and "created" not in first  # the server's clock is no identity
    model_server.model = {"id": "m", "created": int(time.time()) + 1, "root": "/ckpt/other"}  # another model served
    assert served(model_server).identity != first
    caplog.clear()
    with caplog.at_level("WARNING", logger="src.backends.openai_backend"):
        pinned = served(model_server, revision="step-2000").identity
        hosted = {"id": "m", "created": 1722902400, "owned_by": "system"}  # a hosted model's own creation time
        model_server.model = hosted
        dated = served(model_server).identity
    assert not caplog.records and "revision=step-2000" in pinned and "1722902400" in dated
    model_server.model = {**hosted, "created": 1732902400}
    assert served(model_server).identity != dated


def test_a_system_fingerprint_that_changes_while_a_sweep_runs_is_said_once(model_server, caplog):
    from src.backends.base import SamplingParams

    model_server.model = {"id": "m", "created": 1722902400}
    model_server.fingerprints = ["fp_1", "fp_1", "fp_2", "fp_3"]
    backend = served(model_server, max_concurrency=1)
    ask = [Request("Q?", ("A", "B"), ("x", "y"), seed=0)]
    with caplog.at_level("WARNING", logger="src.backends.openai_backend"):
        for _ in range(4):
            backend.generate(ask, SamplingParams())
    changed = [r.getMessage() for r in caplog.records if "system_fingerprint changed" in r.getMessage()]
    assert len(changed) == 1 and "fp_1 to fp_2" in changed[0]


# -- weights by content: a folder read once, a hub id by its commit ---------------------------------------------


def test_weights_copied_over_with_their_times_put_back_are_hashed_again(tmp_path, own_models_cache):
    """Same-size weights of another model written over the first, then their times restored (`os.utime`, what
    `touch -r`, `rsync -a` and `tar x` do) or copied with `cp -p`: another model, though size and mtime are the
    old ones (its ctime is new: no program can set it back)."""
    import os
    import shutil
    import subprocess

    from src.backends import weights

    folder = tmp_path / "ckpt"
    folder.mkdir()
    shard = folder / "model.safetensors"
    shard.write_bytes(b"a" * 64)
    first = weights.folder_fingerprint(folder)
    assert weights.folder_fingerprint(folder) == first  # unchanged: the same (from the hash index)
    stat = shard.stat()
    shard.write_bytes(b"b" * 64)  # same size, its times put back
    os.utime(shard, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert shard.stat().st_mtime_ns == stat.st_mtime_ns and shard.stat().st_size == stat.st_size
    second = weights.folder_fingerprint(folder)
    assert second != first
    other = tmp_path / "other.safetensors"  # `cp -p` of the first weights back over the second, times kept
    other.write_bytes(b"a" * 64)
    os.utime(other, ns=(shard.stat().st_atime_ns, shard.stat().st_mtime_ns))
    cp = shutil.which("cp")
    if cp:
        subprocess.run([cp, "-p", str(other), str(shard)], check=True)
    else:  # pragma: no cover - no coreutils: copy2 keeps the times as cp -p does
        shutil.copy2(other, shard)
    assert weights.folder_fingerprint(folder) == first  # the first weights again: their identity again


def test_only_the_files_the_loader_reads_count_each_named_by_its_part(tmp_path, own_models_cache):
    """A log, an optimizer state, a training checkpoint, a README change nothing; each loaded part is named."""
    import json

    from src.backends import weights

    folder = tmp_path / "ckpt"
    folder.mkdir()
    (folder / "model.safetensors").write_bytes(b"w" * 32)
    (folder / "config.json").write_text("{}")
    (folder / "tokenizer.json").write_text("{}")
    (folder / "tokenizer_config.json").write_text(json.dumps({"model_max_length": 8, "chat_template": "{{ a }}"}))
    (folder / "generation_config.json").write_text('{"do_sample": false}')
    content = weights.model_content(folder)
    assert set(content.parts) == {"weights", "model config", "tokenizer", "chat template", "generation config"}
    (folder / "train.log").write_text("step 1 loss 2.0")
    (folder / "optimizer.pt").write_bytes(b"o" * 16)
    (folder / "checkpoint-500").mkdir()
    (folder / "checkpoint-500" / "model.safetensors").write_bytes(b"x" * 32)
    (folder / "README.md").write_text("a card")
    assert weights.model_content(folder) == content and content.changed() == []
    (folder / "generation_config.json").write_text('{"do_sample": true}')
    assert content.changed() == ["generation config"]
    (folder / "tokenizer_config.json").write_text(json.dumps({"model_max_length": 8, "chat_template": "{{ b }}"}))
    assert content.changed() == ["chat template", "generation config"]
    assert weights.model_content(str(folder) + "/") == weights.model_content(folder)  # a trailing slash: the same


def test_a_model_path_with_variables_is_read_as_the_shell_would(tmp_path, monkeypatch, own_models_cache):
    pytest.importorskip("torch")
    from src.backends import weights
    from src.backends.hf.loading import locate_weights

    folder = tmp_path / "ckpt"
    folder.mkdir()
    (folder / "model.safetensors").write_bytes(b"w" * 32)
    monkeypatch.setenv("CKPT_ROOT", str(tmp_path))
    assert weights.model_content("$CKPT_ROOT/ckpt") == weights.model_content(folder)
    located = locate_weights(
        "m",
        path="${CKPT_ROOT}/ckpt",
        gguf_file=None,
        package=None,
        package_module=None,
        install=None,
        assemble=False,
        revision=None,
    )
    assert located == (str(folder.resolve()), None)


def test_a_vllm_local_gguf_file_is_known_by_its_content_not_its_path(tmp_path, own_models_cache, monkeypatch):
    from src.backends import weights
    from src.backends.vllm_backend import VLLMBackend, VLLMSettings

    monkeypatch.setattr(weights, "hub_commit", lambda *a: pytest.fail("a local file is no hub id"))
    first, copy = tmp_path / "a" / "model.gguf", tmp_path / "b" / "renamed.gguf"
    for path in (first, copy):
        path.parent.mkdir()
        path.write_bytes(b"GGUF" + b"\0" * 60)
    one = VLLMBackend(VLLMSettings(name="g", path=str(first)))
    assert "weights=sha256:" in one.identity and str(tmp_path) not in one.identity
    assert (
        VLLMBackend(VLLMSettings(name="g", path=str(copy))).identity == one.identity
    )  # the same bytes elsewhere: the same
    copy.write_bytes(b"GGUF" + b"\1" * 60)
    assert VLLMBackend(VLLMSettings(name="g", path=str(copy))).identity != one.identity
    folder = VLLMBackend(
        VLLMSettings(name="f", path=str(first.parent) + "/")
    )  # a folder, a trailing slash: not in the identity
    assert folder.identity == VLLMBackend(VLLMSettings(name="f", path=str(first.parent))).identity


def test_a_cache_entry_written_while_the_model_files_change_is_refused(tmp_path, own_models_cache):
    """The identity an answer is stored under is that of the files that produced it: once they change during the
    run, the next store stops the job in one line and stores nothing."""
    from types import SimpleNamespace

    from src.answering.cache import GuardedCache, ResponseCache
    from src.backends import weights
    from src.common.errors import UserError
    from src.job.runner import content_guard

    folder = tmp_path / "last"
    folder.mkdir()
    (folder / "model.safetensors").write_bytes(b"a" * 64)
    backend = SimpleNamespace(name="ckpt", content=weights.model_content(folder))
    cache = GuardedCache(ResponseCache(tmp_path / "cache.db"), content_guard(backend))
    cache.put_many([("k1", 1)])
    (folder / "model.safetensors").write_bytes(b"b" * 64)  # a training loop saves new weights meanwhile
    with pytest.raises(UserError) as refused:
        cache.put_many([("k2", 2)])
    assert "weights changed" in str(refused.value) and "\n" not in str(refused.value)
    assert cache.get_many(["k1", "k2"]) == {"k1": 1} and len(cache) == 1


def test_one_hub_revision_s_commit_is_never_reused_for_another(monkeypatch, own_models_cache):
    """One hub revision's commit reused for another: a sweep over two revisions of one repo records two commits,
    and each revision resolves once per process."""
    from src.backends import weights

    asked = []
    commits = {"v1": "1" * 40, "v2": "2" * 40, None: "3" * 40}

    def online(repo, revision):
        asked.append((repo, revision))
        return commits[revision]

    monkeypatch.setattr(weights, "_online_commit", online)
    monkeypatch.setattr(weights, "_COMMITS", {})
    sweep = [weights.model_content("org/model", revision=r) for r in ("v1", "v2", "v1", None)]
    assert [c.commit for c in sweep] == [commits["v1"], commits["v2"], commits["v1"], commits[None]]
    assert sorted(asked, key=str) == sorted([("org/model", "v1"), ("org/model", "v2"), ("org/model", None)], key=str)


def test_a_hub_id_is_known_by_the_commit_it_resolves_to(tmp_path, monkeypatch, own_models_cache):
    huggingface_hub = pytest.importorskip("huggingface_hub")
    pytest.importorskip("torch")
    from src.backends import weights
    from src.backends.hf import HFBackend, HFSettings

    commit = "0123456789abcdef0123456789abcdef01234567"
    refs = tmp_path / "hub" / "models--org--model" / "refs"
    refs.mkdir(parents=True)
    (refs / "main").write_text(commit)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setattr(weights, "_online_commit", lambda repo, revision: None)  # no network here: the cache's ref
    monkeypatch.setattr(weights, "_COMMITS", {})
    backend = HFBackend(HFSettings(name="hub", path="org/model"), progress=False)
    assert f"|commit={commit}|" in backend.identity and backend.load_revision == commit  # loads what it names
    pinned = "fedcba9876543210fedcba9876543210fedcba98"
    assert weights.hub_commit("org/model", pinned) == pinned
    (refs / "main").write_text(pinned)  # the hub moved: a new process resolves the new commit
    monkeypatch.setattr(weights, "_COMMITS", {})
    assert HFBackend(HFSettings(name="hub", path="org/model"), progress=False).identity != backend.identity


def test_recheck_refuses_a_run_made_on_other_questions_or_other_folder_weights():
    from src.recheck import provenance_differences

    tags = {
        "backend": "hf:/m|weights=sha256:aa|revision=None|dtype=float32|chat=True",
        "data_identity": "d1",
        "git_commit": "c0ffee",
    }
    assert provenance_differences(tags, tags["backend"], "c0ffee", "d1") == []
    assert provenance_differences(tags, tags["backend"], "c0ffee", "d2") == ["other benchmark data (run d1, here d2)"]
    moved = tags["backend"].replace("sha256:aa", "sha256:bb")
    assert provenance_differences(tags, moved, "c0ffee", "d1") == ["other weights (run sha256:aa, here sha256:bb)"]


def test_the_report_says_when_one_model_name_covers_several_weights():
    from src.compare.load import identity_notes

    table = pd.DataFrame(
        {
            "model": ["ckpt", "ckpt", "base", "base"],
            "model_identity": ["m1", "m2", "m3", "m3"],
            "benchmark": ["medqa"] * 4,
            "data_identity": ["d1", "d1", "d1", None],
        }
    )
    assert identity_notes(table) == [
        "model ckpt: its runs were made with 2 different model identities (model_identity: weights or settings; "
        "some runs logged no backend identity to tell which); the tables show the latest run of each condition"
    ]
    table.loc[3, "data_identity"] = "d2"  # the benchmark file corrected between two runs
    assert identity_notes(table)[1].startswith("benchmark medqa: its runs were made with 2 different questions")
