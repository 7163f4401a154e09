"""Beyond the notebook: run a training script (or torchrun rank) with the fd tap, diagnosis and report.

Uses capture + diagnose + the text report bare: no IPython, no ipywidgets.
"""
