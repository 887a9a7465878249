"""The ground floor: the base class of every error that means bad input, options or ids.

Every error raised because of what a user gave prbench (a malformed record, an unknown option, a
missing model, a broken plugin, an unreadable judge reply that ends a run, a damaged cache file)
derives from :class:`PrbenchUserError`. The command line, the lm-eval bridge and the plugin fault
wrappers catch this one class and print its message as one ``error:`` line, never a traceback.
The message names the file, line, record or field it concerns.

This module imports nothing from prbench: every floor may import it.
"""

from __future__ import annotations

__all__ = ["PrbenchUserError", "one_line"]


class PrbenchUserError(Exception):
    """Bad input, options, ids or environment: shown as one ``error:`` line, never a traceback.

    Subclasses usually also derive from the built-in exception that fits (``ValueError``,
    ``KeyError``, ``RuntimeError``), so callers that caught those before still do.
    """


def one_line(exc: BaseException) -> str:
    """The exception's message (a multi-line message is kept: it lists one problem a line).

    Args:
        exc: the exception to show.

    Returns:
        Its message (any secret prbench holds masked, :mod:`prbench.redaction`), or its class
        name when the message is empty.
    """
    from prbench.redaction import redact_text

    return redact_text(str(exc)) or type(exc).__name__  # a secret it quotes is masked
