"""Each committed variant set and the default config do what their comments in conf/ say: the generators run on
the values the files hold (read from the files, not restated), on a four- and a five-option question."""

from __future__ import annotations

import itertools
import math
import random

import pytest
from omegaconf import OmegaConf

from src.common.errors import UserError
from src.config.compose import compose_job
from src.core.questions import Question
from src.core.variant import FILLER, NOTA
from src.variants import make_variants

from .conftest import REPO

FOUR = Question(id="q4", question="Which one?", options=("w", "x", "y", "z"), answer=2)
FIVE = Question(id="q5", question="Which one?", options=("v", "w", "x", "y", "z"), answer=0)


def committed(name: str) -> dict:
    return OmegaConf.to_container(OmegaConf.load(REPO / "conf" / "variants" / f"{name}.yaml"))


def variants(name: str, question: Question = FOUR, seed: int = 0):
    return make_variants(committed(name), question, seed=seed)


def identity(n: int) -> tuple[int, ...]:
    return tuple(range(n))


@pytest.mark.promise("conf/variants/original.yaml", "variants=original asks each question once, in the file's order")
def test_original_asks_each_question_once_in_the_files_order():
    for q in (FOUR, FIVE):
        (only,) = variants("original", q)
        assert only.option_order == identity(q.n_options) and only.option_texts == q.options


@pytest.mark.promise("README.md", "variants=cora asks 2 + 6(A-1) option lists: 20 for four options, 26 for five")
@pytest.mark.promise("conf/variants/cora.yaml", "the CoRA set holds original, shuffled, NOTA and decoupled variants")
def test_cora_asks_2_plus_6_times_a_minus_1_lists_of_the_kinds_its_comment_names():
    for q in (FOUR, FIVE):
        made = variants("cora", q)
        assert len(made) == 2 + 6 * (q.n_options - 1)
        assert {v.kind for v in made} == {
            "original",
            "shuffled",
            "nota",
            "nota_shuffled",
            "decoupled",
            "decoupled_shuffled",
            "decoupled_nota",
            "decoupled_nota_shuffled",
        }
        assert made[0].option_order == identity(q.n_options)
        for v in made:
            if v.kind.startswith("decoupled"):  # the right option and one distractor, then NOTA for decoupled_nota
                assert len(v.option_order) == (3 if "nota" in v.kind else 2) and q.answer in v.option_order, v


@pytest.mark.promise("conf/variants/cora_same_size.yaml", "cora_same_size keeps only variants with the original count")
def test_cora_same_size_shows_the_original_number_of_options_only():
    for q in (FOUR, FIVE):
        made = variants("cora_same_size", q)
        assert made and {len(v.option_order) for v in made} == {q.n_options}
        assert {v.kind for v in made} == {"original", "shuffled", "nota", "nota_shuffled"}


@pytest.mark.promise("conf/variants/perm_full.yaml", "perm_full asks all A! orders, identity first")
def test_perm_full_asks_every_order_once_identity_first():
    for q in (FOUR, FIVE):
        orders = [v.option_order for v in variants("perm_full", q)]
        assert len(orders) == math.factorial(q.n_options) == len(set(orders))
        assert orders[0] == identity(q.n_options)


@pytest.mark.promise("conf/variants/perm_full.yaml", "perm_full refuses a question with more than max_full_options")
def test_perm_full_refuses_a_question_with_more_options_than_its_limit():
    limit = committed("perm_full")["max_full_options"]
    assert limit == 7
    wide = Question(id="wide", question="?", options=tuple("abcdefgh"[: limit + 1]), answer=0)
    with pytest.raises(UserError, match="wide"):
        variants("perm_full", wide)
    assert len(variants("perm_full", Question(id="ok", question="?", options=tuple("abcdefg"), answer=0))) == 5040


@pytest.mark.parametrize("name,size", [("perm_random2", 2), ("perm_randomL", None)])
@pytest.mark.promise(
    "conf/variants/perm_random2.yaml", "random2 and randomL are random.Random(perm_seed).sample of all permutations"
)
def test_the_random_permutation_sets_are_the_seeded_sample_of_all_permutations(name, size):
    seed = committed(name)["perm_seed"]
    assert seed == 0  # the paper's seed
    for q in (FOUR, FIVE):
        every = list(itertools.permutations(range(q.n_options)))
        expected = random.Random(seed).sample(every, size or q.n_options)
        assert [v.option_order for v in variants(name, q)] == expected


@pytest.mark.promise(
    "conf/variants/perm_random2.yaml", "the random sets are the same for every question with A options"
)
def test_the_random_permutation_sets_do_not_depend_on_the_question_or_the_run_seed():
    other = Question(id="another", question="Else?", options=("1", "2", "3", "4"), answer=0)
    for name in ("perm_random2", "perm_randomL"):
        orders = [v.option_order for v in variants(name, FOUR, seed=0)]
        assert [v.option_order for v in variants(name, other, seed=7)] == orders


@pytest.mark.promise("conf/variants/revas_reorder.yaml", "revas_reorder asks k = A distinct orders, the original first")
def test_revas_reorder_asks_a_distinct_orders_the_original_first():
    assert committed("revas_reorder")["k"] is None
    for q in (FOUR, FIVE):
        orders = [v.option_order for v in variants("revas_reorder", q)]
        assert len(orders) == q.n_options == len(set(orders)) and orders[0] == identity(q.n_options)


@pytest.mark.promise(
    "conf/variants/revas_nota.yaml", "revas_nota: NOTA replaces the right option, is the answer, A orders"
)
def test_revas_nota_replaces_the_right_option_by_nota_which_becomes_the_answer():
    for q in (FOUR, FIVE):
        made = variants("revas_nota", q)
        assert len(made) == q.n_options == len({v.option_order for v in made})
        for v in made:
            assert q.answer not in v.option_order and v.option_order[v.correct_slot] == NOTA
            assert len(v.option_order) == q.n_options


@pytest.mark.promise("conf/variants/revas_option_count.yaml", "each level n shows n options in n orders, plus the base")
def test_revas_option_count_shows_each_level_in_as_many_orders_and_the_base():
    cfg = committed("revas_option_count")
    assert cfg["k"] is None and cfg["include_base"] is True
    made = variants("revas_option_count", FOUR)
    by_size: dict[int, list] = {}
    for v in made:
        by_size.setdefault(len(v.option_order), []).append(v)
    assert {n: len(vs) for n, vs in by_size.items()} == {n: n for n in [*cfg["levels"], FOUR.n_options]}
    for v in made:
        assert FOUR.answer in v.option_order  # the right option is always shown
        shown = [i for i in v.option_order if i >= 0]
        fillers = [i for i in v.option_order if i == FILLER]
        assert len(shown) == min(len(v.option_order), FOUR.n_options) and len(shown) + len(fillers) == len(
            v.option_order
        )


@pytest.mark.promise("conf/variants/revas_true_false.yaml", "revas_true_false asks one yes/no question per option")
def test_revas_true_false_asks_one_yes_no_question_per_option_plus_the_reorders():
    made = variants("revas_true_false", FOUR)
    asked = [v for v in made if v.fmt == "true_false"]
    assert sorted(v.option_order for v in asked) == [(i,) for i in range(FOUR.n_options)]
    assert [v.correct_slot for v in sorted(asked, key=lambda v: v.option_order)] == [1, 1, 0, 1]  # Yes on the right
    assert len([v for v in made if v.fmt == "mcq"]) == FOUR.n_options  # the reorders


@pytest.mark.promise(
    "conf/variants/revas_multi_select.yaml", "multi-select asks the original order as usual and select-all"
)
def test_revas_multi_select_asks_the_original_order_twice_once_as_select_all():
    from src.answer_formats.multi_select import MULTI_SELECT_MIN_NEW_TOKENS

    made = variants("revas_multi_select", FOUR)
    assert [v.fmt for v in made] == ["mcq", "multi_select"]
    assert {v.option_order for v in made} == {identity(4)}
    assert MULTI_SELECT_MIN_NEW_TOKENS == 24


@pytest.mark.promise("conf/config.yaml", "the default variant set is original: each question once")
def test_the_default_job_asks_each_question_once_with_the_models_own_scoring():
    cfg = compose_job([])
    assert cfg.variants.name == "original" and cfg.model.name == "smollm2_135m" and cfg.benchmark.name == "synthetic"
    assert cfg.scoring == cfg.model.scoring  # each model config names the scoring it is meant for
    assert compose_job(["model=simulated", "scoring=logprob"]).scoring == "logprob"


@pytest.mark.promise("README.md", "the suite reads the benchmark files from ../shared/data; MCQ_DATA_DIR moves them")
@pytest.mark.promise("conf/config.yaml", "data_dir is MCQ_DATA_DIR when set, else ../shared/data")
def test_data_dir_comes_from_mcq_data_dir_else_the_shared_folder(monkeypatch):
    monkeypatch.delenv("MCQ_DATA_DIR", raising=False)
    assert compose_job([]).data_dir == "../shared/data"
    monkeypatch.setenv("MCQ_DATA_DIR", "/data/mcq")
    assert compose_job([]).data_dir == "/data/mcq"
