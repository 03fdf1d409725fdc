"""DynamoDB repositories: storage errors become domain errors, items become domain values."""
