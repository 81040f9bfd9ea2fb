"""environment.yml (conda) and pyproject.toml must list the same dependencies."""

import re
import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent


def _split(req: str) -> tuple[str, str]:
    req = req.split(";", 1)[0]  # environment markers are pip's business, not conda's
    m = re.match(r"^\s*([A-Za-z0-9_.\-]+)(\[[^\]]*\])?\s*(.*)$", req)
    return m.group(1).lower().replace("_", "-"), m.group(3).replace(" ", "")


def test_environment_yml_matches_pyproject():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = dict(_split(r) for r in project["dependencies"])
    for extra in project["optional-dependencies"].values():
        wanted.update(_split(r) for r in extra)
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    listed = {}
    for dep in env["dependencies"]:
        if isinstance(dep, str):
            name, spec = _split(dep)
            if name not in ("python", "pip"):
                listed[name] = spec
    assert listed == wanted


def test_required_packages_are_dependencies():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    names = {_split(r)[0] for r in project["dependencies"]}
    for extra in project["optional-dependencies"].values():
        names |= {_split(r)[0] for r in extra}
    assert {"jupyterlab", "papermill", "pandas", "altair", "pyyaml", "anthropic", "nbval"} <= names
