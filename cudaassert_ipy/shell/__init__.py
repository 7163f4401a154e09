"""The IPython binding: load/unload, magics, the cell watcher, the context state. The only layer
that wires the others together; nothing below imports it.
"""
