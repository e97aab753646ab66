"""Outbound senders: one per platform, each turning a delivery row into one API call."""
