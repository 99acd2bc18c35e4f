"""Numbers with their uncertainty: sample statistics, the variance model, speed-ups and verdicts, the results table."""
