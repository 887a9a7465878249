"""Every prompt prbench sends to a language model, in one place.

The texts are prbench's own. Each prompt ends by asking for one fixed, machine-readable line
(``Verdict: A``, ``Rating: 7``, ``Scores: [2, 0, 1]``) that the strict parsers in
:mod:`prbench.judges.parsing` read; nothing else in a reply is ever taken as the answer.

Prompt builders return a chat (a list of ``{"role", "content"}`` messages) so that every backend
applies its own chat template. Changing a text here changes the cache keys of the backends' response
caches and of the planner cache, so old cached replies are never reused for a new prompt.
"""

from __future__ import annotations

from collections.abc import Sequence

from prbench.backends.base import Chat

#: Bumped whenever a prompt text below changes (recorded in results and cache keys).
PROMPT_VERSION = "1"

NO_PROFILE = "(no information about this user is available)"


def _profile_block(profile_text: str) -> str:
    return profile_text.strip() or NO_PROFILE


def _chat(system: str, user: str, **fields: object) -> Chat:
    """A two-message chat: ``system``, then ``user`` with ``fields`` filled in."""
    return [
        {"role": "system", "content": system},
        {"role": "user", "content": user.format(**fields)},
    ]


def _person_chat(system: str, user: str, question: str, profile_text: str,
                 **fields: object) -> Chat:
    """A chat about one person's question: ``user`` filled with their profile, the question and
    ``fields``.
    """  # noqa: D205
    return _chat(system, user, profile=_profile_block(profile_text), question=question.strip(),
                 **fields)


# -- the pieces several prompts share (the texts are joined, so each prompt reads as before) -----

_PROFILE_TAG = "<profile>\n{profile}\n</profile>"
_QUESTION_TAG = "<question>\n{question}\n</question>"
#: the person's earlier posts and their question, as the judges show them
_KNOWN_PERSON = (
    "Here is what we know about the person, from posts they wrote earlier:\n"
    f"{_PROFILE_TAG}\n\nTheir question:\n{_QUESTION_TAG}\n\n"
)
#: the question (and the narrative, when given), as the rubric judge shows them
_ASKED = f"The person asked:\n{_QUESTION_TAG}\n{{narrative_block}}\n"
#: the answer under check, as the rubric judge shows it
_TO_CHECK = "The answer to check:\n<answer>\n{answer}\n</answer>\n\n"
#: the person's earlier posts and their question, as the pair generator shows them
_GENERATOR_PERSON = (
    "Posts the person asking wrote earlier (use them to match their background and way of "
    f"writing):\n{_PROFILE_TAG}\n\nTheir question:\n{_QUESTION_TAG}\n\n"
)


# -- pairwise judge ------------------------------------------------------------------------------

PAIRWISE_SYSTEM = (
    "You evaluate answers for one specific person. Two candidate answers to that person's question "
    "are both competent; what matters is which one better fits this particular person: their "
    "situation, constraints, experience and the things they evidently care about, as shown by "
    "what they have written before. Do not prefer an answer for being longer or for its position."
)

PAIRWISE_USER = _KNOWN_PERSON + """\
<answer_a>
{answer_a}
</answer_a>

<answer_b>
{answer_b}
</answer_b>

Think about what this person needs from an answer, then compare the two answers on that basis.
Keep your reasoning short. Finish with exactly one final line of the form
Verdict: A
or
Verdict: B
naming the single answer that suits this person better. Do not write anything after that line."""


def pairwise_chat(question: str, profile_text: str, answer_a: str, answer_b: str) -> Chat:
    """The pairwise judge's chat for one order of two answers."""
    return _person_chat(PAIRWISE_SYSTEM, PAIRWISE_USER, question, profile_text,
                        answer_a=answer_a.strip(), answer_b=answer_b.strip())


# -- pointwise rating ----------------------------------------------------------------------------

RATING_SYSTEM = (
    "You grade one answer for one specific person. A generic answer that would suit anybody earns "
    "a middling grade even when it is correct; a top grade needs an answer that is correct, useful "
    "and clearly shaped around what this person cares about."
)

RATING_USER = _KNOWN_PERSON + """\
The answer to grade:
<answer>
{answer}
</answer>

Grade how well this answer serves this particular person, as a whole number from {low} (useless \
for them) to {high} (exactly what they need). Keep any reasoning short and finish with exactly one \
final line of the form
Rating: N
where N is the whole number. Do not write anything after that line."""


def rating_chat(
    question: str, profile_text: str, answer: str, low: int = 0, high: int = 10
) -> Chat:
    """The pointwise rating judge's chat for one answer."""
    return _person_chat(RATING_SYSTEM, RATING_USER, question, profile_text,
                        answer=answer.strip(), low=low, high=high)


# -- rubric-aspect judge (downstream quality) ----------------------------------------------------

RUBRIC_SYSTEM = (
    "You check whether an answer covers specific points that the person who asked the question "
    "expects. You judge each point on its own, strictly, and only on what the answer actually says."
)

RUBRIC_SCALE = (
    "0 = the answer does not address this point at all\n"
    "1 = the answer touches on it, but only partly, vaguely or in passing\n"
    "2 = the answer addresses it clearly and usefully"
)

RUBRIC_LIST_USER = _ASKED + """\
Points this person expects a good answer to cover:
{aspects}

""" + _TO_CHECK + """\
Score every point with this scale:
{scale}

Keep your reasoning short. Finish with exactly one final line holding one score per point, in the \
order of the points, as a list of {n} whole numbers, for example
Scores: [{example}]
Do not write anything after that line."""

RUBRIC_ONE_USER = _ASKED + """\
A point this person expects a good answer to cover:
{aspect}

""" + _TO_CHECK + """\
Score the point with this scale:
{scale}

Keep your reasoning short. Finish with exactly one final line of the form
Score: N
where N is 0, 1 or 2. Do not write anything after that line."""


def _aspect_line(aspect: str, reason: str = "") -> str:
    line = aspect.strip()
    if reason.strip():
        line += f" (why it matters to them: {reason.strip()})"
    return line


def _narrative_block(narrative: str) -> str:
    if not narrative.strip():
        return ""
    return f"\nWhat they added about their situation:\n<details>\n{narrative.strip()}\n</details>\n"


def rubric_list_chat(
    question: str,
    aspects: Sequence[tuple[str, str]],
    answer: str,
    narrative: str = "",
) -> Chat:
    """The rubric judge's chat scoring all aspects (``(aspect, reason)`` pairs) in one reply."""
    listing = "\n".join(f"{i}. {_aspect_line(a, r)}" for i, (a, r) in enumerate(aspects, start=1))
    example = ", ".join(str((i * 2) % 3) for i in range(len(aspects)))
    return _chat(
        RUBRIC_SYSTEM,
        RUBRIC_LIST_USER,
        question=question.strip(),
        narrative_block=_narrative_block(narrative),
        aspects=listing,
        answer=answer.strip(),
        scale=RUBRIC_SCALE,
        n=len(aspects),
        example=example,
    )


def rubric_one_chat(
    question: str, aspect: tuple[str, str], answer: str, narrative: str = ""
) -> Chat:
    """The rubric judge's chat scoring one aspect (``(aspect, reason)``)."""
    return _chat(
        RUBRIC_SYSTEM,
        RUBRIC_ONE_USER,
        question=question.strip(),
        narrative_block=_narrative_block(narrative),
        aspect=_aspect_line(*aspect),
        answer=answer.strip(),
        scale=RUBRIC_SCALE,
    )


# -- planner (profile condition) -----------------------------------------------------------------

PLANNER_SYSTEM = (
    "You help tailor answers to individual people. From a person's question and the posts they "
    "wrote earlier, you work out what that person will expect a good answer to address."
)

PLANNER_USER = (
    f"Posts this person wrote earlier:\n{_PROFILE_TAG}\n\nTheir new question:\n{_QUESTION_TAG}\n\n"
) + """\
List the specific things this person is likely to expect an answer to address, given their \
situation, constraints, skill level and interests as the posts reveal them. Prefer concrete, \
personal expectations over generic qualities such as "be accurate". Give at most {max_items} \
items, one per line, each line starting with "- ". Write nothing else."""


def planner_chat(question: str, profile_text: str, max_items: int) -> Chat:
    """The planner's chat: infer the aspects a user will expect."""
    return _person_chat(PLANNER_SYSTEM, PLANNER_USER, question, profile_text,
                        max_items=max_items)


PLAN_HEADER = "What this user is likely to expect from an answer (inferred from their posts):"


# -- pair generation (rubric contrast) -----------------------------------------------------------

GENERATOR_SYSTEM = (
    "You write short, helpful, accurate answers to questions people post on Q&A forums, in a tone "
    "that suits the person asking."
)

CHOSEN_USER = _GENERATOR_PERSON + """\
This person expects the answer to address the following:
{aspects}

Write an answer to the question for this person. Address every point above naturally, as part of \
good advice; do not list the points or say that you were given them. Use at most {max_words} \
words. Reply with the answer only."""

REJECTED_USER = _GENERATOR_PERSON + """\
Points the answer must NOT address:
{aspects}

Write an answer to the question for this person that is accurate, helpful and written in a style \
that suits them, but that leaves every point above out entirely (do not mention, hint at or argue \
against them). Do not say that you are leaving anything out. Use at most {max_words} words. Reply \
with the answer only."""


def chosen_chat(
    question: str, profile_text: str, aspects: Sequence[tuple[str, str]], max_words: int
) -> Chat:
    """The generator's chat for the answer that covers the user's aspects."""
    listing = "\n".join(f"- {_aspect_line(a, r)}" for a, r in aspects)
    return _person_chat(GENERATOR_SYSTEM, CHOSEN_USER, question, profile_text, aspects=listing,
                        max_words=max_words)


def rejected_chat(
    question: str, profile_text: str, aspects: Sequence[tuple[str, str]], max_words: int
) -> Chat:
    """The generator's chat for the equally good answer that avoids the user's aspects."""
    listing = "\n".join(f"- {a.strip()}" for a, _ in aspects)
    return _person_chat(GENERATOR_SYSTEM, REJECTED_USER, question, profile_text, aspects=listing,
                        max_words=max_words)
