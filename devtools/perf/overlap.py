"""How far the answering pipeline hides the framework's work behind the backend's (src/answering/pipeline.py).

`measure_overlap(limit)` plans and answers a simulated MMLU CoRA job in-process as `src.job.runner.run_job` does
(`plan_job`, then `answer_items` through a fresh response cache), on the simulated backend with `latency_ms` per
prompt, and returns the backend's time alone (prompts asked x latency: the simulated call sleeps out whatever its own
work left of it), the job's answering wall (planning through the last answer stored), their ratio and the share of
the wall that is the backend's; `plan_s` is the planning's part of the wall, which runs before the first chunk, and
`answer_wall_over_backend` the ratio without it.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any


def measure_overlap(limit: int, latency_ms: float = 0.5) -> dict[str, Any]:
    from src.answering.cache import open_cache  # local: the part that times it imports it
    from src.answering.trials import answer_items  # local: loads pandas (slow import)
    from src.config.checks import job_spec  # local: loads hydra, omegaconf (slow import)
    from src.config.compose import compose_job  # local: loads hydra, omegaconf (slow import)
    from src.job import runner  # local: loads hydra, omegaconf (slow import)

    with tempfile.TemporaryDirectory() as tmp:
        cfg = compose_job(
            [
                "model=simulated",
                f"model.latency_ms={latency_ms}",
                "benchmark=mmlu",
                f"limit={limit}",
                "variants=cora",
                f"cache.path={Path(tmp) / 'cache.db'}",
            ]
        )
        spec = job_spec(cfg)
        questions = runner.job_questions(spec)
        backend = runner.job_backend(spec)
        asked = [0]
        for method in ("generate", "score_labels", "score_options"):
            inner = getattr(backend, method)

            def counted(requests: Any, *args: Any, _inner: Any = inner) -> Any:
                asked[0] += len(requests)
                return _inner(requests, *args)

            setattr(backend, method, counted)
        cache = open_cache(spec.cache.path)
        try:
            start, cpu = time.perf_counter(), time.process_time()
            _, items, _ = runner.plan_job(spec, questions, backend)
            planned = time.perf_counter()
            answer_items(backend, items, scoring=spec.scoring, params=spec.sampling, cache=cache, progress=False)
            end = time.perf_counter()
            wall, cpu, plan_s = end - start, time.process_time() - cpu, planned - start
        finally:
            cache.close()
    backend_s = asked[0] * latency_ms / 1000.0
    return {
        "prompts": len(items),
        "prompts_asked": asked[0],
        "latency_ms": latency_ms,
        "backend_s": backend_s,
        "answering_wall_s": wall,
        "answering_cpu_s": cpu,
        "plan_s": plan_s,  # planning the variants, before the first chunk: not overlapped
        "answer_wall_over_backend": (wall - plan_s) / backend_s if backend_s else float("nan"),
        "wall_over_backend": wall / backend_s if backend_s else float("nan"),
        "backend_share": backend_s / wall if wall else float("nan"),
    }


if __name__ == "__main__":
    import json
    import sys

    print(json.dumps(measure_overlap(int(sys.argv[1]) if len(sys.argv) > 1 else 2000)))
