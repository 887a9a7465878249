"""The RM-R1 judge prompts, in prbench's own words, keeping the published output format.

RM-R1 checkpoints were trained to classify the task, write a rubric (or their own solution),
evaluate both replies against it in tagged sections, and end with ``<answer>[[A]]</answer>`` or
``<answer>[[B]]</answer>``. The section labels and tags below are that format (the models depend
on it); the instructions around them are written for prbench. Two styles:

- ``instruct`` (the Qwen2.5-Instruct checkpoints): the instructions are a system turn;
- ``reasoning`` (the DeepSeek-distilled checkpoints): one user turn; the model thinks inside
  ``<think>...</think>`` before answering.

The user's profile, when the task condition shows one, goes into the user turn as the client's
earlier posts, and the rubric is asked to reflect them; with no profile the prompt is the plain
format.

**User prompt files** (``system_prompt_file=`` / ``user_prompt_file=``) replace this wording with
templates a user supplies -- e.g. the exact prompt the checkpoints were trained on, which the
authors publish in their evaluation code (see the plugin README). A template may use the fields
``{question}``, ``{answer_a}``, ``{answer_b}`` and ``{profile}`` (``{{`` / ``}}`` for literal
braces); :func:`load_templates` checks them once, and results record each file's SHA-256.
"""

from __future__ import annotations

import dataclasses
import hashlib
import string
from typing import Any

from prbench.api import Chat, read_option_file

#: Bumped whenever a text below changes (recorded in results and in backend cache keys).
PROMPT_VERSION = "rm-r1-1"

_INSTRUCT_SYSTEM = """\
You are an impartial evaluator. Two assistants, Chatbot A and Chatbot B, replied to a client's \
question; decide which reply serves this client better.

Start by labelling the task: <type>Reasoning</type> when it needs calculation, code, multi-step \
inference or specialised knowledge to get right, <type>Chat</type> when it is advice, \
conversation, rewriting, a safety matter or general help.

For a Chat task:
1. Inside <rubric>...</rubric>, list what an excellent reply to this client must do, each item \
with a weight; inside <justify>...</justify>, say why those items and weights fit this client.
2. Inside <eval>...</eval>, judge both replies item by item, citing them with \
<quote_A>...</quote_A> / <quote_B>...</quote_B> or paraphrasing them with \
<summary_A>...</summary_A> / <summary_B>...</summary_B>.

For a Reasoning task:
1. Work the problem out yourself inside <solution>...</solution>.
2. Inside <eval>...</eval>, check each reply against your solution for correctness, completeness \
and soundness, citing them with the same quote and summary tags.

Finish with exactly one final line: <answer>[[A]]</answer> if Chatbot A's reply is better, or \
<answer>[[B]]</answer> if Chatbot B's reply is better. Pick one; there are no ties. Which reply \
comes first and how long it is must not sway you.{profile_note}"""

_REASONING_USER = """\
Act as an impartial evaluator: decide which of two assistants' replies serves the client below \
better. Think it through first, building your own criteria for this client (or your own solution \
when the question has a correct answer) and checking both replies against them. Neither the order \
of the replies nor their length should sway you.{profile_note}

{body}

Give your final choice in exactly this form: <answer>[[A]]</answer> if Chatbot A's reply is \
better, or <answer>[[B]]</answer> if Chatbot B's reply is better. Pick one; there are no ties."""

_PROFILE_NOTE = (
    " The client's earlier posts are included: the best reply is the one that fits this "
    "particular client, so let your criteria follow what those posts reveal about their "
    "situation, experience and concerns."
)

_BODY = """\
{profile_block}[Client Question]
{question}

[The Start of Chatbot A's Response]
{answer_a}
[The End of Chatbot A's Response]

[The Start of Chatbot B's Response]
{answer_b}
[The End of Chatbot B's Response]"""


def _body(question: str, profile: str, answer_a: str, answer_b: str) -> str:
    block = f"[Client's Earlier Posts]\n{profile.strip()}\n\n" if profile.strip() else ""
    return _BODY.format(
        profile_block=block, question=question.strip(), answer_a=answer_a.strip(),
        answer_b=answer_b.strip(),
    )


#: The fields a prompt template may use.
FIELDS = ("question", "answer_a", "answer_b", "profile")
#: The fields the templates together must show (the model cannot judge without them).
REQUIRED = ("question", "answer_a", "answer_b")


@dataclasses.dataclass(frozen=True)
class PromptTemplates:
    """User-supplied prompt templates (``None`` where the built-in wording is kept).

    Attributes:
        system: the system turn's template, or ``None`` (no system turn with a user template;
            the built-in one of the style otherwise).
        user: the user turn's template, or ``None`` (the built-in one of the style).
        system_file: the file ``system`` was read from.
        user_file: the file ``user`` was read from.
    """

    system: str | None = None
    user: str | None = None
    system_file: str = ""
    user_file: str = ""

    @property
    def builtin(self) -> bool:
        """Whether no template file was given (prbench's own wording runs)."""
        return self.system is None and self.user is None

    def describe(self) -> str | dict[str, Any]:
        """``"builtin"``, or each template file with the SHA-256 of its text (for results)."""
        if self.builtin:
            return "builtin"
        out: dict[str, Any] = {}
        for kind, text, file in (("system", self.system, self.system_file),
                                 ("user", self.user, self.user_file)):
            if text is not None:
                out[f"{kind}_prompt_file"] = file
                out[f"{kind}_sha256"] = hashlib.sha256(text.encode("utf-8")).hexdigest()
        return out


def _fields(text: str, file: str) -> set[str]:
    """The field names a template uses.

    Raises:
        ValueError: bad braces, an unknown field, or a field with a conversion, format spec,
            index or attribute (naming the file and the field).
    """
    try:
        parts = list(string.Formatter().parse(text))
    except ValueError as exc:
        raise ValueError(
            f"{file}: not a valid prompt template ({exc}); write literal braces as {{{{ and }}}}"
        ) from None
    used: set[str] = set()
    allowed = ", ".join("{" + f + "}" for f in FIELDS)
    for _, name, spec, conversion in parts:
        if name is None:
            continue
        if name not in FIELDS:
            shown = "{" + name + "}" if name else "{}"
            raise ValueError(
                f"{file}: unknown field {shown} in the prompt template; the fields are {allowed} "
                "(write literal braces as {{ and }})"
            )
        if spec or conversion:
            raise ValueError(
                f"{file}: field {{{name}}} has a conversion or format spec; use plain {{{name}}}"
            )
        used.add(name)
    return used


def load_templates(system_file: str = "", user_file: str = "") -> PromptTemplates:
    """Read and check the prompt templates a user supplies.

    With a user template, the templates together must show ``{question}``, ``{answer_a}`` and
    ``{answer_b}`` (``{profile}`` is optional: a prompt without it shows no profile).

    Raises:
        ValueError: a file is missing or unreadable, a field is unknown or malformed, or a
            required field is missing (naming the file and the field).
    """
    texts: dict[str, str] = {}
    used: set[str] = set()
    for kind, file in (("system", system_file), ("user", user_file)):
        if not file:
            continue
        text = read_option_file(file, f"{kind}_prompt_file")  # regular, size-capped, UTF-8
        if not text.strip():
            raise ValueError(f"{kind}_prompt_file {file}: the file is empty")
        used |= _fields(text, file)
        texts[kind] = text
    if "user" in texts:
        for name in REQUIRED:
            if name not in used:
                files = " / ".join(f for f in (system_file, user_file) if f)
                raise ValueError(
                    f"{files}: the prompt never shows the field {{{name}}}; the model cannot "
                    "judge without the question and both answers"
                )
    return PromptTemplates(
        system=texts.get("system"), user=texts.get("user"),
        system_file=system_file, user_file=user_file,
    )


def _render(template: str, question: str, profile: str, answer_a: str, answer_b: str) -> str:
    return template.format(question=question, answer_a=answer_a, answer_b=answer_b,
                           profile=profile)


def judge_chat(
    style: str, question: str, profile: str, answer_a: str, answer_b: str,
    templates: PromptTemplates | None = None,
) -> Chat:
    """The chat asking an RM-R1 model to compare ``answer_a`` (A) with ``answer_b`` (B).

    With ``templates`` from user files, their turns replace the built-in ones: a user template
    is the user turn (with a system turn only when a system template is given); a system
    template alone replaces the style's instructions and keeps the built-in user turn. The
    fields are filled with the texts as given.

    Raises:
        ValueError: an unknown style.
    """
    if templates is not None and not templates.builtin:
        fill = {"question": question, "profile": profile, "answer_a": answer_a,
                "answer_b": answer_b}
        user = (_render(templates.user, **fill) if templates.user is not None
                else _body(question, profile, answer_a, answer_b))
        chat: Chat = []
        if templates.system is not None:
            chat.append({"role": "system", "content": _render(templates.system, **fill)})
        chat.append({"role": "user", "content": user})
        return chat
    note = _PROFILE_NOTE if profile.strip() else ""
    body = _body(question, profile, answer_a, answer_b)
    if style == "instruct":
        return [
            {"role": "system", "content": _INSTRUCT_SYSTEM.format(profile_note=note)},
            {"role": "user", "content": body},
        ]
    if style == "reasoning":
        return [{"role": "user", "content": _REASONING_USER.format(profile_note=note, body=body)}]
    raise ValueError(f"unknown prompt style {style!r}; use 'instruct' or 'reasoning'")
