"""The member's score: scope, site / level / area alignment, the families' rows, and every metric as an
aggregate of that item table."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import ValidationError

from evalkit.errors import InvalidCorpus
from evalkit.scoring import Metric, ScoreContext, Scorer, ScoreResult
from evalkit.scoring.text import normalize
from evalkit.scoring.tree import (
    ACCURACY,
    COUNT,
    SET,
    aggregate_rows,
    align_many_to_one,
    align_one_to_one,
    display,
    edge,
    edge_label,
    norm_key,
)

from .catalog import Catalog, load_catalog
from .families import (
    _Rows,
    _score_connections,
    _score_doors,
    _score_encounters,
    _score_transitions,
    _score_treasure,
)
from .models import AdventureExtraction, AdventureTruth, Dungeon, Options, Scope, XArea, XDungeon, XEntrance

HERE = Path(__file__).resolve().parent.parent  # the task folder

# ============================================================== scoring

KINDS = {
    ("areas", "dungeon"): SET,
    ("areas", "area"): SET,
    ("encounters", "name"): SET,
    ("encounters", "count"): ACCURACY,
    ("encounters", "resolution"): ACCURACY,
    ("encounters", "custom"): ACCURACY,
    ("encounters", "non_srd"): COUNT,
    ("connections", "edge"): SET,
    ("treasure", "presence"): ACCURACY,
    ("treasure", "letters"): ACCURACY,
    ("doors", "door"): SET,
    ("doors", "kind"): ACCURACY,
    ("doors", "locked"): ACCURACY,
    ("transitions", "link"): SET,
    ("transitions", "kind"): ACCURACY,
    ("entrance", "key"): ACCURACY,
}
PREFIX = {
    ("areas", "dungeon"): "areas_dungeons",
    ("areas", "area"): "areas",
    ("encounters", "non_srd"): "encounters_non_srd",
    ("connections", "edge"): "connections",
    ("doors", "door"): "doors",
    ("transitions", "link"): "transitions",
    ("entrance", "key"): "entrance",
}
FAMILIES = ("areas", "encounters", "connections", "treasure", "doors", "transitions", "entrance")
# Each family's headline figure is the mean of these (non-null) figures; the
# member's score is the mean of the non-null family headlines.
HEADLINE = {
    "areas": ("areas_f1",),
    "encounters": ("encounters_name_f1", "encounters_count_accuracy", "encounters_resolution_accuracy",
                   "encounters_custom_accuracy"),
    "connections": ("connections_f1",),
    "treasure": ("treasure_presence_accuracy", "treasure_letters_accuracy"),
    "doors": ("doors_f1", "doors_kind_accuracy", "doors_locked_accuracy"),
    "transitions": ("transitions_f1", "transitions_kind_accuracy"),
    "entrance": ("entrance_accuracy",),
}
COLUMNS = ("family", "metric", "site", "level", "area", "expected", "extracted", "outcome", "reason")


def _mean(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return sum(present) / len(present) if present else None


def compute_metrics(rows: list[dict[str, Any]]) -> dict[str, float | int | None]:
    """All flat metrics of an item table (the member's, or one site's rows)."""
    m = aggregate_rows(rows, KINDS, PREFIX)
    m["areas_truth_dungeons"] = m["areas_dungeons_tp"] + m["areas_dungeons_fn"]
    m["areas_extracted_dungeons"] = m["areas_dungeons_tp"] + m["areas_dungeons_fp"]
    m["areas_matched_dungeons"] = m["areas_dungeons_tp"]
    m["areas_truth"] = m["areas_tp"] + m["areas_fn"]
    m["areas_extracted"] = m["areas_tp"] + m["areas_fp"]
    m["areas_matched"] = m["areas_tp"]
    for fam in FAMILIES:
        m[f"{fam}_score"] = _mean([m[k] for k in HEADLINE[fam]])
    m["score"] = _mean([m[f"{fam}_score"] for fam in FAMILIES])
    return m


def _parse_scope(raw: Any, truth: AdventureTruth, member: str) -> Scope:
    if not raw:
        return Scope()
    try:
        scope = Scope.model_validate(raw)
    except ValidationError as e:
        raise InvalidCorpus([f"{member}: manifest scope: {err['loc']}: {err['msg']}" for err in e.errors()]) from None
    by_name = {normalize(d.name): d for d in truth.dungeons}
    problems = []
    for s in scope.sites or []:
        d = by_name.get(normalize(s.name))
        if d is None:
            problems.append(f"{member}: manifest scope: no truth dungeon named {s.name!r}")
            continue
        keys = {norm_key(a.key) for lv in d.levels for a in lv.areas}
        problems += [f"{member}: manifest scope: {s.name!r} has no area {k!r}" for k in s.areas or []
                     if norm_key(k) not in keys]
    if problems:
        raise InvalidCorpus(problems)
    return scope


def _x_entrance_key(e: XEntrance | str | None) -> str | None:
    if e is None:
        return None
    return e if isinstance(e, str) else e.key


def score(extraction: dict[str, Any] | None, truth: AdventureTruth, ctx: ScoreContext) -> ScoreResult:
    options = ctx.options if isinstance(ctx.options, Options) else Options.model_validate(ctx.options or {})
    task_dir = Path(ctx.extra.get("task_dir") or HERE)
    catalog = load_catalog(task_dir, options)
    scope = _parse_scope(ctx.extra.get("scope"), truth, ctx.member_id)
    notes: list[str] = []

    if extraction is None:
        x = AdventureExtraction()
        notes.append("no extraction: scored as an empty record")
    else:
        try:
            x = AdventureExtraction.model_validate(extraction)
        except ValidationError as e:
            x = AdventureExtraction()
            first = e.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            notes.append(f"extraction does not follow the schema ({e.error_count()} problems; first at {where}: "
                         f"{first['msg']}): scored as an empty record")

    for d in truth.dungeons:
        for lv in d.levels:
            for a in lv.areas:
                for enc in a.encounters or []:
                    if enc.template and enc.template not in catalog.ids:
                        notes.append(f"truth template {enc.template!r} ({d.name} / {a.key}) is not in the catalog")

    R = _Rows()

    # ---- scope: which truth sites and areas are asserted for this member
    in_scope_site: dict[int, bool] = {}
    in_scope_area: dict[tuple[int, str], bool] = {}
    scoped = {normalize(s.name): s for s in scope.sites} if scope.sites is not None else None
    for ti, d in enumerate(truth.dungeons):
        s = None if scoped is None else scoped.get(normalize(d.name))
        in_scope_site[ti] = scoped is None or s is not None
        only = None if s is None or s.areas is None else {norm_key(k) for k in s.areas}
        for lv in d.levels:
            for a in lv.areas:
                in_scope_area[(ti, norm_key(a.key))] = in_scope_site[ti] and (only is None or norm_key(a.key) in only)

    # ---- site alignment (on the full truth, so out-of-scope content finds its counterpart)
    t_keys = [{norm_key(a.key) for lv in d.levels for a in lv.areas} for d in truth.dungeons]
    x_keys = [{norm_key(a.key) for lv in xd.levels for a in lv.areas} for xd in x.dungeons]
    site_map = align_one_to_one(t_keys, x_keys, [d.name for d in truth.dungeons], [xd.name for xd in x.dungeons])
    x_to_t = {xj: ti for ti, (xj, _) in site_map.items()}
    alignment: list[dict[str, Any]] = []

    for xj, xd in enumerate(x.dungeons):
        n_areas = sum(len(lv.areas) for lv in xd.levels)
        label = xd.name or f"(extracted site {xj + 1})"
        if xj in x_to_t:
            ti = x_to_t[xj]
            if not in_scope_site[ti]:
                R.add("areas", "dungeon", truth.dungeons[ti].name, None, None, None, label, "ignored",
                      "aligned to a truth site outside this member's scope: the site and its "
                      f"{n_areas} areas are left out of every family")
            continue
        if scope.unaligned_sites == "ignore":
            R.add("areas", "dungeon", label, None, None, None, label, "ignored",
                  f"aligns to no truth site; this member's scope does not assert the complete site list "
                  f"({n_areas} areas left out)")
            continue
        R.add("areas", "dungeon", label, None, None, None, label, "spurious", "aligns to no truth site (no shared "
              "area key, no equal name)")
        for lv in xd.levels:
            for a in lv.areas:
                R.add("areas", "area", label, None, a.key, None, a.key, "spurious",
                      "area of an extracted site that aligns to no truth site")

    for ti, d in enumerate(truth.dungeons):
        if not in_scope_site[ti]:
            continue
        if ti not in site_map:
            R.add("areas", "dungeon", d.name, None, None, d.name, None, "missed",
                  "no extracted site shares an area key or its name")
            _score_missed_site(R, ti, d, in_scope_area)
            alignment.append({"site": d.name, "extracted_site": None, "shared_keys": 0, "levels": []})
            continue
        xj, shared = site_map[ti]
        xd = x.dungeons[xj]
        R.add("areas", "dungeon", d.name, None, None, d.name, xd.name, "matched",
              f"aligned by {shared} shared area keys" if shared else "aligned by equal name")
        alignment.append(_score_site(R, ti, d, xd, shared, in_scope_area, catalog, options))

    metrics = compute_metrics(R.rows)
    headline = metrics["score"]
    sites = sorted({r["site"] for r in R.rows if r["site"] is not None and r["outcome"] != "ignored"}, key=str)
    per_site = {s: compute_metrics([r for r in R.rows if r["site"] == s]) for s in sites}
    notes += _notes(R.rows)
    passed = None if headline is None else headline >= ctx.threshold
    return ScoreResult(
        score=headline,
        passed=passed,
        metrics=metrics,
        items=R.rows,
        notes=notes,
        details={
            "columns": list(COLUMNS),
            "families": {f: {"score": metrics[f"{f}_score"], "display": display(metrics[f"{f}_score"]),
                             "headline_figures": list(HEADLINE[f])} for f in FAMILIES},
            "headline_rule": "mean of the non-null family scores; a family's score is the mean of its non-null "
                             "headline figures",
            "sites": per_site,
            "alignment": alignment,
            "edges": R.edges,
            "scope": scope.model_dump(mode="json") if ctx.extra.get("scope") else None,
        },
    )


def _score_missed_site(R: _Rows, ti: int, d: Dungeon, in_scope_area: dict) -> None:
    """A truth site no extracted site aligns to: its areas, names and links are all misses."""
    keys = {norm_key(a.key) for lv in d.levels for a in lv.areas if in_scope_area[(ti, norm_key(a.key))]}
    for lv in d.levels:
        for a in lv.areas:
            if not in_scope_area[(ti, norm_key(a.key))]:
                continue
            R.add("areas", "area", d.name, lv.number, a.key, a.key, None, "missed", "its site was not extracted")
            for enc in a.encounters or []:
                R.add("encounters", "name", d.name, lv.number, a.key, enc.name, None, "missed",
                      "its site was not extracted")
    for t in d.transitions or []:
        if {norm_key(t.from_key), norm_key(t.to_key)} <= keys:
            R.add("transitions", "link", d.name, None, edge_label(edge(t.from_key, t.to_key)),
                  edge_label(edge(t.from_key, t.to_key)), None, "missed", "its site was not extracted")


def _score_site(R: _Rows, ti: int, d: Dungeon, xd: XDungeon, shared: int, in_scope_area: dict,
                catalog: Catalog, options: Options) -> dict[str, Any]:
    site = d.name
    scope_of = lambda k: in_scope_area.get((ti, k), False)  # noqa: E731
    t_level_of = {norm_key(a.key): lv.number for lv in d.levels for a in lv.areas}
    t_area = {norm_key(a.key): a for lv in d.levels for a in lv.areas}

    # ---- levels: many-to-one by area-key overlap
    lmap = align_many_to_one(
        [{norm_key(a.key) for a in lv.areas} for lv in d.levels],
        [{norm_key(a.key) for a in xl.areas} for xl in xd.levels],
        [lv.number for lv in d.levels], [xl.number for xl in xd.levels],
    )
    x_first: list[dict[str, XArea]] = []
    for xl in xd.levels:
        first: dict[str, XArea] = {}
        for a in xl.areas:
            first.setdefault(norm_key(a.key), a)
        x_first.append(first)

    # ---- areas: by normalized key within aligned levels
    matched: dict[str, tuple[int, XArea]] = {}  # truth key → (extracted level index, area)
    for li, lv in enumerate(d.levels):
        xl = lmap.get(li, (None, 0))[0]
        for a in lv.areas:
            k = norm_key(a.key)
            if not scope_of(k):
                continue
            got = x_first[xl].get(k) if xl is not None else None
            if got is not None:
                matched[k] = (xl, got)
                R.add("areas", "area", site, lv.number, a.key, a.key, got.key, "matched", "same normalized key")
            else:
                why = ("its level aligned to no extracted level" if xl is None else
                       f"not on extracted level {_xlabel(xd, xl)} (aligned to printed level {lv.number})")
                R.add("areas", "area", site, lv.number, a.key, a.key, None, "missed", why)
    claimed = {(xl, id(a)) for xl, a in matched.values()}
    for xl_i, xl in enumerate(xd.levels):
        for a in xl.areas:
            if (xl_i, id(a)) in claimed:
                continue
            k = norm_key(a.key)
            if k in t_area and not scope_of(k):
                R.add("areas", "area", site, t_level_of[k], a.key, None, a.key, "ignored",
                      "a printed area outside this member's scope")
            elif k in t_area and k in matched and matched[k][1] is not a:
                R.add("areas", "area", site, t_level_of[k], a.key, None, a.key, "spurious",
                      "duplicate of an area already matched")
            elif k in t_area:
                onto = sorted(d.levels[li].number for li, (xl, _) in lmap.items() if xl == xl_i)
                R.add("areas", "area", site, t_level_of[k], a.key, None, a.key, "spurious",
                      f"printed on level {t_level_of[k]}, extracted on level {_xlabel(xd, xl_i)}, which "
                      + (f"printed level(s) {', '.join(map(str, onto))} align to" if onto
                         else "no printed level aligns to"))
            else:
                R.add("areas", "area", site, None, a.key, None, a.key, "spurious",
                      f"not a printed key of this site (extracted level {_xlabel(xd, xl_i)})")

    # ---- encounters and treasure, per in-scope truth area
    for lv in d.levels:
        for a in lv.areas:
            k = norm_key(a.key)
            if not scope_of(k):
                continue
            if k not in matched:
                for enc in a.encounters or []:
                    R.add("encounters", "name", site, lv.number, a.key, enc.name, None, "missed",
                          "its area was not extracted")
                continue
            xa = matched[k][1]
            _score_encounters(R, site, lv.number, a, xa, catalog, options)
            _score_treasure(R, site, lv.number, a, xa)

    # ---- connections and doors: same-level edges between matched areas
    for lv in d.levels:
        level_keys = {norm_key(a.key) for a in lv.areas}
        m = {k for k in level_keys if k in matched}
        _score_connections(R, site, lv, m, matched, t_area, t_level_of, scope_of)
        _score_doors(R, site, lv, m, matched, t_area, t_level_of, scope_of)

    _score_transitions(R, site, d, xd, t_area, t_level_of, scope_of)

    # ---- entrance
    if d.entrance is not None and scope_of(norm_key(d.entrance.key)):
        got = _x_entrance_key(xd.entrance)
        if got is None:
            R.add("entrance", "key", site, d.entrance.level, d.entrance.key, d.entrance.key, None, "missed",
                  "no entrance extracted")
        elif norm_key(got) == norm_key(d.entrance.key):
            R.add("entrance", "key", site, d.entrance.level, d.entrance.key, d.entrance.key, got, "matched",
                  "the printed way in")
        else:
            R.add("entrance", "key", site, d.entrance.level, d.entrance.key, d.entrance.key, got, "mismatch",
                  "a different area")

    return {
        "site": site, "extracted_site": xd.name, "shared_keys": shared,
        "levels": [{"level": d.levels[li].number, "extracted_level": _xlabel(xd, xl), "shared_keys": n}
                   for li, (xl, n) in sorted(lmap.items())],
    }


def _xlabel(xd: XDungeon, xl: int) -> Any:
    n = xd.levels[xl].number
    return n if n is not None else f"#{xl + 1}"


def _notes(rows: list[dict[str, Any]]) -> list[str]:
    """One line per (family, metric) with problems, naming up to three items."""
    out = []
    for fam, metric in KINDS:
        bad = [r for r in rows if r["family"] == fam and r["metric"] == metric
               and r["outcome"] in ("missed", "spurious", "mismatch")]
        if not bad:
            continue
        counts = {o: sum(r["outcome"] == o for r in bad) for o in ("missed", "spurious", "mismatch")}
        summary = ", ".join(f"{n} {o}" for o, n in counts.items() if n)
        examples = "; ".join(
            f"{r['site']}/{r['area']}: {r['expected']!s} vs {r['extracted']!s} ({r['reason']})"
            if r["area"] else f"{r['site']}: {r['reason']}" for r in bad[:3])
        out.append(f"{fam}.{metric}: {summary} — {examples}{' …' if len(bad) > 3 else ''}")
    return out


def expected_extraction(truth: AdventureTruth) -> dict[str, Any]:
    """The perfect extraction: the truth itself, in the truth's own shape (omitted keys stay omitted)."""
    return truth.model_dump(mode="json", exclude_none=True)


# Every metric `score` returns, with the function that writes its rows (or computes it from other metrics).
# Set figures: recall = matched / (matched + missed), precision = matched / (matched + spurious),
# F1 = 2·matched / (2·matched + missed + spurious); accuracy = matched / (matched + mismatch + missed).
METRICS = (
    Metric("score", "the member's headline: mean of the non-null family scores", compute_metrics),
    # ---- areas
    Metric("areas_score", "areas family score: areas_f1", compute_metrics),
    Metric("areas_recall", "in-scope truth areas matched by normalized key within aligned levels / all of them",
           _score_site),
    Metric("areas_precision", "extracted areas of aligned in-scope sites (and of unaligned sites) that match a truth "
           "area / all of them", _score_site),
    Metric("areas_f1", "F1 of area matching", _score_site),
    Metric("areas_tp", "areas matched (rows matched)", _score_site),
    Metric("areas_fp", "extracted areas that match no truth area: duplicate, wrong level, unprinted key, or in a site "
           "that aligns to nothing (rows spurious)", _score_site),
    Metric("areas_fn", "in-scope truth areas not extracted (rows missed)", _score_site),
    Metric("areas_truth", "in-scope truth areas: areas_tp + areas_fn", compute_metrics),
    Metric("areas_extracted", "extracted areas counted: areas_tp + areas_fp", compute_metrics),
    Metric("areas_matched", "truth areas matched: areas_tp", compute_metrics),
    Metric("areas_dungeons_recall", "in-scope truth sites aligned to an extracted site / all of them", score),
    Metric("areas_dungeons_precision", "extracted sites aligned to an in-scope truth site / extracted sites counted",
           score),
    Metric("areas_dungeons_f1", "F1 of site alignment", score),
    Metric("areas_dungeons_tp", "sites aligned (by shared area keys or equal name)", score),
    Metric("areas_dungeons_fp", "extracted sites that align to no truth site (unless the scope ignores them)", score),
    Metric("areas_dungeons_fn", "in-scope truth sites no extracted site aligns to", score),
    Metric("areas_truth_dungeons", "in-scope truth sites: areas_dungeons_tp + areas_dungeons_fn", compute_metrics),
    Metric("areas_extracted_dungeons", "extracted sites counted: areas_dungeons_tp + areas_dungeons_fp",
           compute_metrics),
    Metric("areas_matched_dungeons", "sites aligned: areas_dungeons_tp", compute_metrics),
    # ---- encounters
    Metric("encounters_score", "encounters family score: mean of the non-null name F1, count, resolution and custom "
           "accuracies", compute_metrics),
    Metric("encounters_name_recall", "truth creature names (distinct folds per in-scope area) matched by an "
           "extracted name with the same fold / all of them", _score_encounters),
    Metric("encounters_name_precision", "extracted names (distinct folds) in matched areas whose truth asserts "
           "encounters that match a truth name / all of them", _score_encounters),
    Metric("encounters_name_f1", "F1 of creature-name matching", _score_encounters),
    Metric("encounters_name_tp", "creature names matched", _score_encounters),
    Metric("encounters_name_fp", "extracted names not in the area's complete encounter list", _score_encounters),
    Metric("encounters_name_fn", "truth creature names not extracted (a name in a missed area is missed)",
           _score_encounters),
    Metric("encounters_count_accuracy", "matched names with a stated count whose extracted counts sum to it / all "
           "of them (a dice or missing count is a mismatch)", _score_encounters),
    Metric("encounters_count_matched", "matched names whose count agrees", _score_encounters),
    Metric("encounters_count_denominator", "matched names whose truth states a count", _score_encounters),
    Metric("encounters_resolution_accuracy", "matched names with a truth template whose every extracted name "
           "resolves to it through the catalog / all of them", _score_encounters),
    Metric("encounters_resolution_matched", "matched names that resolve to their template", _score_encounters),
    Metric("encounters_resolution_denominator", "matched names whose truth asserts a template", _score_encounters),
    Metric("encounters_custom_accuracy", "matched custom creatures whose every extracted name is a bespoke emission "
           "(custom: true, no template, a usable stat block) / all of them", _score_encounters),
    Metric("encounters_custom_matched", "matched custom creatures emitted as bespoke", _score_encounters),
    Metric("encounters_custom_denominator", "matched names whose truth says custom: true", _score_encounters),
    Metric("encounters_non_srd", "matched names with neither template nor custom in the truth (a tally, in no "
           "ratio)", _score_encounters),
    # ---- connections
    Metric("connections_score", "connections family score: connections_f1", compute_metrics),
    Metric("connections_recall", "truth same-level connections between matched areas (an endpoint asserting its "
           "connections) that are extracted / all of them", _score_connections),
    Metric("connections_precision", "extracted same-level connections between matched areas (an endpoint asserting "
           "its connections) that are true / all of them", _score_connections),
    Metric("connections_f1", "F1 of same-level connections (undirected edges)", _score_connections),
    Metric("connections_tp", "connections matched", _score_connections),
    Metric("connections_fp", "extracted connections missing from an asserting area's complete neighbour list",
           _score_connections),
    Metric("connections_fn", "truth connections not extracted", _score_connections),
    # ---- treasure
    Metric("treasure_score", "treasure family score: mean of the non-null presence and letters accuracies",
           compute_metrics),
    Metric("treasure_presence_accuracy", "matched areas asserting treasure where the extraction agrees whether there "
           "is any / all of them", _score_treasure),
    Metric("treasure_presence_matched", "matched areas whose treasure presence agrees", _score_treasure),
    Metric("treasure_presence_denominator", "matched areas whose truth asserts treasure", _score_treasure),
    Metric("treasure_letters_accuracy", "matched areas with stated treasure letters whose extracted letter set "
           "equals them / all of them", _score_treasure),
    Metric("treasure_letters_matched", "matched areas whose treasure letters agree", _score_treasure),
    Metric("treasure_letters_denominator", "matched areas whose truth states treasure letters", _score_treasure),
    # ---- doors
    Metric("doors_score", "doors family score: mean of the non-null doors F1, kind and locked accuracies",
           compute_metrics),
    Metric("doors_recall", "truth doors between matched areas of a level (an endpoint asserting doors) that are "
           "extracted / all of them", _score_doors),
    Metric("doors_precision", "extracted doors between matched areas (an endpoint asserting doors) that are true / "
           "all of them", _score_doors),
    Metric("doors_f1", "F1 of doors (undirected edges)", _score_doors),
    Metric("doors_tp", "doors matched", _score_doors),
    Metric("doors_fp", "extracted doors an asserting area's complete door set does not have", _score_doors),
    Metric("doors_fn", "truth doors not extracted", _score_doors),
    Metric("doors_kind_accuracy", "matched doors whose extracted kind (door / secret_door) agrees / matched doors",
           _score_doors),
    Metric("doors_kind_matched", "matched doors whose kind agrees", _score_doors),
    Metric("doors_kind_denominator", "matched doors", _score_doors),
    Metric("doors_locked_accuracy", "matched doors with a stated lock whose extracted lock state agrees / all of "
           "them", _score_doors),
    Metric("doors_locked_matched", "matched doors whose lock state agrees", _score_doors),
    Metric("doors_locked_denominator", "matched doors whose truth states the lock", _score_doors),
    # ---- transitions
    Metric("transitions_score", "transitions family score: mean of the non-null transitions F1 and kind accuracy",
           compute_metrics),
    Metric("transitions_recall", "truth vertical links (undirected key pairs, in-scope endpoints) of sites asserting "
           "transitions that are extracted / all of them", _score_transitions),
    Metric("transitions_precision", "extracted vertical links of sites asserting transitions that are true / all of "
           "them", _score_transitions),
    Metric("transitions_f1", "F1 of vertical links between levels", _score_transitions),
    Metric("transitions_tp", "vertical links matched", _score_transitions),
    Metric("transitions_fp", "extracted vertical links the truth does not have", _score_transitions),
    Metric("transitions_fn", "truth vertical links not extracted", _score_transitions),
    Metric("transitions_kind_accuracy", "matched links with a stated kind whose extracted kind agrees (after the "
           "fold) / all of them", _score_transitions),
    Metric("transitions_kind_matched", "matched links whose kind agrees", _score_transitions),
    Metric("transitions_kind_denominator", "matched links whose truth states a kind", _score_transitions),
    # ---- entrance
    Metric("entrance_score", "entrance family score: entrance_accuracy", compute_metrics),
    Metric("entrance_accuracy", "aligned sites asserting an in-scope entrance whose extracted entrance key is that "
           "area / all of them (none extracted is wrong)", _score_site),
    Metric("entrance_matched", "sites whose entrance agrees", _score_site),
    Metric("entrance_denominator", "aligned sites whose truth asserts an in-scope entrance", _score_site),
)

SCORER = Scorer(
    name="adventure",
    score=score,
    truth_model=AdventureTruth,
    options_model=Options,
    extraction_model=AdventureExtraction,
    expected_extraction=expected_extraction,
    truth_from_record=lambda record, options: AdventureTruth.model_validate(record),
    metrics=METRICS,
)
