"""``profile-vocabulary``: how much of an answer's vocabulary comes from the user's own posts."""

from __future__ import annotations

import re
from collections.abc import Sequence

from prbench.api import ScoreRequest
from prbench_plugin_example_second.plugin import ProfileVocabularyOptions

_WORD = re.compile(r"[a-z0-9']+")


class ProfileVocabularyScorer:
    """Scores an answer by the share of its distinct content words that the shown profile uses."""

    def __init__(self, options: ProfileVocabularyOptions) -> None:
        self.options = options

    def _words(self, text: str) -> set[str]:
        return {w for w in _WORD.findall(text.lower()) if len(w) >= self.options.min_word_length}

    def score(self, requests: Sequence[ScoreRequest]) -> list[float]:
        """One score in [0, 1] per request, in request order (0 when no profile is shown)."""
        out = []
        for r in requests:
            answer = self._words(r.response)
            profile = self._words(r.profile.text)
            out.append(len(answer & profile) / len(answer) if answer else 0.0)
        return out
