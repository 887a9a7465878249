"""The reply format of an OpenAI-compatible chat-completions server, read without trusting it.

:func:`reply_problem` says why a decoded reply is not a usable chat completion (no ``choices``,
no ``message.content``, content that is not text); the readers take the assistant text, the
reasoning a server's reasoning parser moved out of ``content`` (``reasoning_content``, or
``reasoning`` in newer vLLM) and the ``finish_reason`` of a reply it passed. A ``content`` of
``null`` beside a reasoning text (thinking that never ended) is the empty text with its
reasoning, not a malformed reply.
"""

from __future__ import annotations

from typing import Any


def reply_problem(response: Any) -> str:
    """Why a decoded response is not a usable chat completion (``""`` when it is)."""
    if not isinstance(response, dict):
        return f"expected a JSON object, got {type(response).__name__}"
    choices = response.get("choices")
    if not isinstance(choices, list) or not choices:
        return "no choices in the response"
    choice = choices[0]
    message = choice.get("message") if isinstance(choice, dict) else None
    if not isinstance(message, dict) or "content" not in message:
        return "no choices[0].message.content in the response"
    content = message["content"]
    if content is None and reasoning_of(message):
        return ""  # thinking that never ended: no reply text, the reasoning is kept
    if not isinstance(content, str):
        return (
            f"the message content is {type(content).__name__}, not text (finish_reason="
            f"{choice.get('finish_reason')!r})"
        )
    return ""


def reasoning_of(message: dict[str, Any]) -> str:
    """The reasoning text a server's reasoning parser put beside ``content`` (``""``: none)."""
    for key in ("reasoning_content", "reasoning"):
        value = message.get(key)
        if isinstance(value, str) and value:
            return value
    return ""


def message_text(response: dict[str, Any]) -> str:
    """The assistant message of a response :func:`reply_problem` passed (``""`` for ``null``)."""
    content = response["choices"][0]["message"]["content"]
    return "" if content is None else str(content)


def reasoning_text(response: dict[str, Any]) -> str:
    """The reasoning beside the assistant message of a response (``""``: none)."""
    return reasoning_of(response["choices"][0]["message"])


def finish_reason(response: dict[str, Any]) -> str:
    """``choices[0].finish_reason`` of a response (``"length"``: cut at ``max_tokens``)."""
    reason = response["choices"][0].get("finish_reason")
    return str(reason) if reason else "stop"


def prompt_tokens(response: dict[str, Any]) -> int | None:
    """``usage.prompt_tokens`` of a response, when the server reported a count (else ``None``)."""
    usage = response.get("usage")
    count = usage.get("prompt_tokens") if isinstance(usage, dict) else None
    return count if isinstance(count, int) and not isinstance(count, bool) and count >= 0 else None
