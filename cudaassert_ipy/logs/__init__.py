"""Explain a saved log after the fact: every assertion site and CUDA error in it, grouped by rank."""
