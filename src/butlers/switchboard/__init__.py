"""The switchboard pipeline: ingest → classify → fan-out dispatch."""
