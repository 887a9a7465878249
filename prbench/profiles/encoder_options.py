"""The encoder options shared by the ``dense`` builder and the ``embedding-similarity`` scorer.

Both components take the same encoder options (``model``, ``encoder``, ``revision``,
``max_length``, ``batch_size``, ``device``, ``embed_cache``, ``cache_dir``, ``trust_remote_code``,
``embed_dtype``, ``embed_backend``, ``embed_threads``).
The embedding cache switch is ``embed_cache``, not ``cache``: a scorer's ``cache`` is the scorer
runtime's score cache (:mod:`prbench.scoring.runtime`), so ``cache=false`` turns off exactly one
cache, and ``embed_cache=false`` the other.
Their options dataclasses declare these fields with :func:`encoder_option`, which supplies the
shared default and help text, and inherit the checks and the
:class:`~prbench.profiles.embed.Encoder` the options describe from :class:`EncoderOptions`.

The fields are declared in each component rather than inherited as dataclass fields because a
dataclass puts inherited fields first, and the order of a component's fields is visible: it is
the order ``prbench scorers --options`` lists them in, and the order of the non-default options in
a profile builder's id (:func:`prbench.profiles.budget.builder_id`).

Importing this module is cheap (no numpy or torch).
"""

from __future__ import annotations

from typing import Any, Literal

from prbench.devices import EMBED_DTYPES, check_thread_count
from prbench.model_ref import check_model_name
from prbench.profiles.budget import RANKED_OPTIONS, check_positive, table_option
from prbench.profiles.embed import ENCODER_KINDS, Encoder, EncoderKind, EncoderSpec
from prbench.profiles.embed_backend import check_embed_backend

#: The default and help text of each encoder option (a component may give its own help text).
ENCODER_OPTIONS: dict[str, tuple[Any, str]] = {
    "model": ("minilm", "minilm (bundled MiniLM), contriever, a hub id or a local folder"),
    "encoder": ("auto", "auto | sentence-transformers | transformers-mean (mean pooling)"),
    "revision": (None, "hub revision (branch, tag or commit) of the model"),
    "max_length": (None, "encoder truncation in tokens; none = the model's limit"),
    "batch_size": (None, "texts per forward pass; none = the measured default of the device "
                   "kind (16 on a CPU, 512 on a GPU), halved while a batch runs out of memory"),
    "device": ("auto", "auto | cpu | cuda | cuda:N"),
    "embed_cache": (True, "read/write the on-disk embedding cache (not the score cache: that "
                    "is the runtime option cache)"),
    "cache_dir": (None, "embedding cache folder; none = the prbench cache"),
    "trust_remote_code": RANKED_OPTIONS["trust_remote_code"],
    "embed_dtype": ("auto", "auto | float32 | bfloat16 (autocast) | bfloat16-weights: auto = "
                    "bf16 autocast on a CPU with AMX, else float32 (bf16 measured slower on "
                    "CPUs with avx512_bf16 alone and on GPUs)"),
    "embed_backend": ("auto", "auto | torch | openvino: the runtime of the encoder; auto = "
                      "OpenVINO bf16 on a CPU with AMX, else the faster of torch and OpenVINO "
                      "measured once on this CPU (fp32), torch on a GPU or without the "
                      "openvino package"),
    "embed_threads": ("auto", "CPU threads: auto = torch's count, fewer when other processes "
                      "want cores now (the run queue), or a count from 1 to this machine's "
                      "CPU count"),
}

#: The type of the ``embed_threads`` option (a count or ``auto``).
EmbedThreads = int | Literal["auto"]


def encoder_option(name: str, help: str | None = None) -> Any:
    """A dataclass field for the shared encoder option ``name`` (see :func:`table_option`)."""
    return table_option(ENCODER_OPTIONS, name, help)


class EncoderOptions:
    """Base of the options dataclasses that declare the encoder options with :func:`encoder_option`.

    Provides the checks of those options (call :meth:`check_encoder_options` from
    ``__post_init__``) and builds the encoder they describe.
    """

    model: str
    encoder: EncoderKind
    revision: str | None
    max_length: int | None
    batch_size: int | None
    device: str
    embed_cache: bool
    cache_dir: str | None
    trust_remote_code: bool
    embed_dtype: str
    embed_backend: str
    embed_threads: EmbedThreads

    def check_encoder_options(self) -> None:
        """Check ``encoder``, ``embed_dtype``, ``embed_backend``, ``embed_threads`` and the sizes.

        Raises:
            ValueError: an unknown encoder kind or precision, a size below 1, or more threads
                than this machine has CPUs (naming the option).
        """
        check_model_name(self.model, "option 'model'", ValueError)  # no 40,000-character path
        if self.encoder not in ENCODER_KINDS:
            raise ValueError(f"option 'encoder' must be one of {ENCODER_KINDS}")
        if self.embed_dtype not in EMBED_DTYPES:
            raise ValueError(f"option 'embed_dtype' must be one of {EMBED_DTYPES}")
        check_embed_backend(self.embed_backend)
        check_positive(self.batch_size, "batch_size")
        check_positive(None if self.embed_threads == "auto" else self.embed_threads,
                       "embed_threads")
        if self.embed_threads != "auto":
            check_thread_count(self.embed_threads)
        check_positive(self.max_length, "max_length")

    def make_encoder(self, model: str | None = None) -> Encoder:
        """The encoder these options describe.

        Args:
            model: the model to load instead of ``self.model`` (e.g. a synonym option's value).

        Raises:
            prbench.model_ref.ModelUnavailableError: the model cannot be found.
        """
        return Encoder(
            EncoderSpec(
                model=self.model if model is None else model,
                encoder=self.encoder,
                revision=self.revision,
                max_length=self.max_length,
                trust_remote_code=self.trust_remote_code,
                embed_dtype=self.embed_dtype,
                embed_backend=self.embed_backend,
            ),
            device=self.device,
            batch_size=self.batch_size,
            cache=self.embed_cache,
            cache_dir=self.cache_dir,
            threads=self.embed_threads,
        )
