"""Environment the e2e ecosystem's butlers run with, on top of the process environment."""

# Short enough that an expiry test is quick, long enough for a decision on two busy cores.
APPROVAL_TIMEOUT_SECONDS = 3.0

E2E_ENV = {
    "BUTLERS_APPROVAL_TIMEOUT_SECONDS": str(APPROVAL_TIMEOUT_SECONDS),
    "BUTLERS_HEARTBEAT_INTERVAL": "1",
    # Channel modules must fail for lack of credentials, whatever the developer's shell has.
    "TELEGRAM_BOT_TOKEN": "",
    "EMAIL_USERNAME": "",
    "EMAIL_PASSWORD": "",
    # The dashboard: status probes, SSE keepalives and the LISTEN fallback poll, quick.
    "BUTLERS_DASHBOARD_PROBE_INTERVAL": "0.5",
    "BUTLERS_DASHBOARD_KEEPALIVE": "1",
    "BUTLERS_DASHBOARD_POLL_INTERVAL": "0.2",
}
