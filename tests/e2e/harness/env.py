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
}

# A secret in the environment of the process that starts the ecosystem and named by no
# butler: no butler process may hold it (each gets only its own environment).
SUPERVISOR_SECRET = ("E2E_SUPERVISOR_SECRET", "supervisor-only-5b0e1c")
