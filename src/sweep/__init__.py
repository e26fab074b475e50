"""A sweep of jobs: the Hydra callback that pre-checks and closes it, and the job run inside it."""
