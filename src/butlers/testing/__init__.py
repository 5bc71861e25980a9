"""Test support shipped with the package: the LLM script server for the scripted runtime."""
