"""docs/speed.md's exact first-token sampling, as a job sees it (simulated model, in-process): at temperature 0
`logprob` answers with the best label, and a sampled run leaves the temperature-1 scores where a greedy run
finds them in the response cache."""

from __future__ import annotations

import pandas as pd
import pytest

LETTERS = "ABCDEFGHIJ"


def records(result) -> pd.DataFrame:
    return pd.read_parquet(result.out_dir / "artifacts" / "records.parquet")


@pytest.mark.promise("docs/speed.md", "at temperature 0, scoring=logprob answers with the best label")
def test_logprob_at_temperature_0_answers_with_the_best_label(run_job_in):
    table = records(
        run_job_in("model=simulated", "model.invalid_rate=0.2", "scoring=logprob", "limit=8", "variants=cora")
    )
    for row in table.itertuples():
        probs = list(row.label_probs)
        assert row.parsed_label == LETTERS[probs.index(max(probs))] and row.parse_rule == "logprob_argmax", row
        assert row.answer_dist is None  # nothing drawn


@pytest.mark.promise("docs/speed.md", "a sampled logprob run caches the temperature-1 part where greedy runs find it")
def test_a_sampled_run_leaves_the_greedy_scores_in_the_cache(run_job_in):
    sampled = records(run_job_in("model=simulated", "scoring=logprob", "limit=6", "temperature=0.7", "repetitions=3"))
    assert not sampled["cache_hit"].any() and sampled["answer_dist"].notna().all()
    greedy = records(run_job_in("model=simulated", "scoring=logprob", "limit=6"))
    assert greedy["cache_hit"].all(), "the greedy run asked the model again"
    first = sampled[sampled["repetition"] == 0].set_index("prompt_hash")["label_probs"]
    for row in greedy.itertuples():  # the same temperature-1 probabilities, read back
        assert list(row.label_probs) == pytest.approx(list(first[row.prompt_hash]), abs=1e-12)
