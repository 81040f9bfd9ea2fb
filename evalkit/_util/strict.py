"""The strict pydantic base of every typed file shape: unknown keys are errors, and a parsed value is frozen."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

__all__ = ["Strict"]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
