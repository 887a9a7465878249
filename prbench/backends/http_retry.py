"""The one retry policy of prbench's HTTP clients: what is retried, and how long to wait.

Both clients use it: the OpenAI-compatible backend (:class:`prbench.backends.http.OpenAIBackend`,
and the served reward models built on it) and the reward server's client
(:class:`prbench.downstream.serve_client.RewardClient`).

* **Which answers are retried**: :data:`RETRY_STATUSES` -- 408 (request timeout), 409 (conflict),
  429 (too many requests) and every 5xx. A client may hold back a status its server documents as
  final: prbench's reward server answers 500 for a scorer failure (the same batch fails the same
  way again), so :class:`~prbench.downstream.serve_client.RewardClient` raises it at once.
* **How long to wait** before retry ``n`` (0-based): :func:`backoff_delay` -- ``base * 2**n``
  capped at ``cap``, times a random factor in ``[0.5, 1]`` (so that many clients refused at the
  same moment do not come back at the same moment), and never less than the server's
  ``Retry-After`` (itself capped at ``cap``).
* **Retry-After** (RFC 9110, section 10.2.3) is read by :func:`retry_after_seconds` in both of its
  forms: a number of seconds (``120``) or an HTTP date (``Wed, 21 Oct 2026 07:28:00 GMT``); a
  value that is neither is ignored (the computed backoff applies), never an error.

Standard library only, so that any client can use it.
"""

from __future__ import annotations

import email.utils
import random
import time

#: Statuses retried by prbench's HTTP clients (a client may treat one its server documents as
#: final as final; see the module docstring).
RETRY_STATUSES = frozenset({408, 409, 429}) | frozenset(range(500, 600))


def retry_after_seconds(value: str | None, *, now: float | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header value.

    Args:
        value: the header's value: delay-seconds (``"2"``; a decimal such as ``"1.5"`` is read too)
            or an HTTP date (``"Wed, 21 Oct 2026 07:28:00 GMT"``).
        now: the current time as a Unix timestamp (default: :func:`time.time`); for a date.

    Returns:
        The seconds to wait (``0.0`` for a date already past), or ``None`` when the header is
        absent, negative or unreadable.
    """
    if not value or not value.strip():
        return None
    text = value.strip()
    try:
        seconds = float(text)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(text)
        except (TypeError, ValueError, IndexError):
            return None
        if when is None:  # pragma: no cover - older Pythons returned None for bad dates
            return None
        moment = time.time() if now is None else now
        return max(0.0, when.timestamp() - moment)
    if seconds != seconds or seconds < 0 or seconds == float("inf"):  # NaN, negative, infinite
        return None
    return seconds


def backoff_delay(attempt: int, *, base: float, cap: float,
                  retry_after: float | None = None) -> float:
    """Seconds to wait before retry number ``attempt`` (0 for the first retry).

    Args:
        attempt: how many retries came before this one.
        base: the wait before the first retry; it doubles with every retry.
        cap: the longest wait.
        retry_after: the server's ``Retry-After`` in seconds (:func:`retry_after_seconds`), if any.

    Returns:
        ``min(cap, base * 2**attempt)`` times a random factor in ``[0.5, 1]``, raised to
        ``min(retry_after, cap)`` when the server asked for a longer wait.
    """
    delay = min(cap, base * 2 ** min(attempt, 64)) * random.uniform(0.5, 1.0)
    if retry_after is not None:
        delay = max(delay, min(retry_after, cap))
    return delay


__all__ = ["RETRY_STATUSES", "backoff_delay", "retry_after_seconds"]
