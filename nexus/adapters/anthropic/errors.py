"""Anthropic SDK failures and mid-stream `error` events → the engine's ModelError kinds."""

from __future__ import annotations

import anthropic
import httpx2  # the SDK's own HTTP stack: its errors escape a stream that breaks mid-way

from nexus.engine.model import ErrorKind, ModelError

# How the API words a prompt that does not fit the window; no stable error code exists for it.
_OVERFLOW_HINTS = (
    "prompt is too long",
    "context window",
    "context limit",
    "context length",
    "too many tokens",
)
_BY_ERROR_TYPE: dict[str, tuple[ErrorKind, bool]] = {
    "authentication_error": ("auth_failure", False),
    "permission_error": ("auth_failure", False),
    "rate_limit_error": ("rate_limit", True),
    "overloaded_error": ("model_error", True),
    "api_error": ("model_error", True),
    "timeout_error": ("timeout", True),
}


def to_model_error(error: Exception) -> ModelError:
    """Classify what the SDK (or its HTTP stack) raised; anything unforeseen is `unknown`."""
    if isinstance(error, anthropic.APITimeoutError | httpx2.TimeoutException):
        return ModelError("timeout", f"the model call timed out: {error}", retryable=True)
    if isinstance(error, anthropic.APIConnectionError | httpx2.TransportError):
        return ModelError("model_error", f"lost the model API: {error}", retryable=True)
    if isinstance(error, anthropic.APIStatusError):
        return classify(error.type, error.api_message or str(error), error.status_code)
    return ModelError("unknown", f"{type(error).__name__}: {error}")


def classify(error_type: str | None, message: str, status: int | None) -> ModelError:
    """The mapping itself: the API's `error.type` first, the HTTP status as a fallback."""
    # A mid-stream error arrives on a 200 response; that status says nothing about the error.
    status = status if status is not None and status >= 400 else None
    if error_type == "invalid_request_error" or status in (400, 413):
        overflow = status == 413 or any(hint in message.lower() for hint in _OVERFLOW_HINTS)
        kind: ErrorKind = "context_overflow" if overflow else "unknown"
        return ModelError(kind, message, status_code=status)
    if error_type in _BY_ERROR_TYPE:
        kind, retryable = _BY_ERROR_TYPE[error_type]
        return ModelError(kind, message, retryable=retryable, status_code=status)
    kind, retryable = _by_status(status)
    return ModelError(kind, message, retryable=retryable, status_code=status)


def _by_status(status: int | None) -> tuple[ErrorKind, bool]:
    if status in (401, 403):
        return "auth_failure", False
    if status == 429:
        return "rate_limit", True
    if status == 408:
        return "timeout", True
    if status is not None and status >= 500:
        return "model_error", True
    return "unknown", False
