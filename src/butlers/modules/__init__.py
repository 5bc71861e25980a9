"""Opt-in capabilities of a butler: config model, tools, migration chain, dependencies.

A module lives in this package (`butlers.modules.<name>`) and is found through the
static registry in `butlers.modules.registry`; a roster enables it by name under
`spec.modules`. The loader starts enabled modules in dependency order and records
how each one fared; a failed module never takes the butler down with it.
"""
