"""The templates open and run as they are (JupyterLab from notebooks/, default parameters):
extract → score → report, writing only under runs/notebooks/ (gitignored)."""

import json
import shutil
from pathlib import Path

from evalkit.execution.execute import NOTEBOOKS_DIR, NotebookJob, execute

ROOT = Path(__file__).resolve().parent.parent


def test_templates_run_with_their_default_parameters(tmp_path):
    shutil.rmtree(ROOT / "runs" / "notebooks", ignore_errors=True)
    jobs = [NotebookJob(NOTEBOOKS_DIR / f"{name}.ipynb", tmp_path / f"{name}.ipynb", {}, cwd=NOTEBOOKS_DIR)
            for name in ("extract", "score", "report")]
    results = [execute([job], workers=1)[0] for job in jobs]  # in order: each reads what the last wrote
    assert all(r.ok for r in results), [r.error for r in results]
    out = ROOT / "runs" / "notebooks" / "deal-memos" / "clean-single-term" / "fake"
    assert json.loads((out / "score.json").read_text())["score"] == 1.0
    report = json.loads((tmp_path / "report.ipynb").read_text())
    assert "clean-single-term" in json.dumps(report["cells"])
