"""Asking a backend the prompts of a study, trial after trial: trials, adaptive stopping, cache."""
