"""The developer tools: commands for the people working on the tool, run from a clone's root, not installed.

    python -m devtools.perf --only gpu     # speed, memory and agreement numbers (docs/speed.md)
    python -m devtools.ui_check            # the MLflow UI in a real browser (docs/mlflow_ui.md)
    python -m devtools.ci_times LOG        # docs/development.md's times table from a .ci/run log

They may import the tool (`src`); the tool never imports them (tests/test_layers.py), and the installed distribution
holds `src` and `hydra_plugins` only (pyproject.toml).
"""
