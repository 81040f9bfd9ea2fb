"""Shared pytest fixtures and helpers for the backend/cassette tests (import with ``from servers.fixtures import *``)."""

from __future__ import annotations

import pytest

from evalkit.backends import Request

from .anthropic_fake import AnthropicFake
from .openai_fake import OpenAIFake

SCHEMA = {"type": "object", "properties": {"echo": {"type": "string"}, "chars": {"type": "integer"}},
          "required": ["echo", "chars"]}
PLANTED_ANTHROPIC = "sk-ant-PLANTED-a1b2c3d4e5f6g7h8i9j0"
PLANTED_OPENAI = "sk-proj-PLANTED-z9y8x7w6v5u4t3s2r1q0"


def req(member: str = "demo/m1", user: str = "Document:\nAcme Corp was founded in 1999.\nExtract the fields.",
        system: str = "You extract structured data.", max_tokens: int = 64, schema: dict | None = None,
        call_type: str = "extract") -> Request:
    return Request(member=member, call_type=call_type, system=system, user=user, schema=schema or SCHEMA,
                   max_tokens=max_tokens, temperature=0.0)


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    for var in ("EVALKIT_RECORD_LLM", "EVALKIT_REPLAY_LLM", "EVALKIT_PRICES", "OPENAI_API_KEY", "OPENAI_BASE_URL",
                "ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL", "ANTHROPIC_PROFILE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("ANTHROPIC_CONFIG_DIR", "/nonexistent-evalkit-test")  # no on-disk profiles


@pytest.fixture
def oai():
    with OpenAIFake() as server:
        yield server


@pytest.fixture
def ant(monkeypatch):
    with AnthropicFake() as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", PLANTED_ANTHROPIC)
        yield server
