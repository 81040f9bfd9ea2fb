"""Backends: ``--backend NAME=SPEC`` → a constructed `Backend`.

The spec and its label rule: `evalkit.backends.spec` (`BackendSpec`, parsed once, at the command
line). One `Provider` record per kind, in one registry: `evalkit.backends.providers`. From specs and
the environment to backends (record, replay, guards, the dry-run plan): `evalkit.backends.resolve`.
Recording and replay: `evalkit.backends.cassette`, with its failure sidecar
`evalkit.backends.failures`.
"""

from __future__ import annotations

from evalkit.backends.base import Backend, BackendContext, Completion, Request
from evalkit.backends.providers import Provider, provider, providers
from evalkit.backends.spec import BackendSpec, check_label, check_labels, folder_label, label_folder, labels_slug

__all__ = ["Backend", "BackendContext", "BackendSpec", "Completion", "Provider", "Request", "check_label",
           "check_labels", "folder_label", "label_folder", "labels_slug", "provider", "providers"]
