"""Prompt templates: every config renders, variants differ, fields are checked, lm-eval's mmlu format is exact."""

from __future__ import annotations

from pathlib import Path

import pytest
from omegaconf import OmegaConf

from src.common.errors import UserError
from src.core.prompts import PromptTemplate, labels_for, render
from src.core.questions import Question
from src.core.validity import SHOWS_OPTIONS
from src.core.variant import Variant

PROMPT_DIR = Path(__file__).resolve().parents[1] / "conf" / "prompt"
PROMPT_FILES = sorted(PROMPT_DIR.glob("*.yaml"))

QUESTION = Question(
    id="q1",
    question="What is the capital of France?",
    options=("Lyon", "Paris", "Nice", "Lille"),
    answer=1,
    subject="high_school_geography",
)
VARIANTS = [
    Variant("q1", "original", "original_0", (0, 1, 2, 3), ("Lyon", "Paris", "Nice", "Lille"), 1),
    Variant("q1", "shuffled", "shuffled_0", (2, 0, 3, 1), ("Nice", "Lyon", "Lille", "Paris"), 3),
    Variant("q1", "nota", "nota_0", (0, 1, 2, -1), ("Lyon", "Paris", "Nice", "None of the above"), 1),
    Variant("q1", "decoupled", "decoupled_0", (1, 3), ("Paris", "Lille"), 0),
]


def load(path: Path) -> PromptTemplate:
    return PromptTemplate.from_config(OmegaConf.load(path))


def test_every_prompt_config_is_found():
    assert {p.stem for p in PROMPT_FILES} >= {"cora", "repetition", "lm_eval_mmlu", "plain"}


@pytest.mark.parametrize("path", PROMPT_FILES, ids=lambda p: p.stem)
def test_every_template_renders_question_and_every_shown_option(path):
    template = load(path)
    prompts = [render(template, QUESTION, v) for v in VARIANTS]
    for prompt, variant in zip(prompts, VARIANTS):
        assert QUESTION.question in prompt
        labels = labels_for(variant.n_options, template.label_style)
        for label, text in zip(labels, variant.option_texts):
            assert text in prompt
            assert f"{label}. {text}" in prompt or f"({label}) {text}" in prompt
        assert "{" not in prompt and "}" not in prompt
    assert len(set(prompts)) == len(prompts), "different variants must render different prompts"


def test_cora_template_is_the_papers_with_the_shown_letters():
    prompt = render(load(PROMPT_DIR / "cora.yaml"), QUESTION, VARIANTS[3])
    assert prompt == (
        "Answer the following multiple choice question.\n"
        "The first line of your response should be of the following format: 'LETTER' (without quotes), "
        "where LETTER is one of AB (depending on the number of alternatives), "
        "followed by a step-by-step explanation.\n\n"
        "Question: What is the capital of France?\nChoices:\nA. Paris\nB. Lille\nAnswer:"
    )
    paper = Path(__file__).resolve().parents[2] / "shared" / "papers" / "cora-consistency-rebalanced-accuracy.txt"
    if paper.exists():
        assert (
            "Answer the following multiple choice question.\nThe first line of your response should be of the "
            "following format: 'LETTER' (without quotes), where LETTER is one of ABCD (depending on the number "
            "of alternatives), followed by a step-by-step explanation." in paper.read_text()
        )


def test_lm_eval_mmlu_five_shot_matches_lm_eval_format():
    template = load(PROMPT_DIR / "lm_eval_mmlu.yaml")
    shots = []
    for i in range(5):
        q = Question(
            id=f"dev{i}",
            question=f"Dev question {i}?",
            options=(f"a{i}", f"b{i}", f"c{i}", f"d{i}"),
            answer=i % 4,
            subject="abstract_algebra",
            split="dev",
        )
        shots.append((q, Variant(q.id, "original", "original_0", (0, 1, 2, 3), q.options, q.answer)))
    target = Question(
        id="t",
        question="Find the degree of Q(sqrt(2)) over Q.",
        options=("0", "2", "4", "6"),
        answer=1,
        subject="abstract_algebra",
    )
    variant = Variant("t", "original", "original_0", (0, 1, 2, 3), target.options, 1)
    expected = (
        "The following are multiple choice questions (with answers) about abstract algebra.\n\n"
        "Dev question 0?\nA. a0\nB. b0\nC. c0\nD. d0\nAnswer: A\n\n"
        "Dev question 1?\nA. a1\nB. b1\nC. c1\nD. d1\nAnswer: B\n\n"
        "Dev question 2?\nA. a2\nB. b2\nC. c2\nD. d2\nAnswer: C\n\n"
        "Dev question 3?\nA. a3\nB. b3\nC. c3\nD. d3\nAnswer: D\n\n"
        "Dev question 4?\nA. a4\nB. b4\nC. c4\nD. d4\nAnswer: A\n\n"
        "Find the degree of Q(sqrt(2)) over Q.\nA. 0\nB. 2\nC. 4\nD. 6\nAnswer:"
    )
    assert render(template, target, variant, fewshot=shots) == expected


def test_fewshot_answer_follows_the_examples_variant():
    template = load(PROMPT_DIR / "lm_eval_mmlu.yaml")
    shot = (QUESTION, VARIANTS[1])  # Paris shown in slot D
    assert "A. Nice\nB. Lyon\nC. Lille\nD. Paris\nAnswer: D\n\n" in render(
        template, QUESTION, VARIANTS[0], fewshot=[shot]
    )


def test_label_styles():
    assert labels_for(5, "A.") == ("A", "B", "C", "D", "E")
    assert labels_for(4, "1.") == ("1", "2", "3", "4")
    base = dict(name="t", template="{question}\n{choices}")
    assert "(B) Paris" in render(PromptTemplate(**base, label_style="(A)"), QUESTION, VARIANTS[0])
    assert "2. Paris" in render(PromptTemplate(**base, label_style="1."), QUESTION, VARIANTS[0])
    with pytest.raises(UserError, match="prompt.label_style"):
        PromptTemplate(**base, label_style="a)")


@pytest.mark.parametrize(
    ("node", "key"),
    [
        ({"template": "Pick one:\n{choices}"}, "prompt.template"),
        ({"template": "{question}"}, "prompt.template"),
        ({"template": "{question}\n{choices}\n{answr}"}, "prompt.template"),
        ({"template": "{question}\n{choices", "label_style": "A."}, "prompt.template"),
        ({"template": "{question}\n{choices}", "fewshot_template": "{question}\n{choices}"}, "prompt.fewshot_template"),
        ({"template": "{question}\n{choices}", "labels": "A."}, "prompt.labels"),
        ({"label_style": "A."}, "prompt.template"),
    ],
)
def test_bad_templates_name_the_config_key(node, key):
    with pytest.raises(UserError, match=key.replace(".", r"\.")):
        PromptTemplate.from_config(node)


def test_fewshot_without_fewshot_field_is_a_user_error():
    template = PromptTemplate(
        name="t", template="{question}\n{choices}", fewshot_template="{question}\n{choices}\n{answer}"
    )
    with pytest.raises(UserError, match="fewshot"):
        render(template, QUESTION, VARIANTS[0], fewshot=[(QUESTION, VARIANTS[0])])


@pytest.mark.parametrize("scoring", [mode for mode, shown in SHOWS_OPTIONS.items() if shown])
def test_modes_that_show_options_render_different_prompts_for_different_orders(scoring):
    """The validity rule: under every mode allowed with order-comparing variant sets (both read from the code), each
    order is its own prompt."""
    from src.core.validity import needs_shown_options
    from src.variants import VARIANT_SETS, make_variants

    template = load(PROMPT_DIR / "cora.yaml")
    # every set that compares orders, but the second stage of a finished run (it needs the run: variants.source_run)
    compared = [name for name in VARIANT_SETS if needs_shown_options({"name": name}) and name != "revas_misleading"]
    assert {"perm_cyclic", "cora", "revas_reorder"} <= set(compared)
    for name in compared:
        variants = [v for v in make_variants({"name": name}, QUESTION, seed=0) if v.fmt == "mcq"]
        prompts = {render(template, QUESTION, v, scoring=scoring) for v in variants}
        assert len(prompts) == len({v.option_order for v in variants}), name


def test_cloze_renders_one_prompt_for_every_order():
    template = load(PROMPT_DIR / "cora.yaml")
    assert len({render(template, QUESTION, v, scoring="cloze") for v in VARIANTS}) == 1


def test_cloze_shown_lists_the_options_and_ends_at_the_answer_cue():
    prompt = render(load(PROMPT_DIR / "cora.yaml"), QUESTION, VARIANTS[1], scoring="cloze_shown")
    assert prompt.endswith("A. Nice\nB. Lyon\nC. Lille\nD. Paris\nAnswer:")
    assert "LETTER" not in prompt  # the option text, not a letter, is what is scored


def test_numbered_letters_field_and_command_line_float_label_style():
    template = PromptTemplate.from_config(
        {"name": "t", "template": "{question}\n{choices}\nOne of {letters}:", "label_style": 1.0}
    )  # `prompt.label_style=1.` from the command line
    assert template.label_style == "1."
    ten = Question(id="q", question="Pick", options=tuple(f"o{i}" for i in range(10)), answer=0)
    variant = Variant("q", "original", "original", tuple(range(10)), ten.options, 0)
    prompt = render(template, ten, variant)
    assert prompt.endswith("One of 1, 2, 3, 4, 5, 6, 7, 8, 9, 10:")
    assert "10. o9" in prompt
    assert render(load(PROMPT_DIR / "cora.yaml"), QUESTION, VARIANTS[0]).count("one of ABCD") == 1
