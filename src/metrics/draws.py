"""Counting draws with replacement, the one step every resampling here shares: the question resamples of the
intervals and paired tests (src/metrics/intervals.py) and the variant-slot bootstrap of CoRA (src/metrics/cora.py).
"""

from __future__ import annotations

import numpy as np


def draw_counts(draws: np.ndarray, n_categories: int) -> np.ndarray:
    """How often each of `n_categories` categories occurs in each row of `draws` (an integer matrix, one
    resample per row): a (rows x n_categories) float matrix, one bincount for all rows at once.

    >>> draw_counts(np.array([[0, 0, 2], [1, 2, 2]]), 3).tolist()
    [[2.0, 0.0, 1.0], [0.0, 1.0, 2.0]]
    """
    rows = draws.shape[0]
    offsets = (np.arange(rows) * n_categories)[:, None]
    counts = np.bincount((draws + offsets).ravel(), minlength=rows * n_categories)
    return counts.reshape(rows, n_categories).astype(float)
