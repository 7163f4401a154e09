"""View: a Diagnosis rendered as text, HTML and markdown (report), composed into widgets (panel).

Renderers decide nothing; what they show was decided in ``diagnose``. The text report imports
neither IPython nor ipywidgets.
"""
