"""MLflow: names, the store and its retries, one run per job and its identity, the review view, offline closes."""
