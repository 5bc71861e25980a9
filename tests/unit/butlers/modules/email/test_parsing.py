"""Reading a received e-mail: own text, quoted text, threading, attachments, replies."""

from email.message import EmailMessage

from butlers.modules.email.inbound import build_mail_envelope
from butlers.modules.email.module import reply_subject
from butlers.modules.email.parsing import html_to_text, parse_mail, split_quoted
from butlers.switchboard.triage import facts_of


def test_quoted_lines_and_their_attribution_are_split_from_the_own_text() -> None:
    own, quoted = split_quoted("Yes, do it.\n\nOn Mon, Ann wrote:\n> shall I?\n> ok\n\nThanks")
    assert own == "Yes, do it.\n\nThanks"
    assert quoted == ["On Mon, Ann wrote:\nshall I?\nok"]


def test_a_forwarded_block_is_quoted_to_its_end() -> None:
    own, quoted = split_quoted("FYI\n---------- Forwarded message ---------\nFrom: x\nPay now")
    assert own == "FYI"
    assert quoted == ["---------- Forwarded message ---------\nFrom: x\nPay now"]


def test_html_keeps_paragraphs_and_drops_scripts_and_styles() -> None:
    quoted: list[str] = []
    text = html_to_text(
        "<style>x{}</style><p>One &amp; two</p><p>Three<br>four</p><script>evil()</script>",
        quoted,
    )
    assert text == "One & two\n\nThree\nfour"
    assert quoted == []


def test_an_attached_message_is_quoted_and_described() -> None:
    inner = EmailMessage()
    inner["From"] = "stranger@evil.example"
    inner["Subject"] = "Invoice"
    inner.set_content("Wire 1000 EUR to ...")
    outer = EmailMessage()
    outer["From"] = "Owner <OWNER@example.org>"
    outer["Subject"] = "Fwd: Invoice"
    outer["Message-ID"] = "<f1@example.org>"
    outer.set_content("Is this real?")
    outer.add_attachment(inner)
    mail = parse_mail(outer.as_bytes())
    assert mail.text == "Is this real?"
    assert mail.sender == "owner@example.org"
    assert len(mail.quoted) == 1 and "Wire 1000 EUR" in mail.quoted[0]
    assert "From: stranger@evil.example" in mail.quoted[0]
    assert [a["type"] for a in mail.attachments] == ["message/rfc822"]


def test_without_message_id_the_thread_is_the_reply_target_or_the_uid() -> None:
    message = EmailMessage()
    message["From"] = "a@example.org"
    message["In-Reply-To"] = "<parent@example.org>"
    message.set_content("hi")
    mail = parse_mail(message.as_bytes())
    assert (mail.message_id, mail.thread_root) == (None, "<parent@example.org>")
    envelope = build_mail_envelope(
        mail, mailbox="b@example.org", uidvalidity=7, uid=3, size=10, cut=False
    )
    assert envelope.event.external_event_id == "7:3"
    assert envelope.event.external_thread_id == "<parent@example.org>"


def test_the_same_mail_read_twice_has_the_same_key_and_content() -> None:
    message = EmailMessage()
    message["From"] = "a@example.org"
    message["Message-ID"] = "<k@example.org>"
    message["Subject"] = "S"
    message.set_content("body")
    first, second = (
        build_mail_envelope(
            parse_mail(message.as_bytes()), mailbox="m", uidvalidity=v, uid=u, size=1, cut=False
        )
        for v, u in ((1, 5), (2, 1))
    )
    assert first.idempotency_key == second.idempotency_key
    assert first.content_digest() == second.content_digest()


def test_a_mail_with_only_an_attachment_still_has_text() -> None:
    message = EmailMessage()
    message["From"] = "a@example.org"
    message.add_attachment(b"\x89PNG", "image", "png", filename="photo.png")
    mail = parse_mail(message.as_bytes())
    envelope = build_mail_envelope(mail, mailbox="m", uidvalidity=1, uid=1, size=1, cut=False)
    assert envelope.payload.text == "(no text; attached: photo.png)"


def test_an_answer_has_one_re_prefix() -> None:
    assert reply_subject("Groceries", None) == "Re: Groceries"
    assert reply_subject("RE: Groceries", "ignored") == "RE: Groceries"
    assert reply_subject(None, "Weekly") == "Weekly"
    assert reply_subject(None, None) == "Notification"


def test_nul_characters_never_reach_the_envelope() -> None:
    raw = b"From: a@example.org\r\nSubject: x\x00y\r\n\r\nhel\x00lo\r\n> quo\x00ted\r\n"
    envelope = build_mail_envelope(
        parse_mail(raw), mailbox="m", uidvalidity=1, uid=1, size=1, cut=False
    )
    assert "\x00" not in envelope.model_dump_json().replace("\\u0000", "\x00")
    assert envelope.payload.text == "xy\n\nhello"


def test_quoted_text_is_bounded_as_a_whole() -> None:
    body = "mine\n" + "\n\n".join(f"> {'q' * 50_000}" for _ in range(5))
    message = EmailMessage()
    message["From"] = "a@example.org"
    message.set_content(body)
    mail = parse_mail(message.as_bytes())
    assert sum(len(q) for q in mail.quoted) <= 90_000


def test_list_headers_reach_the_envelope_for_triage() -> None:
    message = EmailMessage()
    message["From"] = "News <news@shop.example>"
    message["List-Id"] = "Deals <deals.shop.example>"
    message["List-Unsubscribe"] = "<mailto:unsub@shop.example>"
    message.set_content("50% off")
    envelope = build_mail_envelope(
        parse_mail(message.as_bytes()), mailbox="m", uidvalidity=1, uid=1, size=1, cut=False
    )
    facts = facts_of(envelope)
    assert facts.list_id == "Deals <deals.shop.example>" and facts.mailing_list
    assert facts.sender == "news@shop.example"
