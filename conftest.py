"""Collection: the doctests of :mod:`kernelcw.river` need river, an optional extra
(``pip install ".[river]"``); without it that module is left out, not an error."""

import importlib.util

collect_ignore = [] if importlib.util.find_spec("river") else ["kernelcw/river.py"]
