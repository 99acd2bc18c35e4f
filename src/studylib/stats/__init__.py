"""Numbers with their uncertainty: sample statistics, the variance model, the comparison layer (pair, speed-up,
geometric mean, band, verdict, the false-discovery step), the verdict table, calibration and the results table."""
