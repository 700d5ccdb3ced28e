"""scikit-learn estimators: CW-Stdev/CW-Var, SCW-I/II, AROW, SOP, PA, Perceptron.

One learner per module; the public classes only store their parameters. ``fit``
resets the model and runs the same machinery as ``partial_fit``
(:class:`._base.CWEstimator`): parameters become an engine specification
(:mod:`kernelcw.spec`) and the engine (:mod:`kernelcw.engines`) learns.
"""

from ._mixins import primal_from_dual
from .arow import AROWClassifier
from .cw import CWClassifier
from .pa import PAClassifier
from .perceptron import PerceptronClassifier
from .scw import SCWClassifier
from .sop import SOPClassifier

__all__ = [
    "primal_from_dual",
    "CWClassifier",
    "SCWClassifier",
    "AROWClassifier",
    "SOPClassifier",
    "PAClassifier",
    "PerceptronClassifier",
]
