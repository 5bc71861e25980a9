"""Cron arithmetic (with per-butler staggering) and the registry of Python jobs."""
