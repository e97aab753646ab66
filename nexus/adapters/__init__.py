"""Adapters: inbound parsers and signature checks, outbound senders, external clients."""
