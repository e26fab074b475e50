"""The per-trial records table: the source of truth every metric is computed from.

One row per question x variant x repetition. Columns (see DESIGN.md, decision 1):

run_id, model, benchmark, variant_set      str   run identity (same on every row)
question_id, subject                       str   subject may be None
variant_kind, variant_id                   str   e.g. "nota_shuffled", "nota_shuffled_2"; the original order is kind "original"
repetition                                 int   0..R-1
temperature, seed                          float, int
scoring                                    str   generate | logprob | cloze
n_options                                  int   displayed options
option_order                               list[int]  original option index per displayed slot; -1 NOTA, -2 filler
correct_label                              str   displayed label of the right answer ("A", ...)
correct_option                             int   original index of the right answer (-1 when NOTA is the answer)
raw_output                                 str   model text (generate) or a rendering of the scores
parsed_label                               str?  None when INVALID
chosen_option                              int?  original index the parsed label points to (-1 NOTA, -2 filler); None when INVALID
correct                                    bool  parsed_label == correct_label (INVALID is never correct)
label_probs                                list[float]?  next-token probs of the displayed labels, renormalised (logprob scoring)
label_mass                                 float?  probability the labels held before renormalising
option_loglik, option_loglik_norm          list[float]?  cloze scores per displayed option
prompt_hash                                str   sha256 of the exact prompt, first 16 hex chars
cache_hit                                  bool  answered from the response cache
"""
from __future__ import annotations

COLUMNS = (
    "run_id", "model", "benchmark", "variant_set", "question_id", "subject", "variant_kind", "variant_id",
    "repetition", "temperature", "seed", "scoring", "n_options", "option_order", "correct_label",
    "correct_option", "raw_output", "parsed_label", "chosen_option", "correct", "label_probs", "label_mass",
    "option_loglik", "option_loglik_norm", "prompt_hash", "cache_hit",
)
