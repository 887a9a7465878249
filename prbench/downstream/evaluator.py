"""The ``best-of-n`` downstream evaluator: pools -> scores (runtime) -> Best-of-N curves.

Registered through ``register_downstream_evaluators`` (see
:mod:`prbench.default_plugins.downstream`) and used by ``prbench bon``. Build it with the registry
(``get_registry().build("downstream-evaluator", "best-of-n", options)``) and call
:meth:`BestOfNEvaluator.run` with scorer specs; the result is the JSON-ready dict that
``prbench bon`` writes and that ``prbench correlate`` / ``prbench report`` read.

Every candidate (and each record's own chosen/rejected pair, for the benchmark side of the
correlation) is scored once per scorer through :func:`prbench.scoring.spec.build_runtime`, so
scores are deduplicated, cached on disk for scorers with a fingerprint, and a rerun computes only
what is missing.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from prbench.downstream.bestofn import (
    DEFAULT_BON_RESAMPLES,
    RESULT_KIND,
    PoolItem,
    best_of_n_curve,
    k_values,
    pair_outcomes,
)
from prbench.metrics import DEFAULT_CONFIDENCE, DEFAULT_SEED, bootstrap_ci
from prbench.options import OptionsError, as_mapping, parse_kv_string
from prbench.plugins import BUILTIN_NAMESPACE

DEFAULT_N = 16


def _help(text: str, **bounds: float) -> dict[str, Any]:
    return {"help": text, **bounds}


@dataclasses.dataclass(frozen=True)
class BestOfNOptions:
    """Options of the ``best-of-n`` evaluator (``prbench bon`` maps its flags to these)."""

    data: str = dataclasses.field(
        default="sample", metadata=_help("records: a file, folder, 'sample' or a hub id")
    )
    pools: str = dataclasses.field(
        default="",
        metadata=_help("pool file; default the bundled pools for 'sample'; with `policy`, the "
                       "file generated candidates are written to and resumed from"),
    )
    policy: str = dataclasses.field(
        default="",
        metadata=_help("generate candidates: backend options 'backend=hf,model=...,seed=0' "
                       "(see prbench.downstream.policy.PolicyOptions); '' = use `pools`"),
    )
    n: int = dataclasses.field(
        default=DEFAULT_N, metadata=_help("candidates per record (the first n of a given pool)",
                                          ge=1, le=1_000_000)
    )
    quality: Literal["auto", "gold", "rubric-judge"] = dataclasses.field(
        default="auto",
        metadata=_help("candidate quality: gold coverage labels, the rubric-judge, or auto "
                       "(gold when every pool is labelled)"),
    )
    judge: str = dataclasses.field(
        default="", metadata=_help("rubric-judge options 'backend=...,model=...' (k=v list)")
    )
    profile: str = dataclasses.field(
        default="dense", metadata=_help("profile builder for the scorers and the policy")
    )
    profile_k: int = dataclasses.field(default=5, metadata=_help("posts kept (builders with k)",
                                                                       ge=1, le=1_048_576))
    profile_options: str = dataclasses.field(
        default="", metadata=_help("further profile-builder options, a JSON object")
    )
    resamples: int = dataclasses.field(
        default=DEFAULT_BON_RESAMPLES, metadata=_help("bootstrap resamples (over records)", ge=1,
                                                      le=10_000_000)
    )
    confidence: float = dataclasses.field(
        default=DEFAULT_CONFIDENCE, metadata=_help("confidence of the intervals", gt=0, lt=1)
    )
    seed: int = dataclasses.field(default=DEFAULT_SEED, metadata=_help("bootstrap seed", ge=0,
                                                                             le=2**63 - 1))
    progress: bool = dataclasses.field(default=True, metadata=_help("show progress bars"))

    def __post_init__(self) -> None:
        if self.n < 1:
            raise ValueError(f"n must be at least 1, got {self.n}")
        if self.resamples < 1:
            raise ValueError(f"resamples must be at least 1, got {self.resamples}")


def parse_scorer_spec(spec: str) -> tuple[str, dict[str, str]]:
    """``"ID"`` or ``"ID:key=value,key=value"`` -> (id, raw options).

    Raises:
        OptionsError: an empty id or a malformed option list.
    """
    scorer_id, _, rest = spec.partition(":")
    scorer_id = scorer_id.strip()
    if not scorer_id:
        raise OptionsError(f"bad scorer spec {spec!r}: expected ID or ID:key=value,...")
    return scorer_id, parse_kv_string(rest)


def spec_labels(specs: Sequence[str]) -> list[str]:
    """A label per scorer spec: the id, or the whole spec where two specs share an id."""
    ids = [parse_scorer_spec(s)[0] for s in specs]
    labels = [i if ids.count(i) == 1 else s for i, s in zip(ids, specs, strict=True)]
    if len(set(labels)) != len(labels):
        raise OptionsError(f"the same scorer spec is given twice: {specs}")
    return labels


#: the built-in scorers the evaluator uses itself, by qualified id: a plugin registering the same
#: bare id (``length``) must not make them ambiguous
LENGTH_SCORER = f"{BUILTIN_NAMESPACE}/length"
RUBRIC_JUDGE = f"{BUILTIN_NAMESPACE}/rubric-judge"


def check_pointwise(specs: Sequence[str]) -> list[str]:
    """Check every spec names a registered pointwise scorer (before any work is done).

    Returns:
        The qualified id of each spec's scorer (``plugin/id``): later lookups use it, so an id
        resolved once is never resolved again (and cannot become ambiguous).

    Raises:
        prbench.plugins.UnknownComponentError: an unknown or ambiguous id.
        OptionsError: a pairwise judge (no score per answer).
    """
    from prbench.plugins import get_registry

    qualified = []
    for spec in specs:
        scorer_id, _ = parse_scorer_spec(spec)
        component = get_registry().get("scorer", scorer_id)
        if "pairwise" in component.tags:
            raise OptionsError(
                f"best-of-n: {scorer_id!r} is a pairwise judge (it compares two answers and "
                "gives no score per answer); Best-of-N needs a pointwise scorer"
            )
        qualified.append(component.qualified_id)
    return qualified


class BestOfNEvaluator:
    """Runs Best-of-N for several scorers on one set of pools.

    Args:
        options: the evaluator's options.
    """

    def __init__(self, options: BestOfNOptions) -> None:
        self.options = options

    # -- inputs ----------------------------------------------------------------------------------

    def _records(self) -> list[Any]:
        from prbench.records import load_records

        return load_records(self.options.data)

    def _views(self, records: Sequence[Any]) -> tuple[list[Any], dict[str, Any]]:
        from prbench.plugins import get_registry
        from prbench.profiles.base import build_views

        o = self.options
        component = get_registry().get("profile-builder", o.profile)
        raw = (
            as_mapping(json.loads(o.profile_options), "profile_options")
            if o.profile_options else {}
        )
        fields = (
            {f.name for f in dataclasses.fields(component.options)} if component.options else set()
        )
        if "k" in fields and "k" not in raw:
            raw["k"] = o.profile_k
        builder = component.build(raw)
        what = f"profile builder {component.qualified_id!r} (plugin {component.plugin!r})"
        views = build_views(builder, records, what)
        parsed = getattr(builder, "options", None)  # the typed values (k=5, not "5")
        return views, {"id": o.profile,
                       "options": {k: getattr(parsed, k, v) for k, v in raw.items()}}

    def _pools(self, records: Sequence[Any], views: Sequence[Any]) -> list[Any]:
        from prbench.downstream.pools import load_pools
        from prbench.records import SAMPLE_POOLS

        o = self.options
        if o.policy:
            from prbench.downstream.policy import PolicyOptions, generate_pools

            if not o.pools:
                raise OptionsError("best-of-n: with `policy`, set `pools` to the file to write")
            raw = parse_kv_string(o.policy)
            from prbench.options import parse_options

            policy = parse_options(PolicyOptions, raw, component="best-of-n policy")
            return generate_pools(records, views, policy, o.n, o.pools)  # type: ignore[arg-type]
        path = o.pools or (str(SAMPLE_POOLS) if o.data == "sample" else "")
        if not path:
            raise OptionsError(
                "best-of-n: give candidate pools (`pools`) or a policy to generate them (`policy`)"
            )
        return load_pools(path, records)

    def _quality(
        self, pools: Sequence[Any], by_id: Mapping[str, Any]
    ) -> tuple[str, dict[str, list[float]], dict[str, Any] | None]:
        """Per-candidate quality (0-1) per record, the source and the judge's description."""
        o = self.options
        source = o.quality
        if source == "auto":
            source = "gold" if all(p.labelled for p in pools) else "rubric-judge"
        if source == "gold":
            unlabelled = [p.record_id for p in pools if not p.labelled]
            if unlabelled:
                raise OptionsError(
                    f"best-of-n: quality=gold but pools of {unlabelled[:5]} have no coverage "
                    "labels; use quality=rubric-judge"
                )
            return "gold labels", {
                p.record_id: [float(c.quality) for c in p.candidates[: o.n]] for p in pools
            }, None
        from prbench.scoring.base import ScoreRequest
        from prbench.scoring.spec import build_runtime

        requests = []
        for p in pools:
            r = by_id[p.record_id]
            for c in p.candidates[: o.n]:
                requests.append(
                    ScoreRequest(
                        record_id=r.id, question=r.question, response=c.text,
                        category=r.category, domain=r.domain, hidden=r.hidden(),
                    )
                )
        with build_runtime(
            RUBRIC_JUDGE, {**parse_kv_string(o.judge), "scale": "unit"}, progress=o.progress
        ) as rt:
            values = rt.score(requests)
            described = rt.describe()
        out: dict[str, list[float]] = {}
        pos = 0
        for p in pools:
            size = len(p.candidates[: o.n])
            out[p.record_id] = [float(v) for v in values[pos : pos + size]]
            pos += size
        return "rubric-judge", out, described

    # -- run -------------------------------------------------------------------------------------

    def run(self, scorers: Sequence[str]) -> dict[str, Any]:
        """Best-of-N curves for every scorer spec (``ID`` or ``ID:k=v,...``) plus the baselines.

        Raises:
            OptionsError: a bad spec, a pairwise scorer, or inconsistent pools/quality options.
        """
        o = self.options
        if not scorers:
            raise OptionsError("best-of-n: name at least one scorer")
        labels = spec_labels(scorers)
        qualified = check_pointwise(scorers)
        records = self._records()
        views, profile_info = self._views(records)
        pools = self._pools(records, views)
        by_id = {r.id: r for r in records}
        view_of = {r.id: v for r, v in zip(records, views, strict=True)}
        source, quality, judge_info = self._quality(pools, by_id)
        items: list[PoolItem] = []
        excluded: list[dict[str, str]] = []
        for p in pools:
            q = quality[p.record_id]
            if not all(math.isfinite(v) for v in q):
                bad = [c.id for c, v in zip(p.candidates, q, strict=False) if not math.isfinite(v)]
                excluded.append(
                    {"record_id": p.record_id, "reason": f"no quality for candidates {bad}"}
                )
                continue
            cands = p.candidates[: o.n]
            items.append(
                PoolItem(
                    record_id=p.record_id, domain=by_id[p.record_id].domain,
                    texts=tuple(c.text for c in cands),
                    candidate_ids=tuple(c.id for c in cands), qualities=tuple(q),
                )
            )
        if not items:
            raise ValueError(f"best-of-n: no pool left to evaluate ({len(excluded)} excluded)")
        ks = k_values(max(len(i.texts) for i in items))
        boot = {"resamples": o.resamples, "confidence": o.confidence, "seed": o.seed}
        result: dict[str, Any] = {
            "kind": RESULT_KIND,
            "version": 1,
            "data": o.data,
            "sample": o.data == "sample",
            "pools": o.pools or ("bundled sample pools" if o.data == "sample" else ""),
            "options": dataclasses.asdict(o),
            "n_records": len(records),
            "n_pools": len(items),
            "records_without_pool": len(records) - len(pools),
            "excluded": excluded,
            "candidates_per_pool": {"min": min(len(i.texts) for i in items),
                                    "max": max(len(i.texts) for i in items)},
            "ks": ks,
            "quality": {"source": source, "judge": judge_info},
            "profile": profile_info,
            "bootstrap": boot,
            "items": [
                {"record_id": i.record_id, "domain": i.domain,
                 "candidate_ids": list(i.candidate_ids), "quality": list(i.qualities)}
                for i in items
            ],
            "scorers": {},
            "baselines": {},
        }
        for label, spec, qid in zip(labels, scorers, qualified, strict=True):
            result["scorers"][label] = self._score_one(spec, qid, items, by_id, view_of, ks, boot)
        result["baselines"] = self._baselines(items, by_id, ks, boot)
        return result

    def _requests(
        self, items: Sequence[PoolItem], by_id: Mapping[str, Any], view_of: Mapping[str, Any],
        hidden: bool,
    ) -> list[Any]:
        from prbench.scoring.base import EMPTY_PROFILE, ScoreRequest

        out = []
        for item in items:
            r = by_id[item.record_id]
            for text in (*item.texts, r.chosen, r.rejected):
                out.append(
                    ScoreRequest(
                        record_id=r.id, question=r.question, response=text,
                        profile=view_of.get(r.id, EMPTY_PROFILE), category=r.category,
                        domain=r.domain, hidden=r.hidden() if hidden else None,
                    )
                )
        return out

    def _score_one(
        self, spec: str, qualified_id: str, items: Sequence[PoolItem], by_id: Mapping[str, Any],
        view_of: Mapping[str, Any], ks: Sequence[int], boot: Mapping[str, Any],
    ) -> dict[str, Any]:
        from prbench.scoring.spec import build_runtime

        scorer_id, raw = parse_scorer_spec(spec)
        with build_runtime(qualified_id, raw, progress=self.options.progress) as rt:
            diagnostic = bool(rt.component is not None and rt.component.diagnostic)
            values = rt.score(self._requests(items, by_id, view_of, diagnostic))
            described = rt.describe()
        scores: dict[str, list[float]] = {}
        chosen, rejected = [], []
        pos = 0
        for item in items:
            size = len(item.texts)
            scores[item.record_id] = list(values[pos : pos + size])
            chosen.append(values[pos + size])
            rejected.append(values[pos + size + 1])
            pos += size + 2
        curve = best_of_n_curve(items, scores, ks, **boot)
        ids = [i.record_id for i in items]
        outcomes = pair_outcomes(ids, chosen, rejected)
        acc = bootstrap_ci([o["correct"] for o in outcomes.values()], **boot)
        invalid = sum(1 for v in values if not math.isfinite(v))
        return {
            "spec": spec,
            "id": scorer_id,
            "qualified_id": qualified_id,
            "diagnostic": diagnostic,
            "curve": curve.as_dict(),
            "pair_accuracy": acc.as_dict(),
            "pair_outcomes": outcomes,
            "invalid_scores": invalid,
            "scores": scores,
            "runtime": described,
        }

    def _baselines(
        self, items: Sequence[PoolItem], by_id: Mapping[str, Any], ks: Sequence[int],
        boot: Mapping[str, Any],
    ) -> dict[str, Any]:
        from prbench.scoring.spec import build_runtime

        out: dict[str, Any] = {}
        constant = {i.record_id: [0.0] * len(i.texts) for i in items}
        out["random"] = {
            "description": "expected quality of a uniformly random pick (exact)",
            "curve": best_of_n_curve(items, constant, ks, **boot).as_dict(),
        }
        with build_runtime(LENGTH_SCORER, {}, progress=False) as rt:
            values = rt.score(self._requests(items, by_id, {}, False))
        lengths, chosen, rejected, pos = {}, [], [], 0
        for item in items:
            size = len(item.texts)
            lengths[item.record_id] = list(values[pos : pos + size])
            chosen.append(values[pos + size])
            rejected.append(values[pos + size + 1])
            pos += size + 2
        outcomes = pair_outcomes([i.record_id for i in items], chosen, rejected)
        out["length"] = {
            "description": "the longest candidate (words) wins",
            "curve": best_of_n_curve(items, lengths, ks, **boot).as_dict(),
            "pair_accuracy": bootstrap_ci(
                [o["correct"] for o in outcomes.values()], **boot
            ).as_dict(),
        }
        gold = {i.record_id: list(i.qualities) for i in items}
        out["gold-best"] = {
            "description": "the best candidate by quality (upper bound)",
            "curve": best_of_n_curve(items, gold, ks, **boot).as_dict(),
        }
        return out


__all__ = [
    "DEFAULT_N",
    "BestOfNEvaluator",
    "BestOfNOptions",
    "check_pointwise",
    "parse_scorer_spec",
    "spec_labels",
]
