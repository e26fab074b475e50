"""MLflow: names, the store and its retries, one run per job, the review view, offline closes."""
