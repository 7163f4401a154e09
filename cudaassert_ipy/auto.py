"""``import cudaassert_ipy.auto`` at the top of a script: the runner's diagnosis without the runner.

The one-line alternative to ``python -m cudaassert_ipy train.py`` for ``python -c``, ``ipython script.py``
and launchers you cannot change: the fd tap starts now, and an uncaught CUDA failure gets the report
after its traceback (torchrun ranks: with their rank, into torchelastic's error file, then exit at once).
Inside a notebook kernel it loads the IPython extension instead, which does the same per cell; under
``ipython script.py`` (IPython prints the script's traceback itself) the report follows it at exit.
Settings come from CUDAASSERT_RUN (JSON) when set; ``CUDA_LAUNCH_BLOCKING=1`` and
``CUDAASSERT_VALIDATORS=1`` work as usual.
"""

from __future__ import annotations

import sys


def _activate() -> None:
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    if shell is not None and getattr(shell, "kernel", None) is not None:
        shell.run_line_magic("load_ext", "cudaassert_ipy")
        return
    from cudaassert_ipy.run.hook import install, report_last_at_exit

    install()
    if shell is not None:  # ``ipython script.py`` prints the script's error itself and never calls excepthook
        report_last_at_exit()


_activate()
