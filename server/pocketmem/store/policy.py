"""The rules SQL has to apply, taken from core/scoring.py so that they are written once: the core rule
(persistence >= CORE_PERSISTENCE), bound as a query parameter by both backends. The decay of importance is
never computed in SQL: the cap's eviction order is computed in Python (service/writing/trash.py).
"""

from __future__ import annotations

from pocketmem.core.scoring import CORE_PERSISTENCE

__all__ = ["CORE_PERSISTENCE"]
