"""One vocabulary, one counter: a run with every outcome — scored answers that are ok, malformed, truncated
and schema_invalid; an error; a not-covered member; a skipped one — prints the same counts on every page:
the CLI's Members lines, index.html, the task report's calls table, the compare page's calls table,
summary.json and `evalkit.load_run`. The HTML tables are parsed, not searched for substrings."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
import yaml
from corpus_factory import add_member, cli, make_corpus, write_yaml

from evalkit.results.summary import read_summary

PIPE = '''
import re

def extract(text, task):
    account = re.search(r"ACC-[0-9]+", text).group(0)
    if account == "ACC-004":
        raise RuntimeError("pipeline crashed")
    return {"account_id": account, "rate": float("0." + str(int(account[-1]) + 5))}
'''
MODEL = "m"


class _Tables(HTMLParser):
    """Every <table> of a page as rows of cell texts (th and td alike, in order)."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: list[list[list[str]]] = []
        self._cell: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self.tables.append([])
        elif tag == "tr" and self.tables:
            self.tables[-1].append([])
        elif tag in ("td", "th") and self.tables:
            self._cell = []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None and self.tables and self.tables[-1]:
            self.tables[-1][-1].append(" ".join("".join(self._cell).split()))
            self._cell = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


def table_with(page: Path, *columns: str) -> list[dict[str, str]]:
    """The one table of `page` whose header has `columns`, as dicts keyed by header cell."""
    parser = _Tables()
    parser.feed(page.read_text(encoding="utf-8"))
    found = [t for t in parser.tables if t and set(columns) <= set(t[0])]
    assert len(found) == 1, (page, columns, [t[0] for t in parser.tables if t])
    header, *rows = [r for r in found[0] if r]
    return [dict(zip(header, r)) for r in rows if len(r) == len(header)]


def cassette(corpus: Path, path: Path) -> Path:
    """Recordings of m0 (ok), m1 (malformed), m2 (truncated: the retry was cut off too), m3 (breaks the output
    schema); none of m4, m5 (not covered)."""
    from evalkit.backends import Completion
    from evalkit.backends.cassette import make_record
    from evalkit.corpus.sources import check_integrity, read_document
    from evalkit.corpus.tasks import load_task
    from evalkit.stages.pipeline import render_request

    answers = {
        "m0": Completion(record={"account_id": "ACC-000", "rate": 0.5}, raw='{"account_id": "ACC-000", "rate": 0.5}'),
        "m1": Completion(record=None, raw="I could not find it.", parse="malformed", error="no JSON object"),
        "m2": Completion(record=None, raw='{"account_id": "AC', parse="malformed", truncated="exhausted",
                         finish_reason="length"),
        "m3": Completion(record={"account_id": 3, "rate": "high"}, raw='{"account_id": 3, "rate": "high"}'),
    }
    task = load_task(corpus / "memos")
    lines = []
    for m, completion in answers.items():
        member = task.member(m)
        completion.model = MODEL
        request = render_request(task, member, read_document(check_integrity(member, None)))
        lines.append(json.dumps(make_record(request, MODEL, "openai", completion), sort_keys=True))
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    root = tmp_path_factory.mktemp("vocab")
    corpus = make_corpus(root, members=6)
    pointer = add_member(corpus / "memos", "away", "unused", {"account_id": "ACC-9", "rate": 0.1})
    manifest = yaml.safe_load((pointer / "manifest.yaml").read_text())
    write_yaml(pointer / "manifest.yaml", {**manifest, "source": {"pointer": "memos/away.md"}, "sha256": "0" * 64})
    (pointer / "doc.md").unlink()
    (root / "pipe.py").write_text(PIPE)
    out = root / "run"
    res = cli("run", "--corpus", corpus, "--sources", root / "nowhere", "--out", out, "--workers", 1,
              "--backend", f"cas=cassette:path={cassette(corpus, root / 'cas.jsonl')}",
              "--backend", f"py=python:{root / 'pipe.py'}:extract")
    assert res.exit_code == 5, res.output  # an error: whatever the others' verdicts
    compared = cli("compare", out, "--workers", 1)
    assert compared.exit_code == 0, compared.output
    return out, res.output, read_summary(out).to_json()["tasks"]["memos"]


EXPECTED = {  # backend → what each member × backend is, in the one vocabulary
    "cas": {"attempted": 4, "scored": 4, "errors": 0, "not_covered": 2, "skipped": 1,
            "parse": {"ok": 1, "malformed": 1, "truncated": 1, "schema_invalid": 1}},
    "py": {"attempted": 6, "scored": 5, "errors": 1, "not_covered": 0, "skipped": 1,
           "parse": {"ok": 5, "malformed": 0, "truncated": 0, "schema_invalid": 0}},
}


def entries(summary: dict) -> dict[str, dict]:
    return {b["backend"]: b for b in summary["backends"]}


def test_summary_json_counts_in_the_one_vocabulary(run):
    _, _, summary = run
    for label, b in entries(summary).items():
        want = EXPECTED[label]
        got = {"attempted": b["members"], "scored": b["scored"], "errors": b["errors"],
               "not_covered": len(b["not_covered"]), "skipped": len(b["skipped"]), "parse": b["parse"]}
        assert got == want, label
    assert entries(summary)["cas"]["error_rate"] == 0  # a malformed answer is never an error
    assert entries(summary)["py"]["causes"] == {"pipeline_exception": 1}
    assert [s["member"] for s in summary["skipped"]] == ["away"]  # a not-covered member is not a skip


def test_the_cli_members_lines_match_summary_json(run):
    _, output, summary = run
    for label, b in entries(summary).items():
        (line,) = [x.strip() for x in output.splitlines() if x.strip().startswith(f"{label}: ")]
        assert line.startswith(f"{label}: {b['passed']}/{b['members']} passed")
        counts = {m.group(2): int(m.group(1)) for m in re.finditer(r" · (\d+) ([a-z ]+?)(?= ·|$)", line)}
        assert counts.get("error", counts.get("errors", 0)) == b["errors"], line
        assert counts.get("skipped", 0) == len(b["skipped"]) and counts.get("not covered", 0) == len(b["not_covered"])
        for outcome in ("malformed", "truncated", "schema_invalid"):
            assert counts.get(outcome.replace("_", " "), 0) == b["parse"][outcome], line


def test_index_html_table_matches_summary_json(run):
    out, _, summary = run
    rows = {r["backend"]: r for r in table_with(out / "index.html", "backend", "passed / N", "errors", "not covered")}
    for label, b in entries(summary).items():
        r = rows[label]
        assert r["passed / N"] == f"{b['passed']}/{b['members']}" and int(r["errors"]) == b["errors"]
        assert int(r["skipped"]) == len(b["skipped"]) and int(r["not covered"]) == len(b["not_covered"])
        assert {o: int(r[o.replace("_", " ")]) for o in ("malformed", "truncated", "schema_invalid")} == \
            {o: b["parse"][o] for o in ("malformed", "truncated", "schema_invalid")}


def test_task_report_calls_table_matches_summary_json(run):
    out, _, summary = run
    rows = {r["backend"]: r for r in table_with(out / "memos" / "report.html", "backend", "calls", "error_rate")}
    for label, b in entries(summary).items():
        r = rows[label]
        assert int(r["calls"]) == b["members"] and int(r["errors"]) == b["errors"]
        assert float(r["error_rate"]) == pytest.approx(b["error_rate"], abs=1e-3)
        assert {o: int(r[o]) for o in b["parse"]} == b["parse"]


def test_compare_page_calls_table_matches_summary_json(run):
    out, _, summary = run
    rows = {r["backend"]: r for r in table_with(out / "memos" / "compare.html", "backend", "calls", "error rate")}
    for label, b in entries(summary).items():
        r = rows[label]
        assert int(r["calls"]) == b["members"] and int(r["errors"]) == b["errors"]
        assert float(r["error rate"]) == pytest.approx(b["error_rate"], abs=1e-3)
        assert {o: int(r[o.replace("_", " ")]) for o in b["parse"]} == b["parse"]


def test_load_run_counts_match_summary_json(run):
    import evalkit

    out, _, summary = run
    tables = evalkit.load_run(out)
    counts = {r["backend"]: r for r in tables.counts().to_dict("records")}
    for label, b in entries(summary).items():
        c = counts[label]
        assert (c["attempted"], c["scored"], c["passed"], c["errors"]) == (b["members"], b["scored"], b["passed"],
                                                                           b["errors"])
        assert (c["not_covered"], c["skipped"], c["parse"]) == (len(b["not_covered"]), len(b["skipped"]), b["parse"])
    m = tables.members.set_index(["member", "backend"])
    assert m.loc[("m1", "cas"), "status"] == "scored" and m.loc[("m1", "cas"), "answer"] == "malformed"
    assert m.loc[("m4", "cas"), "status"] == "not_covered" and m.loc[("away", "py"), "status"] == "skipped"
    assert m["heldout"].dtype == bool and not m["heldout"].any()
