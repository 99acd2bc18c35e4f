"""Measuring, from a profile to results rows."""
