"""Data: checks over a dataset or a DataLoader on the CPU (``preflight``)."""
