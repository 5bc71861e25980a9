"""The local ecosystem's database description never shows an external server's password."""

from butlers.ecosystem.database import mask_password


def test_mask_password_hides_only_the_password() -> None:
    assert mask_password("postgresql://u:secret@h:1/d") == "postgresql://u:***@h:1/d"
