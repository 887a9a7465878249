"""What lm-eval saves and prints under ``prbench eval``: results captured, tables hidden.

:func:`capture_lm_eval` has lm-eval's ``run`` command build prbench's evaluation tracker (an
``EvaluationTracker`` subclass, :func:`prbench.harness.run_files.tracker_class`) for one run: the
results and samples are written as strict JSON (no bare NaN) and the results, where they went and
the run's date id are handed back for prbench's summary and manifest; a prbench run's folder is
``prbench-<scorer>``. Without ``--show_lm_eval_tables`` lm-eval's own results tables (and the
run line above them) are left out of standard output: prbench's summary is the results table.
"""

from __future__ import annotations

import contextlib
import io
import sys
from collections.abc import Iterator
from typing import Any


class _HideTables(io.TextIOBase):
    """Standard output without lm-eval's results tables and its run line above them."""

    def __init__(self, target: Any) -> None:
        self.target = target
        self.pending = ""

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        self.pending += text
        *lines, self.pending = self.pending.split("\n")
        for line in lines:
            if line == HIDDEN_TABLE or RUN_LINE in line:
                continue
            self.target.write(line + "\n")
        return len(text)

    def flush(self) -> None:
        if self.pending and self.pending != HIDDEN_TABLE:
            self.target.write(self.pending)
        self.pending = ""
        self.target.flush()


#: what lm-eval's ``make_table`` returns under ``prbench eval`` without --show_lm_eval_tables
HIDDEN_TABLE = "\x00prbench: lm-eval table hidden\x00"
#: a piece of the line lm-eval prints above its tables (model, model args, limit, batch size)
RUN_LINE = "), gen_kwargs: ("


@contextlib.contextmanager
def capture_lm_eval(*, tables: bool = True) -> Iterator[dict[str, Any]]:
    """Capture the results lm-eval saves and where it saves them; name unnamed prbench runs.

    Args:
        tables: print lm-eval's results tables (and the run line above them); otherwise only
            prbench's summary is the results table.
    """
    import lm_eval.utils

    from prbench.harness.run_files import use_tracker
    from prbench.harness.summary import table_view

    captured: dict[str, Any] = {}
    original_table = lm_eval.utils.make_table

    def make_table(result_dict: dict, column: str = "results", sort_results: bool = False) -> str:
        if not tables:
            return HIDDEN_TABLE
        return original_table(table_view(result_dict), column, sort_results)

    loggers, tracker_before = use_tracker(captured)
    lm_eval.utils.make_table = make_table
    hide = contextlib.nullcontext() if tables else contextlib.redirect_stdout(
        _HideTables(sys.stdout))
    try:
        with hide as stream:
            yield captured
            if stream is not None:
                stream.flush()
    finally:
        loggers.EvaluationTracker = tracker_before
        lm_eval.utils.make_table = original_table
