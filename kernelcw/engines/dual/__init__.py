"""The dual (kernel) engine, split by responsibility (``doc/dual-form.md``).

- :mod:`.engine`: :class:`DualEngine`, the block loop over the one-vs-rest models;
- :mod:`.store`: the shared support store and its kernel blocks;
- :mod:`.form`: what every factor form keeps and implements;
- :mod:`.panels`: the append-only Cholesky form in one growing buffer;
- :mod:`.explicit`: nu and Pi updated in place (and first-order rules, and budgets);
- :mod:`.queue`: the "oldest" budget's Cholesky queue;
- :mod:`.convert`: switching forms when a budget binds;
- :mod:`.steps`: the compiled pieces the walks share, and their records;
- :mod:`.status`: the walks' statuses and the errors they raise.
"""

from __future__ import annotations

from .engine import DualEngine
from .status import PSD_TOL

__all__ = ["PSD_TOL", "DualEngine"]
