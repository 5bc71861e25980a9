"""Test support shared by the unit, integration and e2e tiers and the benchmarks.

Never imported by `butlers` or `butlers_operator` (an import-linter contract).
"""
