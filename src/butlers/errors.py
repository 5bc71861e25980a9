"""Errors a user can cause and fix: each message names the thing to fix."""


class ButlersError(Exception):
    """Base for errors reported to the user without a traceback."""


class RosterError(ButlersError):
    """A roster file is missing, unreadable or invalid."""


class DatabaseError(ButlersError):
    """The database cannot be reached, started or provisioned.

    `reason` is a CamelCase word for machines (the operator's condition reason), e.g.
    `DatabaseUnreachable`, `InsufficientPrivilege`, `InvalidPassword`.
    """

    def __init__(self, message: str, reason: str = "DatabaseError") -> None:
        super().__init__(message)
        self.reason = reason


class PortInUseError(ButlersError):
    """A butler's port is already taken by another process."""


class EcosystemError(ButlersError):
    """An ecosystem could not be started, found or stopped."""
