"""What handing a scorer copies of its requests costs, against ``copy.deepcopy``.

The scorer runtime gives every scorer its own copies of the requests
(:func:`prbench.scoring.base.isolated`), so a scorer that changes a request or its shared profile
view changes nothing else. This times that copy per request for a profile of ``--posts`` posts
(each with an ``extra`` mapping, as ``prbench rank`` rows carry retrieval scores) and, in the same
run, the baseline ``copy.deepcopy`` of the same requests, and prints both and their ratio.

Example:
  python benchmarks/bench_request_copies.py --posts 10 --requests 20000
"""

from __future__ import annotations

import argparse
import copy
import time

from prbench.profiles.base import ProfileView
from prbench.records import ProfileItem
from prbench.scoring.base import ScoreRequest, isolated


def _requests(n: int, posts: int) -> list[ScoreRequest]:
    items = tuple(ProfileItem(id=f"p{i}", category="Misc", text="a post of forty words " * 8,
                              extra={"score": 0.5}) for i in range(posts))
    view = ProfileView(text="\n".join(i.text for i in items), items=items, n_tokens=40 * posts,
                       builder=f"dense(k={posts})", extra={"scores": [0.5] * posts})
    return [ScoreRequest(record_id=f"r{i // 2}", question="How do I keep a habit?",
                         response="An answer of about a hundred words. " * 10, profile=view)
            for i in range(n)]


def _best_of(repeats: int, fn: object, requests: list[ScoreRequest]) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn(requests)  # type: ignore[operator]
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    """Time both copies and print µs per request and the ratio."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--posts", type=int, default=10, help="posts per profile view")
    parser.add_argument("--requests", type=int, default=20000, help="requests per timing")
    parser.add_argument("--repeats", type=int, default=3, help="timings; the best is kept")
    args = parser.parse_args()
    requests = _requests(args.requests, args.posts)
    ours = _best_of(args.repeats, isolated, requests)
    base = _best_of(args.repeats, lambda rs: [copy.deepcopy(r) for r in rs], requests)
    per = 1e6 / args.requests
    print(f"{args.requests} requests, {args.posts} posts per profile view")
    print(f"isolated():     {ours * per:8.1f} us per request")
    print(f"copy.deepcopy:  {base * per:8.1f} us per request (baseline)")
    print(f"ratio deepcopy / isolated: {base / ours:.2f}x")


if __name__ == "__main__":
    main()
