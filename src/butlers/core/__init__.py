"""A butler's own context and session services: what tools and modules build on.

`context.ButlerContext` is what a running butler knows about itself; the spawner
runs its LLM sessions one at a time and the scheduler runs its due tasks;
`services` builds and owns both. Nothing here imports tools, modules or the daemon.
"""
