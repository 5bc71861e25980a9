"""The butler daemon: one FastMCP server per butler, served over HTTP."""
