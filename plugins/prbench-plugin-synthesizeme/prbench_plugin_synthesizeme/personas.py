"""Personas on disk, the optional per-user preference pairs, and the seeded splits of the method.

Personas are kept in one :class:`prbench.store.SQLiteStore` file (namespace
``synthesizeme-personas``; default ``<prbench cache>/synthesizeme/personas.sqlite``), one row per
(user, evidence, prompt version, model, decoding) key, with the induction prompt, the model that
wrote it, the demonstrations chosen for the user and how they were chosen, so
``sqlite3 personas.sqlite 'select user, model, persona from personas'`` shows what was used.
A failed induction is never stored.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from prbench.api import Pref, SQLiteStore, UserPreferences, seeded_unit, user_preferences
from prbench_plugin_synthesizeme.prompts import Demo

#: Table layout version of the ``synthesizeme-personas`` namespace.
SCHEMA_VERSION = 1

_TABLES = (
    "CREATE TABLE IF NOT EXISTS personas (key TEXT PRIMARY KEY, user TEXT NOT NULL, "
    "mode TEXT NOT NULL, persona TEXT NOT NULL, demos TEXT NOT NULL, prompt TEXT NOT NULL, "
    "model TEXT NOT NULL, details TEXT NOT NULL, created REAL NOT NULL)",
)


@dataclasses.dataclass
class Persona:
    """An induced persona with its provenance.

    Attributes:
        key: the cache key (user, evidence, prompt version, model, decoding).
        user: the record id it was induced for.
        mode: ``profile`` or ``preferences``.
        persona: the persona text.
        demos: the demonstrations selected for the judge prompt (``preferences`` mode).
        prompt: the induction chat, as sent.
        model: the backend fingerprint and model options that wrote it.
        details: counts of the fit (reasonings kept, validation accuracy per candidate demo set).
    """

    key: str
    user: str
    mode: str
    persona: str
    demos: list[Demo]
    prompt: list[dict[str, str]]
    model: dict[str, Any]
    details: dict[str, Any] = dataclasses.field(default_factory=dict)


class PersonaStore:
    """Personas by key in one SQLite file (see the module docstring)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.store = SQLiteStore(
            self.path, namespace="synthesizeme-personas", schema_version=SCHEMA_VERSION,
            tables=_TABLES, label="persona cache", off_hint="the option persona_cache=false",
        )

    def get(self, keys: Sequence[str]) -> dict[str, Persona]:
        """The stored personas among ``keys``."""
        rows = self.store.query_in(
            "SELECT key, user, mode, persona, demos, prompt, model, details FROM personas "
            "WHERE key IN ({marks})", keys,
        )
        return {
            r[0]: Persona(key=r[0], user=r[1], mode=r[2], persona=r[3], demos=json.loads(r[4]),
                          prompt=json.loads(r[5]), model=json.loads(r[6]),
                          details=json.loads(r[7]))
            for r in rows
        }

    def put(self, personas: Sequence[Persona]) -> None:
        """Store personas (a key stored again is replaced)."""
        now = time.time()
        self.store.write(
            "INSERT OR REPLACE INTO personas (key, user, mode, persona, demos, prompt, model, "
            "details, created) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [(p.key, p.user, p.mode, p.persona, json.dumps(p.demos), json.dumps(p.prompt),
              json.dumps(p.model, sort_keys=True), json.dumps(p.details, sort_keys=True), now)
             for p in personas],
        )

    def __len__(self) -> int:
        return int(self.store.query("SELECT COUNT(*) FROM personas")[0][0])

    def close(self) -> None:
        """Close the connection."""
        self.store.close()


def load_preferences(source: str) -> UserPreferences:
    """The per-user ``preferences`` of the records of ``source`` (file, folder, named source).

    Raises:
        ValueError: a malformed ``preferences`` field (file, line, record and item named), or
            records of one user with different preferences.
    """
    from prbench.api import load_records

    return user_preferences(load_records(source))


def seeded_order(seed: int, *parts: object) -> bool:
    """A seeded coin: ``True`` shows the first answer (or the chosen one) as A."""
    return seeded_unit("synthesizeme-order", seed, *parts) < 0.5


def split_preferences(prefs: Sequence[Pref], user: str, seed: int, val_fraction: float,
                      split: str = "shuffled") -> tuple[list[Pref], list[Pref]]:
    """(train, validation) split of a user's pairs; validation only with 3+ pairs.

    ``shuffled``: a seeded shuffle, ``round(n * val_fraction)`` pairs (at least one) validate.
    ``temporal``: the given (oldest-first) order is kept; the first ``int(n * (1 - val_fraction))``
    pairs train and the later ones validate, as the original implementation splits.
    """
    if split == "temporal":
        if len(prefs) < 3 or val_fraction <= 0:
            return list(prefs), []
        n_train = min(max(int(len(prefs) * (1 - val_fraction)), 1), len(prefs) - 1)
        return list(prefs[:n_train]), list(prefs[n_train:])
    order = sorted(range(len(prefs)), key=lambda i: (seeded_unit("split", seed, user, i), i))
    n_val = round(len(prefs) * val_fraction) if len(prefs) >= 3 else 0
    n_val = min(max(n_val, 1 if len(prefs) >= 3 and val_fraction > 0 else 0), len(prefs) - 1)
    return [prefs[i] for i in order[n_val:]], [prefs[i] for i in order[:n_val]]


def demo_candidates(pool: Sequence[Demo], size: int, n: int, seed: int,
                    user: str) -> list[list[Demo]]:
    """Up to ``n`` distinct seeded demo sets of ``size`` (the empty set first when size > 0)."""
    size = min(size, len(pool))
    sets: list[list[Demo]] = [[]]
    if size == 0:
        return sets
    seen: set[tuple[int, ...]] = set()
    for attempt in range(4 * n):
        order = sorted(range(len(pool)),
                       key=lambda i: (seeded_unit("demos", seed, user, attempt, i), i))
        pick = tuple(sorted(order[:size]))
        if pick not in seen:
            seen.add(pick)
            sets.append([pool[i] for i in pick])
        if len(sets) > n:
            break
    return sets[: n + 1]
