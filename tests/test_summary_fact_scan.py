"""The summary's fact scan tries a match only near digits and at identifier runs: it must find exactly what
the full scan of the fact pattern finds."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from rag_service import summary

# Pieces that make the patterns' hard cases: month names before a digit, currency marks and codes, long
# identifier runs with the digit far in, Chinese date words, full-width digits (\d takes them).
_PIECES = st.sampled_from(
    [
        "0", "1", "7", "9", "13", "2031", "４", "-", "/", ".", ",", " ", "\n", "年", "月", "日", "号", "元", "块",
        "万元", "¥", "$", "RMB", "USD ", "yuan", "Sept", "September", "Feb", "May", "of ", "th", "st",
        "QZ", "abcdefghijkl", "Kx-", "-Kx", "订单", "价格", "是", "：",
    ]
)  # fmt: skip


@settings(max_examples=1500, deadline=None)
@given(st.lists(_PIECES, max_size=40))
def test_fact_scan_finds_what_the_full_scan_finds(pieces: list[str]) -> None:
    text = "".join(pieces)
    expected = [(m.start(), m.end(), m.group()) for m in summary._FACTS.finditer(text)]
    assert [(m.start(), m.end(), m.group()) for m in summary._fact_matches(text)] == expected


def test_fact_scan_reaches_back_to_a_month_and_an_identifier_run() -> None:
    # A month name or currency code inside a longer run of letters and hyphens starts no identifier, so only
    # the reach finds it; the identifier's digit is further from its start than any reach.
    text = "寄出 Re-September. 4 号，单号 Qwertyuiopasdfgh-7，付款 QZUSD 60"
    expected = ["September. 4", "Qwertyuiopasdfgh-7", "USD 60"]
    assert [m.group() for m in summary._FACTS.finditer(text)] == expected
    assert [m.group() for m in summary._fact_matches(text)] == expected


def test_an_identifier_can_end_at_the_digit_the_next_fact_starts_with() -> None:
    # \d takes a full-width digit and the identifier's lookahead sees it after its ASCII run: the run is a
    # fact without it, and the digit starts the next one.
    text = "编号ABCDEF４元"
    expected = ["ABCDEF", "４元"]
    assert [m.group() for m in summary._FACTS.finditer(text)] == expected
    assert [m.group() for m in summary._fact_matches(text)] == expected
