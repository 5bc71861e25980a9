"""The contacts module's dashboard views: contacts, and one contact with its history."""

from butlers.modules.contacts.store import CONTACTS, ContactShown, contact_shown
from butlers.modules.view import Filter, View

VIEWS = (
    View(
        "/api/contacts",
        "Contact",
        CONTACTS,
        (Filter("q", max_length=200),),
        summary="Contacts of every butler with the module, newest first; `q` matches name "
        "or email.",
    ),
    View(
        "/api/contacts/{butler}/{contact_id}",
        "ContactDetail",
        kind="detail",
        read=contact_shown,
        record=ContactShown,
        what="contact",
    ),
)
