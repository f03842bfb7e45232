"""Moved to `d2l_bert.dist.launcher`; this name works for one more
release, with a `DeprecationWarning`."""
import sys
import warnings

from .dist import launcher as _launcher

warnings.warn('d2l_bert.distributed moved to d2l_bert.dist.launcher',
              DeprecationWarning, stacklevel=2)
sys.modules[__name__] = _launcher
