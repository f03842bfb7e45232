"""sec_bert: the BERT model, read top to bottom in the book's order.

Dimension key used in the shape comments:

B: batch size, T: sequence length, H: num_hiddens, V: vocab_size,
P: predicted positions per sequence
"""


def get_tokens_and_segments(tokens_a, tokens_b=None):
    """Build a BERT input sequence from one or two token lists.

    Defined in :numref:`subsec_bert_input_rep`.

    Parameters
    ----------
    tokens_a : list of str
        Tokens of the first text sequence.
    tokens_b : list of str, optional
        Tokens of the second text sequence.

    Returns
    -------
    tokens : list of str
        ``['<cls>'] + tokens_a + ['<sep>']``, followed by
        ``tokens_b + ['<sep>']`` when `tokens_b` is given.
    segments : list of int
        Segment id of each token: 0 for `<cls>`, `tokens_a` and the first
        `<sep>`; 1 for `tokens_b` and the last `<sep>`.
    """
    tokens = ['<cls>'] + list(tokens_a) + ['<sep>']
    segments = [0] * len(tokens)
    if tokens_b is not None:
        tokens += list(tokens_b) + ['<sep>']
        segments += [1] * (len(tokens_b) + 1)
    return tokens, segments
