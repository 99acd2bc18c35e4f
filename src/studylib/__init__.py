"""Shared library of the inference-speed study: profiles, timing, models, runtimes, results, reports."""

__version__ = "0.1.0"
