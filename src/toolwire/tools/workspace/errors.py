"""Errors of the workspace tools, written for the model to act on (what was wrong, what to do)."""

from __future__ import annotations


class WorkspaceError(ValueError):
    """A request the workspace refuses or cannot carry out; the message says how to proceed."""


class EditConflictError(WorkspaceError):
    """The file changed between reading it and replacing it; nothing was written."""
