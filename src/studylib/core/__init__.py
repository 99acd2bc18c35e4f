"""The core: timing, statistics, the comparison layer (speed-ups, bands, verdicts), the results table, the
configuration and its shape. Imports nothing above it."""
