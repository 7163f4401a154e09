"""Diagnose: exception + assertion lines + host-side facts → one frozen :class:`Diagnosis`.

Imports neither IPython nor ipywidgets (a test holds it to that), and never touches GPU memory.
"""
