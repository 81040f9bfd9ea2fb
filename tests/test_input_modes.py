"""Input modes text | pdf | images: what reaches the model (real SDKs against the fake servers), what a cassette
keys and keeps, the dry run's page prices, the scanned task, and what is refused before any call."""

from __future__ import annotations

import base64
import hashlib
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from corpus_factory import specs
from servers.fixtures import _clean_env, ant, oai  # noqa: F401 - fixtures
from servers.parts import png_size

from evalkit._util.jsonio import canonical_sha
from evalkit.backends.cassette import cassette_key, load_records
from evalkit.backends.pricing import image_tokens, pdf_page_tokens
from evalkit.backends.resolve import build_backends, plan, resolve_backends
from evalkit.corpus.parts import PDF_MEDIA_TYPE, PNG_MEDIA_TYPE, Part
from evalkit.corpus.rasterize import render_pages
from evalkit.corpus.sources import check_integrity, read_document
from evalkit.corpus.specs import check_overrides
from evalkit.corpus.tasks import DEFAULT_CORPUS, find_task
from evalkit.errors import UsageError
from evalkit.execution.pool import Job, run_jobs
from evalkit.stages.pipeline import render_request, request_sha
from evalkit.stages.runner import RunOptions, run
from evalkit.status import NO_TEXT_LAYER

ROOT = Path(__file__).resolve().parent.parent
TASK = "deal-memos-scanned"
CASSETTE = ROOT / "tests" / "fixtures" / "vision-fake.jsonl"
MEMBER = "clean-single-term"


def scanned(member: str = MEMBER, **overrides):
    """(member, its request under `overrides` of the task's settings)."""
    task = find_task(Path(DEFAULT_CORPUS), TASK)
    m = task.member(member)
    document = read_document(check_integrity(m, None))
    return m, render_request(task, m, document, None, task.spec.settings.with_overrides(overrides))


def pdf_bytes(member: str = MEMBER) -> bytes:
    return (ROOT / "corpus" / TASK / member / "scan.pdf").read_bytes()


# -- what the model is sent --------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["images", "pdf"])
def test_anthropic_sends_a_document_block_or_image_blocks_before_the_prompt(ant, mode):
    _, request = scanned(input=mode)
    c = run_jobs([Job(build_backends(specs("c=anthropic:model=claude-haiku-4-5,timeout=5"))[0], request)])[0]
    assert c.error is None
    (body,) = ant.messages()
    content = body["messages"][0]["content"]
    kind, media = ("image", PNG_MEDIA_TYPE) if mode == "images" else ("document", PDF_MEDIA_TYPE)
    assert [b["type"] for b in content] == [kind] * len(request.parts) + ["text"]
    assert content[0]["source"]["type"] == "base64" and content[0]["source"]["media_type"] == media
    assert content[-1]["text"] == request.user and "[the document is attached above" in request.user
    (seen,) = ant.decoded  # the server decoded the base64: the exact bytes
    expected = pdf_bytes() if mode == "pdf" else render_pages(pdf_bytes(), 100, "scan.pdf")[0][0]
    assert [data for _, data in seen.parts] == [expected]
    if mode == "images":
        assert png_size(expected) == (850, 1100)  # Letter at the task's 100 DPI
        assert c.input_tokens >= 850 * 1100 // 750  # priced by the server as an image, not as base64 text


@pytest.mark.parametrize("mode", ["images", "pdf"])
def test_openai_sends_a_file_part_or_image_url_parts(oai, mode):
    _, request = scanned(input=mode)
    c = run_jobs([Job(build_backends(specs(f"o=openai:url={oai.url}/v1,model=gpt-4o"))[0], request)])[0]
    assert c.error is None
    (body,) = oai.completions()
    content = body["messages"][-1]["content"]
    assert content[-1] == {"type": "text", "text": request.user}
    if mode == "pdf":
        assert content[0]["type"] == "file" and content[0]["file"]["filename"] == "scan.pdf"
        assert content[0]["file"]["file_data"].startswith("data:application/pdf;base64,")
    else:
        assert content[0]["type"] == "image_url" and content[0]["image_url"]["detail"] == "high"
        assert content[0]["image_url"]["url"].startswith("data:image/png;base64,")
    (seen,) = oai.decoded
    assert [hashlib.sha256(d).hexdigest() for _, d in seen.parts] == [p.sha256 for p in request.parts]


def test_a_part_that_is_not_what_it_claims_is_refused_by_the_fake_server(oai):
    """The servers check what they are sent (as the APIs do): bytes that are no PNG are a 400, a provider error."""
    _, request = scanned(input="images")
    bad = Part(PNG_MEDIA_TYPE, b"GIF89a not a png", "page-1.png", ((10, 10),))
    from dataclasses import replace

    c = run_jobs([Job(build_backends(specs(f"o=openai:url={oai.url}/v1,max_retries=0"))[0],
                      replace(request, parts=(bad,)))])[0]
    assert c.record is None and "HTTP 400" in c.error and "not a valid PNG" in c.error


# -- rendering, keys and records -------------------------------------------------------------------------------
def test_pages_render_deterministically_at_the_stated_dpi():
    first = render_pages(pdf_bytes(), 100, "scan.pdf")
    assert first == render_pages(pdf_bytes(), 100, "scan.pdf")
    (png, w, h), = render_pages(pdf_bytes(), 50, "scan.pdf")
    assert (w, h) == (425, 550) and png_size(png) == (425, 550)


def test_the_cassette_key_covers_mode_dpi_and_source_sha_but_a_text_key_is_unchanged():
    _, text = scanned(input="text")
    _, images = scanned(input="images")
    _, images_72 = scanned(input="images", dpi=72)
    _, pdf = scanned(input="pdf")
    keys = {cassette_key(r, "m") for r in (text, images, images_72, pdf)}
    assert len(keys) == 4 and len({request_sha(r) for r in (text, images, images_72, pdf)}) == 4
    # a text request keys exactly as before input modes existed (the committed cassettes still replay)
    assert cassette_key(text, "m") == canonical_sha({
        "system": text.system, "user": text.user, "schema": text.schema, "model": "m", "max_tokens": text.max_tokens,
        "temperature": float(text.temperature), "call_type": "extract"})
    assert images.input_key() == {"mode": "images", "dpi": 100,
                                  "sources": [hashlib.sha256(pdf_bytes()).hexdigest()]}


def test_the_committed_vision_cassette_keeps_sha256_and_sizes_never_base64():
    records = load_records(CASSETTE)
    assert len(records) == 8 and {r["request"]["input"]["mode"] for r in records} == {"images", "pdf"}
    text = CASSETTE.read_text()
    assert "base64," not in text and len(text) < 100_000  # a page image is ~0.5 MB of base64
    for r in records:
        (part,) = r["request"]["input"]["parts"]
        assert re.fullmatch(r"[0-9a-f]{64}", part["sha256"]) and part["bytes"] > 0


# -- runs ---------------------------------------------------------------------------------------------------
def _run(tmp_path, backend: str, **kw):
    return run(RunOptions(corpus=Path(DEFAULT_CORPUS), backends=specs(backend), tasks=kw.pop("tasks", [TASK]),
                          out=tmp_path / "run", notebooks=kw.pop("notebooks", False), html=kw.pop("html", False), report=False,
                          workers=1, **kw))


def test_the_fake_backend_scores_the_scanned_task_100_percent_in_its_default_images_mode(tmp_path):
    result = _run(tmp_path, "fake")
    assert len(result.outcomes) == 4
    assert all(o.status == "scored" and o.score == 1.0 and o.passed for o in result.outcomes)
    run_block = json.loads((tmp_path / "run" / TASK / MEMBER / "fake" / "extraction.json").read_text())["run"]
    assert run_block["settings"] == {"input": "images"}  # what the call was sent (dpi 100 is the default)


def test_text_mode_skips_every_scan_for_its_missing_text_layer_never_a_zero(tmp_path):
    result = _run(tmp_path, "fake", settings={"input": "text"})
    assert len(result.outcomes) == 4
    for o in result.outcomes:
        assert o.status == "skipped" and o.score is None and o.cause == NO_TEXT_LAYER
        assert "no text layer" in o.message and "--set input=images" in o.message


def test_a_text_source_is_refused_in_pdf_mode_before_any_call(tmp_path):
    result = _run(tmp_path, "fake", tasks=["deal-memos"], settings={"input": "pdf"}, limit=2)
    assert [o.status for o in result.outcomes] == ["refused", "refused"]
    assert all("input mode pdf sends PDF sources only" in o.message and "memo.md" in o.message
               for o in result.outcomes)
    assert not (tmp_path / "run" / "deal-memos").exists()  # nothing was extracted


def test_a_backend_that_cannot_take_the_mode_is_refused_before_any_call(tmp_path):
    pipeline = tmp_path / "echo.py"
    pipeline.write_text("def extract(document, task):\n    raise AssertionError('never called')\n")
    with pytest.raises(UsageError, match=r"backend local \(python\) cannot take input mode images"):
        _run(tmp_path, f"local=python:{pipeline}:extract")
    assert not (tmp_path / "run").exists()


def test_an_unknown_input_mode_is_a_usage_error_naming_the_choices():
    with pytest.raises(UsageError, match=r"--set input=scan: .*'text', 'pdf' or 'images'"):
        check_overrides({"input": "scan"})
    assert check_overrides({"input": "pdf", "dpi": "150"}) == {"input": "pdf", "dpi": 150}


def test_the_dry_run_prices_page_images_and_pdf_pages_by_each_providers_rule():
    env = {"ANTHROPIC_API_KEY": "k"}
    resolved = resolve_backends(specs("a=anthropic:model=claude-haiku-4-5", "o=openai:url=http://x/v1,model=gpt-4o"),
                                env=env)
    _, text_like = scanned(input="images")
    from dataclasses import replace

    bare = replace(text_like, parts=())  # the same prompt with no pages
    by = {b.label: b.est_input_tokens for b in plan(resolved, [text_like]).backends}
    base = {b.label: b.est_input_tokens for b in plan(resolved, [bare]).backends}
    assert by["a"] - base["a"] == image_tokens(850, 1100, "anthropic") == 1247  # 850 x 1100 / 750
    assert by["o"] - base["o"] == image_tokens(850, 1100, "openai") == 85 + 170 * 4  # 768 x 994: 2 x 2 tiles
    _, pdf = scanned(input="pdf")
    pdf_by = {b.label: b.est_input_tokens for b in plan(resolved, [pdf]).backends}
    pdf_base = {b.label: b.est_input_tokens for b in plan(resolved, [replace(pdf, parts=())]).backends}
    letter = pdf_page_tokens(612, 792, "anthropic")  # no text layer: the page image only (1212 x 1568 px)
    assert letter == 2534 and pdf_by["a"] - pdf_base["a"] == letter
    usd = {b.label: b.est_usd for b in plan(resolved, [text_like]).backends}
    assert usd["a"] > {b.label: b.est_usd for b in plan(resolved, [bare]).backends}["a"]


# -- replay and the member page ---------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["images", "pdf"])
def test_the_vision_cassette_replays_offline_and_scores_the_truth(tmp_path, mode):
    result = _run(tmp_path, f"vision=cassette:path={CASSETTE}", settings={"input": mode})
    assert [o.status for o in result.outcomes] == ["scored"] * 4
    assert all(o.score == 1.0 for o in result.outcomes)


def test_the_member_page_shows_each_page_image_the_model_saw(tmp_path):
    result = _run(tmp_path, f"vision=cassette:path={CASSETTE}", only=[MEMBER], notebooks=True, html=True)
    assert [o.status for o in result.outcomes] == ["scored"]
    page = (tmp_path / "run" / TASK / MEMBER / "vision" / "score.html").read_text()
    images = re.findall(r'<img[^>]*src="data:image/png;base64,([^"]+)"', page)
    _, request = scanned(input="images")
    assert [base64.b64decode(i) for i in images] == [p.data for p in request.parts]
    assert "page 1 · 850×1100 px" in page
    assert "img-src data:" in page  # the page's policy lets the embedded images show


def test_the_scanned_pdfs_regenerate_byte_for_byte():
    done = subprocess.run([sys.executable, str(ROOT / "tools" / "make_scanned_pdfs.py"), "--check"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
