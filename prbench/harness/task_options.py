"""What a ``personalized_rewardbench`` task asks for: its ``prbench_*`` keys, validated.

lm-eval passes ``--model_args`` and ``--metadata`` merged as keyword arguments; the keys read here
all start with ``prbench_`` (an unknown ``prbench_`` key is an error, anything else is ignored):

- ``prbench_data``: a file, a folder of per-domain files, ``sample`` or a hub dataset id.
- ``prbench_revision``, ``prbench_split``: hub revision (default
  :data:`prbench.records.HUB_REVISION`, ``main``, not pinned to a commit yet) and split.
- ``prbench_profile``: the profile builder of the profile condition (default ``dense``).
- ``prbench_profile_k``: its ``k`` (posts kept), for builders that have that option.
- ``prbench_profile_options``: further builder options, a JSON object.
- ``prbench_ranked``: a ranking file written by ``prbench rank``: the ``dense`` condition reads
  its top-k from it instead of embedding (the ``ranked`` builder, which checks that the file was
  ranked from these records with the encoder the condition's options name).
- ``prbench_profile_source``: whose posts the profile is built from, ``own`` (default),
  ``swapped`` (another user's of the same domain), ``shuffled`` (k random own posts) or ``none``
  (:mod:`prbench.profiles.sources`); the ``_swapped`` / ``_shuffled`` task variants set it.
- ``prbench_profile_swap_seed``: the seed of the swap derangement and the shuffled draws
  (default :data:`prbench.profiles.sources.DEFAULT_SWAP_SEED`).

The task YAML fixes ``prbench_domain``, ``prbench_condition`` and ``prbench_default_data`` through
``dataset_kwargs``.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from typing import Any

from prbench.options import OptionsError, as_mapping, suggest

#: the condition without a profile, and the one with the retrieved posts
CONDITIONS = ("noprofile", "profile")
DEFAULT_PROFILE_BUILDER = "dense"
DEFAULT_PROFILE_K = 5
#: the ``prbench_domain`` value of the task that keeps every record, whatever its domain
ALL_DOMAINS = "*"

USER_KEYS = (
    "prbench_data",
    "prbench_revision",
    "prbench_split",
    "prbench_profile",
    "prbench_profile_k",
    "prbench_profile_options",
    "prbench_ranked",
    "prbench_profile_source",
    "prbench_profile_swap_seed",
)
TASK_KEYS = ("prbench_domain", "prbench_condition", "prbench_default_data")
#: optional task defaults for the default builder (the published tasks retrieve with contriever,
#: top-10, as the paper does); user keys override them
TASK_DEFAULT_KEYS = (
    "prbench_default_profile_options", "prbench_default_profile_k",
    "prbench_default_profile_source",
)


@dataclasses.dataclass(frozen=True)
class DataRequest:
    """What one task asks :func:`load_docs` for (validated keyword arguments).

    Attributes:
        source: the data source.
        revision: the hub revision (hub ids only).
        split: the hub split.
        domain: the domain to keep, or :data:`ALL_DOMAINS`.
        condition: ``noprofile`` or ``profile``.
        builder: the profile builder id (``none`` for ``noprofile``).
        builder_options: its options.
        profile_source: whose posts the profile is built from
            (:data:`prbench.profiles.sources.PROFILE_SOURCES`; ``none`` for ``noprofile``).
        swap_seed: the seed of the swap derangement and the shuffled draws.
    """

    source: str
    revision: str | None
    split: str
    domain: str
    condition: str
    builder: str
    builder_options: dict[str, Any]
    profile_source: str = "own"
    swap_seed: int = 0


def parse_request(kwargs: Mapping[str, Any]) -> DataRequest:
    """Validate the keyword arguments lm-eval passes to ``custom_dataset``.

    Raises:
        OptionsError: an unknown ``prbench_`` key, a missing task key or a bad value.
    """
    known = set(USER_KEYS) | set(TASK_KEYS) | set(TASK_DEFAULT_KEYS)
    for key in kwargs:
        if key.startswith("prbench_") and key not in known:
            raise OptionsError(
                f"unknown --metadata key {key!r}{suggest(key, known)}; prbench reads: "
                + ", ".join(USER_KEYS)
            )
    missing = [k for k in TASK_KEYS if k not in kwargs]
    if missing:
        raise OptionsError(f"the task YAML must set dataset_kwargs {missing}")
    condition = str(kwargs["prbench_condition"])
    if condition not in CONDITIONS:
        raise OptionsError(f"prbench_condition must be one of {CONDITIONS}, got {condition!r}")
    source = kwargs["prbench_default_data"]
    if "prbench_data" in kwargs:
        given = kwargs["prbench_data"]
        if not isinstance(given, str):
            raise OptionsError(
                f"prbench_data must be a path string (a file, a folder, `sample` or a hub "
                f"dataset id), got {type(given).__name__} {json.dumps(given, default=str)}; "
                'e.g. --metadata \'{"prbench_data": "data/my.jsonl"}\''
            )
        if not given.strip():
            raise OptionsError(
                "prbench_data is empty: give a file, a folder, `sample` or a hub dataset id, or "
                "leave the key out for the task's own data"
            )
        source = given
    if not str(source).strip():  # the custom tasks: the user's data, never a silent sample
        raise OptionsError(
            "the personalized_rewardbench_custom tasks evaluate your own records: add --metadata "
            '\'{"prbench_data": "PATH"}\' (a file or folder `prbench validate` accepts, or a hub '
            "dataset id); for the bundled sample run --tasks personalized_rewardbench_sample"
        )
    revision = kwargs.get("prbench_revision")
    from prbench.profiles.sources import resolve_seed, resolve_source

    profile_source = resolve_source(kwargs)
    swap_seed = resolve_seed(kwargs)
    if profile_source == "none":
        builder, options = "none", {}
    else:
        builder = str(kwargs.get("prbench_profile") or DEFAULT_PROFILE_BUILDER)
        options = {}
        k = DEFAULT_PROFILE_K
        # the task's own retrieval defaults, whether the built-in is named bare or qualified
        if builder in (DEFAULT_PROFILE_BUILDER, f"prbench/{DEFAULT_PROFILE_BUILDER}"):
            key = "prbench_default_profile_options"
            options.update(as_mapping(kwargs.get(key) or {}, key))
            k = kwargs.get("prbench_default_profile_k", k)
        key = "prbench_profile_options"
        options.update(as_mapping(kwargs.get(key) or {}, key))
        k = kwargs.get("prbench_profile_k", k)
        if k is not None and "k" not in options:
            options["k"] = k
        if kwargs.get("prbench_ranked"):
            if profile_source == "shuffled":
                raise OptionsError(
                    "prbench_ranked cannot serve profile_source=shuffled: shuffled draws k "
                    "random posts instead of the retrieved ones, so no ranking is read; drop "
                    "prbench_ranked for the shuffled tasks"
                )
            builder, options = _ranked_instead(builder, options, str(kwargs["prbench_ranked"]))
    return DataRequest(
        source=str(source),
        revision=None if revision in (None, "") else str(revision),
        split=str(kwargs.get("prbench_split") or "test"),
        domain=str(kwargs["prbench_domain"]),
        condition=condition,
        builder=builder,
        builder_options=options,
        profile_source=profile_source,
        swap_seed=swap_seed,
    )


def _ranked_instead(
    builder: str, options: dict[str, Any], path: str
) -> tuple[str, dict[str, Any]]:
    """The ``ranked`` builder reading ``path`` in place of the ``dense`` condition's builder."""
    if builder != DEFAULT_PROFILE_BUILDER:
        raise OptionsError(
            f"prbench_ranked stands in for the {DEFAULT_PROFILE_BUILDER!r} profile builder; it "
            f"cannot be combined with prbench_profile={builder!r}"
        )
    from prbench.plugins import get_registry
    from prbench.profiles.ranked import ranked_options_from_dense

    dense = get_registry().get("profile-builder", builder).parse_options(options)
    return "ranked", ranked_options_from_dense(dense, path)


def task_profile(config: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """The profile builder and options a task config (from lm-eval's results) asks for.

    Reads the task's ``dataset_kwargs`` and ``metadata`` as :func:`load_docs` does; for
    summaries and manifests. ``("none", {})`` for the question-only condition.
    """
    kwargs = {**(config.get("metadata") or {}), **(config.get("dataset_kwargs") or {})}
    try:
        req = parse_request(kwargs)
    except OptionsError:
        return str(kwargs.get("prbench_profile") or "?"), {}
    return req.builder, dict(req.builder_options)


def task_profile_source(config: Mapping[str, Any]) -> tuple[str, int]:
    """The profile source and swap seed a task config asks for (``("?", 0)`` if invalid)."""
    from prbench.profiles.sources import resolve_seed, resolve_source

    kwargs = {**(config.get("metadata") or {}), **(config.get("dataset_kwargs") or {})}
    try:
        return resolve_source(kwargs), resolve_seed(kwargs)
    except OptionsError:
        return "?", 0


__all__ = [
    "ALL_DOMAINS",
    "CONDITIONS",
    "DEFAULT_PROFILE_BUILDER",
    "DEFAULT_PROFILE_K",
    "TASK_DEFAULT_KEYS",
    "TASK_KEYS",
    "USER_KEYS",
    "DataRequest",
    "parse_request",
    "task_profile",
    "task_profile_source",
]
