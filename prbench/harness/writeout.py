"""``--write_out`` for prbench tasks: the first document of each task as the scorer gets it.

lm-eval's ``--write_out`` logs (at INFO) the prompt of each task's first document. For a prbench
task that prompt is ``doc_to_text``: a likelihood baseline's text in which a profile still to be
built stands as ``[profile <builder> <key>: built when scored]``, and which a reward model never
reads (it gets the structured request). :func:`render` writes instead, to standard error and
whatever lm-eval's verbosity, what the scorer gets for document 0 — the profile as the task's
builder renders it (built now for this one record, unless the scorer reads no profiles), and the
chat for each answer with the profile where the scorer's ``profile_position`` and formats put it
(a chat reward model then applies its own chat template). ``prbench eval --write_out`` has the
model print it as it scores (:meth:`prbench.harness.lm.PRBenchLM.from_spec`); under plain
``lm_eval --write_out`` lm-eval's ``print_writeout`` does it
(:func:`prbench.harness.lm_eval_compat.patch_writeout`); other tasks keep lm-eval's output.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any


def is_prbench_doc(doc: Any) -> bool:
    """A row of a prbench task (built by :func:`prbench.harness.task_rows.load_docs`)."""
    return isinstance(doc, Mapping) and "record_ref" in doc and "profile_text" in doc


def _indent(text: str) -> str:
    return "\n".join("    " + line for line in text.splitlines()) or "    (empty)"


def _chat(options: Any) -> Callable[[str, str, str], list[dict[str, str]]] | None:
    """The scorer's chat builder when its options say where the profile goes, else ``None``."""
    position = getattr(options, "profile_position", None)
    if position is None:
        return None
    from prbench.backends.chat_inputs import (
        DEFAULT_SYSTEM_FORMAT,
        DEFAULT_USER_FORMAT,
        build_chat,
    )

    user_format = getattr(options, "user_format", DEFAULT_USER_FORMAT)
    system_format = getattr(options, "system_format", DEFAULT_SYSTEM_FORMAT)

    def chat(question: str, answer: str, profile: str) -> list[dict[str, str]]:
        return build_chat(question, answer, profile, position=position,
                          user_format=user_format, system_format=system_format)

    return chat


def render(task_name: str, doc: Mapping[str, Any], lm: Any) -> str:
    """What the scorer of ``lm`` gets for ``doc``, as the text ``--write_out`` prints."""
    from prbench.harness.profile_rows import row_view

    component = lm.component
    reads = bool(component.reads_profile)
    view = row_view(doc, build=reads)
    lines = [f"prbench --write_out: task {task_name}, document 0 (record {doc.get('id')!r}), as "
             f"the scorer {component.name!r} gets it"]
    if doc.get("condition") == "noprofile" or (reads and not view.text and not view.items):
        lines.append("profile: none")
    elif not reads:
        lines.append(f"profile: not built (the scorer {component.name!r} reads no profile)")
    else:
        lines.append(f"profile ({doc.get('profile_builder')}, {len(view.items)} posts, "
                     f"{view.n_tokens} tokens):")
        lines.append(_indent(view.text))
    if component.diagnostic:
        lines.append("DIAGNOSTIC scorer: it also reads the record's narrative and rubric aspects")
    profile = view.text if reads else ""
    chat = _chat(lm.options)
    if chat is None:
        lines.append(f"question: {doc['question']}")
    for label in ("chosen", "rejected"):
        answer = str(doc[label])
        if chat is None:
            lines.append(f"answer ({label}):")
            lines.append(_indent(answer))
            continue
        lines.append(f"chat for the {label} answer (the reward model applies its own chat "
                     "template to these turns):")
        for message in chat(str(doc["question"]), answer, profile):
            lines.append(f"  [{message['role']}]")
            lines.append(_indent(message["content"]))
    return "\n".join(lines)
