"""Writes the Word and PDF documents of the skinshop knowledge base (kb/*.docx, kb/*.pdf).

The binary files are committed; this script is how they were made, so a fact can be changed in one
place and the files written again: `python eval/answers/skinshop/make_binary_docs.py`. Needs
python-docx and fpdf2 (both in the project's venv). The PDF is English only: the machine that made it
had no CJK font, and fpdf2's core fonts are Latin-1.
"""

from __future__ import annotations

import sys
from pathlib import Path

# Run as a script: the shared writers sit one folder up.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from binary_docs import write_docx as _write_docx
from binary_docs import write_pdf

KB = Path(__file__).resolve().parent / "kb"


def write_docx(name: str, title: str, parts: list[str | list[tuple[str, ...]]]) -> None:
    _write_docx(KB / name, title, parts)


def sample_kits() -> None:
    write_docx(
        "sample-kits.docx",
        "素研小样与试用装价格表",
        [
            "更新日期：2026 年 9 月 20 日。试用装适合第一次买素研、想先试肤感的顾客，也适合出差旅行。"
            "所有试用装单瓶都在 100ml 以下。",
            [
                ("套装", "内容", "售价", "限购"),
                (
                    "入门体验装",
                    "清润洁面标准版 30ml + 光妍标准版 5ml + ShieldLight Daily 10ml",
                    "59 元",
                    "每个账号 2 套",
                ),
                ("维C尝鲜装", "光妍标准版 5ml + 光妍 Pro 5ml", "79 元", "每个账号 2 套"),
                ("敏感肌试用装", "清润敏感肌版 30ml + 修护面霜 15ml", "69 元", "每个账号 2 套"),
                ("旅行装 Pro", "清润 Pro 50ml + 光妍 Pro 10ml + ShieldLight Sport 30ml", "139 元", "不限"),
            ],
            "## 试用装抵扣",
            "购买入门体验装或维C尝鲜装后 30 天内买对应正装，可以凭试用装订单号抵扣 20 元，每个订单号只能用一次。",
            "## 说明",
            "试用装不参加满减活动，不退不换。积分兑换的入门体验装和购买的入门体验装内容相同。",
        ],
    )


def invoices_gift_wrap() -> None:
    write_docx(
        "invoices-gift-wrap.docx",
        "Invoices and Gift Wrapping",
        [
            "Updated 1 August 2026. How to get a fapiao (invoice) for your order, and the gift wrapping we offer.",
            "## Invoices (fapiao)",
            "Electronic general invoices are issued automatically within 3 working days after delivery and sent"
            " to the email address you give at checkout.",
            "A paper VAT special invoice for companies must be requested with the company's tax number and bank"
            " details; it is posted within 10 working days.",
            "Invoices can be requested up to 90 days after delivery. The invoice amount is the amount actually paid:"
            " points and coupons are not invoiced.",
            "## Gift wrapping",
            [
                ("Option", "What you get", "Price"),
                ("Standard gift box", "Kraft box with tissue paper", "16 yuan"),
                ("Premium gift box", "Rigid box, satin ribbon, dried flowers", "38 yuan"),
                ("Handwritten card", "A card written by our staff, up to 50 characters", "Free"),
            ],
            "Black card members get the premium gift box free on every order. Gift-wrapped orders ship one day"
            " later than other orders. Prices are never printed on anything inside a gift-wrapped parcel.",
        ],
    )


def subscription_pdf() -> None:
    write_pdf(
        KB / "subscription-installments.pdf",
        "Subscribe & Save and Installment Payments",
        [
            "Updated 10 September 2026. Two ways to spread the cost of your routine at Suyan Skin.",
            "## Subscribe & Save",
            "Cleansers, Guangyan serums and ShieldLight sunscreens can be bought as a subscription. You choose a"
            " delivery every 30, 60 or 90 days.",
            "Every subscription delivery is 12% off the list price, and delivery is always free.",
            "The minimum commitment is 2 deliveries. After the second delivery you can cancel at any time, up to"
            " 3 days before the next delivery ships.",
            "To pause, skip or cancel, go to My Subscriptions on the website or mini program.",
            "## Installments",
            "Orders of 600 yuan or more can be paid in installments with Huabei or a credit card. The fee depends"
            " on the number of periods:",
            [
                ("Periods", "Fee (of order total)"),
                ("3 periods", "2.3%"),
                ("6 periods", "4.5%"),
                ("12 periods", "7.5%"),
            ],
            "3 periods are interest-free on any order that includes Guangyan Max.",
            "If you return an item bought in installments, the remaining installments are cancelled and the fee"
            " for the returned part is refunded.",
        ],
    )


if __name__ == "__main__":
    sample_kits()
    invoices_gift_wrap()
    subscription_pdf()
