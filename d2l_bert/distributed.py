"""Old path of `d2l_bert.dist.launcher`: warns that it moved, then is it
(`d2l_bert._moved`)."""
from ._moved import alias

alias(__name__)
