"""The scorer itself. A real RM plugin imports torch/transformers here, not in plugin.py."""

from __future__ import annotations

import re
from collections.abc import Sequence

from prbench.api import ScoreRequest
from prbench_plugin_template.plugin import QuestionOverlapOptions

_WORD = re.compile(r"[a-z0-9']+")


class QuestionOverlapScorer:
    """Scores an answer by how many of the question's (and profile's) words it reuses."""

    def __init__(self, options: QuestionOverlapOptions) -> None:
        self.options = options

    def _words(self, text: str) -> set[str]:
        return {w for w in _WORD.findall(text.lower()) if len(w) >= self.options.min_word_length}

    def score(self, requests: Sequence[ScoreRequest]) -> list[float]:
        """One score in [0, 1] per request, in request order."""
        out = []
        for r in requests:
            target = self._words(r.question)
            if self.options.use_profile:
                target |= self._words(r.profile.text)
            answer = self._words(r.response)
            out.append(len(target & answer) / len(target) if target else 0.0)
        return out
