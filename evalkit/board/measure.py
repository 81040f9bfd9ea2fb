"""`evalkit band`: run the repeated sweeps (or read their folders) and write the noise band they measure.

The band itself is computed by `evalkit.results.band` (pure over run folders); this module runs the sweeps.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from evalkit.backends import labels_slug
from evalkit.board.sweep import sweep
from evalkit.corpus.tasks import heldout_keys
from evalkit.errors import SweepFailed, UsageError
from evalkit.results.band import band_path, compute_band, render_markdown, update_readme, write_band
from evalkit.scoring.stats import CONFIDENCE, RESAMPLES, SEED

__all__ = ["Measured", "SweepFailed", "measure"]


@dataclass
class Measured:
    """What `measure` did: the band written to `path` (its Markdown table), the sweeps it read."""

    path: Path
    band: dict[str, Any]
    markdown: str
    sweeps: list[Path]
    readme: Path | None = None


def measure(opts: Any, *, specs: Sequence[Any] = (), from_runs: Sequence[Path] = (), runs_dir: Path = Path("runs"),
            out: Path | None = None, label: str | None = None, readme: Path | None = None, seed: int = SEED,
            resamples: int = RESAMPLES, confidence: float = CONFIDENCE, allow_failures: bool = False,
            allow_predictions: bool = False, on_sweep: Callable[[int, int, Any, Path], Any] | None = None,
            on_swept: Callable[[Any], Any] | None = None) -> Measured:
    """`evalkit band`: run one sweep per backend spec in `specs` (each with `opts`, a `runner.RunOptions`),
    or read `from_runs`; compute the band over them, write it (default ``<corpus>/band.json``) and, with
    `readme`, rewrite its band block. `on_sweep(i, n, spec, folder)` is told before each sweep runs,
    `on_swept(result)` after each one that had failures."""
    if bool(specs) == bool(from_runs):
        raise UsageError("band: give sweeps to run or run folders to read (not both)")
    roots = [Path(r) for r in from_runs]
    if specs:
        if len(specs) < 2:
            raise UsageError("band: a band needs at least 2 sweeps")
        failed, stamp = [], datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
        for i, spec in enumerate(specs, 1):
            folder = Path(runs_dir) / f"{stamp}-band-{i}-{labels_slug([spec.label])}"
            if on_sweep:
                on_sweep(i, len(specs), spec, folder)
            result = sweep(replace(opts, backends=[spec], out=folder, force=True, board=None))
            if result.failures:
                if on_swept:
                    on_swept(result)
                failed.append(result.exit_code)
            roots.append(folder)
        if failed and not allow_failures:
            raise SweepFailed(max(failed))
    path = Path(out or band_path(opts.corpus))
    band = compute_band(roots, tasks=opts.tasks, label=label, seed=seed, resamples=resamples, confidence=confidence,
                        band_dir=path.parent, heldout=heldout_keys(opts.corpus, opts.tasks),
                        allow_predictions=allow_predictions)
    write_band(path, band)
    md = render_markdown(band)
    if readme:
        update_readme(readme, md)
    return Measured(path, band, md, roots, Path(readme) if readme else None)
