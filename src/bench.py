"""`python -m src.bench`: the old name of `python -m src.perf` (speed and memory measurements), kept working."""
import sys

from .perf import main

if __name__ == "__main__":
    sys.exit(main())
