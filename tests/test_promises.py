"""docs/testing.md's list of promises is the one the tests' `promise` marks make, and each mark names a real page."""

from __future__ import annotations

import pytest

from tests import promises

pytestmark = pytest.mark.promise(
    "docs/testing.md", "the list of promises is made from the tests' marks and cannot drift from them"
)


def test_docs_testing_lists_exactly_the_promises_the_tests_mark():
    page = promises.PAGE.read_text(encoding="utf-8")
    expected = promises.page_with(promises.collect(), page)
    assert page == expected, "docs/testing.md differs from the tests' marks: run `python -m tests.promises --write`"


def test_every_promise_names_a_page_that_exists_and_says_something():
    found = promises.collect()
    assert found, "no test carries a promise mark"
    for p in found:
        assert (promises.REPO / p.page).is_file(), f"{p.test}: its promise names {p.page}, which is no file"
        assert len(p.text.split()) >= 4, f"{p.test}: its promise says too little: {p.text!r}"
        assert "\n" not in p.text, f"{p.test}: a promise is one line"


def test_a_promise_mark_is_read_from_a_function_a_class_and_a_module(tmp_path):
    (tmp_path / "test_x.py").write_text(
        "import pytest\n"
        "pytestmark = pytest.mark.promise('README.md', 'module wide promise here')\n"
        "@pytest.mark.promise('docs/a.md', 'a function promise here')\n"
        "def test_f(): pass\n"
        "@pytest.mark.promise('docs/b.md', 'a class promise here')\n"
        "class TestC:\n"
        "    def test_m(self): pass\n"
        "def helper(): pass\n",
        encoding="utf-8",
    )
    found = {(p.page, p.text, p.test.split("::", 1)[1]) for p in promises.promises_in_tree(tmp_path)}
    assert found == {
        ("README.md", "module wide promise here", "test_f"),
        ("docs/a.md", "a function promise here", "test_f"),
        ("README.md", "module wide promise here", "TestC::test_m"),
        ("docs/b.md", "a class promise here", "TestC::test_m"),
    }


def test_a_promise_mark_that_is_not_two_literal_strings_is_refused(tmp_path):
    (tmp_path / "test_y.py").write_text(
        "import pytest\nTEXT = 'x'\n@pytest.mark.promise(TEXT)\ndef test_f(): pass\n", encoding="utf-8"
    )
    with pytest.raises(ValueError, match="two literal strings"):
        promises.promises_in_tree(tmp_path)
