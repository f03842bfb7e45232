"""Time the book's `load_data_wiki(512, 64)` on the embedded corpus, with
MXNet's `np.array` and with `d2l_bert.fast.quick_arrays()`.

::

    python benchmarks/bench_data_wiki.py              # 3 rounds each
    python benchmarks/bench_data_wiki.py --repeats 1 --paragraphs 200

The book's data pipeline, the same code both ways (`d2l_bert.book.dataset`,
which the bert-dataset notebook writes out): read the paragraphs, cut the
NSP pairs and the MLM masks, pad them into seven small arrays an
example.  The two take turns, each from the same seed, and the examples
they give are compared field by field.  Only the padding's `np.array`
calls differ: MXNet's waits on its engine before each copy.
"""
import os
import random
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _gemm  # noqa: E402
import _machine  # noqa: E402  (before mxnet: sets the thread count)
import _options  # noqa: E402
import _timing  # noqa: E402


def parse_args(argv=None):
    p = _options.arg_parser(__doc__, repeats=3, batch_size=512)
    p.add_argument('--max-len', type=int, default=64)
    p.add_argument('--paragraphs', type=int, default=None,
                   help="only the corpus's first N paragraphs (default: "
                        'all, as the book reads them)')
    return p.parse_args(argv)


def build(args):
    """The two ways to build the book's data loader, by name."""
    from mxnet import npx

    from d2l_bert.book import dataset
    from d2l_bert.data import hub
    from d2l_bert.fast import arrays

    npx.set_np()  # as the book's first cell does
    folder = tempfile.mkdtemp(prefix='bench-wiki-')
    path, _ = hub.STAND_INS['wikitext-2'](folder)
    made = {}

    def load(name, quick):
        def run():
            arrays.quick_arrays() if quick else arrays.undo()
            random.seed(0)
            try:
                paragraphs = dataset._read_wiki(path)[:args.paragraphs]
                made[name] = dataset._WikiTextDataset(paragraphs,
                                                      args.max_len)
            finally:
                arrays.undo()
        return run
    return {'book': load('book', False), 'quick': load('quick', True)}, made


FIELDS = ('all_token_ids', 'all_segments', 'valid_lens',
          'all_pred_positions', 'all_mlm_weights', 'all_mlm_labels',
          'nsp_labels')


def differences(book, quick):
    """The fields of the two datasets that differ: in length, in any
    example's dtype or shape, or in any value."""
    from mxnet import np
    differ = []
    for field in FIELDS:
        a, b = getattr(book, field), getattr(quick, field)
        if (len(a) != len(b) or [(x.dtype, x.shape) for x in a]
                != [(x.dtype, x.shape) for x in b]
                or not (np.stack(a) == np.stack(b)).all()):
            differ.append(field)
    return differ


def main(argv=None):
    args = parse_args(argv)
    print(_machine.set_threads(args.threads, isa=args.isa))
    _gemm.print_machine(args.threads)
    functions, made = build(args)
    start = time.perf_counter()
    res = _timing.alternate(functions, repeats=args.repeats, warmup=0)
    print(f'\nbook pipeline at max_len {args.max_len}: '
          f"{len(made['book'])} examples, {len(made['book']) * 7} arrays")
    for name, label in (('book', "MXNet's np.array"),
                        ('quick', 'quick_arrays()')):
        print(f'{label:18s}{res[name][0]:8.1f} s (median of '
              f'{len(res[name][1])}), CPU {res[name][2]:.1f} s')
    print(f"speed-up of quick_arrays: "
          f"{res['book'][0] / res['quick'][0]:.2f}x; fields that differ: "
          f"{', '.join(differences(made['book'], made['quick'])) or 'none'}; "
          f'{time.perf_counter() - start:.0f} s in all')
    return 0


if __name__ == '__main__':
    sys.exit(main())
