"""The library's option lists, in one light module (no numpy, numba or scikit-learn),
so the command line can offer them as choices without importing the engines.

The modules that use an option import its list from here: :mod:`kernelcw.kernels`
(kernels), :mod:`kernelcw.budget` (policies), :mod:`kernelcw.rules` (diagonal
methods), :mod:`kernelcw.spec` (modes, solvers, covariances).
"""

__all__ = ["COVARIANCES", "DIAG_METHODS", "KERNELS", "MODES", "POLICIES", "SOLVERS"]

#: Kernels by name; a callable ``k(A, B)`` is accepted too.
KERNELS = ("linear", "rbf", "poly", "laplacian", "precomputed")
#: Budget policies: which support vector leaves when the budget overflows.
POLICIES = ("oldest", "random", "smallest", "project")
#: How a diagonal covariance is kept (JMLR 2012 section 6) -> code for compiled loops.
DIAG_METHODS = {"kl": 0, "l2": 1, "exact": 2}
#: Which engine learns: primal (linear kernel), dual (any kernel), or chosen by the kernel.
MODES = ("auto", "primal", "dual")
#: The dual engine's factor forms: the append-only Cholesky factor, or explicit nu/Pi.
SOLVERS = ("cholesky", "explicit")
#: Covariance forms of the primal engine.
COVARIANCES = ("full", "diag")
