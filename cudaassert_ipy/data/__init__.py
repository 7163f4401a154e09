"""Data: the DataLoader bookmark (which batch, which dataset samples were in flight) and what it tells after a
failure; preflight, which checks a dataset before training, is in checks/."""
