"""The append-only ledger: models, records and the repository that holds all SQL."""
