"""The nouns of a study: questions, prompts, parsing answers, records, validity rules, few-shot."""
