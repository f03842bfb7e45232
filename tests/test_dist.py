"""Tests of d2l_bert/dist/__init__.py."""
import sys


def test_importing_the_package_imports_no_module_of_it():
    code = ('import sys, d2l_bert.dist; '
            "print(sorted(m for m in sys.modules "
            "if m.startswith('d2l_bert.dist.')))")
    import subprocess
    out = subprocess.run([sys.executable, '-c', code], capture_output=True,
                         text=True, check=True).stdout
    assert out.strip() == '[]'
