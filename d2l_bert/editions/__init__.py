"""Moved to `d2l_bert.chapter.editions`; this old path warns, then gives
that package (and its modules, ``d2l_bert.editions.child`` ...)."""
from .._moved import alias

alias(__name__)
