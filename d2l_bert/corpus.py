"""Old path of `d2l_bert.data.corpus`: warns that it moved, then is it
(`d2l_bert._moved`).

``python -m d2l_bert.corpus`` still runs it too.
"""
from d2l_bert._moved import alias, run_as_main

if __name__ == '__main__':
    run_as_main('d2l_bert.corpus')
else:
    alias(__name__)
