"""Local stand-ins for external services the channel modules talk to."""
