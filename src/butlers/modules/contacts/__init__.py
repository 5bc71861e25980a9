"""`contacts`: the relationship butler's personal CRM (contacts, notes, interactions).

`contact_delete` waits for approval by default; `contact_update` does when it changes
where the contact is reached (email or phone). Both need the `approvals` module.


The MCP-facing class is in `module.py`; the package itself imports nothing, so
`store` and `views` can be imported alone (the dashboard does).
"""
