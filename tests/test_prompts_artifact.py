"""Every records row can be audited from the run's artifacts alone: `prompts.parquet` holds the text behind each
`prompt_hash` (src/core/records.py `write_prompts`)."""

from __future__ import annotations

import pandas as pd
import pytest

from src.answering.trials import prompt_hash


@pytest.mark.promise("README.md", "prompts.parquet holds the text behind each prompt hash, so any row can be audited")
def test_every_records_row_finds_its_prompt_text(run_job_in):
    result = run_job_in("model=simulated", "variants=cora", "limit=3", "stats.bootstrap=0")
    artifacts = result.out_dir / "artifacts"
    records = pd.read_parquet(artifacts / "records.parquet")
    prompts = pd.read_parquet(artifacts / "prompts.parquet").set_index("prompt_hash")
    assert prompts.index.is_unique and set(records.prompt_hash) == set(prompts.index)
    for key, row in prompts.iterrows():
        assert prompt_hash(row.prompt) == key
    # the prompt shows the question and the options in the order the records say they were displayed
    from src.benchmarks import load_benchmark

    questions = {q.id: q for q in load_benchmark("synthetic", path=None, data_dir="unused", seed=0, limit=3)}
    row = records[records.variant_kind == "shuffled"].iloc[0]
    text = prompts.loc[row.prompt_hash, "prompt"]
    question = questions[row.question_id]
    assert question.question in text
    shown = [f"\n{label}. {question.options[i]}\n" for label, i in zip("ABCDE", row.option_order)]
    assert all(line in text for line in shown), "each option under its displayed label"
    assert prompts.model_input.isna().all()  # the simulated backend wraps nothing
