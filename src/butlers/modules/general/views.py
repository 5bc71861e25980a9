"""The general module's dashboard views: collections and their notes."""

from butlers.modules.general.store import COLLECTIONS, NOTES
from butlers.modules.view import Filter, View

VIEWS = (
    View("/api/general/collections", "Collection", COLLECTIONS, kind="list"),
    View("/api/general/notes", "Note", NOTES, (Filter("collection"),)),
)
