"""The plugin API: everything a prbench plugin may import, in one module.

A plugin (a scorer, a judge, a profile builder, a task folder; see "Plugin API" in
docs/plugin-api.md) imports prbench only from here::

    from prbench.api import ScoreRequest, fingerprint_of, hookimpl

and its tests from here and from :mod:`prbench.testing`. Every other module under ``prbench`` is
internal: it may be renamed, split or changed in any release. The names below keep their meaning
within one major version of :data:`API_VERSION`; from the first release on, a name is removed or
changed only after one minor release in which it still works and is documented as deprecated.
``tests/test_plugin_api.py`` fails when a plugin under ``plugins/`` imports anything else from
prbench. API 2.0 (before any release, so without a deprecation period) removed eight names that no
plugin needs; "Plugin API" in docs/plugin-api.md lists them with what to use instead.

Importing this module is cheap (no torch, transformers or numpy); the heavy libraries are imported
inside the functions and classes that need them.

Names, by what a plugin uses them for (each object's own docstring is the reference):

Registering components (the hook module):
    ``hookimpl`` marks hook functions; ``ComponentRegister`` is the type of ``register`` in
    ``register_scorers``/``register_profile_builders``/...; ``TaskDirRegister`` the type of
    ``register`` in ``register_task_dirs``.
Component contracts (typing protocols a component implements):
    ``Scorer`` (``score(requests)``), ``PairwiseJudge`` (``compare(pairs)``), ``ProfileBuilder``
    (``build(records)``), ``PairGenerator`` (``settings()`` and ``generate(records)``).
Errors:
    ``PrbenchUserError`` (the base of every bad-input error: the command line shows it as one
    ``error:`` line, never a traceback; a plugin's own refusals derive from it).
Options:
    ``OptionsError`` (a bad option, shown to the user as one ``error:`` line), ``parse_options``
    (a mapping of strings to an options dataclass), ``options_to_dict`` (the reverse, for
    ``describe()``), ``read_option_file`` (the text of a file an option names: a regular file
    under a size cap, one error line naming the option otherwise; added in 1.2).
Requests and results:
    ``ScoreRequest`` (one response to score), ``PairRequest`` (one pair for a pairwise judge),
    ``UnscoredInputs`` (a mixin giving ``request_extras``/``failures`` to a scorer that leaves
    inputs unscored with a reason; added in 1.3), ``ProfileView`` (the profile a request
    carries; also what a profile builder returns), ``POST_FORMAT`` and ``render_posts`` (the
    benchmark's rendering of profile posts).
Records and data:
    ``Record`` (``Record.user``: the user it belongs to; added in 2.0), ``ProfileItem``,
    ``load_records``, ``file_hashes`` (``{}`` for a hub id), ``SAMPLE_DIR``,
    ``PREFERENCES_SAMPLE_DIR``; profile builders: ``builder_id`` (the provenance id of a builder
    and its options), ``top_k`` and ``ranked_view`` (rank posts, ties in post order, token budget
    applied); per-user preference pairs: ``user_preferences`` (grouped by ``Record.user``), which
    returns a ``UserPreferences`` of ``Pref`` pairs.
Caching, batching, devices, progress:
    ``fingerprint_of`` (the identity of a scorer's scores), ``BatchStats`` and ``run_batches``
    (token-budgeted, length-sorted batching with out-of-memory back-off),
    ``uncounted_if_out_of_memory``, ``build_runtime`` (scores through the cached scorer runtime),
    ``SQLiteStore`` (base of an on-disk cache), ``cache_dir``, ``resolve_device``,
    ``torch_device``, ``progress_bar``, ``disable_progress``; ``ScorerReward`` (a scorer as a TRL
    reward function, for an RL script of your own).
Hugging Face sequence classifiers and chat inputs:
    ``HFClassifierOptions`` and ``HFClassifierScorer`` (the built-in ``hf-classifier`` scorer, to
    subclass), ``model_identity``, ``ChatEncoder``, ``build_chat``, ``ChatRenderOptions`` /
    ``ProfileRenderOptions`` (the shared chat-rendering options to inherit; their fields carry the
    default formats) and ``profile_texts`` (each request's profile as an encoder shows it).
    The input as scored (a scorer's optional ``request_inputs(requests, *, sent)``, written to
    the samples file): ``encoded_records`` (the records of a ``ChatEncoder``'s inputs: text,
    tokens, the cut, the profile's span), ``shown_profiles`` (the profile text each request
    shows) and ``kept_inputs`` (what the last call kept for each request); added in 2.1.
Embeddings:
    ``Encoder``, ``EncoderSpec``, ``EmbeddingCache`` (rows keyed by the sha256 hex of a text's
    UTF-8 bytes), ``resolve_model``,
    ``ModelUnavailableError``, ``remote_code_error``.
Generation backends and LLM judges:
    ``Chat``, ``Reply``, ``Completion``, ``GenerationBackend``, ``GenerationFailure``,
    ``BackendFatalError``, ``is_truncated``, ``truncation_failure``, ``BackendOptions``,
    ``LLMJudgeBase``, ``OrderTally``, ``generate_in_batches``, ``seeded_unit``, ``stable_hash``,
    ``aggregate_order_metrics``. In 1.4 ``OrderTally.order`` took the optional ``reply`` (the text
    the verdict was read from, kept for the samples file and the pair explorer) and
    ``GenerationFailure`` the field ``text`` (a cut reply's text).
Parsing judge replies:
    ``ParseFailure``, ``generation_failed``, ``strip_reasoning``, ``parse_pairwise``,
    ``parse_rating``.
Statistics:
    ``pair_outcome`` (strict per-pair accuracy, ties and margin), ``compare_paired`` (paired
    bootstrap difference of two scorers' per-pair accuracies).

The task class for a plugin's task YAML is not imported by Python code and is named in the YAML:
``class: !function prbench.harness.plugin_task.PersonalizedRewardBenchTask``. That dotted path is
part of this API too.
"""

from __future__ import annotations

from prbench.analysis.paired import compare as compare_paired
from prbench.backends.base import (
    BackendFatalError,
    Chat,
    Completion,
    GenerationBackend,
    GenerationFailure,
    Reply,
    is_truncated,
    truncation_failure,
)
from prbench.backends.chat_inputs import ChatEncoder, build_chat, profile_texts
from prbench.backends.chat_options import ChatRenderOptions, ProfileRenderOptions
from prbench.backends.hf_classifier import HFClassifierScorer
from prbench.backends.hf_classifier_options import HFClassifierOptions
from prbench.backends.input_record import encoded_records, kept_inputs, shown_profiles
from prbench.devices import resolve_device, torch_device
from prbench.downstream.rl import ScorerReward
from prbench.errors import PrbenchUserError
from prbench.hashing import seeded_unit, stable_hash
from prbench.hookspecs import ComponentRegister, TaskDirRegister, hookimpl
from prbench.judges.common import BackendOptions, LLMJudgeBase, generate_in_batches
from prbench.judges.order_metrics import aggregate as aggregate_order_metrics
from prbench.judges.order_tally import OrderTally
from prbench.judges.parsing import (
    ParseFailure,
    generation_failed,
    parse_pairwise,
    parse_rating,
    strip_reasoning,
)
from prbench.metrics import pair_outcome
from prbench.model_ref import ModelUnavailableError, remote_code_error, resolve_model
from prbench.oom import uncounted_if_out_of_memory
from prbench.options import OptionsError, options_to_dict, parse_options, read_option_file
from prbench.pairs.base import PairGenerator
from prbench.paths import cache_dir
from prbench.preference_data import Pref, UserPreferences, user_preferences
from prbench.profiles.base import POST_FORMAT, ProfileBuilder, ProfileView, render_posts
from prbench.profiles.budget import builder_id, ranked_view, top_k
from prbench.profiles.embed import Encoder, EncoderSpec
from prbench.profiles.embed_cache import EmbeddingCache
from prbench.progress import disable_progress, progress_bar
from prbench.records import (
    PREFERENCES_SAMPLE_DIR,
    SAMPLE_DIR,
    ProfileItem,
    Record,
    file_hashes,
    load_records,
)
from prbench.scoring.base import (
    PairRequest,
    PairwiseJudge,
    Scorer,
    ScoreRequest,
    UnscoredInputs,
)
from prbench.scoring.cache import fingerprint_of, model_identity
from prbench.scoring.engine import BatchStats, run_batches
from prbench.scoring.spec import build_runtime
from prbench.store import SQLiteStore

#: The plugin API's version, ``MAJOR.MINOR``. MINOR grows when names are added (or deprecated);
#: MAJOR grows when a name is removed or changes meaning. A plugin may check it at import time.
API_VERSION = "2.1"

__all__ = [
    "API_VERSION",
    "POST_FORMAT",
    "PREFERENCES_SAMPLE_DIR",
    "SAMPLE_DIR",
    "BackendFatalError",
    "BackendOptions",
    "BatchStats",
    "Chat",
    "ChatEncoder",
    "ChatRenderOptions",
    "Completion",
    "ComponentRegister",
    "EmbeddingCache",
    "Encoder",
    "EncoderSpec",
    "GenerationBackend",
    "GenerationFailure",
    "HFClassifierOptions",
    "HFClassifierScorer",
    "LLMJudgeBase",
    "ModelUnavailableError",
    "OptionsError",
    "OrderTally",
    "PairGenerator",
    "PairRequest",
    "PairwiseJudge",
    "ParseFailure",
    "PrbenchUserError",
    "Pref",
    "ProfileBuilder",
    "ProfileItem",
    "ProfileRenderOptions",
    "ProfileView",
    "Record",
    "Reply",
    "SQLiteStore",
    "ScoreRequest",
    "Scorer",
    "ScorerReward",
    "TaskDirRegister",
    "UnscoredInputs",
    "UserPreferences",
    "aggregate_order_metrics",
    "build_chat",
    "build_runtime",
    "builder_id",
    "cache_dir",
    "compare_paired",
    "disable_progress",
    "encoded_records",
    "file_hashes",
    "fingerprint_of",
    "generate_in_batches",
    "generation_failed",
    "hookimpl",
    "is_truncated",
    "kept_inputs",
    "load_records",
    "model_identity",
    "options_to_dict",
    "pair_outcome",
    "parse_options",
    "parse_pairwise",
    "parse_rating",
    "profile_texts",
    "progress_bar",
    "ranked_view",
    "read_option_file",
    "remote_code_error",
    "render_posts",
    "resolve_device",
    "resolve_model",
    "run_batches",
    "seeded_unit",
    "shown_profiles",
    "stable_hash",
    "strip_reasoning",
    "top_k",
    "torch_device",
    "truncation_failure",
    "uncounted_if_out_of_memory",
    "user_preferences",
]
