"""The options every scorer takes that the scorer runtime handles, and splitting them out.

They are given with the scorer's own options (``--model_args``, a reward server's config, ...);
:func:`split_options` takes them out and validates both halves before a scorer is built
(:func:`prbench.scoring.spec.build_runtime`, and the commands that check a scorer first).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from prbench.options import OptionsError, option_fields, suggest
from prbench.scoring.inputs import DEFAULT_INPUT_CHARS

#: Requests per chunk sent to the scorer (and committed to the cache) by default, for a scorer
#: that names no default of its own (``default_chunk_size()``; ``hf-classifier`` names one per
#: device, see docs/scale.md).
DEFAULT_CHUNK_SIZE = 256

#: Seconds one scorer call (one chunk) may take by default: generous, yet never forever.
DEFAULT_TIMEOUT = 1800.0

@dataclasses.dataclass(frozen=True)
class RuntimeOptions:
    """Options every scorer takes, handled by the runtime rather than the scorer.

    They are given with the scorer's own options (``--model_args``, a reward server's config, ...)
    and taken out before the rest is validated against the scorer's options. A scorer whose own
    options declare a field of the same name (e.g. ``progress``) gets the value too.
    """

    cache: bool = dataclasses.field(
        default=True,
        metadata={"help": "use the persistent score cache (scorers with a fingerprint only)"},
    )
    cache_path: str = dataclasses.field(
        default="", metadata={"help": "score-cache SQLite file (default: <prbench cache>/scores/)"}
    )
    chunk_size: int = dataclasses.field(
        default=0,
        metadata={"help": "requests per scorer call; each chunk is cached before the next. 0 = "
                  "auto: the scorer's default for its device (hf-classifier: 2048 on a GPU, "
                  "256 on a CPU, both measured), else 256", "ge": 0, "le": 1_048_576},
    )
    progress: bool = dataclasses.field(default=True, metadata={"help": "show a progress bar"})
    call_timeout: float = dataclasses.field(
        default=DEFAULT_TIMEOUT,
        metadata={"help": "seconds one scorer call (one chunk) may take before the run ends with "
                  "an error (chunks scored before it stay cached); 0 = no limit. Not `timeout`: "
                  "judges and served RMs use that name for one HTTP request",
                  "ge": 0, "le": 7 * 86_400},
    )
    record_input: bool = dataclasses.field(
        default=True,
        metadata={"help": "record in the samples file (--log_samples) the input each answer was "
                  "scored from: text or messages, tokens, truncation, time share "
                  "(`scored_input`); false leaves it out"},
    )
    record_input_chars: int = dataclasses.field(
        default=DEFAULT_INPUT_CHARS,
        metadata={"help": "record_input: the most characters kept of each input text (of each "
                  "message's content for chat inputs); the length and sha256 always cover the "
                  "whole text", "ge": 1, "le": 10_000_000},
    )


#: The option names the runtime takes out of a scorer's options.
RUNTIME_KEYS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(RuntimeOptions))


def split_options(
    component: Any, raw: Mapping[str, Any] | None
) -> tuple[RuntimeOptions, dict[str, Any]]:
    """Split raw options into the runtime's and the scorer's, and validate both.

    Args:
        component: the registered scorer (:class:`prbench.plugins.Component`).
        raw: option names to values (strings are coerced as for any component).

    Returns:
        The runtime options and the raw scorer options (runtime keys the scorer also declares stay
        in them).

    Raises:
        OptionsError: an option neither the runtime nor the scorer knows (with suggestions from
            both), or a bad runtime value.
    """
    from prbench.options import parse_options

    raw = dict(raw or {})
    scorer_fields = {f.name for f in option_fields(component.options)}
    known = scorer_fields | set(RUNTIME_KEYS)
    where = f"{component.kind} {component.name!r}"
    for key in raw:
        if key not in known:
            listing = ", ".join(sorted(known))
            raise OptionsError(
                f"{where}: unknown option {key!r}{suggest(key, known)}; its options are: {listing}"
            )
    runtime_raw = {k: raw[k] for k in RUNTIME_KEYS if k in raw}
    runtime = parse_options(RuntimeOptions, runtime_raw, component=f"{where} (runtime)")
    assert runtime is not None
    if runtime.chunk_size < 0:
        raise OptionsError(
            f"{where}: option 'chunk_size' must be at least 1 (or 0: the scorer's default), got "
            f"{runtime.chunk_size}"
        )
    if not runtime.call_timeout >= 0:  # NaN too
        raise OptionsError(
            f"{where}: option 'call_timeout' must be 0 (no limit) or a number of seconds, got "
            f"{runtime.call_timeout}"
        )
    scorer_raw = {k: v for k, v in raw.items() if k not in RUNTIME_KEYS or k in scorer_fields}
    return runtime, scorer_raw
