"""Errors a user can cause and fix: each message names the thing to fix."""


class ButlersError(Exception):
    """Base for errors reported to the user without a traceback."""


class RosterError(ButlersError):
    """A roster file is missing, unreadable or invalid."""


class DatabaseError(ButlersError):
    """The database cannot be reached, started or provisioned."""


class PortInUseError(ButlersError):
    """A butler's port is already taken by another process."""


class EcosystemError(ButlersError):
    """An ecosystem could not be started, found or stopped."""
