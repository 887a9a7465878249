"""Best-of-N candidates from a policy model: seeded, saved to a pool file, resumable.

The policy sees the question and the user's profile view (the posts the profile builder picked)
and is asked for a personalised answer under 100 words. Candidate ``j`` of every record is sampled
with seed ``seed + j`` (the ``hf`` backend derives each chat's sampling stream from that seed and
the prompt; an OpenAI-compatible server gets the seed in the request), so N candidates of one
prompt differ and a rerun gives the same ones. After each round of candidates the pool file is
rewritten, so an interrupted run resumes where it stopped; a pool file written with other policy
settings is refused rather than mixed.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from prbench.backends.base import Chat, GenerationBackend
from prbench.judges.common import BackendOptions, generate_in_batches, resolve_backend
from prbench.profiles.base import ProfileView
from prbench.records import Record

POLICY_SYSTEM = (
    "You help one particular person. Their earlier posts show who they are: their situation, "
    "constraints, tastes and what they already know. Write the answer this person would find "
    "most useful, fitted to what the posts reveal about them, and stay under 100 words."
)


@dataclasses.dataclass(frozen=True)
class PolicyOptions(BackendOptions):
    """The policy's backend and sampling options (defaults: the paper's sampling settings)."""

    temperature: float = dataclasses.field(
        default=1.0, metadata={"help": "sampling temperature (the paper samples at 1.0)"}
    )
    top_p: float = dataclasses.field(default=0.9, metadata={"help": "nucleus mass (paper: 0.9)"})
    max_new_tokens: int = dataclasses.field(
        default=512, metadata={"help": "tokens per candidate (paper: 512)"}
    )


def policy_chat(question: str, profile: ProfileView) -> Chat:
    """The policy prompt for one record."""
    parts = []
    if profile.text:
        parts.append("Earlier posts by this person:\n" + profile.text)
    parts.append("Their question: " + question)
    parts.append("Answer them directly in under 100 words, personalised to what their posts show.")
    return [
        {"role": "system", "content": POLICY_SYSTEM},
        {"role": "user", "content": "\n\n".join(parts)},
    ]


def policy_settings(options: PolicyOptions, backend: GenerationBackend, n: int) -> dict[str, Any]:
    """What identifies a generated pool (stored in it; a resume must match)."""
    return {
        "backend": options.backend,
        "model": options.model,
        "gguf_file": options.gguf_file,
        "fingerprint": getattr(backend, "fingerprint", ""),
        "temperature": options.temperature,
        "top_p": options.top_p,
        "max_new_tokens": options.max_new_tokens,
        "seed": options.seed,
        "n": n,
        "prompt": POLICY_SYSTEM,
    }


def generate_pools(
    records: Sequence[Record],
    views: Sequence[ProfileView],
    options: PolicyOptions,
    n: int,
    path: str | os.PathLike[str],
    *,
    backend: GenerationBackend | None = None,
) -> list[Any]:
    """Sample ``n`` candidates per record (resuming from ``path``) and save them there.

    Blank replies are not candidates: they are listed under ``empty_replies`` in the pool (so a
    rerun does not ask again) and the pool has fewer than ``n`` candidates; a record whose every
    reply was blank is an error.

    Returns:
        The pools (:class:`prbench.downstream.pools.Pool`), in record order.

    Raises:
        ValueError: ``n`` < 1, or ``path`` holds pools made with other policy settings.
    """
    from prbench.downstream.pools import Candidate, Pool, load_pools, write_pools
    from prbench.progress import progress_bar

    if n < 1:
        raise ValueError(f"N must be at least 1, got {n}")
    backend = resolve_backend(options, backend, "bon policy")
    settings = policy_settings(options, backend, n)
    target = Path(path)
    done: dict[str, tuple[list[Candidate], list[str]]] = {r.id: ([], []) for r in records}
    if target.exists():
        for pool in load_pools(target, records):
            previous = dict(pool.extra.get("policy") or {})
            previous.pop("n", None)
            wanted = {k: v for k, v in settings.items() if k != "n"}
            if previous != wanted:
                raise ValueError(
                    f"{target}: pool of record {pool.record_id!r} was generated with other policy "
                    f"settings ({previous}); use another pool file or the same settings"
                )
            empty = list(pool.extra.get("empty_replies", []))
            done[pool.record_id] = (list(pool.candidates), empty)

    def cand_id(rid: str, j: int) -> str:
        return f"{rid}-s{options.seed + j}"

    def pools() -> list[Pool]:
        out = []
        for r in records:
            cands, empty = done[r.id]
            extra: dict[str, Any] = {"policy": settings}
            if empty:
                extra["empty_replies"] = empty
            out.append(Pool(r.id, tuple(cands), None, None, str(target), extra))
        return out

    todo = sum(
        1 for r in records for j in range(n)
        if cand_id(r.id, j) not in {c.id for c in done[r.id][0]} | set(done[r.id][1])
    )
    bar = progress_bar(todo, desc="bon: generating", unit="answer")
    try:
        for j in range(n):
            missing = [
                (r, v) for r, v in zip(records, views, strict=True)
                if cand_id(r.id, j) not in {c.id for c in done[r.id][0]} | set(done[r.id][1])
            ]
            if not missing:
                continue
            chats = [policy_chat(r.question, v) for r, v in missing]
            config = options.generation_config(seed=options.seed + j)
            replies = generate_in_batches(backend, chats, config, options.batch_size)
            for (r, _), reply in zip(missing, replies, strict=True):
                text = reply.strip()
                if text:
                    done[r.id][0].append(
                        Candidate(
                            cand_id(r.id, j), text, None, f"policy sample, seed {options.seed + j}"
                        )
                    )
                else:
                    done[r.id][1].append(cand_id(r.id, j))
            write_pools(target, [p for p in pools() if p.candidates])
            bar.update(len(missing))
    finally:
        bar.close()
    result = pools()
    empty_pools = [p.record_id for p in result if not p.candidates]
    if empty_pools:
        raise ValueError(
            f"the policy gave only blank replies for record(s) {empty_pools[:5]}; "
            f"nothing to select from (pools saved in {target})"
        )
    write_pools(target, result)
    return result


__all__ = ["POLICY_SYSTEM", "PolicyOptions", "generate_pools", "policy_chat", "policy_settings"]
