"""Differential tests: every dialect against the runtime that owns it (marker ``peers``)."""
