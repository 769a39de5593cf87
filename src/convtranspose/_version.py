"""The library version: its one definition (pyproject reads it from here)."""

__version__ = "0.1.0"
