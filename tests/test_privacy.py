"""PII masking of text and of log lines."""

from __future__ import annotations

import logging

import pytest

from rag_service.privacy import Masker, MaskingFilter, install_log_masking, uninstall_log_masking
from rag_service.settings import PrivacySettings, Settings


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
        # bank cards, 16-19 digits: last 4
        ("卡号6222021234567890", "卡号************7890"),
        ("卡号6222021234567890123", "卡号***************0123"),
        ("card 6222 0212 3456 7890", "card ************7890"),
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
    assert broad.mask("热线4008201234 卡6222021234567890") == "热线4008201234 卡************7890"


def test_log_filter_masks_messages_args_and_tracebacks(masker: Masker, caplog: pytest.LogCaptureFixture) -> None:
    log = logging.getLogger("rag_service.test_privacy")
    caplog.handler.addFilter(MaskingFilter(masker))
    try:
        with caplog.at_level(logging.INFO, logger=log.name):
            log.info("user 13812345678 asked about order XC20250301000123")
            log.info("id=%s card=%s mail=%s", "11010519491231002X", "6222021234567890123", "alice@example.com")
            try:
                raise ValueError("bad phone 13912345678")
            except ValueError:
                log.exception("failed for %s", "bob@example.com")
    finally:
        caplog.handler.filters.clear()
    text = caplog.text
    assert "138****5678" in text and "XC20250301000123" in text
    assert "110105********002X" in text and "***************0123" in text and "a***@example.com" in text
    assert "139****5678" in text and "b***@example.com" in text
    for raw in ("13812345678", "11010519491231002X", "6222021234567890123", "alice@", "13912345678", "bob@"):
        assert raw not in text
    assert caplog.records[1].getMessage() == "id=110105********002X card=***************0123 mail=a***@example.com"


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
