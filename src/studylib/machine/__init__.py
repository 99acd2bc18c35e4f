"""The machine: thread counts, the captured environment, the precision policy, measured limits, the run lock and one call's profile."""
