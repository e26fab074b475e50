"""`python -m devtools.perf`: speed, memory and agreement numbers, split by part (see __main__.py)."""
