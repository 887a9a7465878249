from prbench.plugins import PluginRegistry
from prbench.scoring.base import ScoreRequest


def test_registered_through_the_entry_point() -> None:
    registry = PluginRegistry()
    info = registry.plugins["template"]
    assert info.origin == "entry-point"
    assert info.dist == "prbench-plugin-template"
    assert info.components == ["scorer:question-overlap"]
    assert registry.get("scorer", "template/question-overlap").plugin == "template"


def test_scores_follow_question_overlap_in_order() -> None:
    scorer = PluginRegistry().build("scorer", "question-overlap", {"min_word_length": "3"})
    requests = [
        ScoreRequest("r1", "Which lens suits night photography?", "Any phone works."),
        ScoreRequest(
            "r1", "Which lens suits night photography?", "A fast lens for night photography."
        ),
    ]
    low, high = scorer.score(requests)
    assert low == 0.0
    assert high == 0.6  # lens, night, photography of {which, lens, suits, night, photography}
    assert scorer.score(requests[::-1]) == [high, low]
