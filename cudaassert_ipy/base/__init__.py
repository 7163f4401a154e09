"""Base: the few helpers every layer may use (wording, atomic writes, passthrough frames, lazy names).

Standard library only, and they import nothing else of ours, so each layer can use them without an edge in the
layer table (tests/test_layers.py) and the bare frontends (the runner, the log explainer, the helpers) stay light.
"""
