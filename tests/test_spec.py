"""The backend spec (`evalkit.backends.spec`) and the provider registry (`evalkit.backends.providers`).

A spec is parsed once, into a `BackendSpec`, and its three forms (as typed, redacted, public) have one
owner. A provider is one `Provider` record: the toy provider below is added through the
``evalkit.backends`` entry-point group of a package outside evalkit, and runs end to end (key guard,
live run with notebooks, recording, replay in sweep worker processes) without an edit to evalkit.
"""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
from dataclasses import FrozenInstanceError

import pytest
from corpus_factory import cli, make_corpus, specs
from servers.fixtures import _clean_env, req  # noqa: F401 - fixtures

from evalkit.backends import BackendSpec, provider
from evalkit.backends.resolve import plan, resolve_backends
from evalkit.backends.spec import redact_stored
from evalkit.errors import Escape, UsageError


@pytest.mark.parametrize("typed, label, kind, options", [
    ("fake", "fake", "fake", {}),
    ("a=fake", "a", "fake", {}),
    ("org/model=openai:url=http://h:8/v1,model=m", "org/model", "openai", {"url": "http://h:8/v1", "model": "m"}),
    ("openai:url=http://h/v1", "openai", "openai", {"url": "http://h/v1"}),  # bare: labelled by its kind
    ("p=python:pipes/mine.py:extract", "p", "python", {"target": "pipes/mine.py:extract"}),  # colons kept
    ("python:mod:fn", "python", "python", {"target": "mod:fn"}),
    ("g=cassette:path=c.jsonl,model=gemma", "g", "cassette", {"path": "c.jsonl", "model": "gemma"}),
])
def test_a_spec_is_parsed_into_label_kind_and_options_and_round_trips(typed, label, kind, options):
    spec = BackendSpec.parse(typed)
    assert (spec.label, spec.kind, dict(spec.options)) == (label, kind, options)
    assert BackendSpec.parse(str(spec)) == spec and str(BackendSpec.parse(str(spec))) == str(spec)
    assert str(spec) == (typed if "=" in typed.partition(":")[0] else f"{label}={typed}")
    assert BackendSpec.parse(spec.spec, label=label) == spec  # the SPEC alone, as a file stores it
    assert pickle.loads(pickle.dumps(spec)) == spec and hash(pickle.loads(pickle.dumps(spec))) == hash(spec)


def test_a_spec_is_frozen_and_its_label_is_a_name():
    spec = BackendSpec.parse("a=openai:url=http://h/v1")
    with pytest.raises(FrozenInstanceError):
        spec.label = "b"  # type: ignore[misc]
    with pytest.raises(TypeError):
        spec.options["url"] = "http://elsewhere/v1"  # type: ignore[index]
    with pytest.raises(Escape, match="backend name"):
        BackendSpec("../up", "fake")
    with pytest.raises(UsageError, match="must be key=value"):
        BackendSpec.parse("a=openai:url")
    assert BackendSpec.parse("anthropic", label="judge") == BackendSpec("judge", "anthropic")  # --judge SPEC


def test_redacted_hides_secrets_and_public_hides_local_paths_too():
    spec = BackendSpec.parse("o=openai:url=http://user:hunter2@h:8/v1?token=t1#frag,model=m,api_key=sk-1")
    assert spec.redacted().spec == "openai:url=http://h:8/v1,model=m,api_key=***"
    assert spec.public().spec == "openai:url=<local>,model=m,api_key=***"
    assert BackendSpec.parse("c=cassette:path=/home/me/c.jsonl").redacted().spec == "cassette:path=/home/me/c.jsonl"
    assert BackendSpec.parse("c=cassette:path=c.jsonl,model=m").public().spec == "cassette:path=<local>,model=m"
    assert BackendSpec.parse("p=python:pipes/mine.py:extract").public().spec == "python:<local>"
    assert BackendSpec.parse("p=python:pipes/mine.py:extract").redacted().spec == "python:pipes/mine.py:extract"
    # A SPEC read back from a file: the same rules; text that is no spec is kept (redacted) or withheld (public).
    assert redact_stored("anthropic:model=c,token=abc") == "anthropic:model=c,token=***"
    assert redact_stored("openai:url=http://u:p@h/v1", public=True) == "openai:url=<local>"
    assert redact_stored("openai:url") == "openai:url" and redact_stored("openai:url", public=True) == "<unparsed>"


def test_the_dry_run_plan_shows_no_secret(tmp_path):
    # Before: the plan's own redaction hid URL credentials but printed an api_key= value as typed.
    res = cli("run", "--dry-run", "--allow-unpriced", "--corpus", make_corpus(tmp_path, members=1), "--backend",
              "o=openai:url=http://user:hunter2@127.0.0.1:9/v1,model=gpt-4o-mini,api_key=sk-SECRET")
    assert res.exit_code == 0, res.output
    assert "o: live openai:url=http://127.0.0.1:9/v1,model=gpt-4o-mini,api_key=*** " in res.output
    assert "hunter2" not in res.output and "sk-SECRET" not in res.output
    (r,) = resolve_backends(specs("o=openai:url=http://h/v1,api_key=sk-SECRET"))
    assert "sk-SECRET" not in json.dumps(plan([r], [req()]).to_json())


def test_a_sweep_folder_keeps_no_url_credentials(tmp_path):
    # Before: sweep.json stored the spec as typed (user:password in the URL) in its parameters and
    # currency keys, because its redaction (scoreboard.redact_spec) knew secret keys but not URLs.
    corpus = make_corpus(tmp_path, members=1)
    out = tmp_path / "sw"
    res = cli("sweep", "--corpus", corpus, "--no-notebooks", "--workers", 1, "--out", out, "--backend",
              "o=openai:url=http://user:hunter2@127.0.0.1:9/v1?token=tok3n,model=m,max_retries=0,timeout=2")
    assert res.exit_code == 5, res.output  # nothing listens on port 9: a provider error, recorded as such
    sweep_json = json.loads((out / "sweep.json").read_text())
    assert sweep_json["backends"] == [{"label": "o", "spec": "openai:url=http://127.0.0.1:9/v1,model=m,max_retries=0,"
                                                             "timeout=2"}]
    leaks = [p for p in out.rglob("*") if p.is_file() and (b"hunter2" in p.read_bytes() or b"tok3n" in p.read_bytes())]
    assert not leaks


def test_every_kind_is_one_provider_record():
    assert provider("anthropic").model(BackendSpec.parse("anthropic")) == "claude-sonnet-5-5"
    assert provider("openai").model(BackendSpec.parse("openai:url=http://h/v1")) == "default"
    assert provider("python").model(BackendSpec.parse("p=python:m:f")) == "python:m:f"  # a pipeline is its spec
    assert provider("openai").missing_key(BackendSpec.parse("openai:model=m"), {}) == (
        "backend openai: OPENAI_API_KEY is not set (give url=... or socket=... for a local server)")
    assert provider("openai").missing_key(BackendSpec.parse("openai:url=http://h/v1"), {}) is None
    assert [k for k in ("fake", "predictions", "cassette") if provider(k).live] == []
    with pytest.raises(UsageError, match=r"unknown kind 'nope' \(known: anthropic, cassette, fake"):
        resolve_backends(specs("x=nope"))


# -- a provider from a package outside evalkit, through the entry-point group ----------------------------------
TOY = '''
import json
from pathlib import Path

from evalkit.backends import Completion, Provider


class Toy:
    """Answers every member with the account its spec names; counts its calls in a file."""

    def __init__(self, spec, ctx):
        self.label, self.spec, self.model = spec.label, spec.redacted().spec, PROVIDER.model(spec)
        self.account, self.calls = spec.options["account"], Path(spec.options["calls"])

    async def complete(self, request):
        with self.calls.open("a") as f:
            f.write(request.member + "\\n")
        record = {"account_id": self.account, "rate": 0.9}
        return Completion(record=record, raw=json.dumps(record), model=self.model)

    async def aclose(self):
        return None


PROVIDER = Provider("toy", Toy, usage="toy:account=ID,calls=FILE", live=True, default_model="toy-1",
                    key_env="TOY_API_KEY")
'''


def test_a_provider_is_added_in_one_place_by_an_entry_point(tmp_path):
    plugin = tmp_path / "plugin"
    (plugin / "toy_provider-0.1.dist-info").mkdir(parents=True)
    (plugin / "toy_provider.py").write_text(TOY)
    (plugin / "toy_provider-0.1.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: toy-provider\n"
                                                                   "Version: 0.1\n")
    (plugin / "toy_provider-0.1.dist-info" / "entry_points.txt").write_text("[evalkit.backends]\n"
                                                                           "toy = toy_provider:PROVIDER\n")
    corpus = make_corpus(tmp_path, members=1)
    calls, cassette = tmp_path / "calls.txt", tmp_path / "toy.jsonl"
    spec = f"t=toy:account=ACC-000,calls={calls}"
    env = {k: v for k, v in os.environ.items() if k not in ("TOY_API_KEY", "EVALKIT_RECORD_LLM", "EVALKIT_REPLAY_LLM")}
    env["PYTHONPATH"] = os.pathsep.join([str(plugin), *filter(None, [env.get("PYTHONPATH")])])

    def evalkit(*args, **extra):
        return subprocess.run([sys.executable, "-m", "evalkit.cli", *map(str, args)], capture_output=True,
                              text=True, cwd=tmp_path, env={**env, **extra})

    # Its key variable guards a live run before any call (exit 2: `errors.MissingKey`).
    proc = evalkit("run", "--corpus", corpus, "--backend", spec, "--out", tmp_path / "nokey", "--no-html")
    assert proc.returncode == 2 and "backend t: TOY_API_KEY is not set" in proc.stderr, proc.stderr  # a fix, not a failure
    assert not calls.exists()

    # A live run (notebooks and all), recorded: its model id keys the cassette. The toy's rate is wrong:
    # half the score, a FAIL verdict (exit 1), as for any backend.
    proc = evalkit("run", "--corpus", corpus, "--backend", spec, "--record", f"t={cassette}", "--out",
                   tmp_path / "live", "--no-html", TOY_API_KEY="k")
    assert proc.returncode == 1 and "m0 …  50.0% FAIL" in proc.stdout, proc.stdout + proc.stderr
    extraction = json.loads((tmp_path / "live" / "memos" / "m0" / "t" / "extraction.json").read_text())
    assert extraction["backend"] == {"label": "t", "spec": f"toy:account=ACC-000,calls={calls}", "model": "toy-1"}
    assert json.loads((tmp_path / "live" / "memos" / "m0" / "t" / "score.json").read_text())["score"] == 0.5
    assert (tmp_path / "live" / "memos" / "m0" / "t" / "score.ipynb").is_file()
    (record,) = [r for r in map(json.loads, cassette.read_text().splitlines()) if "key" in r]  # not the header
    assert (record["provider"], record["model"]) == ("toy", "toy-1")
    assert calls.read_text() == "memos/m0\n"

    # Replayed from that cassette in sweep worker processes (which find the entry point too): no call, no key.
    proc = evalkit("sweep", "--corpus", corpus, "--backend", spec, "--no-notebooks", "--workers", 1, "--out",
                   tmp_path / "sw", EVALKIT_REPLAY_LLM=str(cassette))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    score = json.loads((tmp_path / "sw" / "members" / "memos" / "m0" / "memos" / "m0" / "t" / "score.json").read_text())
    assert score["score"] == 0.5 and score["run"]["replayed"] is True
    assert calls.read_text() == "memos/m0\n"
