"""PII masking of text and of log lines."""

from __future__ import annotations

import dataclasses
import datetime
import logging

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rag_core.settings import PrivacySettings, Settings
from rag_service.privacy import (
    ORDER_CONTEXT,
    Masker,
    MaskingFilter,
    install_log_masking,
    order_numbers,
    uninstall_log_masking,
)


@pytest.fixture(scope="module")
def masker() -> Masker:
    return Masker()


@pytest.mark.parametrize(
    ("text", "masked"),
    [
        # mainland mobile numbers: first 3 and last 4
        ("13812345678", "138****5678"),
        ("我的手机是13812345678，谢谢", "我的手机是138****5678，谢谢"),
        ("电话 138-1234-5678 或 159 8765 4321", "电话 138****5678 或 159****4321"),
        ("+86 13812345678 / +8613812345678", "+86 138****5678 / +86138****5678"),
        # resident ID numbers: first 6 and last 4
        ("身份证11010519491231002X", "身份证110105********002X"),
        ("id 440308199901011234.", "id 440308********1234."),
        # bank cards, 16-19 digits with a valid Luhn check digit: last 4
        ("卡号6222021234567894", "卡号************7894"),
        ("卡号6222021234567890128", "卡号***************0128"),
        ("card 6222 0212 3456 7894", "card ************7894"),
        # e-mail: first character and the domain
        ("alice@example.com", "a***@example.com"),
        ("联系 bob.smith+vip@mail.example.com.cn 吧", "联系 b***@mail.example.com.cn 吧"),
        ("13812345678@163.com", "1***@163.com"),
        # never masked: the hotline, order numbers, prices, dates, models, short numbers
        ("客服热线400-820-1234", "客服热线400-820-1234"),
        ("热线 4008201234", "热线 4008201234"),
        ("订单号XC20250301000123已发货", "订单号XC20250301000123已发货"),
        ("订单 XC20250301000123", "订单 XC20250301000123"),
        ("iPhone 16 Pro 256GB 售价 7999 元，2025-03-01 发货", "iPhone 16 Pro 256GB 售价 7999 元，2025-03-01 发货"),
        ("型号 A3293，编号 12345678901234", "型号 A3293，编号 12345678901234"),
        ("", ""),
    ],
)
def test_masks_each_kind_and_nothing_else(masker: Masker, text: str, masked: str) -> None:
    assert masker.mask(text) == masked
    assert masker.mask(masked) == masked  # idempotent


def test_settings_overrides_and_switch() -> None:
    assert Masker.from_settings(PrivacySettings(enabled=False)) is None
    # A stricter phone pattern (no separators) and e-mail masking switched off.
    custom = Masker.from_settings(
        PrivacySettings(patterns={"phone": r"(?<!\d)1[3-9]\d{9}(?!\d)", "email": ""}),
    )
    assert custom is not None
    assert custom.mask("13812345678 alice@example.com") == "138****5678 alice@example.com"
    assert custom.mask("138-1234-5678") == "138-1234-5678"
    with pytest.raises(ValueError, match="unknown kinds"):
        PrivacySettings(patterns={"passport": "x"})
    assert Settings().privacy.enabled


def test_keep_patterns_win_over_broader_overrides() -> None:
    broad = Masker.from_settings(PrivacySettings(patterns={"bank_card": r"\d{10,19}"}))
    assert broad is not None
    assert broad.mask("热线4008201234 卡6222021234567894") == "热线4008201234 卡************7894"


def test_log_filter_masks_messages_args_and_tracebacks(masker: Masker, caplog: pytest.LogCaptureFixture) -> None:
    log = logging.getLogger("rag_service.test_privacy")
    caplog.handler.addFilter(MaskingFilter(masker))
    try:
        with caplog.at_level(logging.INFO, logger=log.name):
            log.info("user 13812345678 asked about order XC20250301000123")
            log.info("id=%s card=%s mail=%s", "11010519491231002X", "6222021234567890128", "alice@example.com")
            try:
                raise ValueError("bad phone 13912345678")
            except ValueError:
                log.exception("failed for %s", "bob@example.com")
    finally:
        caplog.handler.filters.clear()
    text = caplog.text
    assert "138****5678" in text and "XC20250301000123" in text
    assert "110105********002X" in text and "***************0128" in text and "a***@example.com" in text
    assert "139****5678" in text and "b***@example.com" in text
    for raw in ("13812345678", "11010519491231002X", "6222021234567890128", "alice@", "13912345678", "bob@"):
        assert raw not in text
    assert caplog.records[1].getMessage() == "id=110105********002X card=***************0128 mail=a***@example.com"


def test_install_masks_every_logger(masker: Masker, caplog: pytest.LogCaptureFixture) -> None:
    install_log_masking(masker)
    try:
        with caplog.at_level(logging.WARNING):
            logging.getLogger("uvicorn.error").warning("client %s", "13812345678")
            logging.getLogger("some.library").warning("mail alice@example.com")
    finally:
        uninstall_log_masking()
    assert [r.getMessage() for r in caplog.records] == ["client 138****5678", "mail a***@example.com"]
    logging.getLogger("some.library").warning("after 13812345678")
    assert caplog.records[-1].getMessage() == "after 13812345678"


# -- order numbers are not bank cards or ID numbers --------------------------------------------------
# The checks are computed here, independently of python-stdnum, which the masker uses.


def luhn_ok(number: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(number)):
        d = int(ch) * (2 if i % 2 else 1)
        total += d - 9 if d > 9 else d
    return total % 10 == 0


def with_luhn_digit(body: str) -> str:
    return next(body + d for d in "0123456789" if luhn_ok(body + d))


def without_luhn_digit(body: str) -> str:
    return next(body + d for d in "0123456789" if not luhn_ok(body + d))


def gb11643_check(first17: str) -> str:
    weights = [7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2]
    return "10X98765432"[sum(int(c) * w for c, w in zip(first17, weights, strict=True)) % 11]


def resident_id(region: str, born: datetime.date, seq: int) -> str:
    first17 = f"{region}{born:%Y%m%d}{seq:03d}"
    return first17 + gb11643_check(first17)


def card_masked(number: str) -> str:
    return "*" * (len(number) - 4) + number[-4:]


ORDER_PREFIXES = ["订单号", "我的订单号是 ", "订单号码为：", "订单编号:", "订单 ", "单号", "快递单号 ", "order ", "Order No. ",
                  "order number: ", "ORDER #", "order#"]  # fmt: skip


def test_the_issue_example_is_an_order_number_and_a_valid_card_number(masker: Masker) -> None:
    number = "3187654321098765432"
    assert luhn_ok(number)  # the "both" case: a bank card by its digits, an order number by its context
    assert masker.mask(f"我的订单号是 {number}") == f"我的订单号是 {number}"
    assert masker.mask(f"卡号 {number}") == f"卡号 {card_masked(number)}"


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(length=st.integers(16, 19), seed=st.integers(0, 10**19), prefix=st.sampled_from(ORDER_PREFIXES))
def test_digit_runs_of_card_length(masker: Masker, length: int, seed: int, prefix: str) -> None:
    body = str(seed).zfill(length)[: length - 1]
    body = ("6" + body[1:]) if body[0] == "0" else body
    valid, invalid = with_luhn_digit(body), without_luhn_digit(body)
    # Without context: masked exactly when the Luhn check passes (an 18-digit run may be an ID number).
    if not (length == 18 and gb11643_check(valid[:17]) == valid[-1]):
        assert masker.mask(f"付款卡 {valid} 已绑定") == f"付款卡 {card_masked(valid)} 已绑定"
    if not (length == 18 and gb11643_check(invalid[:17]) == invalid[-1]):
        assert masker.mask(f"付款卡 {invalid} 已绑定") == f"付款卡 {invalid} 已绑定"
    # After the word for an order number: kept, valid or not.
    for number in (valid, invalid):
        assert masker.mask(f"{prefix}{number}，请查一下") == f"{prefix}{number}，请查一下"


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    region=st.integers(110000, 659999),
    born=st.dates(datetime.date(1900, 1, 1), datetime.date.today()),
    seq=st.integers(0, 999),
    prefix=st.sampled_from(ORDER_PREFIXES),
)
def test_resident_id_numbers(masker: Masker, region: int, born: datetime.date, seq: int, prefix: str) -> None:
    number = resident_id(str(region), born, seq)
    assert masker.mask(f"身份证 {number}。") == f"身份证 {number[:6]}********{number[-4:]}。"
    assert masker.mask(f"身份证 {number.lower()}。") == f"身份证 {number[:6]}********{number[-4:].lower()}。"
    # A wrong check character: not an ID number (a Luhn-valid all-digit one is still a card number).
    for wrong in "0123456789X":
        if wrong == number[-1]:
            continue
        other = number[:-1] + wrong
        expected = card_masked(other) if other.isdigit() and luhn_ok(other) else other
        assert masker.mask(f"身份证 {other}。") == f"身份证 {expected}。"
    # A valid ID number after the word for an order number is that order number.
    assert masker.mask(f"{prefix}{number}") == f"{prefix}{number}"


def test_id_numbers_need_a_real_birth_date(masker: Masker) -> None:
    for day in ("19990230", "20230229", "21000101", "18991231"):
        first17 = f"110105{day}123"
        number = first17 + gb11643_check(first17)
        expected = card_masked(number) if number.isdigit() and luhn_ok(number) else number
        assert masker.mask(f"证件 {number}") == f"证件 {expected}", day
    tomorrow = datetime.date.today() + datetime.timedelta(days=1)
    future = resident_id("110105", tomorrow, 1)
    assert masker.kinds(f"证件 {future}") == (["bank_card"] if future.isdigit() and luhn_ok(future) else [])
    assert masker.kinds("证件 11010519491231002X") == ["id_card"]


def test_order_context_is_only_the_identifier_right_after_the_word(masker: Masker) -> None:
    card = "6222021234567894"
    # The card after the order number is not in the order number's context.
    assert masker.mask(f"订单号 XC20250301000123，卡号 {card}") == f"订单号 XC20250301000123，卡号 {card_masked(card)}"
    assert masker.mask(f"订单 3187654321098765432 用卡 {card} 付的") == (
        f"订单 3187654321098765432 用卡 {card_masked(card)} 付的"
    )
    # Too far from the word, or a different word: masked.
    assert masker.mask(f"订单的付款卡是 {card}") == f"订单的付款卡是 {card_masked(card)}"
    assert masker.mask(f"recorder {card}") == f"recorder {card_masked(card)}"
    # Phones after the word for an order number are order numbers too; elsewhere masked as before.
    assert masker.mask("订单号 13812345678") == "订单号 13812345678"
    assert masker.mask("电话 13812345678") == "电话 138****5678"


def test_checks_and_order_context_can_be_switched_off() -> None:
    invalid = without_luhn_digit("622202123456789012")
    strict = Masker.from_settings(PrivacySettings(validate_checksums=False, keep_order_numbers=False))
    assert strict is not None
    assert strict.mask(f"卡 {invalid}") == f"卡 {card_masked(invalid)}"
    assert strict.mask("订单号 3187654321098765432") == f"订单号 {card_masked('3187654321098765432')}"
    default = Masker.from_settings(PrivacySettings())
    assert default is not None and default.mask(f"卡 {invalid}") == f"卡 {invalid}"


# Characters the masking patterns turn on: digits, separators, the order labels' letters, Chinese text.
_PII_ALPHABET = "0123456789０１ -+@._#：:订单号是单号orderORDERNoXCa卡号Xx中\n"


@settings(max_examples=300, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.lists(
        st.one_of(
            st.text(alphabet=_PII_ALPHABET, max_size=30),
            st.sampled_from(
                [
                    "13812345678",
                    "159 8765 4321",
                    "+86 13812345678",
                    "订单号 ",
                    "Order #",
                    "recorder ",
                    "6222021234567894",
                    "6222 0212 3456 7894",
                    "11010519491231002X",
                    "400-820-1234",
                    "XC20250301000123",
                    "bob.smith@mail.example.com",
                ]
            ),
        ),
        max_size=6,
    )
)
def test_scan_shortcuts_change_no_result(parts: list[str]) -> None:
    """The order-label scan before the order context and the patterns' hints only skip work."""
    text = "".join(parts)
    assert [m.span() for m in order_numbers(text)] == [m.span() for m in ORDER_CONTEXT.finditer(text)]
    fast = Masker()
    plain = Masker([dataclasses.replace(rule, hint=None) for rule in fast.rules])
    plain.keep = [(pattern, None) for pattern, _ in fast.keep]
    assert any(hint is not None for _, hint in fast.keep) and all(rule.hint is not None for rule in fast.rules)
    assert fast.mask(text) == plain.mask(text)
