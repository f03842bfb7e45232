"""`python -m d2l_bert` is the `d2l-bert` command."""
import sys

from .cli import main

sys.exit(main())
