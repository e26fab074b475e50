"""What a person sees of a job and its runs, apart from the report (src/compare): the closing block a finished job
prints (`closing`), a run's description in MLflow (`description`), and the MLflow UI served and read in headless
Chromium (`browser`)."""
