"""Docstring fragments the estimators share (parameters and fitted attributes)."""

COMMON_DOC = """
    a : float, default=1.0
        Initial covariance ``Sigma_1 = a I``. CW-Stdev's predictions do not depend
        on it (NIPS 2008 Lemma 3); the other rules are invariant after rescaling
        their parameter (``kernelcw.rules``).
    kernel : {{"linear", "rbf", "poly", "laplacian", "precomputed"}} or callable, default="linear"
        The Mercer kernel k(x, z): ``x . z``; ``exp(-gamma |x - z|^2)``;
        ``(gamma x . z + coef0)^degree``; ``exp(-gamma |x - z|_1)``; rows of a
        Gram matrix against the training inputs (``fit(K_train, y)``,
        ``predict(K_test)``; the support set then holds positions); or a
        callable ``k(A, B) -> (len(A), len(B))`` matrix.
    gamma : float or None, default=None
        Kernel width for rbf, poly and laplacian; None means 1 / n_features.
    degree : int, default=3
        Degree of the poly kernel.
    coef0 : float, default=0.0
        Constant of the poly kernel.
    mode : {{"auto", "primal", "dual"}}, default="auto"
        Which engine learns: the primal (weights mu, Sigma) or the dual form
        (coefficients over support vectors, any kernel). "auto" picks the primal
        engine for the linear kernel and the dual one otherwise; "dual" forces the
        dual engine for the linear kernel (it reproduces the primal run:
        :func:`kernelcw.primal_from_dual`).
    solver : {{"cholesky", "explicit"}}, default="cholesky"
        Dual engine only. "cholesky": the append-only Cholesky form, in blocks of
        ``block_size`` inputs with BLAS-3 kernel blocks and triangular solves;
        "explicit": the papers' nu/Pi recursion, one round at a time (the readable
        reference). Both give the same model to rounding.
    budget : int or None, default=None
        At most this many support vectors after every round (dual engine; a
        budget selects it under ``mode="auto"``): when an update makes one too
        many, one leaves at once. Memory and time per round then stay bounded.
        Once the budget binds, with a second-order rule and the Cholesky solver,
        "oldest" and "random" keep a Cholesky factor (a queue of two factors; the
        lazy form), BLAS-3; "smallest" and "project" keep nu and Pi in a blocked
        walk (a few budget^2 flops per round); see :mod:`kernelcw.budget`.
    budget_policy : {{"oldest", "random", "smallest", "project"}}, default="project"
        Which support vector leaves and how: the oldest (Forgetron), a random one
        other than the newest (randomized budget perceptron; seeded by
        ``random_state``), the one whose removal moves the mean least, or the one
        whose projection onto the others moves it least, projected KL-optimally
        (Csato & Opper 2002). Every policy keeps Sigma positive definite.
    budget_batch : int, default=1
        How many support vectors leave at once when an update takes the model past
        its budget (q). 1 is the round-by-round policy of the papers. q > 1 prunes
        the q lowest-scored (the q oldest, q random draws) at once, leaving
        ``budget + 1 - q``, in a Cholesky form maintained with BLAS-3 once per q
        overflows (second-order rules, ``solver="cholesky"``): a different (batch)
        policy, so results change (on magic, "project" with q = 50: 12.92 % test
        error against 13.00 % at q = 1 for B = 500). Each prune refactors the
        model, so a batch pays only from about a third of the budget: at B = 1000,
        q = 400 trained in 0.89x SVC's time at 12.81 % against 1.29x and 12.76 % at
        q = 1, q = 50-300 took longer than q = 1 (``python -m benchmarks scaling
        --parts headline --batches 50,100,200,300,400 --name scaling_batches``). At
        B = 4000 with q = 500, "oldest", "random" and "smallest" learn at 0.39, 0.58
        and 0.25 of the unbudgeted speed, against 0.38, 0.27 and 0.22 at q = 1
        ("project": 0.04 and 0.12; ``python -m benchmarks budget --parts
        throughput``, both on an idle machine, where large blocks take BLAS's
        threads).
    block_size : int or None, default=None
        Inputs per block of the blocked learners (the dual engine, and the primal
        one with full covariance); None picks 256 for the dual and
        ``kernelcw.engines.primal_full.default_block_size(d)`` for the primal. Results do not
        depend on it beyond rounding. A model keeps the block size it started with (``fit``,
        or the first ``partial_fit``).
    covariance : {{"full", "diag"}}, default="{cov_default}"
        Primal mode: full d x d covariance (the papers' exact algorithms, O(d^2)
        memory) or a diagonal one (JMLR 2012 section 6: O(d) memory, for text and
        other high-dimensional sparse data). The dual engine always keeps the full
        covariance in the kernel's feature space.{cov_note}
    diag_method : {{"kl", "l2", "exact"}}, default="kl"
        How the diagonal is kept (JMLR 2012 section 6): diagonalised precision
        update ("kl", the paper's best), diagonalised covariance update ("l2"), or
        the exact solution of the problem restricted to diagonal matrices.
    fit_intercept : bool, default=True
        Learn an intercept b (decision ``mu . x + b``) as the weight of a constant
        feature of value ``intercept_scaling``, whose weight has its own prior
        variance ``a * intercept_scaling**2``: the primal engines see it as one more
        column, the dual engine as ``intercept_scaling**2`` added to the kernel. True
        (scikit-learn's convention) is the measured better default for the
        second-order learners (``benchmarks/bench_intercept.py``); the first-order PA-I
        with a kernel did better without it there (so, likely, PA and the Perceptron).
        False is the papers' learners, without a bias term, which their reproductions
        keep.
    intercept_scaling : float > 0, default=1.0
        The constant feature's value (so the intercept's prior scale) with
        ``fit_intercept=True``; ignored otherwise.
    n_iter : int, default=1
        Passes over the data in ``fit``. One pass is online learning.
    shuffle : bool, default=False
        Shuffle the rows before each pass of ``fit`` (``partial_fit`` never does).
    random_state : int, RandomState instance or None, default=None
        Seeds the shuffling and the "random" budget policy."""

SECOND_ORDER_DOC = COMMON_DOC.format(cov_default="full", cov_note="")
FIRST_ORDER_DOC = COMMON_DOC.format(
    cov_default="diag",
    cov_note=(
        "\n        Sigma = a I never changes for a first-order rule, so the diagonal\n"
        '        form is exact; "full" stores the same a I as a d x d array.'
    ),
)

ATTR_DOC = """
    Attributes
    ----------
    mean_ : ndarray of shape (n_features,) or (n_classes, n_features)
        Primal mode: the mean weights mu (one row per one-vs-rest model with > 2
        classes).
    covariance_ : ndarray
        Primal mode: Sigma, (n_features, n_features) full or (n_features,)
        diagonal, with a leading class axis for more than two classes.
    support_vectors_ : ndarray of shape (n_support, n_features)
        Dual mode: the support inputs in the order they entered (a list per class
        for more than two classes; absent for ``kernel="precomputed"``).
    support_ : ndarray of shape (n_support,)
        Dual mode: positions of the support inputs in the training data.
    dual_coef_ : ndarray of shape (n_support,)
        Dual mode: nu, with ``mu = sum_p nu_p phi(x_p)``.
    covariance_coef_ : ndarray of shape (n_support, n_support)
        Dual mode: Pi, with ``Sigma = a I + sum_pq Pi_pq phi(x_p) phi(x_q)'``
        (computed on demand from the Cholesky factor).
    n_support_ : int or ndarray of shape (n_classes,)
        Dual mode: the number of support vectors.
    coef_ : ndarray of shape (1, n_features) or (n_classes, n_features)
        mu in scikit-learn's shape (primal mode, or the dual with a linear kernel).
    intercept_ : ndarray of shape (1,) or (n_classes,)
        The mean intercept with ``fit_intercept=True``, else zeros.
    n_updates_ : int or ndarray of shape (n_classes,)
        Rounds that changed the model.
    n_mistakes_ : int or ndarray of shape (n_classes,)
        Online mistakes made while fitting (each counted before that round's
        update), summed over ``partial_fit`` calls and reset by ``fit``.
    n_variance_floored_ : int or ndarray of shape (n_classes,)
        Rounds whose margin variance was raised to the floor
        ``kernelcw.rules.VAR_FLOOR * a * |x|^2`` (a warning is issued the first
        time). Zero on well-posed streams.
    classes_ : ndarray
        The labels; with two, ``classes_[0]`` is -1 and ``classes_[1]`` is +1.
    n_features_in_ : int"""


#: The shared parameters without ``a``, which SOP documents in its own terms.
SOP_DOC = "    kernel :" + SECOND_ORDER_DOC.split("    kernel :", 1)[1]

FIRST_ORDER_NOTE = """
    First-order rules keep ``Sigma = a I``: the step is ``mu += alpha y a x``
    (``a = 1`` gives the published algorithm); ``covariance`` and ``diag_method``
    only choose how ``covariance_`` is reported."""
