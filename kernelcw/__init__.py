"""kernelcw: online confidence-weighted learning in primal and dual (kernel) form.

Estimators follow scikit-learn's API; :func:`run_online` runs the papers'
online protocol (predict each example, then learn from it).
"""

from .estimators import (
    AROWClassifier,
    CWClassifier,
    PAClassifier,
    PerceptronClassifier,
    SCWClassifier,
    primal_from_dual,
)
from .online import OnlineResult, run_online

__version__ = "0.1.0"

__all__ = [
    "AROWClassifier",
    "CWClassifier",
    "OnlineResult",
    "PAClassifier",
    "PerceptronClassifier",
    "SCWClassifier",
    "primal_from_dual",
    "run_online",
]
