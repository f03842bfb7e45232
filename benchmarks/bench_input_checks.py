"""What checking a student's inputs costs a forward pass.

`d2l_bert.checks.check_inputs(net)` (which the command line and the
runs apply to the book's blocks) and the fast twins check shapes for
free and value ranges (token ids, segment ids, `valid_lens`,
`pred_positions`) with one small device-to-host copy per call.  This script times the same forward pass
with the checks and with them switched off, taking turns in one process,
and prints the ratio::

    python benchmarks/bench_input_checks.py [--repeats 15]

Two cases: the book's pretraining batch (512 x 64, on the fast twin,
``fast.accelerate(net)``) and the chapter's demo batch (2 x 8, 768 hidden,
imperative), where a fixed per-call cost weighs most.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _batches  # noqa: E402
import _common  # noqa: E402
import _gemm  # noqa: E402
import _machine  # noqa: E402  (before mxnet: sets the thread count)
import _timing  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--repeats', type=int, default=15)
    args = parser.parse_args()
    print(_machine.set_threads())
    _gemm.print_machine()

    import mxnet as mx
    from mxnet import np, npx

    from d2l_bert import BERTModel, checks, fast
    from d2l_bert.fast import blocks, models

    npx.set_np()  # as the book's first cell does

    names = ('check_encoder_inputs', 'check_pred_positions')
    originals = {name: getattr(checks, name) for name in names}

    def set_checks(on):
        # `check_inputs`'s hooks and the fast twins call the same two
        for module in (checks, blocks, models):
            for name in names:
                setattr(module, name, originals[name] if on
                        else (lambda *a, **k: None))

    def case(net, inputs):
        def run(on):
            def call():
                set_checks(on)
                net(*inputs)
            return call
        return {'checked': run(True), 'unchecked': run(False)}

    book = _common.BOOK
    net = BERTModel(book['vocab_size'], book['num_hiddens'],
                    book['ffn_num_hiddens'], book['num_heads'],
                    book['num_blks'], 0.0, max_len=book['max_len'])
    net.initialize(mx.init.Xavier())
    net = fast.accelerate(net)
    tokens, segments, valid_lens, positions = [
        np.array(a) for a in _batches.book_batch()[:4]]
    demo = checks.check_inputs(BERTModel(10000, 768, 1024, 4, 2, 0.2))
    demo.initialize()
    demo_inputs = (np.random.randint(0, 10000, (2, 8)).astype('int32'),
                   np.array([[0, 0, 0, 0, 1, 1, 1, 1],
                             [0, 0, 0, 1, 1, 1, 1, 1]], dtype='int32'),
                   None, np.array([[1, 5, 2], [6, 1, 5]], dtype='int32'))
    for label, cases in [
            ('pretraining forward, 512 x 64, accelerate(net)',
             case(net, (tokens, segments, valid_lens, positions))),
            ("chapter demo forward, 2 x 8, 768 hidden, imperative",
             case(demo, demo_inputs))]:
        print(f'\n{label}')
        result = _timing.alternate(cases, repeats=args.repeats,
                                   progress=False)
        checked, unchecked = result['checked'][0], result['unchecked'][0]
        print(f'  checked   {checked * 1e3:8.2f} ms')
        print(f'  unchecked {unchecked * 1e3:8.2f} ms')
        print(f'  checks cost {100 * (checked / unchecked - 1):+.1f}% '
              f'(ratio {checked / unchecked:.3f})')
    set_checks(True)


if __name__ == '__main__':
    main()
