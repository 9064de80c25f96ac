"""One exception hierarchy for everything that ends a turn or a request (not tool errors)."""

from __future__ import annotations


class SynapseError(Exception):
    """Base of every error Synapse raises on purpose; `message` is safe to show a user."""

    def __init__(self, message: str, *, cause: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.cause = cause


class ShellError(SynapseError):
    """The persistent shell could not start or died."""


class ModelError(SynapseError):
    """The model API failed after retries, or is not configured (no key)."""


class SessionBusyError(SynapseError):
    """A second prompt arrived while a turn runs in the same session."""
