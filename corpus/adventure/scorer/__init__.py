"""The `adventure` task scorer: seven metric families over sites → levels → areas.

Loaded by evalkit through task.yaml's ``scorer: scorer/:SCORER`` (the
plugin entry point: this package, beside task.yaml); nothing in evalkit knows
this vocabulary. The rules are documented in docs/scoring-adventure.md; in brief:

* The truth (truth.yaml) and the extraction have one shape: ``dungeons[]``
  of ``levels[]`` of keyed ``areas[]`` with ``encounters``, ``connections``,
  ``doors``, ``treasure``; per dungeon ``transitions`` and ``entrance``.
* Asserted-empty convention: a present list/map (``[]``/``{}`` included)
  asserts the complete fact set; an omitted key asserts nothing and keeps
  the area (or site) out of that family's denominators.
* Alignment first: sites by maximal shared area keys (normalized name breaks
  ties), truth levels many-to-one onto extracted levels by area-key overlap,
  areas by normalized printed key.
* Every metric is an aggregate of the item table (one row per compared
  fact, with a `family` and `metric` column); a per-site view is the same
  aggregation over that site's rows. Each metric is declared, with its
  definition and the function that writes its rows, in `score.METRICS`
  (`evalkit metrics adventure`).

Modules: `models` (truth, extraction, options, scope), `catalog` (the creature
catalog), `families` (the shared predicates and each family's rows), `score`
(alignment, the metrics, `SCORER`).
"""

from .catalog import Catalog, load_catalog
from .families import door_kind, is_bespoke_emission, parse_count, read_treasure, transition_kind, usable_stat_block
from .models import AdventureExtraction, AdventureTruth, Options, Scope
from .score import METRICS, SCORER, compute_metrics, score

__all__ = [
    "SCORER", "METRICS", "score", "compute_metrics", "AdventureTruth", "AdventureExtraction", "Options", "Scope",
    "Catalog", "load_catalog", "usable_stat_block", "is_bespoke_emission", "parse_count", "read_treasure",
    "door_kind", "transition_kind",
]
