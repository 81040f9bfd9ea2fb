"""environment.yml (conda) and pyproject.toml list the same dependencies (run time and the `test` extra; the
`lab` extra stays out of both run-time environments); `make lab` takes PORT= and runs as root."""

import os
import re
import subprocess
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
    extras = project["optional-dependencies"]
    wanted = dict(_split(r) for r in project["dependencies"] + extras["test"])
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    listed, pip = {}, []
    for dep in env["dependencies"]:
        if isinstance(dep, str):
            name, spec = _split(dep)
            if name not in ("python", "pip"):
                listed[name] = spec
        else:
            pip += [r for r in dep["pip"] if not r.startswith("-e")]
    listed.update(_split(r) for r in pip)
    assert listed == wanted
    # Platform markers travel with the requirement (conda has none: such requirements go in the pip section).
    marked = {r.replace(" ", "") for r in project["dependencies"] if ";" in r}
    assert marked and marked == {r.replace(" ", "") for r in pip}
    # JupyterLab (the lab extra) adds ~1 s to every kernel start: never in the run-time environment.
    assert not {_split(r)[0] for r in extras["lab"]} & set(listed)
    assert {"jupyterlab", "nbdime"} <= {_split(r)[0] for r in extras["lab"]}


def test_make_lab_takes_a_port_and_allows_root_only_as_root():
    # --no-print-directory: under `make test` (a nested make) make would add "Leaving directory" lines
    cmd = subprocess.run(["make", "--no-print-directory", "-n", "lab", "PORT=9123"], cwd=ROOT, capture_output=True,
                         text=True, check=True).stdout.strip().splitlines()[-1]
    assert "jupyter lab notebooks/" in cmd and "--port=9123" in cmd
    assert ("--allow-root" in cmd) == (os.geteuid() == 0)


def test_required_packages_are_dependencies():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    names = {_split(r)[0] for r in project["dependencies"]}
    for extra in project["optional-dependencies"].values():
        names |= {_split(r)[0] for r in extra}
    assert {"jupyterlab", "papermill", "pandas", "altair", "pyyaml", "anthropic", "nbval"} <= names
