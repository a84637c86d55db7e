"""What the analysis derives from the run's events trace: small, read with pyarrow, computed on the
driver without Spark."""
