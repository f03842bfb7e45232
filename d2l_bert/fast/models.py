"""The fast twins of the book's whole models, `BERTModel` and the
fine-tuning section's `BERTClassifier`: their blocks' twins
(`blocks`) in one graph, the book's input checks before it runs, and the
tokens packed where only some of them are read (`step.packed_tokens`):

- the classifier, whose scores read only `<cls>`, encodes the valid
  tokens only, as the pretraining step does, and its last block only
  `<cls>`;
- the model, called while autograd records with valid lengths and
  predicted positions (the book's `train_bert`), encodes the valid and
  the predicted tokens only, and fills the other positions of
  `encoded_X`, which no loss reads, with `<cls>`'s.

Dimension key used in the shape comments:

B: batch size, T: sequence length, H: num_hiddens, V: vocab_size,
P: predicted positions per sequence, K: the distinct predicted
positions, N: the packed tokens, S: the attention's length, C: classes
"""
import warnings

import mxnet as mx

from ..checks import check_pred_positions
from .blocks import (FastBERTEncoder, FastMaskLM, FastNextSentencePred,
                     MLMScores, _Checked, distinct_positions)
from .step import TOKEN_MULTIPLE, encode_packed, packed_inputs


class FastBERTModel(_Checked):
    """`BERTModel` as one graph: called as the book's, it returns
    ``(encoded_X, mlm_Y_hat, nsp_Y_hat)``, `mlm_Y_hat` None without
    `pred_positions`.

    Called while autograd records, with `valid_lens` and
    `pred_positions`, as the book's `train_bert` calls it, the encoder
    runs on the tokens the losses depend on only, packed, as the command
    line's step does (`step.packed_tokens`, `step.encode_packed`): the
    valid ones and the predicted ones.  The scores and their gradients
    are the book's, within float32 rounding; in `encoded_X`, a position
    past its sequence's valid length (and past its predictions) holds
    its sequence's `<cls>` encoding, which nothing of the book reads.
    Called otherwise, every position is computed, as the book's.

    Parameters
    ----------
    net : BERTModel
        The book's model, whose blocks the twin holds.
    kernels : bool
        Use the compiled loops (else MXNet's operators).
    token_multiple : int, default `step.TOKEN_MULTIPLE`
        The packed tokens' number is rounded up to a multiple of this.
    """
    def __init__(self, net, kernels, token_multiple=None):
        super().__init__()
        self.encoder = FastBERTEncoder(net.encoder, kernels)
        self.hidden = net.hidden
        self.mlm = FastMaskLM(net.mlm, kernels)
        self.nsp = FastNextSentencePred(net.nsp)
        self.token_multiple = token_multiple or TOKEN_MULTIPLE

    def forward(self, tokens, segments, valid_lens=None,
                pred_positions=None):
        """Check the inputs (arrays), then run the graph on the distinct
        predicted positions (`distinct_positions`).  Given a graph's
        symbols, `pred_positions` stands for the graph's two inputs
        ``rows`` and ``copies``, as a tuple."""
        if isinstance(tokens, mx.sym.Symbol):
            positions = pred_positions or ()
        else:
            packing = (valid_lens is not None and pred_positions is not None
                       and mx.autograd.is_recording())
            self._prepare(self.encoder, tokens, segments, valid_lens,
                          [valid_lens, pred_positions, packing or None])
            positions = ()
            if pred_positions is not None:
                check_pred_positions(pred_positions, *tokens.shape)
                positions = distinct_positions(pred_positions)
            if packing:
                # the rows are read from the packed encodings instead
                positions = (None, positions[1]) + packed_inputs(
                    self.encoder, valid_lens, positions[0], tokens.shape,
                    self.token_multiple, book_layout=True)
        with warnings.catch_warnings():
            # Without `pred_positions` the graph leaves `mlm` out, as it
            # should; Gluon's warning about unused parameters would confuse
            warnings.filterwarnings('ignore', 'Parameter .* is not used')
            outputs = super().forward(tokens, segments, valid_lens,
                                      *positions)
        if isinstance(tokens, mx.sym.Symbol):
            if not positions:
                return outputs
            encoded_X, mlm_Y_hat, nsp_Y_hat = outputs    # mlm: (B*P, V)
            mlm_Y_hat = mx.sym.npx.reshape_like(
                mlm_Y_hat, positions[1], lhs_begin=0, lhs_end=1,
                rhs_begin=0, rhs_end=2)                      # (B, P, V)
            return encoded_X, mlm_Y_hat, nsp_Y_hat
        if pred_positions is None:
            encoded_X, nsp_Y_hat = outputs
            return encoded_X, None, nsp_Y_hat
        encoded_X, mlm_Y_hat, nsp_Y_hat = outputs        # mlm: (B*P, V)
        mlm_Y_hat = MLMScores.view(mlm_Y_hat, *pred_positions.shape)
        return encoded_X, mlm_Y_hat, nsp_Y_hat             # mlm: (B, P, V)

    def hybrid_forward(self, F, tokens, segments, valid_lens=None,
                       rows=None, copies=None, pack=None, positions=None,
                       unpack=None, kept_rows=None, query_lens=None,
                       cls_rows=None, mlm_rows=None, book_rows=None):
        """`rows` (2, K) and `copies` (B, P): `distinct_positions` of the
        book's `pred_positions`; `pack` to `book_rows`: `packed_tokens`'s
        arrays for those rows, when packing.  Returns ``encoded_X`` (B,
        T, H), ``mlm_Y_hat`` (B*P, V) (left out without `rows`;
        `forward` hands out its (B, P, V) view) and ``nsp_Y_hat`` (B,
        2)."""
        if pack is not None:
            X = encode_packed(F, self.encoder, tokens, segments, valid_lens,
                              pack, positions, unpack, kept_rows,
                              query_lens)                    # (N, H)
            encoded_X = F.np.take(X, book_rows, axis=0)      # (B, T, H)
            cls = F.np.take(X, cls_rows, axis=0)             # (B, H)
            nsp_Y_hat = self.nsp(self.hidden(cls))           # (B, 2)
            masked_X = F.np.take(X, mlm_rows, axis=0)        # (K, H)
            mlm_Y_hat = self.mlm.scores(F, masked_X, copies)  # (B*P, V)
            return encoded_X, mlm_Y_hat, nsp_Y_hat
        encoded_X = self.encoder(tokens, segments, valid_lens)  # (B, T, H)
        # The NSP classifier reads the encoding of `<cls>`, at position 0
        nsp_Y_hat = self.nsp(self.hidden(encoded_X[:, 0, :]))  # (B, 2)
        if rows is None:
            return encoded_X, nsp_Y_hat  # a graph cannot output None
        mlm_Y_hat = self.mlm(encoded_X, rows, copies)        # (B*P, V)
        return encoded_X, mlm_Y_hat, nsp_Y_hat


class FastBERTClassifier(_Checked):
    """The fine-tuning section's `BERTClassifier` as one graph; called, as
    the book's, with one tuple ``(tokens_X, segments_X, valid_lens_x)``.

    The scores read the encoding of `<cls>` only, which the padded
    positions do not change (their keys have weight exactly 0): given
    `valid_lens_x`, the encoder runs on the valid tokens only, packed
    (`step.packed_tokens`, `step.encode_packed`), as the pretraining
    step does, and its last block on `<cls>` alone.  The scores and
    gradients are the book's, within float32 rounding; with dropout on,
    AddNorm's masks are drawn for the packed rows.

    Parameters
    ----------
    net : BERTClassifier
        The fine-tuning section's classifier, whose blocks the twin holds.
    kernels : bool
        Use the compiled loops (else MXNet's operators).
    token_multiple : int, default `step.TOKEN_MULTIPLE`
        The packed tokens' number is rounded up to a multiple of this
        (each new number costs the graph a memory plan).
    """
    # Built and checked as `FastBERTModel` is: each twin mirrors its book
    # class, and the book's `BERTClassifier` repeats `BERTModel` here
    def __init__(self, net, kernels, token_multiple=None):
        super().__init__()
        self.encoder = FastBERTEncoder(net.encoder, kernels)
        self.hidden = net.hidden
        self.output = net.output
        self.token_multiple = token_multiple or TOKEN_MULTIPLE

    def forward(self, inputs):
        """`inputs`: (tokens_X (B, T), segments_X (B, T), valid_lens_x
        (B,)).  Returns the class scores (B, C)."""
        tokens_X, segments_X, valid_lens_x = inputs
        self._prepare(self.encoder, tokens_X, segments_X, valid_lens_x,
                      [valid_lens_x])
        if valid_lens_x is None or isinstance(tokens_X, mx.sym.Symbol):
            return super().forward(tokens_X, segments_X, valid_lens_x)
        no_rows = mx.np.zeros((2, 0), dtype='int32',
                              ctx=valid_lens_x.ctx)          # (2, 0)
        arrays = packed_inputs(self.encoder, valid_lens_x, no_rows,
                               tokens_X.shape, self.token_multiple)
        # all but `mlm_rows`, which no prediction needs here
        return super().forward(tokens_X, segments_X, valid_lens_x,
                               *arrays[:-1])

    def hybrid_forward(self, F, tokens_X, segments_X, valid_lens_x=None,
                       pack=None, positions=None, unpack=None,
                       kept_rows=None, query_lens=None, cls_rows=None):
        """Encode (the packed tokens, given `packed_tokens`'s arrays),
        then classify the `<cls>` encoding; (B, C)."""
        if pack is None:
            encoded_X = self.encoder(tokens_X, segments_X,
                                     valid_lens_x)           # (B, T, H)
            return self.output(self.hidden(encoded_X[:, 0, :]))  # (B, C)
        cls = encode_packed(F, self.encoder, tokens_X, segments_X,
                            valid_lens_x, pack, positions, unpack,
                            kept_rows, query_lens, cls_rows)  # (B, H)
        return self.output(self.hidden(cls))                 # (B, C)
