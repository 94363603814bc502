"""Writes the Word and PDF documents of the kidsshop knowledge base (kb/*.docx, kb/*.pdf).

The binary files are committed; this script is how they were made, so a fact can be changed in one
place and the files written again: `python eval/answers/kidsshop/make_binary_docs.py`. Needs
python-docx and fpdf2 (both in the project's venv). The PDF is English only: fpdf2's core fonts are
Latin-1.
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


def toys_price_list() -> None:
    write_docx(
        "shumiao-toys-price-list.docx",
        "小树苗积木与益智玩具价格表",
        [
            "更新日期：2026 年 9 月 18 日。以下玩具都通过 GB 6675 国家玩具安全标准检测，门店和线上同价。",
            [
                ("商品", "规格", "适用年龄", "售价"),
                ("森林积木", "60 粒", "1 岁以上", "139 元"),
                ("森林积木", "120 粒", "1 岁以上", "229 元"),
                ("森林积木", "240 粒（带收纳箱）", "2 岁以上", "389 元"),
                ("彩虹磁力片", "40 片", "3 岁以上", "168 元"),
                ("彩虹磁力片", "100 片", "3 岁以上", "358 元"),
                ("木质小火车轨道", "基础款（32 件）", "3 岁以上", "279 元"),
                ("木质小火车轨道", "豪华款（68 件，带桥和隧道）", "3 岁以上", "519 元"),
                ("宝宝布书", "6 本一套", "0 岁以上", "86 元"),
            ],
            "## 安全提示",
            "彩虹磁力片内含强磁铁，不适合 3 岁以下儿童，磁力片破损后请立即停止使用。",
            "森林积木 60 粒和 120 粒的每一粒都大于 3.2 厘米，不会被小宝宝吞下。",
            "## 清洁",
            "森林积木和布书可以用温水加婴儿洗涤剂清洗；木质小火车轨道只能用干布擦，不能泡水。",
        ],
    )


def invoices_registry() -> None:
    write_docx(
        "shumiao-invoices-registry.docx",
        "Invoices, Gift Wrapping and the Baby Registry",
        [
            "Updated 26 August 2026. Getting a fapiao (invoice), wrapping a gift, and setting up a baby registry.",
            "## Invoices (fapiao)",
            "An electronic general invoice is issued within 5 working days after delivery and sent to your email.",
            "A paper VAT special invoice for a company needs the company's tax number, address and bank account; it"
            " is posted within 10 working days.",
            "You can ask for an invoice up to 180 days after delivery. Points and coupons are not invoiced: the invoice"
            " shows the amount actually paid.",
            "## Gift wrapping",
            [
                ("Option", "What you get", "Price"),
                ("Standard wrap", "Printed paper and a ribbon", "15 yuan"),
                ("Welcome Baby box", "Wooden box with a name tag and a knitted rattle", "52 yuan"),
                ("Greeting card", "A card written by our staff", "Free"),
            ],
            "## Baby registry",
            "Expecting parents can make a registry (a gift list) in the app and share its link with family and"
            " friends. Guests see what has already been bought, so nobody buys the same stroller twice.",
            "When the baby arrives, the parents get 12% off everything still left on their registry, for 60 days.",
            "Registries worth more than 2000 yuan in total get a free hospital bag.",
            "A gift bought from a registry is invoiced to the guest who paid for it, not to the parents.",
        ],
    )


def installments_pdf() -> None:
    write_pdf(
        KB / "shumiao-payment-installments.pdf",
        "Payment Methods and Installments",
        [
            "Updated 3 September 2026. How you can pay at Xiaoshumiao, online and in our stores.",
            "## Payment methods",
            "We accept Alipay, WeChat Pay, UnionPay cards and, in stores, cash. Online orders must be paid within"
            " 30 minutes, or they are cancelled automatically.",
            "## Installments",
            "Orders of 500 yuan or more can be paid in installments with Huabei or a credit card. The fee is a share of"
            " the order total:",
            [
                ("Periods", "Huabei fee", "Credit card fee"),
                ("3 periods", "interest-free", "1.5%"),
                ("6 periods", "2.8%", "3.6%"),
                ("12 periods", "5.2%", "6.9%"),
            ],
            "Example: a Qingyu Plus stroller paid with Huabei over 6 periods comes to about 376.76 yuan a month.",
            "If you return an item bought in installments within 15 days, the installment fee is refunded in full.",
            "## Pre-orders",
            "New strollers and car seats can be pre-ordered with a deposit of 10% of the price. The deposit is"
            " refunded if you cancel more than 7 days before the expected arrival date; after that it is kept.",
        ],
        cell_width=50,
    )


if __name__ == "__main__":
    toys_price_list()
    invoices_registry()
    installments_pdf()
