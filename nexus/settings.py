"""Configuration: the only module that reads the environment (names: deploy/env.example)."""

from __future__ import annotations

from functools import lru_cache
from typing import Literal

from pydantic import AliasChoices, Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

DEFAULT_DATABASE_URL = "sqlite:///./.nexus/nexus.db"
DEFAULT_ANTHROPIC_MODEL = "claude-sonnet-4-5"
SCRIPTED_MODEL = "scripted"


class Settings(BaseSettings):
    """Every setting Nexus reads, from the environment or a `.env` file."""

    model_config = SettingsConfigDict(
        env_prefix="NEXUS_", env_file=".env", env_file_encoding="utf-8", extra="ignore"
    )

    database_url: str = DEFAULT_DATABASE_URL
    redis_url: str | None = None
    broker_url_override: str | None = Field(
        default=None, validation_alias=AliasChoices("NEXUS_BROKER_URL")
    )
    model: str | None = None
    # The model that writes compaction summaries (a cheaper one, say); unset: the turn's.
    summary_model: str | None = None
    anthropic_api_key: SecretStr | None = Field(
        default=None, validation_alias=AliasChoices("ANTHROPIC_API_KEY")
    )
    anthropic_base_url: str | None = Field(
        default=None, validation_alias=AliasChoices("ANTHROPIC_BASE_URL")
    )
    # Model calls: an explicit timeout and retry budget (the SDK retries 429/5xx itself).
    model_timeout_seconds: int = Field(default=120, ge=1)
    model_max_retries: int = Field(default=2, ge=0)
    # The offline `scripted` model waits this long at the start of every call, standing in
    # for a real model's latency (benchmarks of scaling); 0 answers at once.
    scripted_delay_ms: int = Field(default=0, ge=0)
    # Tool loop bound: model calls per turn before the turn ends regardless.
    max_tool_iterations: int = Field(default=8, ge=1)
    # How deep workers may dispatch workers (0 = unlimited).
    max_worker_depth: int = Field(default=3, ge=0)
    # Cap the context below the model's window (cost control); unset: the model's window.
    context_window: int | None = Field(default=None, ge=1000)
    # A YAML or JSON file of model prices merged over the built-in table (docs/engine.md,
    # "Cost and usage"); unset: the built-in Anthropic prices.
    prices: str | None = None
    # Tool credentials by id (docs/engine.md): NEXUS_CREDENTIAL_<ID>, else this JSON, TOML or
    # YAML file of id → secret, read when a tool call needs it (never at start-up).
    secrets_file: str | None = None
    # The deployment's own addresses, which `http_fetch` never reaches whatever a persona's
    # permissions.network allows (docs/engine.md "Credentials and sandbox"): a JSON list of
    # host, host:port, address, address:port or network (its Flower, its metrics, the API
    # pod's address). NEXUS_API_URL's and NEXUS_PUBLIC_URL's host and port are always in.
    own_addresses: list[str] = Field(default_factory=list)
    # Layer 1 of every context: AGENTS.md and identity files from this directory
    # (docs/engine.md "Context layers"); unset: ./workspace if it exists; "": none.
    workspace_dir: str | None = None
    policies: str | None = None
    hooks_dir: str = "./hooks"
    # Hook processes (docs/hooks.md): how many each worker process keeps ready, the memory
    # each may use (MiB, 0: no limit), and the environment variables hooks may read (a JSON
    # list of names; none of the worker's own otherwise).
    hooks_processes: int = Field(default=4, ge=0)
    hooks_memory_mb: int = Field(default=512, ge=0)
    hooks_env: list[str] = Field(default_factory=list)
    api_tokens: SecretStr | None = None
    # Tokens that may also post events as a platform Nexus serves (answered in its chats).
    api_admin_tokens: SecretStr | None = None
    # /metrics wants one of api_tokens like /v1; true serves it to anyone who reaches it.
    metrics_public: bool = False
    # A worker's own metrics (nexus_task_duration_seconds): each worker process that runs
    # tasks serves them on the first free port from this one up; unset, none is opened.
    # `nexus dev` needs none: its worker runs inside the API, whose /metrics has them.
    worker_metrics_port: int | None = Field(default=None, ge=1, le=65535)
    # Where the CLI finds a running Nexus (`nexus send`, `nexus sessions`), and its token.
    api_url: str = "http://127.0.0.1:8000"
    api_token: SecretStr | None = None

    telegram_secret_token: SecretStr | None = None
    slack_signing_secret: SecretStr | None = None
    discord_public_key: str | None = None
    whatsapp_app_secret: SecretStr | None = None
    twilio_auth_token: SecretStr | None = None
    github_webhook_secret: SecretStr | None = None
    webhook_secret: SecretStr | None = None

    whatsapp_verify_token: SecretStr | None = None
    # The base URL platforms call (https://bot.example.com): Twilio signs the URL it requested,
    # which a TLS-terminating proxy hides from the app.
    public_url: str | None = None
    # Any /v1 body above this is refused with 413 before it is read (or as it streams in).
    max_body_bytes: int = Field(default=1024 * 1024, ge=1024)

    # Outbound senders: tokens, and API bases that tests (or a proxy) may point elsewhere.
    telegram_bot_token: SecretStr | None = None
    telegram_api_base: str = "https://api.telegram.org"
    slack_bot_token: SecretStr | None = None
    slack_api_base: str = "https://slack.com/api"
    discord_bot_token: SecretStr | None = None
    discord_api_base: str = "https://discord.com/api/v10"
    whatsapp_access_token: SecretStr | None = None
    whatsapp_api_base: str = "https://graph.facebook.com/v21.0"
    twilio_account_sid: str | None = None
    twilio_api_base: str = "https://api.twilio.com"
    # Where replies to the generic webhook adapter go, signed like the inbound side.
    webhook_reply_url: str | None = None
    smtp_host: str | None = None
    smtp_port: int = Field(default=587, ge=1, le=65535)
    smtp_username: str | None = None
    smtp_password: SecretStr | None = None
    smtp_starttls: bool = True
    email_from: str | None = None
    # Gmail through the Gmail API (docs/adapters.md "Connect Gmail"). Unset mailbox or
    # credential: the channel is off. The credential id names NEXUS_CREDENTIAL_<ID> (or a
    # secrets file entry) holding {"client_id", "client_secret", "refresh_token"} as JSON;
    # the push token is the `?token=` in the Pub/Sub push endpoint's URL; the topic is
    # what `users.watch` publishes to (unset: no watch, the timer's sync alone finds mail).
    gmail_mailbox: str | None = None
    gmail_credential: str | None = None
    gmail_push_token: SecretStr | None = None
    gmail_topic: str | None = None
    gmail_api_base: str = "https://gmail.googleapis.com"
    gmail_token_url: str = "https://oauth2.googleapis.com/token"  # noqa: S105 - a URL
    # After a history id Gmail no longer knows (404), at most this many recent INBOX
    # messages are read again.
    gmail_resync_limit: int = Field(default=50, ge=1, le=500)
    # Inbound images and PDFs the model reads but cannot open by URL (Telegram, Slack,
    # WhatsApp Cloud) are fetched at turn time with the tokens above: at most this many
    # bytes (the Messages API takes images up to 5 MB), within this many seconds.
    attachment_max_bytes: int = Field(default=5_000_000, ge=1024)
    attachment_fetch_timeout_seconds: float = Field(default=10.0, gt=0)
    # iMessage through a BlueBubbles server (a Mac): its URL and server password (sent as
    # the `password` query parameter its API wants), for replies and attachment downloads.
    # Its webhooks carry the password, or NEXUS_BLUEBUBBLES_WEBHOOK_SECRET, in their URL.
    bluebubbles_url: str | None = None
    bluebubbles_password: SecretStr | None = None
    bluebubbles_webhook_secret: SecretStr | None = None
    # AppleScript works on any server; the Private API (a helper bundle) is faster.
    bluebubbles_send_method: Literal["apple-script", "private-api"] = "apple-script"

    # Delivery: attempts per chunk, and how long a send may take before another worker
    # looks at it again.
    delivery_max_attempts: int = Field(default=3, ge=1)
    delivery_lease_ms: int = Field(default=60_000, ge=1000)
    # A worker that died mid-send leaves its outcome unknown. `fail` records the chunk as
    # failed rather than risk a duplicate on platforms without an idempotency key;
    # `resend` sends it again (at least once). Idempotent platforms always resend.
    delivery_uncertain: Literal["fail", "resend"] = "fail"
    # Sends per second per platform, shared by every worker (Redis when configured).
    delivery_rate_limits: dict[str, float] = Field(
        default_factory=lambda: {
            "telegram": 25.0,
            "slack": 1.0,
            "discord": 5.0,
            "whatsapp": 50.0,
            "twilio": 1.0,
            "email": 5.0,
            "webhook": 50.0,
            "bluebubbles": 2.0,
        }
    )

    # Per-session queue: the most inputs that may wait, and what to drop beyond that.
    queue_cap: int = Field(default=20, ge=1)
    queue_drop_policy: Literal["old", "new", "summarize"] = "summarize"
    # `collect` mode: the quiet time after the last message before they run as one turn.
    collect_window_ms: int = Field(default=1000, ge=0)
    # The router runs the turn of the last idle session it queued work for itself, rather
    # than ringing it through the broker (one hop less). Off: every session is rung.
    inline_session_runs: bool = True
    # How many sessions' contexts each process keeps, so a session's next turn reads only
    # the turns after the last one it read (turns never change once committed). 0: none.
    context_cache_sessions: int = Field(default=64, ge=0)
    # ... and at most this many turns in all, whatever their sessions (bounds the memory).
    context_cache_turns: int = Field(default=2000, ge=0)
    # How often each worker looks for runs that died (claimed work, no live lease) or whose
    # ring was lost (queued work due for a whole period, no live lease: say, a run cut off
    # from Redis put its turn back) and rings their sessions, so they resume a lease TTL
    # after the loss with no beat running. 0: off (the beat's relay finds them, a tick later).
    watchdog_seconds: float = Field(default=5.0, ge=0)
    # A session's lease in Redis; a keep-alive extends it while a turn runs.
    session_lease_ms: int = Field(default=30_000, ge=1000)
    # The longest a turn may run; the broker's visibility timeout is set well above it.
    turn_time_limit_seconds: int = Field(default=600, ge=1)
    # How long Redis holds an unacknowledged task before redelivering it; unset: twice the
    # turn time limit plus a minute. A worker refuses to start if it is not above the limit.
    visibility_timeout_seconds: int | None = Field(default=None, ge=1)
    # Flower's basic auth, "user:password" (comma-separate several).
    flower_basic_auth: SecretStr | None = None
    # Prefix for every broker key, so several deployments (or test runs) share one Redis.
    broker_prefix: str | None = None

    # Logs: JSON lines for machines (the default), or plain text for a person at a terminal.
    log_format: Literal["json", "console"] = "json"
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"

    # Database pool sizing for the distributed mode; SQLite ignores it.
    db_pool_size: int = Field(default=5, ge=1)
    db_max_overflow: int = Field(default=10, ge=0)
    # The longest a Postgres connection or round trip may wait for the server before the
    # connection is given up, so a dead link is noticed in bounded time and a turn stuck on
    # it ends, releasing its session's lease (docs/runtime.md). 0: as long as TCP waits.
    database_timeout_seconds: float = Field(default=30.0, ge=0)

    # The files channel (docs/adapters.md "Connect a folder or uploads (Files)"): each new
    # file in this folder becomes one event; unset: no folder is watched. A file is recorded
    # once a scan sees it unchanged at least this long after an earlier scan first saw it.
    files_dir: str | None = None
    files_settle_seconds: float = Field(default=30.0, ge=0)

    @field_validator("database_url")
    @classmethod
    def _database_url_has_scheme(cls, value: str) -> str:
        if "://" not in value:
            raise ValueError(
                f"NEXUS_DATABASE_URL must be a SQLAlchemy URL such as {DEFAULT_DATABASE_URL!r} "
                f"or 'postgresql://user@host/db', got {value!r}"
            )
        return value

    @property
    def broker_url(self) -> str:
        """Celery's broker: explicit, else Redis, else the in-process transport."""
        return self.broker_url_override or self.redis_url or "memory://"

    @property
    def default_model(self) -> str:
        """The model a persona uses unless it names one: Anthropic with a key, else scripted."""
        if self.model:
            return self.model
        return DEFAULT_ANTHROPIC_MODEL if self.anthropic_api_key else SCRIPTED_MODEL

    @property
    def gmail_enabled(self) -> bool:
        """True when the Gmail channel is configured (a mailbox and its credential)."""
        return bool(self.gmail_mailbox and self.gmail_credential)

    @property
    def embedded(self) -> bool:
        """True when running without Redis: one process, in-process coordination."""
        return self.redis_url is None


def revealed(value: SecretStr | None) -> str | None:
    """A secret setting's value, for the one place that must use it (never for logs)."""
    return value.get_secret_value() if value is not None else None


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process's settings, read once on first use (never at import)."""
    return Settings()
