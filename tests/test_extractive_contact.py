"""A contact question that names one channel gets that channel's line."""

from __future__ import annotations

from tests.extractive_kit import answer, chunk

_PAGE = (
    "Pebblekite customer service email: help@pebblekite.example, we reply within two working days.\n"
    "Hotline: 0755-4410 2288, open 9:00 to 18:00 on weekdays."
)


def test_phone_number_question_quotes_the_phone_line() -> None:
    got = answer("What is the Pebblekite customer service number?", [chunk("contact", "Reach Pebblekite", _PAGE)])
    first = got.splitlines()[1]
    assert "0755-4410 2288" in first


def test_email_question_quotes_the_email_line() -> None:
    got = answer("Which email address reaches Pebblekite support?", [chunk("contact", "Reach Pebblekite", _PAGE)])
    first = got.splitlines()[1]
    assert "help@pebblekite.example" in first
