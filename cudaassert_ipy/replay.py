"""Kept for resume stubs written before 0.1's package layout: they import ``resume_at_startup`` from here."""

from cudaassert_ipy.shell.resume import resume_at_startup

__all__ = ["resume_at_startup"]
