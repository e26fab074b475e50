"""The launcher a Hydra user names by its plugin's name: `hydra/launcher=submitit_slurm`, the name Hydra's
and submitit's documentation teach, runs the project's Slurm launcher with the plugin's keys unchanged
(hydra_plugins/mcq_consistency_sweeper.py, PROJECT_LAUNCHERS); the Slurm tier runs the cancel scenario
under that name (tests/test_slurm_no_accounting.py). hydra-ray-launcher's `ray` is checked in the Ray tier."""

from __future__ import annotations

import pytest
from hydra import compose, initialize_config_dir
from hydra.utils import get_class
from omegaconf import OmegaConf

from hydra_plugins.mcq_consistency_sweeper import PROJECT_LAUNCHERS, use_project_launcher
from tests.conftest import REPO


def composed_launcher(choice: str):
    with initialize_config_dir(config_dir=str(REPO / "sweeps"), version_base="1.3"):
        return compose(config_name="smoke", overrides=[f"hydra/launcher={choice}"], return_hydra_config=True)


@pytest.mark.promise(
    "docs/launchers.md",
    "hydra/launcher=submitit_slurm runs the project's launcher class with the plugin's keys unchanged",
)
def test_submitit_slurm_by_its_plugin_name_is_the_project_launcher_with_the_plugins_keys():
    cfg = composed_launcher("submitit_slurm")
    before = OmegaConf.to_container(cfg.hydra.launcher)
    assert before["_target_"] in PROJECT_LAUNCHERS, "the plugin's class name changed: PROJECT_LAUNCHERS is out of step"
    use_project_launcher(cfg)
    after = OmegaConf.to_container(cfg.hydra.launcher)
    assert after.pop("_target_") == "hydra_plugins.mcq_slurm_launcher.TrackedSlurmLauncher"
    assert after == {k: v for k, v in before.items() if k != "_target_"}  # every key of the plugin, as it was
    project, plugin = get_class(cfg.hydra.launcher._target_), get_class(before["_target_"])
    # it takes the plugin's constructor: the same keys mean the same. By name: Hydra's plugin scan executes every
    # module of the `hydra_plugins` namespace again, in the order of its folders, and where the project's folder
    # comes first (a clone's root, an editable install) the plugin's class is made anew after ours subclassed it
    assert f"{plugin.__module__}.{plugin.__qualname__}" in {f"{c.__module__}.{c.__qualname__}" for c in project.__mro__}


@pytest.mark.promise("docs/launchers.md", "slurm_cpu, submitit_local and joblib are used as configured, not swapped")
@pytest.mark.parametrize("choice", ["slurm_cpu", "submitit_local", "joblib"])
def test_other_launchers_are_left_as_they_are(choice):
    cfg = composed_launcher(choice)
    target = cfg.hydra.launcher._target_
    use_project_launcher(cfg)
    assert cfg.hydra.launcher._target_ == target


@pytest.mark.promise(
    "docs/launchers.md", "the plugin names submitit_slurm and ray map onto the project's launcher classes"
)
def test_the_swap_tables_paths_name_installed_classes_and_the_project_side_is_the_projects():
    """Bug class "hydra/launcher=ray keeps hydra-ray-launcher's own launcher", the part that needs no Ray:
    each project-side path of PROJECT_LAUNCHERS is a launcher class of the project's `hydra_plugins` modules, under
    the name the table gives it; each plugin-side path names a class of a Hydra launcher plugin's package, and
    imports wherever that plugin is installed (hydra-submitit-launcher always; hydra-ray-launcher with the ray
    extra, where the Ray tier, tests/test_ray_cluster.py, also runs a sweep through the swap)."""
    import importlib.util

    from hydra.plugins.launcher import Launcher

    assert len(PROJECT_LAUNCHERS) == 2
    checked = []
    for plugin, project in PROJECT_LAUNCHERS.items():
        cls = get_class(project)
        assert f"{cls.__module__}.{cls.__qualname__}" == project and issubclass(cls, Launcher), project
        assert (REPO / "hydra_plugins" / f"{cls.__module__.rpartition('.')[2]}.py").is_file(), project
        package, *module, name = plugin.split(".")[1:]
        assert plugin.startswith("hydra_plugins.hydra_") and module and name.isidentifier(), plugin
        if importlib.util.find_spec(f"hydra_plugins.{package}") is not None:
            found = get_class(plugin)
            assert f"{found.__module__}.{found.__qualname__}" == plugin and issubclass(found, Launcher), plugin
            checked.append(plugin)
    assert "hydra_plugins.hydra_submitit_launcher.submitit_launcher.SlurmLauncher" in checked  # the test extra's
