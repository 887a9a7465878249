"""Turning (profile, question, answer) into the exact token ids a chat model sees.

Shared by the in-process HF backends. Three things are decided here, each an option recorded in
results:

- **where the profile goes** (``profile_position``): ``none`` (never shown), ``system`` (a system
  turn before the question) or ``user`` (in the user turn, before the question). With an empty
  profile every position yields ``[user: question, assistant: answer]`` — the released script's
  chat (its token ids can still differ in the BOS; :meth:`ChatEncoder.encode_released` gives
  them exactly).
- **exactly one BOS**: the chat template is rendered to text, tokenised without special tokens,
  every leading BOS is stripped, and exactly one is put back when the model expects one (the
  tokenizer adds one by itself, or the template writes one). Templates that write a BOS *and*
  tokenizers that add one (the Llama-3.1 double-BOS trap, which Skywork-Reward-V2 warns about)
  therefore give one BOS, and BOS-less models (Qwen) get none. The result is checked.
- **truncation** (``truncation``): by default (``profile_first``) a too-long input loses the end
  of the profile first (cut at a word boundary), then, with no profile left, the end of the
  question; the answer is never cut — an answer that does not fit even alone makes that input
  *invalid* (:attr:`EncodedInput.invalid` says why; the scorer gives it no score and the pair is
  counted invalid), the rest of the run goes on. ``left`` is reward-bench's rule: the input keeps
  its last ``max_length`` tokens (after the BOS, which is kept), whatever they belong to.

The profile is the view's text, or, with ``released_profile``, the view's posts rendered as the
released Best-of-N / PPO reward code renders them (:func:`released_profile_text`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import re
from collections.abc import Sequence
from typing import Any, Literal

from prbench.errors import PrbenchUserError

ProfilePosition = Literal["none", "system", "user"]
BosMode = Literal["auto", "always", "never"]
Truncation = Literal["profile_first", "left"]

#: The user turn when the profile goes there (``{profile}`` and ``{question}`` are filled in).
DEFAULT_USER_FORMAT = "Some of my earlier posts:\n\n{profile}\n\nMy question: {question}"
#: The system turn when the profile goes there (``{profile}`` is filled in).
DEFAULT_SYSTEM_FORMAT = "Earlier posts written by the user you are answering:\n\n{profile}"

#: The user turn of the released Best-of-N / PPO reward code: the question, then the profile.
RELEASED_PROFILE_USER_FORMAT = "{question}{profile}"
#: One post as the released Best-of-N / PPO reward code renders it (posts joined with ``\n``).
RELEASED_POST_FORMAT = "Post {index} (Category: {category}):\n{text}"
RELEASED_POST_SEPARATOR = "\n"

_WS = re.compile(r"\s+")

logger = logging.getLogger(__name__)


def names_a_file(value: str) -> bool:
    """Whether a ``chat_template=`` value names a file (rather than being the template's text).

    One line, no Jinja markers, and something exists at that path (a FIFO or a folder too: the
    reader then says what it is). A path too long to exist is no file (``os.path.lexists``
    answers False where ``Path.exists`` raises "File name too long").
    """
    import os

    return (len(value) < 4096 and "\n" not in value and "{%" not in value
            and "{{" not in value and os.path.lexists(os.path.expanduser(value)))


def load_chat_template(value: str) -> str:
    """A chat template override: the path of a Jinja file, or the template text itself.

    Raises:
        ValueError: ``value`` is neither an existing file nor text that looks like Jinja.
    """
    from prbench.options import read_option_file

    if names_a_file(value):
        return read_option_file(value, "chat_template")  # a regular file under the size cap
    if "{%" in value or "{{" in value:
        return value
    raise ValueError(
        f"chat_template {value[:80]!r} is neither an existing file nor a Jinja template"
    )


def template_sha256(template: str | None) -> str:
    """Short hash of a chat template's text (``"none"`` without one)."""
    if not template:
        return "none"
    return hashlib.sha256(template.encode("utf-8")).hexdigest()[:16]


def build_chat(
    question: str,
    response: str | None,
    profile: str,
    *,
    position: ProfilePosition = "user",
    user_format: str = DEFAULT_USER_FORMAT,
    system_format: str = DEFAULT_SYSTEM_FORMAT,
) -> list[dict[str, str]]:
    """The chat messages for one request (``response=None`` leaves the assistant turn out)."""
    messages: list[dict[str, str]] = []
    user = question
    if profile and position == "system":
        messages.append({"role": "system", "content": system_format.format(profile=profile)})
    elif profile and position == "user":
        user = user_format.format(profile=profile, question=question)
    messages.append({"role": "user", "content": user})
    if response is not None:
        messages.append({"role": "assistant", "content": response})
    return messages


def check_formats(position: str, user_format: str, system_format: str) -> None:
    """Validate the profile format strings for a position.

    Raises:
        ValueError: a placeholder is missing or the format string is malformed.
    """
    try:
        user_format.format(profile="", question="")
        system_format.format(profile="")
    except (KeyError, IndexError, ValueError) as exc:
        raise ValueError(f"bad profile format string: {exc!r}") from exc
    if position == "user" and ("{profile}" not in user_format or "{question}" not in user_format):
        raise ValueError("user_format must contain {profile} and {question}")
    if position == "system" and "{profile}" not in system_format:
        raise ValueError("system_format must contain {profile}")


class NoChatTemplateError(PrbenchUserError, ValueError):
    """The tokenizer has no chat template to render ``[user, assistant]`` and none was given."""


@dataclasses.dataclass(frozen=True)
class BosPolicy:
    """How the beginning-of-sequence token is handled.

    Attributes:
        bos_id: the tokenizer's BOS id (``None`` if it has none).
        add: whether every input starts with exactly one BOS (otherwise none).
        source: why: ``tokenizer``, ``template``, ``tokenizer+template`` (a duplicate is stripped),
            ``absent`` (no BOS expected), ``forced`` or ``disabled`` (the ``bos`` option).
    """

    bos_id: int | None
    add: bool
    source: str

    def apply(self, ids: list[int]) -> list[int]:
        """Strip every leading BOS, then add exactly one if the policy says so."""
        if self.bos_id is None:
            return ids
        start = 0
        while start < len(ids) and ids[start] == self.bos_id:
            start += 1
        body = ids[start:]
        return [self.bos_id, *body] if self.add else body

    def check(self, ids: Sequence[int], where: str) -> None:
        """Raise unless ``ids`` starts with exactly the expected number of BOS tokens."""
        if self.bos_id is None:
            return
        leading = 0
        while leading < len(ids) and ids[leading] == self.bos_id:
            leading += 1
        expected = 1 if self.add else 0
        if leading != expected:
            raise ValueError(
                f"{where}: input starts with {leading} BOS tokens, expected {expected}"
            )


def resolve_bos(tokenizer: Any, mode: BosMode, rendered_sample: str) -> BosPolicy:
    """Decide the BOS policy from the tokenizer, a rendered sample chat and the ``bos`` option.

    Raises:
        ValueError: ``mode="always"`` with a tokenizer that has no BOS token.
    """
    bos_id = tokenizer.bos_token_id
    if bos_id is None:
        if mode == "always":
            raise ValueError("bos='always' but the tokenizer has no BOS token")
        return BosPolicy(None, False, "absent")
    if mode == "always":
        return BosPolicy(bos_id, True, "forced")
    if mode == "never":
        return BosPolicy(bos_id, False, "disabled")
    probe = tokenizer("Hello", add_special_tokens=True)["input_ids"]
    by_tokenizer = bool(probe) and probe[0] == bos_id
    bos_text = tokenizer.bos_token or ""
    by_template = bool(bos_text) and rendered_sample.startswith(bos_text)
    if by_tokenizer and by_template:
        return BosPolicy(bos_id, True, "tokenizer+template")
    if by_tokenizer or by_template:
        return BosPolicy(bos_id, True, "tokenizer" if by_tokenizer else "template")
    return BosPolicy(bos_id, False, "absent")


@dataclasses.dataclass(frozen=True)
class EncodedInput:
    """One request's model input.

    Attributes:
        ids: the token ids (exactly the model input; empty for an invalid input).
        truncated: ``""``, ``"profile"``, ``"question"``, ``"left"`` (``truncation=left``: the
            first tokens after the BOS cut) or ``"end"`` (the released format's cut of the last
            tokens) — what was cut to fit.
        removed_chars: characters cut from the profile (or question); for ``"left"``, tokens cut;
            0 for ``"end"``.
        invalid: why the input cannot be scored (``""``: it can): the answer alone does not fit
            in ``max_length`` under ``truncation=profile_first``.
        text: the rendered chat before any cut (what the input as scored records).
        full_tokens: the ids ``text`` gives before any cut.
        sent_text: for a ``profile`` or ``question`` cut, the rendered chat actually tokenised
            (``""`` otherwise: the ids are ``text``'s, or a cut of them).
    """

    ids: list[int]
    truncated: str = ""
    removed_chars: int = 0
    invalid: str = ""
    text: str = ""
    full_tokens: int = 0
    sent_text: str = ""


class ChatEncoder:
    """Renders requests through a chat template and tokenises them (see the module docstring).

    Args:
        tokenizer: a transformers tokenizer with a chat template (or ``chat_template`` given).
        max_length: the most tokens per input.
        position: where the profile goes.
        user_format: the user turn with the profile (``{profile}``, ``{question}``).
        system_format: the system turn with the profile (``{profile}``).
        bos: ``auto``, ``always`` or ``never``.
        chat_template: a template overriding the tokenizer's (text).
        truncation: ``profile_first`` or ``left`` (see the module docstring).
        released_profile: profiles are shown as the released Best-of-N/PPO code shows them
            (:func:`released_profile_text`; used by :func:`encode_requests`).
    """

    def __init__(
        self,
        tokenizer: Any,
        *,
        max_length: int = 8192,
        position: ProfilePosition = "user",
        user_format: str = DEFAULT_USER_FORMAT,
        system_format: str = DEFAULT_SYSTEM_FORMAT,
        bos: BosMode = "auto",
        chat_template: str | None = None,
        truncation: Truncation = "profile_first",
        released_profile: bool = False,
    ) -> None:
        if max_length < 2:
            raise ValueError(f"max_length must be at least 2, got {max_length}")
        check_formats(position, user_format, system_format)
        self.tokenizer = tokenizer
        self.max_length = max_length
        self.position = position
        self.user_format = user_format
        self.system_format = system_format
        self.truncation = truncation
        self.released_profile = released_profile
        self.template = chat_template or getattr(tokenizer, "chat_template", None)
        if not self.template or not isinstance(self.template, str):
            name = getattr(tokenizer, "name_or_path", "") or "the model"
            raise NoChatTemplateError(
                f"the tokenizer of {name} has no (single) chat template, so the chat "
                "[user: question, assistant: answer] cannot be rendered; pass "
                "chat_template=<Jinja text or file> (a reward model's own template, or e.g. "
                "ChatML)"
            )
        sample = self.render("Hello?", "Hi.", "")
        self.bos = resolve_bos(tokenizer, bos, sample)

    def render(self, question: str, response: str, profile: str) -> str:
        """The chat as text, through the template (no generation prompt)."""
        messages = build_chat(
            question, response, profile, position=self.position,
            user_format=self.user_format, system_format=self.system_format,
        )
        text = self.tokenizer.apply_chat_template(
            messages, chat_template=self.template, tokenize=False, add_generation_prompt=False
        )
        if not isinstance(text, str):
            raise TypeError(f"apply_chat_template returned {type(text).__name__}, expected text")
        return text

    def _tokenize(self, texts: list[str]) -> list[list[int]]:
        encoded = self.tokenizer(texts, add_special_tokens=False)["input_ids"]
        return [self.bos.apply(list(ids)) for ids in encoded]

    def encode(
        self,
        questions: Sequence[str],
        responses: Sequence[str],
        profiles: Sequence[str],
        *,
        names: Sequence[str] | None = None,
    ) -> list[EncodedInput]:
        """Encode requests (one tokenizer call for all; a search only for over-long ones).

        An answer that does not fit even alone (``truncation=profile_first``) gives an input with
        no ids and :attr:`EncodedInput.invalid` set; the other inputs are encoded as usual.

        Args:
            questions: the questions.
            responses: the answers to score.
            profiles: the profile texts (``""`` for none).
            names: labels for the reasons (e.g. record ids).
        """
        profiles = [p if self.position != "none" else "" for p in profiles]
        texts = [
            self.render(q, r, p) for q, r, p in zip(questions, responses, profiles, strict=True)
        ]
        all_ids = self._tokenize(texts)
        out = []
        for i, ids in enumerate(all_ids):
            where = f"request {i}" + (f" (record {names[i]!r})" if names else "")
            if len(ids) <= self.max_length:
                enc = EncodedInput(ids)
            elif self.truncation == "left":
                enc = self._cut_left(ids)
            else:
                enc = self._fit(questions[i], responses[i], profiles[i], where)
            if not enc.invalid:
                self.bos.check(enc.ids, where)
            out.append(dataclasses.replace(enc, text=texts[i], full_tokens=len(ids)))
        return out

    def _cut_left(self, ids: list[int]) -> EncodedInput:
        """The last tokens that fit, after the BOS (kept, as a tokenizer's own truncation does)."""
        head = 1 if self.bos.add else 0
        keep = self.max_length - head
        return EncodedInput(ids[:head] + ids[len(ids) - keep :], "left", len(ids) - head - keep)

    def encode_released(
        self,
        questions: Sequence[str],
        responses: Sequence[str],
        profiles: Sequence[str] | None = None,
    ) -> list[EncodedInput]:
        """The released scripts' input for each (question, answer[, profile]).

        Without ``profiles`` it is the pointwise script's chat (no profile); with them, the
        profile goes where the encoder's position and user format put it (the released
        Best-of-N scorer's user turn under ``input_format=released_bon``).

        The chat is rendered to text through the template, then tokenised with the tokenizer's
        default special tokens — no BOS policy, so a tokenizer that adds a BOS to a template that
        writes one gives two, as the released script does — and an input over ``max_length`` keeps
        its first ``max_length`` tokens (the tokenizer's own truncation, which cuts the end; the
        answer is the end). Such inputs are marked ``truncated="end"``.
        """
        shown = [""] * len(questions) if profiles is None else list(profiles)
        texts = [
            self.render(q, r, p) for q, r, p in zip(questions, responses, shown, strict=True)
        ]
        out = []
        for text, ids in zip(texts, self.tokenizer(texts)["input_ids"], strict=True):
            if len(ids) <= self.max_length:
                out.append(EncodedInput(list(ids), text=text, full_tokens=len(ids)))
                continue
            cut = self.tokenizer(text, truncation=True, max_length=self.max_length)["input_ids"]
            out.append(EncodedInput(list(cut), "end", 0, text=text, full_tokens=len(ids)))
        return out

    def _length(self, question: str, response: str, profile: str) -> list[int]:
        return self._tokenize([self.render(question, response, profile)])[0]

    def _longest_fitting(self, text: str, build: Any) -> tuple[int, list[int]] | None:
        """The longest word-boundary cut of ``text`` whose input fits, as (chars kept, ids)."""
        cuts = [0, *(m.start() for m in _WS.finditer(text) if m.start() > 0), len(text)]
        cuts = sorted(set(cuts))
        lo, hi = 0, len(cuts) - 1
        best: tuple[int, list[int]] | None = None
        while lo <= hi:
            mid = (lo + hi) // 2
            ids = build(text[: cuts[mid]].rstrip())
            if len(ids) <= self.max_length:
                best = (cuts[mid], ids)
                lo = mid + 1
            else:
                hi = mid - 1
        return best

    def _fit(self, question: str, response: str, profile: str, where: str) -> EncodedInput:
        if profile:
            found = self._longest_fitting(profile, lambda p: self._length(question, response, p))
            if found is not None:
                kept, ids = found
                return EncodedInput(ids, "profile", len(profile) - kept, sent_text=self.render(
                    question, response, profile[:kept].rstrip()))
        found = self._longest_fitting(question, lambda q: self._length(q, response, ""))
        if found is not None:
            kept, ids = found
            return EncodedInput(ids, "question", len(question) - kept + len(profile),
                                sent_text=self.render(question[:kept].rstrip(), response, ""))
        alone = len(self._length("", response, ""))
        return EncodedInput([], invalid=(
            f"{where}: the answer needs {alone} tokens with the chat template, more than "
            f"max_length={self.max_length} (answers are never cut; raise max_length, or "
            "truncation=left)"
        ))


def load_tokenizer(
    pretrained: str, *, revision: str = "main", trust_remote_code: bool = False
) -> Any:
    """A tokenizer from a hub id (at ``revision``) or a local folder.

    ``trust_remote_code`` is always passed explicitly (``False`` unless the user asked for it).
    """
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(
        pretrained, revision=revision, trust_remote_code=trust_remote_code
    )


def encoder_from_options(
    tokenizer: Any, options: Any, *, max_length: int | None = None
) -> ChatEncoder:
    """The :class:`ChatEncoder` for a scorer's chat-rendering options.

    ``options`` are :class:`~prbench.backends.chat_options.ChatRenderOptions` with a
    ``max_length``, as ``hf-classifier`` and ``served-rm`` have them; ``max_length`` overrides the
    option.
    """
    template = load_chat_template(options.chat_template) if options.chat_template else None
    return ChatEncoder(
        tokenizer,
        max_length=options.max_length if max_length is None else max_length,
        position=options.profile_position,
        user_format=options.effective_user_format,
        system_format=options.system_format,
        bos=options.bos,
        chat_template=template,
        truncation=options.truncation,
        released_profile=options.released_profile,
    )


def rendering_description(encoder: ChatEncoder) -> dict[str, Any]:
    """What of the rendering changes the token ids (for a scorer's fingerprint)."""
    return {
        "max_length": encoder.max_length,
        "profile_position": encoder.position,
        "user_format": encoder.user_format,
        "system_format": encoder.system_format,
        "chat_template": template_sha256(encoder.template),
        "bos": {"add": encoder.bos.add, "id": encoder.bos.bos_id},
        "truncation": encoder.truncation,
        "profile_posts": "released" if encoder.released_profile else "view",
    }


def check_request_texts(requests: Sequence[Any]) -> None:
    """Check every request's question and response are strings.

    Raises:
        TypeError: the first request whose question or response is not a string (named by index
            and record id).
    """
    for i, r in enumerate(requests):
        for field in ("question", "response"):
            if not isinstance(getattr(r, field), str):
                raise TypeError(
                    f"request {i} (record {r.record_id!r}): {field} must be a string, "
                    f"got {type(getattr(r, field)).__name__}"
                )


def released_profile_text(view: Any) -> tuple[str, bool]:
    r"""A profile view as the released Best-of-N / PPO reward code shows it.

    A view that is its posts (its text is prbench's rendering of its ``items``, as the ``all``,
    ``dense`` and ``bm25`` builders give) is re-rendered the released way: ``Post i (Category:
    c):\n{text}``, joined with ``\n``. Any other view (a planner's plan with the posts, a custom
    text) has no released rendering and is shown as its own text.

    Returns:
        ``(text, as_posts)``: the profile text, and whether it was rendered from the posts.
    """
    from prbench.profiles.base import render_posts

    if view.items and view.text == render_posts(view.items):
        return render_posts(view.items, RELEASED_POST_FORMAT, RELEASED_POST_SEPARATOR), True
    return view.text, not view.text


def profile_texts(encoder: ChatEncoder, requests: Sequence[Any]) -> list[str]:
    """Each request's profile as ``encoder`` shows it: the view's text, or the released posts.

    Under ``released_profile``, views that are not plain posts keep their own text; a warning
    says how many.
    """
    if not encoder.released_profile:
        return [r.profile.text for r in requests]
    texts, own = [], 0
    for r in requests:
        text, as_posts = released_profile_text(r.profile)
        texts.append(text)
        own += not as_posts
    if own:
        logger.warning(
            "input_format=released_profile: %d profile view(s) are not plain posts (e.g. a "
            "planner's plan): shown as their own text right after the question", own
        )
    return texts


def encode_requests(encoder: ChatEncoder, requests: Sequence[Any]) -> list[EncodedInput]:
    """The encoded chat of each score request (question, response, profile).

    An input whose answer alone is too long comes back invalid (:attr:`EncodedInput.invalid`).

    Raises:
        TypeError: a question or response that is not a string.
    """
    check_request_texts(requests)
    return encoder.encode(
        [r.question for r in requests],
        [r.response for r in requests],
        profile_texts(encoder, requests),
        names=[r.record_id for r in requests],
    )
