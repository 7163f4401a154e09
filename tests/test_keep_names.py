"""restart/keep/names.py: the keep marker, and the names a cell binds and changes, read from its code."""

from __future__ import annotations

from cudaassert_ipy.restart.keep.names import is_keep_marked, read_cell


def test_the_keep_marker_is_read_from_the_first_line():
    assert is_keep_marked("# cudaassert: keep\ndf = 1") and is_keep_marked("\n#cudaassert:KEEP")
    assert not is_keep_marked("df = 1\n# cudaassert: keep")


def test_names_are_read_from_the_cells_top_level_not_from_function_bodies():
    names = read_cell(
        "import numpy as np\nfrom os import path as p\nx, (y, *z) = 1, (2, 3)\nfor i in range(2):\n"
        "    acc = i\nwith open('f') as fh:\n    pass\ndef f():\n    inner = 1\nclass C:\n    attr = 1\n"
        "if (w := 3):\n    v = 1\ndf['c'] = 1\nt.add_(1)\nm.to('cpu')\n"
        "q.drop(columns=['a'], inplace=True)"
    )
    assert names.binds == {"np", "p", "x", "y", "z", "i", "acc", "fh", "f", "C", "w", "v"}
    assert names.changes == {"df", "t", "m", "q"}
    assert names.effect is None
