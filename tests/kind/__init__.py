"""The kind lane: a node image built here, its own Docker engine, the cluster's life.

`python3 dev.py kind image|up|down` (this package's `__main__`). See README, "kind".
"""
