"""The dashboard: seed 003's HTTP API over every butler of an ecosystem.

Reads go to each butler's schema by SQL through the read-only dashboard role;
writes go through the owning butler's MCP tools and are audited in the
dashboard's own schema. `create_app` (in `app.py`) builds the FastAPI app;
nothing is built at import time.
"""
