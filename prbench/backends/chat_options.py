r"""The chat-rendering options shared by every scorer that renders its reward model's chats itself.

``hf-classifier``, ``served-rm`` and the plugins built on them (``skywork``) take the same options
for turning (profile, question, answer) into a chat and its token ids, with the same meaning:
:class:`ChatRenderOptions`. ``internlm2-reward``, whose template and BOS are the checkpoint's own
code's, shares only the profile placement: :class:`ProfileRenderOptions`. A scorer's options
dataclass inherits one of them; the fields are keyword-only, so a scorer's own required fields
(``pretrained``) may come first.

``input_format=released_profile`` is the with-profile reward-model input of the paper's released
Best-of-N and PPO reward code (``BoN/score.py``, ``PPO/reward_server.py``): the user turn is the
question immediately followed by the profile, no separator, and the profile is the view's posts
rendered ``Post i (Category: c):\n{text}``, joined with ``\n`` (a view that is not plain posts,
e.g. a planner's, keeps its own text). It fixes the profile position and the user turn, so
setting either with it is an error. It is the released *text*: the tokens and the reward stay the
scorer's own (one BOS, ``logits[label_index]``). ``hf-classifier`` (and ``skywork``, built on it)
also take ``input_format=released_bon``: the same user turn with the released scripts' own
tokens, cut and reward rule (:class:`~prbench.backends.hf_classifier_options.HFClassifierOptions`).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Literal

from prbench.backends.chat_inputs import (
    DEFAULT_SYSTEM_FORMAT,
    DEFAULT_USER_FORMAT,
    RELEASED_PROFILE_USER_FORMAT,
    check_formats,
    names_a_file,
)

#: ``input_format`` values every chat-rendering scorer accepts.
InputFormat = Literal["prbench", "released_profile"]


def _opt(default: Any, help_text: str) -> Any:
    return dataclasses.field(default=default, metadata={"help": help_text}, kw_only=True)


@dataclasses.dataclass(frozen=True, kw_only=True)
class ProfileRenderOptions:
    """Where the profile goes in the chat, and in which words (shared by every chat RM scorer)."""

    profile_position: Literal["none", "system", "user"] = _opt(
        "user", "where the profile goes: nowhere, a system turn, or before the question"
    )
    user_format: str = _opt(DEFAULT_USER_FORMAT, "user turn with a profile: {profile}, {question}")
    system_format: str = _opt(DEFAULT_SYSTEM_FORMAT, "system turn with a profile: {profile}")
    input_format: InputFormat = dataclasses.field(
        default="prbench", kw_only=True, metadata={"help": (
            "prbench (the options above) or released_profile (the released Best-of-N/PPO "
            "reward input: question then 'Post i (Category: c):' posts, no separator)"
        )},
    )

    def __post_init__(self) -> None:
        if self.released_profile:
            clashes = []
            if self.profile_position != "user":
                clashes.append(f"profile_position={self.profile_position}")
            if self.user_format != DEFAULT_USER_FORMAT:
                clashes.append("user_format")
            if clashes:
                raise ValueError(
                    f"input_format={self.input_format} fixes the user turn (question, then the "
                    "posts, no separator); drop " + ", ".join(clashes)
                )
        check_formats(self.profile_position, self.user_format, self.system_format)
        template = getattr(self, "chat_template", None)  # options that render with no template
        if template and names_a_file(template):
            from prbench.options import check_option_file

            # a FIFO, a device or a folder is refused here, before any model or lm-eval set-up
            check_option_file(template, "chat_template")

    @property
    def released_profile(self) -> bool:
        """Whether the released Best-of-N/PPO user turn is asked for (text, or the exact run)."""
        return self.input_format in ("released_profile", "released_bon")

    @property
    def effective_user_format(self) -> str:
        """The user turn actually rendered (the released one under ``released_profile``)."""
        return RELEASED_PROFILE_USER_FORMAT if self.released_profile else self.user_format


@dataclasses.dataclass(frozen=True, kw_only=True)
class ChatRenderOptions(ProfileRenderOptions):
    """:class:`ProfileRenderOptions` plus the template, BOS and truncation rules of the encoder.

    What each does: :mod:`prbench.backends.chat_inputs`.
    """

    chat_template: str = _opt("", "Jinja text or file overriding the tokenizer's chat template")
    bos: Literal["auto", "always", "never"] = _opt(
        "auto", "exactly one BOS when the tokenizer or template uses one (auto), always, or never"
    )
    truncation: Literal["profile_first", "left"] = _opt(
        "profile_first", "over-long inputs: profile_first (cut the profile, then the question; an "
        "answer too long alone is an invalid pair) or left (keep the last tokens, as reward-bench)"
    )


__all__ = [
    "MIN_MAX_LENGTH",
    "ChatRenderOptions",
    "InputFormat",
    "ProfileRenderOptions",
    "check_max_length",
]


#: the fewest tokens an input may be cut to (a BOS and one more token)
MIN_MAX_LENGTH = 2


def check_max_length(max_length: int) -> None:
    """Refuse a ``max_length`` no input fits in (the encoder keeps a BOS and at least one token).

    Raises:
        ValueError: ``max_length`` below :data:`MIN_MAX_LENGTH`.
    """
    if max_length < MIN_MAX_LENGTH:
        raise ValueError(
            f"max_length={max_length}: an input needs at least {MIN_MAX_LENGTH} tokens; give "
            "the most tokens per input, e.g. max_length=8192 (the default)"
        )
