"""Butlers: a Kubernetes-native ecosystem of AI agents served over MCP."""

__version__ = "0.1.0"
