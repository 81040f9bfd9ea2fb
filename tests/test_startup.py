"""`evalkit --help` stays cheap: the command line loads no heavy layer until a command runs.

The time is measured by benchmarks/bench_startup.py; this guards the cause of a slow start-up (a module
imported at the top of the CLI path), which a timed test could only catch on a quiet machine."""

import subprocess
import sys

HEAVY = ("numpy", "pandas", "altair", "papermill", "nbconvert", "anthropic", "openai", "httpx", "dask", "scipy",
         "evalkit.results.runfolder", "evalkit.stages.runner", "evalkit.scoring.stats")


def test_the_command_line_imports_no_heavy_module_before_a_command_runs():
    code = f"import sys, evalkit.cli; heavy = {HEAVY!r}; print(' '.join(m for m in heavy if m in sys.modules))"
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert loaded == [], f"imported at `evalkit --help`: {loaded} (import them inside the command, with a `# lazy:` why)"
