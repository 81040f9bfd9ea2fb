"""The judge against people: how often the reference judge's verdicts agree with human ones, and the judged
figures corrected for the errors measured (docs/judging.md, "Auditing the judge").

A **candidate** is one extracted item the strict pass found spurious on an axis the judge looked at (status
``judged``): the judge *accepts* it (pairs it with one of the missed true items: judged tp + 1) or *rejects* it
(it stays a false positive). A person decides the same question — is the pairing right (accepted), is the item
one of the missed true items (rejected)? — in the ``human`` column of a labels file (CSV or JSONL):

    task, member, backend, axis, key, extracted, judge, paired_with, missed, human

(`key`, `extracted`, `paired_with`, `missed` as JSON; `judge` and `human` ``accept``/``reject``; ``yes``/``no``,
``1``/``0``, ``true``/``false`` are read too; a blank ``human`` is unlabelled and left out.)

From the labelled rows: the 2×2 confusion matrix, agreement, Cohen's κ (with both base rates), the judge's
false-accept rate FAR = P(judge accepts | human rejects) and false-reject rate FRR = P(judge rejects | human
accepts). The judged counts are corrected Rogan–Gladen style: of N candidates the judge accepted a, so the true
accepts are â = (a − FAR·N) / (1 − FAR − FRR) (clipped to [0, N]); tp + â, fp − â, fn − â give the corrected
precision / recall / F1 (micro, over members). The CI is a percentile bootstrap over the labelled rows *and*
the members of the judged set jointly (each resample draws both), so it carries the audit's own uncertainty as
well as the members'. Assumption: the labelled rows are a random sample of the candidates (FAR and FRR are the
judge's error rates on them) and one FAR/FRR holds across axes.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from evalkit.errors import CorpusError, UsageError
from evalkit.results.runfolder import read_judgments, scan
from evalkit.scoring.stats import CONFIDENCE, RESAMPLES, SEED, Seed, f1

__all__ = ["COLUMNS", "ACCEPT", "REJECT", "candidates", "write_labels", "read_labels", "confusion", "agreement",
           "error_rates", "corrected_counts", "corrected_f1_ci", "member_counts", "audit"]

ACCEPT, REJECT = "accept", "reject"
COLUMNS = ("task", "member", "backend", "axis", "key", "extracted", "judge", "paired_with", "missed", "human")
_YES = {"accept", "accepted", "yes", "y", "1", "true"}
_NO = {"reject", "rejected", "no", "n", "0", "false"}
AXES = ("entities", "relations")


# --------------------------------------------------------------------------- the candidates of a run


def candidates(run: str | Path) -> list[dict[str, Any]]:
    """Every candidate the judge decided in a run: one row per spurious item of a ``judged`` axis (see module
    docstring), ``human`` empty. Only verdicts on the current extraction (`runfolder.read_judgments`)."""
    rows = []
    for s in scan(run):
        judgments = read_judgments(s.home, s.extraction())
        if judgments is None:
            continue
        items = s.score().rows
        for axis, entry in sorted(judgments.axes.items()):
            if entry.get("status") != "judged":
                continue
            paired = {json.dumps(a["extracted_key"]): a.get("expected") for a in entry.get("accepted") or []}
            missed = [r.get("expected") for r in items if r.get("axis") == axis and r.get("outcome") == "missed"]
            for r in items:
                if r.get("axis") != axis or r.get("outcome") != "spurious":
                    continue
                key = json.dumps(r.get("key"), ensure_ascii=False)
                rows.append({"task": s.task, "member": s.member, "backend": s.backend, "axis": axis, "key": key,
                             "extracted": json.dumps(r.get("extracted"), ensure_ascii=False),
                             "judge": ACCEPT if key in paired else REJECT,
                             "paired_with": json.dumps(paired[key], ensure_ascii=False) if key in paired else "",
                             "missed": json.dumps(missed, ensure_ascii=False), "human": ""})
    return rows


def write_labels(path: str | Path, rows: Sequence[Mapping[str, Any]]) -> Path:
    """A labels file for people to fill in: CSV (``.csv``) or JSONL (anything else)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8", newline="") as f:
        if path.suffix.lower() == ".csv":
            w = csv.DictWriter(f, fieldnames=COLUMNS)
            w.writeheader()
            w.writerows({c: r.get(c, "") for c in COLUMNS} for r in rows)
        else:
            f.writelines(json.dumps({c: r.get(c, "") for c in COLUMNS}, ensure_ascii=False) + "\n" for r in rows)
    return path


def _verdict(value: Any, where: str) -> str | None:
    v = str(value if value is not None else "").strip().lower()
    if not v:
        return None
    if v in _YES:
        return ACCEPT
    if v in _NO:
        return REJECT
    raise CorpusError(f"{where}: {value!r} is not a verdict (accept/reject, yes/no, 1/0, true/false)")


def read_labels(path: str | Path) -> list[dict[str, Any]]:
    """The labelled rows of a labels file (blank ``human``: left out); `CorpusError` naming a bad row."""
    path = Path(path)
    if not path.is_file():
        raise CorpusError(f"{path}: labels file not found (make one with `evalkit judge-audit RUN --export FILE`)")
    text = path.read_text(encoding="utf-8")
    if path.suffix.lower() == ".csv":
        raw = list(csv.DictReader(text.splitlines()))
    else:
        raw = []
        for n, line in enumerate(text.splitlines(), 1):
            if line.strip():
                try:
                    raw.append(json.loads(line))
                except json.JSONDecodeError as e:
                    raise CorpusError(f"{path}:{n}: not JSON ({e.msg})") from None
    out = []
    for n, r in enumerate(raw, 2 if path.suffix.lower() == ".csv" else 1):
        missing = [c for c in ("task", "member", "backend", "axis", "key", "judge", "human") if c not in r]
        if missing:
            raise CorpusError(f"{path}: row {n}: no column {', '.join(missing)}")
        human = _verdict(r["human"], f"{path}: row {n}: human")
        if human is not None:
            out.append({**r, "judge": _verdict(r["judge"], f"{path}: row {n}: judge"), "human": human})
    return out


# --------------------------------------------------------------------------- agreement


def confusion(pairs: Iterable[tuple[str, str]]) -> dict[str, int]:
    """The 2×2 matrix of (judge, human) verdicts: ``aa`` both accept, ``ar`` judge accepts / human rejects
    (a false accept), ``ra`` judge rejects / human accepts (a false reject), ``rr`` both reject."""
    m = {"aa": 0, "ar": 0, "ra": 0, "rr": 0}
    for judge, human in pairs:
        m[judge[0] + human[0]] += 1
    return m


def agreement(m: Mapping[str, int]) -> dict[str, float | None]:
    """Agreement, Cohen's κ, the base rates (human and judge accept rates), FAR and FRR of a matrix."""
    n = sum(m.values())
    if not n:
        return {"n": 0, "agreement": None, "kappa": None, "human_accept_rate": None, "judge_accept_rate": None,
                "far": None, "frr": None}
    po = (m["aa"] + m["rr"]) / n
    human, judge = (m["aa"] + m["ra"]) / n, (m["aa"] + m["ar"]) / n
    pe = human * judge + (1 - human) * (1 - judge)
    far, frr = error_rates(m)
    return {"n": n, "agreement": po, "kappa": None if pe == 1 else (po - pe) / (1 - pe), "human_accept_rate": human,
            "judge_accept_rate": judge, "far": far, "frr": frr}


def error_rates(m: Mapping[str, Any]) -> tuple[Any, Any]:
    """(FAR, FRR): judge accepts over human rejects, judge rejects over human accepts (arrays work too)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        rejects, accepts = np.asarray(m["ar"] + m["rr"], float), np.asarray(m["ra"] + m["aa"], float)
        far = np.where(rejects > 0, m["ar"] / np.where(rejects > 0, rejects, 1), np.nan)
        frr = np.where(accepts > 0, m["ra"] / np.where(accepts > 0, accepts, 1), np.nan)
    if far.ndim == 0:
        return (None if np.isnan(far) else float(far)), (None if np.isnan(frr) else float(frr))
    return far, frr


# --------------------------------------------------------------------------- the correction


def corrected_counts(tp: Any, fp: Any, fn: Any, n: Any, accepted: Any, far: Any, frr: Any) -> tuple[Any, Any, Any]:
    """(tp, fp, fn) with the Rogan–Gladen estimate of the true accepts among `n` candidates of which the judge
    accepted `accepted`: â = (accepted − FAR·n)/(1 − FAR − FRR), clipped to [0, min(n, fn)]. Arrays broadcast."""
    far, frr = np.asarray(far, float), np.asarray(frr, float)
    useful = 1 - far - frr > 0  # else the judge is no better than chance: no estimate (NaN)
    with np.errstate(invalid="ignore", divide="ignore"):
        a = np.where(useful, (np.asarray(accepted, float) - far * n) / np.where(useful, 1 - far - frr, 1), np.nan)
    a = np.clip(a, 0, np.minimum(n, fn))
    return tp + a, fp - a, fn - a


def _f1(tp: Any, fp: Any, fn: Any) -> Any:
    denom = 2 * tp + fp + fn
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(denom > 0, 2 * tp / np.where(denom > 0, denom, 1), np.nan)


def corrected_f1_ci(members: Any, matrix: Mapping[str, int], seed: Seed = SEED, resamples: int = RESAMPLES,
                    confidence: float = CONFIDENCE, correct: bool = True) -> dict[str, Any]:
    """Corrected (or, ``correct=False``, the judge's own) micro precision / recall / F1 of the judged set and a
    percentile bootstrap CI of F1 that resamples the members (rows ``tp, fp, fn, n, accepted``: strict counts,
    candidates, judge accepts) and the labelled pairs (`matrix`) jointly. Uncorrected: members only."""
    x = np.asarray(members, dtype=float).reshape(-1, 5)
    rng = np.random.default_rng(seed)
    cells = np.array([matrix["aa"], matrix["ar"], matrix["ra"], matrix["rr"]], dtype=float)
    labelled = int(cells.sum())

    def figures(sums: np.ndarray, m: Mapping[str, Any]) -> tuple[Any, Any, Any]:
        tp, fp, fn, n, a = (sums[..., i] for i in range(5))
        if correct:
            far, frr = error_rates(m)
            tp, fp, fn = corrected_counts(tp, fp, fn, n, a, far, frr)
        else:
            tp, fp, fn = tp + a, fp - a, fn - a
        return tp, fp, fn

    tp, fp, fn = (float(v) for v in figures(x.sum(axis=0), matrix))
    if any(np.isnan(v) for v in (tp, fp, fn)):  # FAR + FRR ≥ 1: the judge is no better than chance, no correction
        return {"precision": None, "recall": None, "f1": None, "ci": None}
    point = {"precision": tp / (tp + fp) if tp + fp else None, "recall": tp / (tp + fn) if tp + fn else None,
             "f1": f1(tp, fp, fn)}
    sums = x[rng.integers(0, len(x), size=(resamples, len(x)))].sum(axis=1)
    m = matrix
    if correct and labelled:
        draw = rng.multinomial(labelled, cells / labelled, size=resamples)  # the labelled rows, resampled
        m = {"aa": draw[:, 0], "ar": draw[:, 1], "ra": draw[:, 2], "rr": draw[:, 3]}
    boot = _f1(*figures(sums, m))
    boot = boot[~np.isnan(boot)]
    alpha = (1 - confidence) / 2
    ci = [float(v) for v in np.quantile(boot, [alpha, 1 - alpha])] if boot.size else None
    return {**point, "ci": ci}


def member_counts(run: str | Path, backend: str, axis: str, cands: Sequence[Mapping[str, Any]]) -> list[list[float]]:
    """Per member of `backend`: [strict tp, fp, fn, candidates, judge accepts] on `axis` (members the judge
    looked at on that axis; others carry their strict counts with no candidates)."""
    per: dict[tuple[str, str], list[float]] = {}
    for s in scan(run):
        met = s.score().metrics
        if s.backend != backend or met.get(f"{axis}_tp") is None:
            continue
        per[(s.task, s.member)] = [float(met[f"{axis}_tp"]), float(met[f"{axis}_fp"]), float(met[f"{axis}_fn"]), 0, 0]
    for c in cands:
        row = per.get((c["task"], c["member"]))
        if c["backend"] == backend and c["axis"] == axis and row is not None:
            row[3] += 1
            row[4] += c["judge"] == ACCEPT
    return [per[k] for k in sorted(per)]


@dataclass
class Audit:
    matrix: dict[str, int]
    agreement: dict[str, Any]
    figures: list[dict[str, Any]]  # per backend × axis: judged and corrected P/R/F1 with CIs
    unlabelled: int

    def lines(self) -> list[str]:
        a, m = self.agreement, self.matrix
        pct = lambda v: "—" if v is None else f"{v:.1%}"  # noqa: E731
        out = [f"judge-audit: {a['n']} labelled candidate(s) ({self.unlabelled} of the run's not labelled)",
               "                 human accepts  human rejects",
               f"  judge accepts  {m['aa']:>13}  {m['ar']:>13}",
               f"  judge rejects  {m['ra']:>13}  {m['rr']:>13}",
               f"  agreement {pct(a['agreement'])}, Cohen's κ "
               + ("—" if a["kappa"] is None else f"{a['kappa']:.3f}")
               + f" (base rates: human accepts {pct(a['human_accept_rate'])}, judge accepts {pct(a['judge_accept_rate'])})",
               f"  false-accept rate {pct(a['far'])} (judge accepts / human rejects), "
               f"false-reject rate {pct(a['frr'])} (judge rejects / human accepts)"]
        for f in self.figures:
            def fig(d, name="f1"):
                ci = d.get("ci") if name == "f1" else None
                return ("—" if d[name] is None else f"{d[name]:.3f}") + (f" [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else "")
            c = f["corrected"]
            out.append(f"  {f['backend']} {f['axis']}: judged F1 {fig(f['judged'])} → corrected F1 {fig(c)} "
                       f"(P {fig(c, 'precision')}, R {fig(c, 'recall')}; {f['members']} members, "
                       f"{f['candidates']} candidates)" + ("" if c["f1"] is not None else
                                                           " — no correction: FAR + FRR ≥ 1 or no labels"))
        out.append("  CI: 95% percentile bootstrap over members and labelled pairs jointly (corrected); members only (judged)")
        return out


def audit(run: str | Path, labels: Sequence[Mapping[str, Any]], seed: Seed = SEED) -> Audit:
    """Match the labels to the run's candidates (a label on no candidate, or with another judge verdict than the
    run's, is a `UsageError`: the labels are of another judgment), then agreement and corrected figures."""
    cands = candidates(run)
    index = {(c["task"], c["member"], c["backend"], c["axis"], _canon(c["key"])): c for c in cands}
    pairs = []
    for n, r in enumerate(labels, 1):
        c = index.get((r["task"], r["member"], r["backend"], r["axis"], _canon(r["key"])))
        if c is None:
            raise UsageError(f"labels row {n} ({r['task']}/{r['member']} [{r['backend']}] {r['axis']} {r['key']}): "
                             f"no such candidate in {run}; export the labels from this run")
        if c["judge"] != r["judge"]:
            raise UsageError(f"labels row {n}: the judge said {r['judge']} when labelled, {c['judge']} in {run}: "
                             "the labels are of another judgment; export them again")
        pairs.append((r["judge"], r["human"]))
    matrix = confusion(pairs)
    figures = []
    for backend, axis in sorted({(c["backend"], c["axis"]) for c in cands}):
        rows = member_counts(run, backend, axis, cands)
        if not rows:
            continue
        figures.append({"backend": backend, "axis": axis, "members": len(rows),
                        "candidates": int(sum(r[3] for r in rows)),
                        "judged": corrected_f1_ci(rows, matrix, seed, correct=False),
                        "corrected": corrected_f1_ci(rows, matrix, seed) if pairs else
                        {"precision": None, "recall": None, "f1": None, "ci": None}})
    return Audit(matrix, agreement(matrix), figures, len(cands) - len(pairs))


def _canon(key: Any) -> str:
    try:
        return json.dumps(json.loads(key) if isinstance(key, str) else key, ensure_ascii=False)
    except json.JSONDecodeError:
        return str(key)
