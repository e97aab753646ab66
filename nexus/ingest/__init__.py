"""Ingestion: verified platform events into the ledger, one transaction, then a doorbell."""
