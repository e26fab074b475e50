"""The variant type: one displayed option list for a question, with its map back to the original options, and the
vocabulary of its option slots (NOTA, FILLER) and answer labels (LETTERS, TF_LABELS). The generators of variant
sets (src/variants) make these; prompts, answer formats, records and ingest read them."""

from __future__ import annotations

import string
from dataclasses import dataclass

NOTA = -1  # slot shows "None of the above"
FILLER = -2  # slot shows a non-semantic filler option
NOTA_TEXT = "None of the above"
LETTERS = string.ascii_uppercase
TF_LABELS = ("Yes", "No")  # the answers of a true_false variant, in slot order

# The variant kinds (`Variant.kind`, the records' variant_kind): named here once, written by the generators
# (src/variants) and read by the metrics (src/metrics), so that a kind one side renames cannot drift from the other.
ORIGINAL = "original"  # the unaltered option order
PERMUTATION = "permutation"  # another order of the original options (the permutation sets)
CORA_KINDS = (
    ORIGINAL,
    "shuffled",
    "nota",
    "nota_shuffled",
    "decoupled",
    "decoupled_shuffled",
    "decoupled_nota",
    "decoupled_nota_shuffled",
)
CORA_ALTERED_KINDS = frozenset(CORA_KINDS) - {ORIGINAL}  # the cora family needs one of them beside the original
REORDER = "reorder"  # REVAS: the non-reference orders of the original options
NOTA_REPLACES_CORRECT = "nota_replaces_correct"
MISLEADING_REPLACED = "misleading_replaced"
REVAS_KINDS = (
    REORDER,
    "more_options",
    "fewer_options",
    NOTA_REPLACES_CORRECT,
    "true_false",
    "multi_select",
    MISLEADING_REPLACED,
)


@dataclass(frozen=True)
class Variant:
    """A displayed option list. `option_order[slot]` is the original option index shown there (or NOTA/FILLER).

    The fields after `correct_slot` have defaults, so multiple-choice generators (CoRA) need not name them.
    A `true_false` variant shows one option (`option_order == (asked_option,)`) and its answer slots are
    TF_LABELS: `correct_slot` is 0 ("Yes") when the asked option is the right one, else 1 ("No").
    A `multi_select` variant asks for every correct option; `correct_slots` is the set the answer should name.
    """

    question_id: str
    kind: str  # generator kind, e.g. "nota_shuffled"
    variant_id: str  # unique within the question, e.g. "nota_shuffled_2"
    option_order: tuple[int, ...]
    option_texts: tuple[str, ...]  # text shown in each slot
    correct_slot: int  # slot of the right answer (an original option, or NOTA when NOTA is the answer)
    fmt: str = "mcq"  # answer format: mcq | true_false | multi_select
    level: int | None = None  # REVAS option-count level n (options shown), None outside that set
    memberships: tuple[tuple[str, int], ...] = ()  # (permutation set, position in it); position 0 = reference order
    asked_option: int | None = None  # true_false: the option asked about; misleading_replaced: the option replaced

    @property
    def n_options(self) -> int:
        return len(self.option_order)

    @property
    def correct_label(self) -> str:
        return TF_LABELS[self.correct_slot] if self.fmt == "true_false" else LETTERS[self.correct_slot]

    @property
    def correct_slots(self) -> tuple[int, ...]:
        """Slots a multi_select answer should name: the one right option (benchmarks here have one)."""
        return (self.correct_slot,)


def trial_key(question_id: str, variant_id: str) -> str:
    """A trial's key ("question_id/variant_id", `Request.key`): the response cache's and the answer key's name for
    it (both a question's and a variant's id are unique where they are read)."""
    return f"{question_id}/{variant_id}"
