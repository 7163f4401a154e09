"""Capture: what the process writes to fd 1/2 (teed, never lost) and the kernel assertion lines in it.

Imports neither IPython nor ipywidgets nor torch: the script runner and the log explainer use it bare.
"""
