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
"""

from __future__ import annotations

from prbench.backends.base import Chat

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


def judge_chat(style: str, question: str, profile: str, answer_a: str, answer_b: str) -> Chat:
    """The chat asking an RM-R1 model to compare ``answer_a`` (A) with ``answer_b`` (B).

    Raises:
        ValueError: an unknown style.
    """
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
