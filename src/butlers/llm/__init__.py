"""LLM runtimes: model clients (OpenAI-compatible, Anthropic, scripted), the agent loop
that lets a model call one butler's MCP tools, and the Claude Code CLI runner."""
