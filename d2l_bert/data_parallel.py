"""Moved to `d2l_bert.dist.workers`; this name works for one more
release, with a `DeprecationWarning`."""
import sys
import warnings

from .dist import workers as _workers

warnings.warn('d2l_bert.data_parallel moved to d2l_bert.dist.workers',
              DeprecationWarning, stacklevel=2)
sys.modules[__name__] = _workers
