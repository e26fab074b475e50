"""The Python side of the test task mcq_test_task.yaml (lm-eval's `!function`): the choices of a document."""


def choices(doc: dict) -> list[str]:
    """The document's options, as lm-eval asks for them (a function, so that the tests cover both kinds)."""
    return list(doc["options"])


def answerable(dataset):
    """The documents whose answer is one of their options (lm-eval cannot show the others as solved examples)."""
    return dataset.filter(lambda doc: doc["answer"] < len(doc["options"]))
