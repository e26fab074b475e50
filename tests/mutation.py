"""`python -m tests.mutation`: a mutation check of the metric, parsing, variant-rule, interval, paired-test,
resume, report-summary, chance-verdict, recheck, Slurm-queue, sweeper, adaptive-repetition, per-question-statement
and resampling-draw code, and the weights' identity, response cache, job runner, token budget, packed
attention, lm-eval task and MLflow store code, run on demand (not in CI; docs/mutation.md has the latest score and
survivors).

Each mutant is one small operator change in one function of TARGETS (a comparison `<` made `<=`, `==` made `!=`,
`+` made `-`, `and` made `or`, a `not` dropped, an integer n made n + 1, True made False, `reverse=` flipped). It
is written into a copy of the tree in a temporary folder (never into the worktree) and the target's fast tests and
the module's doctests run against it (`-m "not slow" -x`); a mutant is killed when they fail (or time out), and
survives when they pass.
The unmutated copy must pass first, or the target is reported as broken and not mutated.

    python -m tests.mutation                      # every mutant of every target
    python -m tests.mutation --sample 120         # 120 of them, drawn with --seed (default 0), spread over targets
    python -m tests.mutation --target parsing --list    # the mutants, without running anything
    python -m tests.mutation --match "src/core/parsing.py:288 "  # the mutants of one line (a survivor, again)

Mutants are chosen by the AST (`ast`), each written out by `ast.unparse` of its module (comments are lost in the
copy, behaviour is not). Mutations inside f-strings and `raise` statements (messages, not behaviour) are left out.
"""

from __future__ import annotations

import argparse
import ast
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Target:
    """Functions of one module to mutate (None: every function), and the fast tests that should kill them."""

    name: str
    path: str
    functions: tuple[str, ...] | None
    tests: tuple[str, ...]
    keyword: str | None = None  # pytest -k


TARGETS = (
    Target(
        "metrics",
        "src/metrics/cora.py",
        ("response_consistency", "mcqa_score", "mcqa_metrics", "_consistency_index", "cora_metrics"),
        ("tests/test_metrics_cora.py", "tests/test_metrics_missing_variants.py"),
    ),
    Target(
        "metrics",
        "src/metrics/repetition.py",
        ("question_outcomes", "repetition_metrics"),
        ("tests/test_metrics_repetition.py", "tests/test_sure_rule.py"),
    ),
    Target(
        "parsing",
        "src/core/parsing.py",
        ("_settle", "_phrase_slots", "_label_of", "_hedged", "_label_slot", "strip_reasoning", "parse_with_rule"),
        ("tests/test_parsing.py", "tests/test_parse_rule.py", "tests/test_parser_corpus.py"),
    ),
    Target(
        "variant-rules",
        "src/variants/rules.py",
        ("__init__", "_anchor", "fixed", "arrange", "free_slots", "check", "_refs_broken", "capped"),
        (
            "tests/test_variants_references.py",
            "tests/test_variants_cora.py",
            "tests/test_variants_permutations.py",
            "src/variants/cora.py",
            "src/variants/permutations.py",
        ),
    ),  # their doctests build Rules(question)
    Target(
        "intervals",
        "src/metrics/intervals.py",
        ("wilson_interval", "resample_counts", "bootstrap_values", "percentile_interval"),
        ("tests/test_intervals.py", "tests/test_paired.py"),
    ),  # the paired draws are the run's own bootstrap's
    Target(
        "paired",
        "src/metrics/paired.py",
        ("_counts", "bootstrap_p_value", "paired_differences", "holm", "questions_needed"),
        ("tests/test_paired.py",),
    ),
    Target("paired", "src/compare/paired.py", ("_condition", "_power_row", "lookup"), ("tests/test_paired.py",)),
    Target(
        "resume",
        "src/tracking/runs.py",
        ("finished_run_of", "provably_dead", "mark_interrupted_runs"),
        ("tests/test_reliability.py",),
    ),
    # the report's first table, the chance verdict, the recheck, the Slurm queue,
    # the project's sweeper plugin and adaptive repetitions. The Slurm and Ray launcher plugins are left out: only
    # the opt-in cluster tiers run them (a Slurm cluster, Ray), never the fast tests a mutant is judged by.
    Target("summary", "src/compare/summary.py", None, ("tests/test_paired.py",)),
    Target("summary", "src/compare/tables/common.py", ("p_text",), ("tests/test_paired.py",)),  # the summary's p
    Target(
        "chance",
        "src/metrics/chance.py",
        None,
        ("tests/test_chance_verdict.py", "tests/test_report_review.py", "tests/test_progress_and_closing.py"),
        keyword="chance or closing_block",
    ),  # the verdict's tests (the progress bars' tests need tqdm on)
    Target("recheck", "src/recheck.py", None, ("tests/test_recheck.py",)),
    Target("slurm-queue", "src/sweep/slurm_queue.py", None, ("tests/test_slurm_queue.py",)),
    Target(
        "plugins",
        "hydra_plugins/mcq_consistency_sweeper.py",
        None,
        ("tests/test_sweeps.py",),
        keyword="sweeper or launcher_worker",
    ),
    Target("adaptive", "src/answering/adaptive.py", None, ("tests/test_adaptive.py",)),
    # each family's per-question statement (its value, interval and paired test come from it)
    # and the draws every resampling counts with (the intervals', the paired tests' and CoRA's slot bootstrap)
    Target(
        "statement",
        "src/metrics/per_question.py",
        None,
        ("tests/test_metric_statement.py", "tests/test_intervals.py", "tests/test_paired.py"),
    ),
    Target(
        "draws",
        "src/metrics/draws.py",
        None,
        ("tests/test_intervals.py", "tests/test_paired.py", "tests/test_metrics_cora.py"),
    ),
    # the weights' and the
    # data's identity, the response cache, the job, the token budgets and packed attention, lm-eval's tasks, the
    # MLflow store and its adapter. Each with the fast tests that exercise it (a keyword where a file's other tests
    # are slow and exercise something else).
    Target(
        "weights",
        "src/backends/weights.py",
        None,
        ("tests/test_content_identity.py", "tests/test_gguf_cache.py"),
        keyword="test_gguf_cache or hashed or hub or (new_weights and false) or loader_reads or vllm_local_gguf "
        "or while_the_model_files_change or variables",
    ),  # the identity's fast tests, by their names: the file's others exercise the cache
    Target(
        "answer-cache",
        "src/answering/cache.py",
        None,
        ("tests/test_shared_cache.py", "tests/test_content_identity.py", "tests/test_store_defects.py"),
        keyword="test_shared_cache or cache_key or response_cache",
    ),
    Target(
        "runner",
        "src/job/runner.py",
        None,
        (
            "tests/test_run_pipeline.py",
            "tests/test_validity.py",
            "tests/test_records_unchanged.py",
            "tests/test_adaptive.py",
            "tests/test_job_config_reads.py",
            "tests/test_content_identity.py",
        ),
    ),  # not test_progress_and_closing.py: its progress-bar tests need tqdm, which the check turns off;
    # test_content_identity.py: a finished job's rerun is skipped and says so
    Target(
        "budget",
        "src/backends/hf/budget.py",
        None,
        (
            "tests/test_batch_tokens.py",
            "tests/test_generation_sharing.py",
            "tests/test_architectures.py",
            "tests/test_memory_budget.py",
        ),
        keyword="test_batch_tokens or memory or test_architectures or budget.py",
    ),  # the memory estimates per token are checked in test_generation_sharing.py; every architecture's fields in
    # test_architectures.py; the fallbacks, the GiB's tokens and the freed failed pass in
    # test_memory_budget.py; `budget.py`: the module's own doctests (a keyword that leaves them out hides survivors)
    Target(
        "packing",
        "src/backends/hf/packing.py",
        None,
        (
            "tests/test_prefix_sharing.py",
            "tests/test_generation_sharing.py",
            "tests/test_batch_tokens.py",
            "tests/test_memory_budget.py",
        ),
    ),  # test_batch_tokens.py: a recovery that repacks more than one prompt (wrong answers after out of memory);
    # test_memory_budget.py: a generation pass counted with its samples' tokens
    Target(
        "lm-eval",
        "src/benchmarks/lm_eval.py",
        None,
        (
            "tests/test_lm_eval_benchmark.py",
            "tests/test_task_reading.py",
            "tests/test_docs_warnings.py",
            "tests/test_task_folder_and_pool.py",
            "tests/test_lm_eval_requests.py",
        ),
    ),  # test_docs_warnings.py: the skipped documents' and the target reading's warnings (a stand-in task);
    # test_task_folder_and_pool.py: the include_path folder check, a one-split task's own document left out;
    # test_lm_eval_requests.py: what prompt=lm_eval adds to a question (labels scored, delimiter, chat turns)
    Target(
        "lm-eval-requests",
        "src/core/prompts.py",
        ("lm_eval_request",),
        ("tests/test_lm_eval_requests.py",),
    ),  # prompt=lm_eval's request: lm-eval's own (context, continuation) pair
    Target(
        "lm-eval-suite",
        "src/job/lm_eval_suite.py",
        None,
        ("tests/test_lm_eval_suite.py",),
    ),  # a suite's lm-eval numbers: acc, per-character acc_norm, the groups'
    Target(
        "lm-eval-suite",
        "src/benchmarks/lm_eval.py",
        ("scoring_refusal", "suite_scores", "lm_eval_contexts", "_with_lm_evals_text", "load_lm_eval"),
        (
            "tests/test_lm_eval_suite.py",
            "tests/test_lm_eval_requests.py",
            "tests/test_lm_eval_benchmark.py",
            "tests/test_docs_warnings.py",
            "tests/test_task_reading.py",
        ),
    ),  # each task of a suite asked as lm-eval asks it or refused; its own option style; the sampler's draws;
    # test_docs_warnings.py: the skipped documents' and the target reading's warnings (a stand-in task);
    # test_task_reading.py: a group of one task named as a group of many
    Target(
        "lm-eval-suite",
        "src/benchmarks/lm_eval.py",
        (
            "_listed_lines",
            "_option_ends",
            "split_listed_options",
            "option_listing",
            "task_shapes",
            "check_task_shapes",
            "task_spec",
            "task_label",
            "_tasks_of_list",
        ),
        ("tests/test_lm_eval_suite.py", "tests/test_lm_eval_requests.py"),
    ),  # a label task's listing read to be listed again; each task's shape against the variant set; a list of tasks
    Target(
        "lm-eval-suite",
        "src/answer_formats/base.py",
        ("request", "listed_texts"),
        ("tests/test_lm_eval_requests.py",),
    ),  # a label task's listed options under scoring=cloze, in each variant's order (src/core/prompts.py `relisted`
    # writes them: no operator to mutate, so no target)
    Target(
        "lm-eval-suite",
        "src/core/validity.py",
        ("check_shown_options", "check_validity"),
        ("tests/test_validity.py", "tests/test_lm_eval_suite.py"),
    ),  # the rule of shown options, for a run and for each task of a suite
    Target(
        "lm-eval-suite",
        "src/benchmarks/__init__.py",
        ("continuation_style", "continuation_tasks"),
        ("tests/test_lm_eval_suite.py", "tests/test_lm_eval_benchmark.py"),
    ),  # the validity contract per task of a suite
    Target(
        "tree-attention",
        "src/backends/hf/tree_attention.py",
        None,
        ("tests/test_tree_attention.py",),
    ),  # a packed pass's attention in blocks of queries
    Target(
        "vllm",
        "src/backends/vllm_backend.py",
        None,
        ("tests/test_vllm_backend.py", "tests/test_backend_text.py"),
        keyword="vllm",
    ),  # the engine's lifetime, its log's stream and level, chunked prefill and seeds, request building
    Target(
        "store",
        "src/tracking/store.py",
        None,
        (
            "tests/test_store_defects.py",
            "tests/test_store_errors.py",
            "tests/test_offline_mode.py",
            "tests/test_reliability.py",
            "tests/test_store_retries.py",
            "tests/test_store_settings.py",
        ),
    ),  # test_store_settings.py: the offline folder's default, the file-store check, the retry budget's bounds
    Target(
        "store",
        "src/tracking/mlflow_adapter.py",
        None,
        ("tests/test_framework_adapters.py", "tests/test_store_errors.py"),
    ),
)

SWAPS = {
    ast.Lt: ast.LtE,
    ast.LtE: ast.Lt,
    ast.Gt: ast.GtE,
    ast.GtE: ast.Gt,
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
    ast.Is: ast.IsNot,
    ast.IsNot: ast.Is,
    ast.Add: ast.Sub,
    ast.Sub: ast.Add,
    ast.Mult: ast.Div,
    ast.Div: ast.Mult,
    ast.And: ast.Or,
    ast.Or: ast.And,
}
SYMBOL = {
    ast.Lt: "<",
    ast.LtE: "<=",
    ast.Gt: ">",
    ast.GtE: ">=",
    ast.Eq: "==",
    ast.NotEq: "!=",
    ast.In: "in",
    ast.NotIn: "not in",
    ast.Is: "is",
    ast.IsNot: "is not",
    ast.Add: "+",
    ast.Sub: "-",
    ast.Mult: "*",
    ast.Div: "/",
    ast.And: "and",
    ast.Or: "or",
}


@dataclass(frozen=True)
class Mutant:
    target: Target
    function: str
    line: int
    what: str  # e.g. "< -> <="
    site: int  # index of the mutation site in the module's walk, to make it again

    @property
    def label(self) -> str:
        return f"{self.target.path}:{self.line} {self.function}: {self.what}"


def _sites(node: ast.AST):
    """(node, what, apply) for every mutation site under `node`; `apply` mutates the node in place."""
    if isinstance(node, ast.Compare):
        for i, op in enumerate(node.ops):
            if type(op) in SWAPS:
                yield (
                    node,
                    f"{SYMBOL[type(op)]} -> {SYMBOL[SWAPS[type(op)]]}",
                    (lambda n, i=i: n.ops.__setitem__(i, SWAPS[type(n.ops[i])]())),
                )
    elif isinstance(node, (ast.BinOp, ast.AugAssign)) and type(node.op) in SWAPS:
        yield (
            node,
            f"{SYMBOL[type(node.op)]} -> {SYMBOL[SWAPS[type(node.op)]]}",
            (lambda n: setattr(n, "op", SWAPS[type(n.op)]())),
        )
    elif isinstance(node, ast.BoolOp):
        yield (
            node,
            f"{SYMBOL[type(node.op)]} -> {SYMBOL[SWAPS[type(node.op)]]}",
            (lambda n: setattr(n, "op", SWAPS[type(n.op)]())),
        )
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        yield node, "not x -> x", (lambda n: setattr(n, "op", ast.UAdd()))  # +bool(x) is x's truth
    elif isinstance(node, ast.Constant) and isinstance(node.value, bool):
        yield node, f"{node.value} -> {not node.value}", (lambda n: setattr(n, "value", not n.value))
    elif isinstance(node, ast.Constant) and type(node.value) is int:
        yield node, f"{node.value} -> {node.value + 1}", (lambda n: setattr(n, "value", n.value + 1))
    elif isinstance(node, ast.keyword) and node.arg == "reverse":
        yield node, "reverse=x -> reverse=not x", (lambda n: setattr(n, "value", ast.UnaryOp(ast.Not(), n.value)))


def _walk_behaviour(node: ast.AST):
    """ast.walk, leaving out f-strings, raise statements and docstrings' neighbours: messages, not behaviour."""
    todo = [node]
    while todo:
        current = todo.pop()
        if isinstance(current, (ast.JoinedStr, ast.Raise)):
            continue
        yield current
        todo.extend(reversed(list(ast.iter_child_nodes(current))))


def _functions(tree: ast.Module):
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node


def mutants(target: Target) -> list[Mutant]:
    tree = ast.parse((REPO / target.path).read_text(encoding="utf-8"))
    out, site = [], 0
    for function in _functions(tree):
        if target.functions is not None and function.name not in target.functions:
            continue
        for node in _walk_behaviour(function):
            for found, what, _ in _sites(node):
                out.append(Mutant(target, function.name, getattr(found, "lineno", function.lineno), what, site))
                site += 1
    return out


def mutated_source(mutant: Mutant, source: str | None = None) -> str:
    """The module's source (`source`, else the worktree's file) with the mutant applied (sites are counted in the
    same order as `mutants`). A run passes its copy's source: the worktree may change while the run goes on."""
    tree = ast.parse((REPO / mutant.target.path).read_text(encoding="utf-8") if source is None else source)
    site = 0
    for function in _functions(tree):
        if mutant.target.functions is not None and function.name not in mutant.target.functions:
            continue
        for node in _walk_behaviour(function):
            for found, _, apply in _sites(node):
                if site == mutant.site:
                    apply(found)
                    return ast.unparse(ast.fix_missing_locations(tree))
                site += 1
    raise LookupError(mutant.label)


def copy_tree(into: Path) -> None:
    """The files git tracks or would track (no ignored build output, stores or caches) copied into `into`."""
    files = (
        subprocess.run(
            ["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=REPO, capture_output=True, check=True
        )
        .stdout.decode()
        .split("\0")
    )
    for name in filter(None, files):
        source = REPO / name
        if source.is_file():
            (into / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, into / name)


def run_tests(tree: Path, target: Target, timeout: float) -> tuple[str, float, str]:
    """'pass', 'fail', 'error' or 'timeout' of the target's fast tests in `tree`, the seconds they took, and their
    output's last lines."""
    data = Path(os.environ.get("MCQ_DATA_DIR", REPO.parent / "shared" / "data")).resolve()
    # the module's own doctests too, as the suite runs them (--doctest-modules)
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "-x",
        "-q",
        "-m",
        "not slow",
        "-p",
        "no:cacheprovider",
        "-o",
        "addopts=",
        "--disable-plugin-autoload",
        "-p",
        "hypothesispytest",
        "--no-header",
        "--doctest-modules",
        *(["-k", target.keyword] if target.keyword else []),
        target.path,
        *target.tests,
    ]
    env = {**os.environ, "MCQ_DATA_DIR": str(data), "TQDM_DISABLE": "1", "PYTHONDONTWRITEBYTECODE": "1"}
    env.pop("PYTHONPATH", None)  # the copy's own src, found from its root (the working folder)
    start = time.monotonic()
    try:
        proc = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return "timeout", time.monotonic() - start, ""
    tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-15:])
    # exit 1: a test failed; anything else (2: the mutated module did not import) kills it too, but is said
    verdict = {0: "pass", 1: "fail"}.get(proc.returncode, "error")
    return verdict, time.monotonic() - start, tail


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.mutation", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--target",
        action="append",
        choices=sorted({t.name for t in TARGETS}),
        help="only these targets (repeat); default all",
    )
    parser.add_argument("--sample", type=int, help="run this many mutants, drawn with --seed, spread over targets")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--match",
        action="append",
        help="only the mutants whose label (as printed: path:line function: change) contains this "
        "text (repeat: any of them), e.g. to run the survivors again",
    )
    parser.add_argument("--list", action="store_true", help="list the mutants and stop")
    args = parser.parse_args(argv)
    targets = [t for t in TARGETS if not args.target or t.name in args.target]
    chosen = [m for t in targets for m in mutants(t) if not args.match or any(text in m.label for text in args.match)]
    total = len(chosen)
    if args.sample and args.sample < total:
        chosen = sorted(
            random.Random(args.seed).sample(chosen, args.sample), key=lambda m: (TARGETS.index(m.target), m.site)
        )
    if args.list:
        for m in chosen:
            print(m.label)
        print(f"{len(chosen)} of {total} mutants")
        return 0
    survivors, killed, timeouts, errors, broken = [], 0, 0, 0, []
    with tempfile.TemporaryDirectory(prefix="mcq-mutation-") as folder:
        tree = Path(folder)
        copy_tree(tree)
        baseline: dict[Target, float] = {}
        for target in dict.fromkeys(m.target for m in chosen):
            verdict, seconds, tail = run_tests(tree, target, timeout=1800)
            print(f"baseline {target.path}: {verdict} in {seconds:.0f} s", flush=True)
            if verdict != "pass":
                print(tail)
                broken.append(target)
            baseline[target] = seconds
        start = time.monotonic()
        ran = [m for m in chosen if m.target not in broken]
        for i, mutant in enumerate(ran, 1):
            original = (tree / mutant.target.path).read_text(encoding="utf-8")
            (tree / mutant.target.path).write_text(mutated_source(mutant, original), encoding="utf-8")
            try:
                verdict, seconds, _ = run_tests(tree, mutant.target, timeout=3 * baseline[mutant.target] + 30)
            finally:
                (tree / mutant.target.path).write_text(original, encoding="utf-8")
            killed += verdict != "pass"
            timeouts += verdict == "timeout"
            errors += verdict == "error"
            if verdict == "pass":
                survivors.append(mutant)
            shown = {"pass": "SURVIVED", "fail": "killed", "error": "killed (error)", "timeout": "killed (timeout)"}
            print(f"[{i}/{len(ran)}] {shown[verdict]} {mutant.label} ({seconds:.0f} s)", flush=True)
    print(
        f"\nscore: {killed}/{len(ran)} killed ({100 * killed / max(1, len(ran)):.1f}%), {timeouts} by timeout, "
        f"{errors} by an error; "
        f"{len(ran)} of {total} mutants run in {time.monotonic() - start:.0f} s"
    )
    for target in broken:
        print(f"not run: the unmutated tests of {target.path} fail")
    print(f"survivors ({len(survivors)}):")
    for mutant in survivors:
        print(f"  {mutant.label}")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
