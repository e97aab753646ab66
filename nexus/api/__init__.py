"""The HTTP entry point: the FastAPI app over the bootstrapped graph; webhooks, REST, SSE."""
