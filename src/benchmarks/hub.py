"""Where each benchmark is published on the Hugging Face Hub, and how its rows become `Question`s.

`load_benchmark` reads, in order: an explicit `benchmark.path`; the raw files under `data_dir`
(the readers in the other modules, for offline clusters and the published raw formats); then
the benchmark's Hub dataset (`hub_questions`), looked for in this order:

1. a Hub-layout snapshot folder named by `MCQ_HUB_DIR` (`$MCQ_HUB_DIR/<repo id>/<layout dir>/<split>-*.parquet`,
   e.g. `.../cais/mmlu/all/test-00000-of-00001.parquet`: the Hub's parquet files as published);
2. the same layout under `data_dir/hub/` (what `python -m src.data fetch NAME --to DIR` writes);
3. `datasets.load_dataset(repo, config, split=..., revision=...)`: the `datasets` cache, or a
   download when online. Offline (`HF_HUB_OFFLINE=1` / `HF_DATASETS_OFFLINE=1`, read when the
   benchmark loads) and absent, or the Hub unreachable: one-line `UserError` naming the dataset
   and the fetch command (exit 2).

Snapshot files (1, 2) are read with `datasets.load_dataset("parquet", data_files=...)`, and every
row, from any of the three, goes through the same converter, which builds each question with the
raw loaders' `checked_question` (the same cleaning and checks), the same ids where the Hub keeps
what they are made of, and the same options (`subjects`, `only_ok`, `shuffle`). Questions come
in the Hub's row order.

Ids and differences from the raw files (see `../shared/data/SOURCES.md` for those):

- mmlu (`cais/mmlu`, config `all`): `mmlu/<subject>/<split>/<row within the subject>`, as the raw
  CSVs; split `val` is the Hub's `validation`. Assumed (not checked here): `all` holds the
  subjects in name order, each in its CSV's row order, so ids and order equal the raw loader's.
- mmlu_redux (`edinburgh-dawg/mmlu-redux-2.0`, one config per subject, split `test`):
  `mmlu_redux/<subject>/<row>`. The raw files are MMLU-Redux from `aryopg/mmlu-redux`; 2.0 is
  the corrected release, whose annotations may differ.
- arc_challenge / arc_easy (`allenai/ai2_arc`, `ARC-Challenge` / `ARC-Easy`): the ARC ids;
  `dev` is the Hub's `validation`. The Hub's `question` is the stem.
- truthfulqa_mc1 / mc2 (`truthfulqa/truthful_qa`, `multiple_choice`, split `validation`): only
  version v1 (817 questions); ids `truthfulqa_<task>/v1/<row>`; no subject (the Hub's
  multiple_choice config has no Category), so per-subject metrics are absent.
- medqa_4 (`GBaker/MedQA-USMLE-4-options`, `test`): `medqa_4/<row>`. medqa (5 options) has no
  Hub source here: raw files only.
- medmcqa (`openlifescienceai/medmcqa`, `validation`): `medmcqa/<row>`; options opa..opd, answer
  `cop`, subject `subject_name` (the raw reduced export has no subject).
- commonsenseqa (`tau/commonsense_qa`, `validation` as our `dev`): the record ids.
- hellaswag (`Rowan/hellaswag`, `validation` as our `val`): `hellaswag/<row>`; the question is
  lm-eval's query, `activity_label: ctx_a ctx_b.capitalize()` with lm-eval's clean-up (the raw
  text file was made that way; not compared here).
- winogrande (`allenai/winogrande`, `winogrande_xl`, `validation` as our `dev`): the Hub has no
  qID, so ids are `winogrande/<row>` where the raw loader uses the qIDs.

Revisions: the sha of no Hub commit could be verified from here (no network), so every source
pins the branch `main` (which every Hub repository has); put a commit sha in `revision` once one
is checked. The licences are as SOURCES.md states them.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import socket
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from src.common.errors import UserError
from src.core.questions import Question

from .medical import medqa_question
from .mmlu import normalise_error_type, wanted_subjects
from .position import seeded_shuffle
from .validate import answer_from_label, checked_question, choose_split, record_error

HUB_DIR_ENV = "MCQ_HUB_DIR"
OFFLINE_ENVS = ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")
REVISION = "main"  # unverified from here: no Hub commit sha could be checked without network

MMLU_SUBJECTS = (
    "abstract_algebra anatomy astronomy business_ethics clinical_knowledge college_biology college_chemistry "
    "college_computer_science college_mathematics college_medicine college_physics computer_security "
    "conceptual_physics econometrics electrical_engineering elementary_mathematics formal_logic global_facts "
    "high_school_biology high_school_chemistry high_school_computer_science high_school_european_history "
    "high_school_geography high_school_government_and_politics high_school_macroeconomics high_school_mathematics "
    "high_school_microeconomics high_school_physics high_school_psychology high_school_statistics "
    "high_school_us_history high_school_world_history human_aging human_sexuality international_law jurisprudence "
    "logical_fallacies machine_learning management marketing medical_genetics miscellaneous moral_disputes "
    "moral_scenarios nutrition philosophy prehistory professional_accounting professional_law professional_medicine "
    "professional_psychology public_relations security_studies sociology us_foreign_policy virology world_religions"
).split()

Converter = Callable[..., list[Question]]  # (rows, *, name, split, seed, options, place) -> questions


@dataclass(frozen=True)
class LocalFiles:
    """The raw files a benchmark's loader reads under `data_dir`, and the sha256 pinned for them.

    `digest` is the sha256 of the lines `<relative path> <file sha256>\\n` of `globs`' files in path
    order; every file's sha256 was checked against `../shared/data/SOURCES.md` when it was pinned.
    """

    globs: tuple[str, ...]
    n_files: int
    digest: str
    default: Callable[[str, Mapping[str, Any]], str]  # (split, options) -> the path the loader reads

    def files(self, data_dir: str | Path) -> list[Path]:
        root = Path(data_dir).expanduser()
        return sorted({p for pattern in self.globs for p in root.glob(pattern) if p.is_file()})


@dataclass(frozen=True)
class HubSource:
    """A benchmark's published dataset: repository, config, our split -> the Hub's, revision, licence, size."""

    repo: str
    config: str | None  # None: the default config; "{subject}": one config per MMLU subject
    splits: Mapping[str, str]  # our split name -> the Hub split, the first is the default
    licence: str
    n_questions: int  # in the default split
    convert: Converter
    revision: str = REVISION
    options: Mapping[str, Any] = field(default_factory=dict)  # options only the raw files support

    def configs(self, options: Mapping[str, Any] | None = None) -> list[str | None]:
        if self.config != "{subject}":
            return [self.config]

        return list(wanted_subjects(options or {}, list(MMLU_SUBJECTS), "mmlu", f"the Hub dataset {self.repo}"))

    def layout_dir(self, config: str | None) -> str:
        """The folder of a config's parquet files in the repository: the config's name, `data` for the default."""
        return config or "data"

    def describe(self, split: str | None = None) -> str:
        """`cais/mmlu (all, test)`."""
        hub_split = (
            self.splits[split] if split is not None and split in self.splits else next(iter(self.splits.values()))
        )
        config = "one config per subject" if self.config == "{subject}" else (self.config or "default")
        return f"{self.repo} ({config}, {hub_split})"


# --- converters: the Hub's rows (dicts as `datasets` yields them) -> Questions -------------------------------


def _wanted(options: Mapping[str, Any]) -> set[str] | None:
    """The MMLU subjects option `subjects` names (mmlu.wanted_subjects), or None when it names none (all)."""
    if options.get("subjects") is None:
        return None
    return set(wanted_subjects(options, list(MMLU_SUBJECTS), "mmlu", "the Hub dataset cais/mmlu"))


def _mmlu(
    rows: Iterable[dict], *, name: str, split: str, seed: int, options: Mapping[str, Any], place: str
) -> list[Question]:
    wanted = _wanted(options)
    counters: dict[str, int] = {}
    questions = []
    for n, row in enumerate(rows):
        subject = str(row.get("subject") or "")
        index = counters.get(subject, 0)
        counters[subject] = index + 1
        if wanted is not None and subject not in wanted:
            continue
        qid = f"mmlu/{subject}/{split}/{index}"
        questions.append(
            checked_question(
                f"{place} row {n} (record {qid})",
                id=qid,
                question=row.get("question"),
                options=list(row.get("choices") or ()),
                answer=row.get("answer"),
                subject=subject,
                split=split,
            )
        )
    return questions


def _mmlu_redux(
    rows: Iterable[dict], *, name: str, split: str, seed: int, options: Mapping[str, Any], place: str, subject: str
) -> list[Question]:
    questions = []
    for n, row in enumerate(rows):
        qid = f"mmlu_redux/{subject}/{n}"
        raw_type = str(row.get("error_type") or "")
        metadata = {
            "error_type": normalise_error_type(raw_type) or None,
            "error_type_raw": raw_type,
            **{k: str(row[k]) for k in ("source", "correct_answer", "potential_reason") if row.get(k)},
        }
        answer = row.get("answer")
        if isinstance(answer, str) and answer.strip().isdigit():
            answer = int(answer)
        questions.append(
            checked_question(
                f"{place} row {n} (record {qid})",
                id=qid,
                question=row.get("question"),
                options=list(row.get("choices") or ()),
                answer=answer,
                subject=subject,
                metadata=metadata,
            )
        )
    if options.get("only_ok"):
        questions = [q for q in questions if q.metadata["error_type"] == "ok"]
    return questions


def _labelled(
    rows: Iterable[dict],
    *,
    name: str,
    split: str,
    seed: int,
    options: Mapping[str, Any],
    place: str,
    metadata_fields: tuple[str, ...] = (),
) -> list[Question]:
    """ARC / CommonsenseQA rows: id, question (the stem), choices {text, label}, answerKey."""
    questions = []
    for n, row in enumerate(rows):
        qid = str(row.get("id"))
        where = f"{place} row {n} (record {qid})"
        choices = row.get("choices")
        if not isinstance(choices, dict):
            raise record_error(where, "'choices' is not an object with 'text' and 'label' lists")
        labels = [str(label) for label in choices.get("label") or ()]
        answer = answer_from_label(row.get("answerKey"), labels, where)
        metadata: dict[str, Any] = {"labels": tuple(labels)}
        metadata.update({k: row[k] for k in metadata_fields if k in row})
        questions.append(
            checked_question(
                where,
                id=qid,
                question=row.get("question"),
                options=list(choices.get("text") or ()),
                answer=answer,
                split=split,
                metadata=metadata,
            )
        )
    return questions


def _truthfulqa(task: str) -> Converter:
    def convert(
        rows: Iterable[dict], *, name: str, split: str, seed: int, options: Mapping[str, Any], place: str
    ) -> list[Question]:
        shuffle = options.get("shuffle", True)
        if not isinstance(shuffle, bool):
            raise UserError(
                f"config key benchmark.shuffle: {shuffle!r} is not true or false; true (the default) "
                "shuffles the options with the run's seed, false keeps the file order"
            )
        questions = []
        for n, row in enumerate(rows):
            qid = f"{name}/v1/{n}"
            where = f"{place} row {n} (record {qid})"
            targets = row.get(f"{task}_targets")
            if not isinstance(targets, dict):
                raise record_error(where, f"the record has no {task}_targets object")
            pairs = [
                (t, m) for t, m in zip(targets.get("choices") or (), targets.get("labels") or ()) if str(t).strip()
            ]
            true = [i for i, (_, mark) in enumerate(pairs) if mark == 1]
            if task == "mc1" and len(true) > 1:
                raise record_error(where, f"mc1_targets marks {len(true)} answers true; mc1 needs exactly one")
            metadata: dict[str, Any] = {"version": "v1"}
            if task == "mc2":
                metadata["correct_set"] = tuple(true)
            question = checked_question(
                where,
                id=qid,
                question=row.get("question"),
                options=[t for t, _ in pairs],
                answer=true[0] if true else None,
                metadata=metadata,
            )
            questions.append(seeded_shuffle(question, seed) if shuffle else question)
        return questions

    return convert


def _medqa_4(
    rows: Iterable[dict], *, name: str, split: str, seed: int, options: Mapping[str, Any], place: str
) -> list[Question]:
    return [
        medqa_question(row, qid=f"{name}/{n}", place=f"{place} row {n} (record {name}/{n})", split=split)
        for n, row in enumerate(rows)
    ]


def _medmcqa(
    rows: Iterable[dict], *, name: str, split: str, seed: int, options: Mapping[str, Any], place: str
) -> list[Question]:
    questions = []
    for n, row in enumerate(rows):
        qid = f"medmcqa/{n}"
        metadata = {k: row[k] for k in ("id", "topic_name", "choice_type") if row.get(k) is not None}
        questions.append(
            checked_question(
                f"{place} row {n} (record {qid})",
                id=qid,
                question=row.get("question"),
                options=[row.get(k) for k in ("opa", "opb", "opc", "opd")],
                answer=row.get("cop"),
                subject=row.get("subject_name"),
                split=split,
                metadata=metadata,
            )
        )
    return questions


def lm_eval_clean(text: str) -> str:
    """HellaSwag text as lm-eval cleans it: " [title]" -> ". ", other [markers] removed, double spaces single.

    >>> lm_eval_clean("Hello [header] world [title]Next  step")
    'Hello world. Next step'
    """
    text = text.strip().replace(" [title]", ". ")
    text = re.sub(r"\[.*?\]", "", text)
    return text.replace("  ", " ")


def _hellaswag(
    rows: Iterable[dict], *, name: str, split: str, seed: int, options: Mapping[str, Any], place: str
) -> list[Question]:
    questions = []
    for n, row in enumerate(rows):
        qid = f"hellaswag/{n}"
        label = str(row.get("activity_label") or "")
        ctx = f"{row.get('ctx_a') or ''} {str(row.get('ctx_b') or '').capitalize()}"
        gold = str(row.get("label", "")).strip()
        where = f"{place} row {n} (record {qid})"
        if not gold.isdigit():
            raise record_error(where, f"label {gold!r} is not a number 0-3")
        questions.append(
            checked_question(
                where,
                id=qid,
                question=lm_eval_clean(f"{label}: {ctx}"),
                options=[lm_eval_clean(e) for e in row.get("endings") or ()],
                answer=int(gold),
                subject=label or None,
                split=split,
                metadata={"ind": row.get("ind")} if row.get("ind") is not None else None,
            )
        )
    return questions


def _winogrande(
    rows: Iterable[dict], *, name: str, split: str, seed: int, options: Mapping[str, Any], place: str
) -> list[Question]:
    questions = []
    for n, row in enumerate(rows):
        qid = f"winogrande/{n}"
        where = f"{place} row {n} (record {qid})"
        raw = str(row.get("answer") or "").strip()
        if raw not in ("1", "2"):
            raise record_error(where, f"answer {raw!r} is not 1 or 2")
        questions.append(
            checked_question(
                where,
                id=qid,
                question=row.get("sentence"),
                options=(row.get("option1"), row.get("option2")),
                answer=int(raw) - 1,
                split=split,
            )
        )
    return questions


# --- the registry ----------------------------------------------------------------------------------------------


def _fixed(path: str) -> Callable[[str, Mapping[str, Any]], str]:
    return lambda split, options: path


LOCAL: dict[str, LocalFiles] = {
    "mmlu": LocalFiles(
        ("mmlu/test/*.csv", "mmlu/dev/*.csv", "mmlu/val/*.csv"),
        171,
        "e79cbf5a0f6f318b47470074634249c408631c1821b8199bfb89a03fa8ddb6de",
        lambda s, o: f"mmlu/{s}",
    ),
    "mmlu_redux": LocalFiles(
        ("mmlu_redux/*.csv",),
        57,
        "715738b145cef1175e023b0836bd046e2be52e467f81a8355b1610736c933705",
        _fixed("mmlu_redux"),
    ),
    "arc_challenge": LocalFiles(
        ("arc_challenge/ARC-Challenge-*.jsonl",),
        3,
        "03f7c09085107b6375a1bbad1e030e95db1ad20647197a3439d1f7dd2e03779a",
        lambda s, o: f"arc_challenge/ARC-Challenge-{s.capitalize()}.jsonl",
    ),
    "arc_easy": LocalFiles(
        ("arc_easy/ARC-Easy-*.jsonl",),
        1,
        "e25e773c1163537c9dd42f91ea6362f0cefee8aa4627af5ab8fbb706e90a8c22",
        lambda s, o: f"arc_easy/ARC-Easy-{s.capitalize()}.jsonl",
    ),
    "medqa": LocalFiles(
        ("medqa/test.jsonl",),
        1,
        "ac89f646bc18a2b2ff57d0b90cc38343165ccb18fa3ff7ba2bf3ae30270f14fc",
        _fixed("medqa/test.jsonl"),
    ),
    "medqa_4": LocalFiles(
        ("medqa/4_options/phrases_no_exclude_test.jsonl",),
        1,
        "c5a53405cdcf48b0c5f7d34633178ba7077b906756289585a93605a9a498e69b",
        _fixed("medqa/4_options/phrases_no_exclude_test.jsonl"),
    ),
    "medmcqa": LocalFiles(
        ("medmcqa/validation.jsonl",),
        1,
        "282ba4cc09c8f4b114f970385c9768c7a31e88fe2c3ddddc257bae9741e93b27",
        _fixed("medmcqa/validation.jsonl"),
    ),
    "commonsenseqa": LocalFiles(
        ("commonsenseqa/dev_rand_split.jsonl",),
        1,
        "0e8f97b3152477f011b2fbc8b39e1034216fbfe0a9cd601f028ab7c81ac737b5",
        _fixed("commonsenseqa/dev_rand_split.jsonl"),
    ),
    "hellaswag": LocalFiles(
        ("hellaswag/hellaswag_val_full.txt.bz2",),
        1,
        "c0eca68531e82104cbe47017de74fb3cd5601ac735cce8fb2e934b5db9141604",
        _fixed("hellaswag/hellaswag_val_full.txt.bz2"),
    ),
    "winogrande": LocalFiles(
        ("winogrande/dev.jsonl", "winogrande/dev-labels.lst"),
        2,
        "274ce268e308f602e3ab15ca937de402f36d612e4ab4ad71903b0790ffe4bbb0",
        _fixed("winogrande/dev.jsonl"),
    ),
}
_TRUTHFULQA_FILES = LocalFiles(
    (
        "truthfulqa/mc_task.json",
        "truthfulqa/TruthfulQA.csv",
        "truthfulqa/v1/mc_task.json",
        "truthfulqa/v1/TruthfulQA.csv",
    ),
    4,
    "cc143bfa96653a9172077a4be48841d4b297609fb209f0828702fe63d242931e",
    lambda s, o: "truthfulqa/mc_task.json" if str(o.get("version", "v1")) == "2025" else "truthfulqa/v1/mc_task.json",
)
LOCAL["truthfulqa_mc1"] = LOCAL["truthfulqa_mc2"] = _TRUTHFULQA_FILES

# Raw loaders' split names; the Hub's names of the same splits.
HUB: dict[str, HubSource] = {
    "mmlu": HubSource("cais/mmlu", "all", {"test": "test", "dev": "dev", "val": "validation"}, "MIT", 14042, _mmlu),
    "mmlu_redux": HubSource(
        "edinburgh-dawg/mmlu-redux-2.0", "{subject}", {"test": "test"}, "CC BY 4.0", 5700, _mmlu_redux
    ),
    "arc_challenge": HubSource(
        "allenai/ai2_arc",
        "ARC-Challenge",
        {"test": "test", "dev": "validation", "train": "train"},
        "CC BY-SA 4.0",
        1172,
        _labelled,
    ),
    "arc_easy": HubSource(
        "allenai/ai2_arc",
        "ARC-Easy",
        {"test": "test", "dev": "validation", "train": "train"},
        "CC BY-SA 4.0",
        2376,
        _labelled,
    ),
    "truthfulqa_mc1": HubSource(
        "truthfulqa/truthful_qa",
        "multiple_choice",
        {"test": "validation"},
        "Apache-2.0",
        817,
        _truthfulqa("mc1"),
        options={"version": "v1"},
    ),
    "truthfulqa_mc2": HubSource(
        "truthfulqa/truthful_qa",
        "multiple_choice",
        {"test": "validation"},
        "Apache-2.0",
        817,
        _truthfulqa("mc2"),
        options={"version": "v1"},
    ),
    "medqa_4": HubSource("GBaker/MedQA-USMLE-4-options", None, {"test": "test"}, "MIT", 1273, _medqa_4),
    "medmcqa": HubSource(
        "openlifescienceai/medmcqa",
        None,
        {"validation": "validation"},
        "MIT (upstream; HF card: Apache-2.0)",
        4183,
        _medmcqa,
    ),
    "commonsenseqa": HubSource(
        "tau/commonsense_qa",
        None,
        {"dev": "validation"},
        "MIT (HF card, not checked)",
        1221,
        lambda rows, **kw: _labelled(rows, metadata_fields=("question_concept",), **kw),
    ),
    "hellaswag": HubSource("Rowan/hellaswag", None, {"val": "validation"}, "MIT", 10042, _hellaswag),
    "winogrande": HubSource(
        "allenai/winogrande",
        "winogrande_xl",
        {"dev": "validation"},
        "Apache-2.0 (repo LICENSE; HF card: CC-BY)",
        1267,
        _winogrande,
    ),
}
LOCAL_LICENCES = {"medqa": "MIT (upstream jind11/MedQA)", "synthetic": "built in", "generic": "your file"}
LOCAL_COUNTS = {"medqa": 1273}


# --- reading ---------------------------------------------------------------------------------------------------


def fetch_command(name: str, data_dir: str | Path) -> str:
    return f"python -m src.data fetch {name} --to {data_dir}"


def raw_present(name: str, data_dir: str | Path, split: str | None, options: Mapping[str, Any] | None) -> bool:
    """Whether the raw file the loader reads for `split` is under `data_dir` (True when unknown: the raw loader
    decides)."""
    local, source = LOCAL.get(name), HUB.get(name)
    if local is None or source is None:
        return True
    our_split = split if split is not None else next(iter(source.splits))
    if our_split not in source.splits:
        return True  # the raw loader names the valid splits
    try:
        relative = local.default(our_split, options or {})
    except Exception:  # noqa: BLE001 - an odd option: let the raw loader report it
        return True
    return (Path(data_dir).expanduser() / relative).exists()


def offline() -> bool:
    """`HF_HUB_OFFLINE` or `HF_DATASETS_OFFLINE` set true now (not only when `datasets` was imported)."""
    return any(os.environ.get(var, "").strip().upper() in {"1", "ON", "YES", "TRUE"} for var in OFFLINE_ENVS)


def hub_unreachable(timeout: float = 3.0) -> str | None:
    """Why the Hub cannot be reached (its host does not resolve or connect within `timeout`), or None.

    Checked before a download so that a machine without network fails in milliseconds rather than after
    `huggingface_hub`'s retries (~25 s); skipped (None) behind a proxy, which may be the only way out.
    """
    if any(os.environ.get(var) for var in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy")):
        return None
    endpoint = urlparse(os.environ.get("HF_ENDPOINT") or "https://huggingface.co")
    host, port = endpoint.hostname or "huggingface.co", endpoint.port or (80 if endpoint.scheme == "http" else 443)
    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except OSError as err:
        return f"no network: {host} {type(err).__name__}"
    return None


@contextlib.contextmanager
def offline_libraries(on: bool) -> Iterator[None]:
    """`datasets` and `huggingface_hub` read the offline variables when imported; set their flags for one load."""
    if not on:
        yield
        return
    import datasets.config
    import huggingface_hub.constants

    saved = datasets.config.HF_HUB_OFFLINE, huggingface_hub.constants.HF_HUB_OFFLINE
    datasets.config.HF_HUB_OFFLINE = huggingface_hub.constants.HF_HUB_OFFLINE = True
    try:
        yield
    finally:
        datasets.config.HF_HUB_OFFLINE, huggingface_hub.constants.HF_HUB_OFFLINE = saved


def snapshot_roots(data_dir: str | Path | None) -> list[Path]:
    """Folders that may hold Hub-layout snapshots: `$MCQ_HUB_DIR`, then `data_dir/hub`."""
    roots = [Path(os.environ[HUB_DIR_ENV]).expanduser()] if os.environ.get(HUB_DIR_ENV) else []
    if data_dir is not None:
        roots.append(Path(data_dir).expanduser() / "hub")
    return roots


def snapshot_files(source: HubSource, config: str | None, hub_split: str, data_dir: str | Path | None) -> list[Path]:
    """The parquet files of one config and split in the first snapshot folder that has them."""
    for root in snapshot_roots(data_dir):
        folder = root / source.repo / source.layout_dir(config)
        files = sorted(folder.glob(f"{hub_split}-*.parquet"))
        if files:
            return files
    return []


def _require_datasets() -> Any:
    try:
        import datasets
    except ImportError:
        raise UserError(
            "reading a benchmark from the Hugging Face Hub needs the datasets package; "
            "pip install datasets (or pip install -e .), or set data_dir to the raw files"
        ) from None
    return datasets


def _read_parquet(files: list[Path]) -> list[dict]:
    datasets = _require_datasets()
    try:
        return list(datasets.load_dataset("parquet", data_files=[str(f) for f in files], split="train"))
    except Exception as err:  # noqa: BLE001 - a damaged file: one line naming it
        raise UserError(
            " ".join(
                f"{files[0].parent}: cannot read the parquet files ({type(err).__name__}: {err}); "
                "fetch them again".split()
            )
        ) from None


def absent_error(
    name: str,
    source: HubSource,
    split: str | None,
    data_dir: str | Path,
    reason: str = "offline",
    options: Mapping[str, Any] | None = None,
) -> UserError:
    """`benchmark mmlu: files absent under D (no D/mmlu/test) and the Hub dataset cais/mmlu (all, test) is not in
    ...`"""
    local = LOCAL.get(name)
    our_split = split if split is not None else next(iter(source.splits))
    missing = f" (no {Path(data_dir) / local.default(our_split, options or {})})" if local is not None else ""
    return UserError(
        f"benchmark {name}: files absent under {data_dir}{missing} and the Hub dataset "
        f"{source.describe(our_split)} is not in the cache and cannot be downloaded ({reason}); "
        f"run {fetch_command(name, data_dir)} on a machine with network, or set data_dir "
        "(or benchmark.path) to the files"
    )


def read_hub_rows(
    name: str, source: HubSource, config: str | None, split: str, data_dir: str | Path, *, allow_snapshot: bool = True
) -> tuple[list[dict], str]:
    """(rows, where they came from) of one config and our split: a snapshot folder, else `datasets.load_dataset`."""
    hub_split = source.splits[split]
    files = snapshot_files(source, config, hub_split, data_dir) if allow_snapshot else []
    if files:
        return _read_parquet(files), str(files[0].parent)
    dataset = load_hub_dataset(name, source, config, split, data_dir)
    return list(dataset), f"hf://datasets/{source.repo}@{source.revision}/{source.layout_dir(config)}/{hub_split}"


def load_hub_dataset(name: str, source: HubSource, config: str | None, split: str, data_dir: str | Path) -> Any:
    """`datasets.load_dataset(repo, config, split=..., revision=...)`: the cache, or a download when online."""
    hub_split = source.splits[split]
    datasets = _require_datasets()
    unreachable = None if offline() else hub_unreachable()
    is_offline = offline() or unreachable is not None  # unreachable: the cache alone, as offline
    try:
        with offline_libraries(is_offline):
            rows = datasets.load_dataset(source.repo, config, split=hub_split, revision=source.revision)
    except Exception as err:  # noqa: BLE001 - offline, unreachable, absent: one line
        reason = (
            ("offline" if offline() else unreachable) if is_offline else f"the Hub refused: {type(err).__name__}: {err}"
        )
        raise absent_error(name, source, split, data_dir, " ".join(str(reason).split())) from None
    return rows


def hub_questions(
    name: str, *, data_dir: str | Path, split: str | None, seed: int, options: Mapping[str, Any]
) -> list[Question]:
    """The benchmark's questions from its Hub dataset (a snapshot folder, the `datasets` cache or a download)."""
    source = HUB[name]
    split = choose_split(split, tuple(source.splits), name)
    for key, only in source.options.items():
        if key in options and str(options[key]) != only:
            raise UserError(
                f"config key benchmark.{key}: the Hub dataset {source.repo} has only {key} {only}; "
                f"set it to {only}, or data_dir to the raw files of {key} {options[key]}"
            )
    shuffle = options.get("shuffle", True)
    if not isinstance(shuffle, bool):  # checked before any download, as the raw loaders do before reading
        raise UserError(
            f"config key benchmark.shuffle: {shuffle!r} is not true or false; true (the default) "
            "shuffles the options with the run's seed, false keeps the file order"
        )
    configs = source.configs(options)
    if name == "mmlu":
        _wanted(options)  # an unknown subject is refused before any download
    questions: list[Question] = []
    for config in configs:
        rows, place = read_hub_rows(name, source, config, split, data_dir)
        extra = {"subject": config} if source.config == "{subject}" else {}
        questions += source.convert(rows, name=name, split=split, seed=seed, options=options, place=place, **extra)
    return questions


# --- list / check ----------------------------------------------------------------------------------------------


def local_digest(files: list[Path], root: str | Path) -> str:
    """sha256 of `<relative path> <file sha256>\\n` lines in path order (what `LocalFiles.digest` pins)."""
    lines = "".join(
        f"{f.relative_to(Path(root).expanduser()).as_posix()} {hashlib.sha256(f.read_bytes()).hexdigest()}\n"
        for f in files
    )
    return hashlib.sha256(lines.encode()).hexdigest()


def in_datasets_cache(source: HubSource) -> bool:
    """Whether the `datasets` cache holds a prepared copy of the repo: `<owner>___<name>/<config>/<version>/<hash>/`
    with its `dataset_info.json`. A build killed halfway leaves `<hash>.incomplete/` (and `huggingface_hub` an
    `.incomplete` download), which `datasets` reuses on the next load and which is not a copy."""
    cache = os.environ.get("HF_DATASETS_CACHE") or os.path.join(
        os.environ.get("HF_HOME") or os.path.join(os.environ.get("XDG_CACHE_HOME") or "~/.cache", "huggingface"),
        "datasets",
    )
    owner, _, repo = source.repo.partition("/")
    # the folder name datasets' CachedDatasetModuleFactory looks for (datasets.naming.camelcase_to_snakecase)
    snake = re.sub(r"([a-z\d])([A-Z])", r"\1_\2", re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", repo)).lower()
    folder = Path(cache).expanduser() / f"{owner}___{snake}"
    return any(not info.parent.name.endswith(".incomplete") for info in folder.glob("*/*/*/dataset_info.json"))
