"""Numbers with their uncertainty: sample statistics, the variance model, the comparison layer (pair, speed-up,
geometric mean, band, verdict), the verdict table, calibration, the results table and the one formatter."""
