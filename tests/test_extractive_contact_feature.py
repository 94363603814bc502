"""Whether a contact channel has something ("does your hotline have English-speaking staff?") is answered by the
line that says so, number or not, on an invented tea shop's pages; a plain number question still gets the number."""

from __future__ import annotations

from tests.extractive_kit import answer, chunk

HOTLINE = chunk(
    "contact",
    "茶舍 联系我们",
    "客服热线\n全国客服热线：400-613-2288，每天 9:00–21:00。\n杭州店电话：0571-8123 4567",
    section="客服热线",
)
FAQ = chunk(
    "faq",
    "Help for Visitors",
    "Help in English\nYes. Dial the national hotline and choose option 5 for English.\nThe tea menu is bilingual.",
    section="Help in English",
    index=1,
)


def test_the_line_saying_the_channel_has_it_answers() -> None:
    out = answer("Does your hotline have anyone who speaks English?", [HOTLINE, FAQ])
    assert "option 5" in out


def test_a_number_asked_for_is_still_the_number() -> None:
    out = answer("What's your hotline number?", [HOTLINE, FAQ])
    assert "400-613-2288" in out
