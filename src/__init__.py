"""mcq-consistency: how reliably language models answer multiple-choice benchmarks."""
