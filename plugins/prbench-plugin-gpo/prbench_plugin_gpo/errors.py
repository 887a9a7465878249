"""The GPO plugin's refusals: one error class, shown by prbench as one ``error:`` line."""

from __future__ import annotations

from prbench.api import PrbenchUserError


class GPOError(PrbenchUserError, ValueError):
    """A GPO refusal: an unreadable or unsafe checkpoint, evaluated users that were training
    users, a record outside the checkpoint's data, a context holding the scored pair.

    It is a ``ValueError`` too, so callers that caught that before still do.
    """  # noqa: D205
