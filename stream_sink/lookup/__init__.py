"""The key -> row position lookup shared by the table formats: the CDC writers, Iceberg's
positions commits and Delta's (NumPy, no table format)."""
