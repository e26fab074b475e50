"""The per-trial records table: the source of truth every metric is computed from, and where a run keeps it.

A job writes its table as `records.parquet` among the run's artifacts (`write_records`), with the text of each
prompt in `prompts.parquet` keyed by `prompt_hash` (`write_prompts`); `src.tracking.records.read_run_records`
fetches the table of a finished MLflow run (compare --diff, assess and the revas_misleading second stage).

One row per question x variant x repetition. Columns (see DESIGN.md, decision 1):

run_id, model, benchmark, variant_set      str   run identity (same on every row)
question_id, subject                       str   subject may be None
variant_kind, variant_id                   str   e.g. "nota_shuffled", "nota_shuffled_2"; the original order is kind
                                                 "original"
repetition                                 int   0..R-1
temperature, seed                          float, int
scoring                                    str   generate | logprob | cloze
n_options                                  int   displayed options
option_order                               list[int]  original option index per displayed slot; -1 NOTA, -2 filler
correct_label                              str   displayed label of the right answer ("A", ...)
correct_option                             int   original index of the right answer (-1 when NOTA is the answer)
raw_output                                 str   model text (generate) or a rendering of the scores
parsed_label                               str?  None when INVALID
chosen_option                              int?  original index the parsed label points to (-1 NOTA, -2 filler); None
                                                 when INVALID
correct                                    bool  parsed_label == correct_label (INVALID is never correct)
label_probs                                list[float]?  next-token probs of the displayed labels, renormalised
                                                         (logprob scoring)
label_mass                                 float?  probability the labels held before renormalising
option_loglik, option_loglik_norm          list[float]?  cloze scores per displayed option
answer_dist                                list[float]?  exact first-token sampling (logprob at a temperature): the
                                                         tempered first-token probability of each displayed label,
                                                         then of anything else (INVALID) last; the draws come from it
prompt_hash                                str   sha256 of the exact prompt, first 16 hex chars
cache_hit                                  bool  answered from the response cache
fmt                                        str   answer format: mcq | true_false | multi_select
variant_level                              int?  REVAS option-count level n (options shown); None outside
                                                 revas_option_count
perm_sets                                  list[str]  permutation-set memberships "set:pos" (pos 0 = reference order);
                                                      [] otherwise
asked_option                               int?  true_false: original option asked about; misleading_replaced: option
                                                 replaced by a filler
parsed_labels                              list[str]?  multi_select: the labels named (None when INVALID or not
                                                       multi_select)
chosen_options                             list[int]?  multi_select: original options behind parsed_labels
parse_rule                                 str   the rule that decided parsed_label (src/core/parsing.py): generate
                                                 gives
                                                 first_token, answer_phrase, boxed, option_text, self_correction
                                                 (a revised answer), ... (prefixed "reasoning_stripped+" after a
                                                 removed <think> block) or the INVALID
                                                 reason (invalid_empty, invalid_hedge, invalid_out_of_range,
                                                 invalid_no_label, truncated, ...); true_false first_word/yes_no_word,
                                                 multi_select label_list/label_mentions; scores: logprob_argmax,
                                                 exact_sample (logprob at a temperature), cloze_argmax
truncated                                  bool?  generated text stopped by max_new_tokens, not by an end token; None
                                                  when the backend cannot tell (or an old cache entry) or not generated
decision_margin                            float?  a ranking's decision (parse_rule logprob_argmax, cloze_argmax): the
                                                   chosen option's score minus the next best one's, in log units
                                                   (log label probability; the cloze score the decision used, per
                                                   byte under cloze_normalise); None elsewhere (generated, sampled).
                                                   Below NEAR_TIE_MARGIN it is a near-tie (`near_ties`)

Adaptive runs (`adaptive=true`, src/answering/adaptive.py) leave out the trials they did not ask and add two columns:
n_asked                                    int   trials made of this question x variant (repetitions 0..n_asked-1;
                                                 n_asked..n_planned-1 were skipped once its cell was settled)
n_planned                                  int   R, the repetitions planned (the repetition family's R)

Formats other than mcq reuse the columns as follows. true_false: n_options 1, option_order [asked option],
correct_label and parsed_label "Yes"/"No", label_probs [p(Yes), p(No)], correct_option the question's right
option, chosen_option the asked option on "Yes" and None on "No". multi_select: parsed_label the named labels
joined ("A, C"), chosen_option None, correct only when exactly the right option is named.
REVAS orders have variant_id "<prefix>_<j>", j = 0 their reference order (the first order shown).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

# Two options whose decision scores (log-likelihoods, or log label probabilities) are closer than this are a
# near-tie: another CPU's float32 kernels, another dtype or batch size may order them the other way. Across
# instruction sets and CPUs the embedded model's scores moved by at most 6.0e-5 (docs/reproducibility.md), so a
# margin (two scores) by at most 1.2e-4; 1e-3 leaves a factor of ~8 for larger models and longer prompts, where
# the errors add up.
NEAR_TIE_MARGIN = 1e-3
# How far a float32 score (log-probability, log-likelihood, probability) of one run may lie from another machine's
# and still be the same result: the largest move measured between instruction sets is 6e-5 (docs/reproducibility.md).
# The golden tests and `python -m src.recheck` compare floats within it.
SCORE_TOLERANCE = 1e-4
RECORDS_FILE = "records.parquet"  # the artifact name; compare, assess and the misleading stage look for it
COLUMNS = (
    "run_id",
    "model",
    "benchmark",
    "variant_set",
    "question_id",
    "subject",
    "variant_kind",
    "variant_id",
    "repetition",
    "temperature",
    "seed",
    "scoring",
    "n_options",
    "option_order",
    "correct_label",
    "correct_option",
    "raw_output",
    "parsed_label",
    "chosen_option",
    "correct",
    "label_probs",
    "label_mass",
    "option_loglik",
    "option_loglik_norm",
    "prompt_hash",
    "cache_hit",
    "fmt",
    "variant_level",
    "perm_sets",
    "asked_option",
    "parsed_labels",
    "chosen_options",
    "answer_dist",
    "parse_rule",
    "truncated",
    "decision_margin",
)


def near_ties(records: pd.DataFrame) -> tuple[int, int]:
    """(near-ties, ranked decisions) of `records`: how many decisions had a `decision_margin` below NEAR_TIE_MARGIN
    (the ones another machine, dtype or batch size may flip), of how many had a margin at all. (0, 0) for a table
    without margins (generated answers, runs from before the column).

    >>> near_ties(pd.DataFrame({"decision_margin": [0.0004, 0.2, None]})), near_ties(pd.DataFrame({"x": [1]}))
    ((1, 2), (0, 0))
    """
    if "decision_margin" not in records.columns:
        return 0, 0
    margins = pd.to_numeric(records["decision_margin"], errors="coerce")
    return int((margins < NEAR_TIE_MARGIN).sum()), int(margins.notna().sum())


def write_records(records: pd.DataFrame, folder: str | Path) -> Path:
    """Write `records` as FOLDER/records.parquet, the file a run logs among its artifacts; returns its path."""
    path = Path(folder) / RECORDS_FILE
    records.to_parquet(path, index=False)
    return path


PROMPTS_FILE = "prompts.parquet"  # beside records.parquet: the text behind each prompt_hash


def write_prompts(prompts: dict[str, tuple[str, str | None]], folder: str | Path) -> Path:
    """Write FOLDER/prompts.parquet: one row per distinct prompt of a run, keyed by the records' `prompt_hash`, so
    that any records row can be audited from the run's artifacts alone. `prompts` maps hash -> (prompt,
    model_input): `prompt` is the rendered text (question, options as shown, few-shot examples), `model_input`
    the text the model was given after the backend's own wrapping (a chat template), or None where the backend
    did not load its tokenizer in this run (every answer from the cache) or sends the prompt as a chat message.

    >>> import tempfile
    >>> folder = tempfile.mkdtemp()
    >>> table = pd.read_parquet(write_prompts({"ab12": ("Q?\\nA. x\\nAnswer:", None)}, folder))
    >>> table.columns.tolist(), table.prompt[0]
    (['prompt_hash', 'prompt', 'model_input'], 'Q?\\nA. x\\nAnswer:')
    """
    path = Path(folder) / PROMPTS_FILE
    rows = [{"prompt_hash": key, "prompt": prompt, "model_input": shown} for key, (prompt, shown) in prompts.items()]
    pd.DataFrame(rows, columns=["prompt_hash", "prompt", "model_input"]).to_parquet(path, index=False)
    return path
