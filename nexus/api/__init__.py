"""The HTTP surface: FastAPI app factory, inbound webhooks, REST and SSE."""
