"""The prompts of SynthesizeMe, in this project's own wording.

Five chats: the persona from profile posts (fit mode ``profile``); the bootstrap reasoning over one
labelled pair and the persona from the kept reasonings (fit mode ``preferences``); the persona
from labelled choices with their reasonings (``protocol=authors``); the persona-conditioned
pairwise judge (with optional demonstrations); the persona-conditioned rating.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypedDict

from prbench.api import Chat

#: Bumped whenever a prompt's wording changes (part of cache keys and fingerprints).
PROMPT_VERSION = "synthesizeme-2"

NO_POSTS = "(this person has not shared any posts)"


class Demo(TypedDict):
    """A demonstration: a pair of the user's, its verified reasoning (``""``: none), the verdict."""

    question: str
    answer_a: str
    answer_b: str
    reasoning: str
    verdict: str


def _chat(system: str, user: str) -> Chat:
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


PERSONA_SYSTEM = (
    "You build short, concrete portraits of people from the little that is known about them, for "
    "an assistant that must anticipate what answer each person would find most useful. Stick to "
    "what the evidence supports; say so where it is thin."
)


def persona_from_posts_chat(posts: str) -> Chat:
    """Persona induction from the posts the task shows (fit mode ``profile``)."""
    return _chat(PERSONA_SYSTEM, f"""\
Below are posts one person wrote in online communities.
<posts>
{posts.strip() or NO_POSTS}
</posts>

Write a persona of this person in at most eight sentences: their situation and circumstances,
their level of experience, constraints they live with (money, time, health, location, people who
depend on them), their values and tastes, and what kind of answer they would find helpful or
unhelpful. Write the persona only, in the third person, with no heading.""")


def bootstrap_chat(posts: str, question: str, answer_a: str, answer_b: str) -> Chat:
    """Ask for reasoning about which answer this person preferred (kept only if it is right)."""
    return _chat(PERSONA_SYSTEM, f"""\
What we know about a person from their posts:
<posts>
{posts.strip() or NO_POSTS}
</posts>

The person asked:
<question>
{question.strip()}
</question>

<answer_a>
{answer_a.strip()}
</answer_a>

<answer_b>
{answer_b.strip()}
</answer_b>

The person preferred one of these answers. Reason about what their choice would reveal about them
(needs, constraints, tastes), in three to six sentences, then finish with exactly one final line
Verdict: [[A]]
or
Verdict: [[B]]
naming the answer you think they preferred.""")


def persona_from_reasoning_chat(posts: str, observations: Sequence[str]) -> Chat:
    """Persona induction from the reasonings that predicted the user's known choices."""
    notes = "\n\n".join(f"Observation {i}: {o.strip()}" for i, o in enumerate(observations, 1))
    return _chat(PERSONA_SYSTEM, f"""\
What we know about a person from their posts:
<posts>
{posts.strip() or NO_POSTS}
</posts>

Notes from watching which answers this person preferred (each note was checked against a choice
they really made):
<observations>
{notes or "(no checked observations)"}
</observations>

Write a persona of this person in at most eight sentences, built on the observations first and
the posts second: their situation, experience, constraints, values and the kind of answer they
reward. Write the persona only, in the third person, with no heading.""")


def _demo_text(i: int, d: Demo, tag: str, outcome: str) -> str:
    """One labelled pair as shown in a prompt: the pair, its reasoning if any, then ``outcome``."""
    reasoning = f"Reasoning: {d['reasoning'].strip()}\n" if d["reasoning"].strip() else ""
    return (f"<{tag} {i}>\nQuestion: {d['question'].strip()}\nAnswer A: {d['answer_a'].strip()}\n"
            f"Answer B: {d['answer_b'].strip()}\n{reasoning}{outcome}\n</{tag} {i}>")


def persona_from_demos_chat(posts: str, demos: Sequence[Demo]) -> Chat:
    """Persona induction from labelled pairs: each pair as shown, its reasoning where it has one
    (checked against the user's choice), and the answer the user chose (``protocol=authors``).
    """  # noqa: D205
    parts = [_demo_text(i, d, "choice", f"They chose: Answer {d['verdict']}")
             for i, d in enumerate(demos, 1)]
    return _chat(PERSONA_SYSTEM, f"""\
What we know about a person from their posts:
<posts>
{posts.strip() or NO_POSTS}
</posts>

Choices this person really made between two answers (with the reasoning that predicted the
choice, where there is one):
<choices>
{chr(10).join(parts) or "(no choices)"}
</choices>

Write a persona of this person in at most eight sentences, built on the choices first and the
posts second: their situation, experience, constraints, values and the kind of answer they
reward. Write the persona only, in the third person, with no heading.""")


JUDGE_SYSTEM = (
    "You predict which of two answers one specific person would prefer. Both answers are "
    "competent; decide by the person's own needs and tastes as the persona describes them, not by "
    "length, polish or the order the answers are shown in."
)


def _demo_block(demos: Sequence[Demo]) -> str:
    if not demos:
        return ""
    parts = [_demo_text(i, d, "example", f"Verdict: [[{d['verdict']}]]")
             for i, d in enumerate(demos, 1)]
    return ("Earlier choices this person really made (with the reasoning that predicted them, "
            "where there is one):\n"
            + "\n\n".join(parts) + "\n\n")


def judge_chat(persona: str, question: str, answer_a: str, answer_b: str,
               demos: Sequence[Demo] = ()) -> Chat:
    """The persona-conditioned pairwise judge for one order of two answers."""
    return _chat(JUDGE_SYSTEM, f"""\
The person:
<persona>
{persona.strip()}
</persona>

{_demo_block(demos)}Their question:
<question>
{question.strip()}
</question>

<answer_a>
{answer_a.strip()}
</answer_a>

<answer_b>
{answer_b.strip()}
</answer_b>

Think briefly about which answer this person would choose, then finish with exactly one final line
Verdict: [[A]]
or
Verdict: [[B]]
A tie is not allowed.""")


RATING_SYSTEM = (
    "You grade one answer the way one specific person would. A correct answer that ignores who "
    "they are earns a middling grade; the top grade is for an answer shaped around their needs."
)


def rating_chat(persona: str, question: str, answer: str, low: int, high: int) -> Chat:
    """The persona-conditioned rating of one answer."""
    return _chat(RATING_SYSTEM, f"""\
The person:
<persona>
{persona.strip()}
</persona>

Their question:
<question>
{question.strip()}
</question>

The answer:
<answer>
{answer.strip()}
</answer>

How much would this person value this answer? Reason briefly, then finish with exactly one final
line
Rating: N
where N is a whole number from {low} (useless to them) to {high} (exactly what they need).""")
