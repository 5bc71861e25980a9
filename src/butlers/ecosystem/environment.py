"""The environment of one butler process of a local ecosystem: its own, no more.

The supervisor's environment holds every butler's credentials (the messenger's
`EMAIL_PASSWORD`, a runtime's API key, the admin DSN). A butler process gets the OS
basics, the `BUTLERS_*` settings a butler reads, and the variables its own spec
names: `spec.env`, its modules' credential variables and its runtime's key.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from butlers.settings import BUTLER_SETTINGS_ENVIRONMENT, OS_ENVIRONMENT, runtime_adapter

if TYPE_CHECKING:
    from butlers.spec import ButlerResource


def butler_variables(resource: ButlerResource, environ: Mapping[str, str]) -> set[str]:
    """The names of the variables this butler may inherit."""
    # Imported here: the module registry and the runtimes pull in FastMCP (~1.3 s of
    # imports). The supervisor calls this in a child of the fork server, which has
    # them loaded already (`launcher.plan_butlers`), and never imports them itself.
    from butlers.llm.config import runtime_key_env
    from butlers.modules.loader import module_env_names

    spec = resource.spec
    names = {*OS_ENVIRONMENT, *BUTLER_SETTINGS_ENVIRONMENT}
    names |= {var.name for var in spec.env}
    names |= module_env_names(spec.modules)
    key = runtime_key_env(spec, runtime_adapter(environ))
    if key:
        names.add(key)
    return names


def base_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """What a process that is no butler (the fork server) gets: the OS basics only."""
    return {name: environ[name] for name in OS_ENVIRONMENT if name in environ}
