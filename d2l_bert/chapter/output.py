"""A cell's printed output, as the chapter runner keeps it: `CappedOutput`.

What a cell prints goes to a `CappedOutput` (the runner redirects the
standard output to it), then the `repr` of its final expression's value:
the first `MAX_OUTPUT_CHARS` characters are kept, the rest only counted.
"""
import io

#: Characters of a cell's output that its result keeps (about 250 lines
#: of 80); the rest is counted, not held, and said to be cut
MAX_OUTPUT_CHARS = 20_000


class CappedOutput(io.TextIOBase):
    """A cell's standard output: its first `limit` characters, and a
    count of the rest, which is not held.

    Parameters
    ----------
    limit : int, default `MAX_OUTPUT_CHARS`
        How many characters are kept; those past it are only counted.

    Examples
    --------
    >>> out = CappedOutput(limit=4)
    >>> print('abcdefgh', file=out)
    >>> out.getvalue()
    'abcd\\n... 5 more characters cut\\n'
    """

    def __init__(self, limit=MAX_OUTPUT_CHARS):
        super().__init__()
        self.limit, self.parts, self.kept, self.cut = limit, [], 0, 0

    def writable(self):
        return True

    def write(self, text):
        room = max(0, self.limit - self.kept)
        if room:
            self.parts.append(text[:room])
            self.kept += min(room, len(text))
        self.cut += max(0, len(text) - room)
        return len(text)

    def getvalue(self):
        """The characters kept, then a line that says how many were cut
        (none when nothing was)."""
        text = ''.join(self.parts)
        if not self.cut:
            return text
        end = '' if text.endswith('\n') or not text else '\n'
        return f'{text}{end}... {self.cut:,} more characters cut\n'
