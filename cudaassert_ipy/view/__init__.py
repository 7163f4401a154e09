"""View: a Diagnosis rendered as text, HTML and markdown (report), composed into widgets (panel).

Renderers decide nothing; what they show was decided in ``diagnose``. Each HTML section is
rendered once (report.py) and has one look (style.py). The text report imports neither IPython
nor ipywidgets.
"""
