"""Writes the Word and PDF documents of the musicshop knowledge base (kb/*.docx, kb/*.pdf).

The binary files are committed; this script is how they were made, so a fact can be changed in one
place and the files written again: `python eval/answers/musicshop/make_binary_docs.py`. Needs
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


def violins() -> None:
    write_docx(
        "qinyun-xianyin-violins.docx",
        "弦音小提琴 商品详情",
        [
            "更新日期：2026 年 8 月 1 日。弦音（Xianyin）V2 是琴韵乐器的自有品牌小提琴，分标准款和进阶款。"
            "两款都是实木手工制作，出厂前由技师装好琴码和音柱、调好音，买回去就能拉。",
            "## 标准款与进阶款",
            "V2 标准款：云杉实木面板，枫木背侧板，乌木指板，配巴西木琴弓，适合初学和考级前的练习。",
            "V2 进阶款：选用 10 年以上自然风干的欧洲云杉和火焰纹枫木，油性漆，配碳纤维琴弓，音色更集中，适合考级和乐团。",
            "## 尺寸与价格",
            [
                ("型号", "尺寸", "适合年龄", "手臂长度", "售价"),
                ("弦音 V2 标准款", "1/4", "6–7 岁", "48–52 cm", "1260 元"),
                ("弦音 V2 标准款", "1/2", "8–9 岁", "52–56 cm", "1360 元"),
                ("弦音 V2 标准款", "3/4", "10–11 岁", "56–60 cm", "1460 元"),
                ("弦音 V2 标准款", "4/4", "12 岁以上及成人", "60 cm 以上", "1680 元"),
                ("弦音 V2 进阶款", "3/4", "10–11 岁", "56–60 cm", "3860 元"),
                ("弦音 V2 进阶款", "4/4", "12 岁以上及成人", "60 cm 以上", "4280 元"),
            ],
            "手臂长度的量法：左臂向侧面伸直，从脖子左侧量到手掌心。介于两个尺寸之间时，选小一号。进阶款只有 3/4 和 4/4 两个尺寸。",
            "## 随琴配件",
            "每把弦音小提琴都配琴盒、琴弓、松香和一套备用琴弦。进阶款另配肩托和消音器。",
            "## 孩子长大了怎么办",
            "在本店购买弦音 V2 标准款的小尺寸琴（1/4、1/2、3/4），一年内换大一号的标准款，旧琴按购买价的 60% 抵扣新琴。",
            "## 保养",
            "每次拉完用软布擦掉琴身和琴弦上的松香粉，放松琴弓的弓毛。新琴头两个月琴弦容易跑音，每次练习前请先调音。",
        ],
    )


def accessories() -> None:
    write_docx(
        "qinyun-accessories-price-list.docx",
        "Qinyun Music Accessories Price List",
        [
            "Last updated: 1 October 2026. Prices of strings, tuners, cases and other accessories, the same in "
            "our stores and online. Accessories have no product pages of their own; this list is the reference.",
            [
                ("Item", "Model", "Details", "Price"),
                ("Guitar strings", "Songming PB12", "Phosphor bronze, light gauge 12-53, fits the S1", "69 yuan"),
                ("Violin strings, full set", "Xianyin VS-1", "Steel core, sizes 1/4 to 4/4", "78 yuan"),
                ("Violin strings, full set", "Xianyin VS-3 Pro", "Synthetic core, sizes 3/4 and 4/4", "468 yuan"),
                ("Ukulele strings", "Breeze UK-N", "Nylon, soprano, concert and tenor", "38 yuan"),
                ("Clip-on tuner", "QT-1", "Runs on a button battery", "89 yuan"),
                ("Clip-on tuner", "QT-1 Pro", "Rechargeable over USB-C, tuner and metronome", "139 yuan"),
                ("Capo", "Songming CP-2", "For guitar and ukulele", "59 yuan"),
                ("Rosin", "Xianyin R1", "Light rosin for violin", "32 yuan"),
                ("Metronome", "Beat M2", "Digital, with tap tempo", "129 yuan"),
                ("Headphones", "Yunlv H20", "Closed-back, for digital pianos", "259 yuan"),
                ("Piano bench", "Yunlv BN-1", "Height adjustable from 47 to 57 cm", "459 yuan"),
                ("Triple pedal unit", "Yunlv TP-3", "For the YL-100 Standard", "419 yuan"),
                ("Guitar gig bag", "Songming GB-41", "Padded, fits 40 and 41 inch guitars", "189 yuan"),
                ("Guitar hard case", "Songming ABS-41", "ABS shell, fits 40 and 41 inch guitars", "560 yuan"),
                ("Violin case", "Xianyin VC-2", "Oblong, for 3/4 and 4/4 violins", "330 yuan"),
                ("Humidifier pack", "Songming HP-2", "Two-way humidity control, lasts about 3 months", "79 yuan"),
                ("Piano dust cover", "Yunlv DC-1", "Velvet, for digital pianos", "99 yuan"),
            ],
            "## Strings offer",
            "Buy three sets of the same strings in one order and pay 15% less for the three sets.",
            "## Returns",
            "Opened strings, rosin and cleaning products cannot be returned unless they are faulty. Electronic "
            "accessories (tuners, metronome, headphones) are covered for 6 months.",
        ],
    )


def rental_and_trade_in() -> None:
    rental = [
        "Last updated: 1 August 2026. Qinyun Music rents out instruments by the month, so a child can try an "
        "instrument before the family buys one, and lets you trade in an old instrument towards a new one.",
        "## Monthly rent and deposit",
    ]
    rows = [
        ("Instrument", "Monthly rent", "Deposit"),
        ("Upright piano UP-121", "450 yuan", "6,000 yuan"),
        ("YL-100 Standard", "230 yuan", "2,000 yuan"),
        ("Violin V2 Standard", "95 yuan", "800 yuan"),
        ("Guitar S1 Standard 40in", "85 yuan", "600 yuan"),
        ("Ukulele U1 Standard", "42 yuan", "350 yuan"),
    ]
    terms = [
        "The YL-100 Standard row is the Yunlv YL-100 Standard digital piano. A rented violin can be any "
        "size from 1/4 to 4/4 at the same rent.",
        "## Rental terms",
        "Minimum rental: 3 months for every instrument except the upright piano, which has a minimum of "
        "6 months. Rent is paid monthly in advance.",
        "The deposit is refunded within 7 working days after the instrument comes back and passes our "
        "check. Damage beyond normal wear is repaired at the prices of our repair service and taken off "
        "the deposit.",
        "Delivering and collecting a rented upright piano is charged at the piano moving rates, each way.",
        "Growing children: a rented violin can be swapped for the next size up free of charge, once every 12 months.",
        "Ending a rental: after the minimum period, give 15 days' notice by calling the customer hotline.",
        "## Rent to own",
        "If you buy the instrument you are renting within 12 months of the start of the rental, 70% of the "
        "rent you have paid is taken off the purchase price. After 12 months, 50% of the rent paid is taken "
        "off.",
    ]
    trade = [
        "## Trade-in",
        "Bring a digital piano, guitar, violin or ukulele of any brand to one of our stores. We value it on "
        "the spot and give you a credit towards a new instrument. The credit is a share of the price you "
        "paid, by condition and age:",
    ]
    trade_rows = [
        ("Condition", "Under 2 years old", "2 to 5 years old"),
        ("Like new", "58%", "42%"),
        ("Good", "40%", "28%"),
        ("Worn", "20%", "12%"),
    ]
    trade_tail = [
        "Instruments older than 5 years are valued individually. Upright pianos are valued on a free home "
        "visit in Shanghai, Hangzhou and Suzhou; book it on the customer hotline 400-826-7300.",
        "Bring the original receipt; without one, our technician estimates the original price.",
        "The credit is not paid out in cash. It can only be used on a new instrument that costs at least "
        "twice the credit, within 30 days of the valuation.",
        "Trade-in bonus: trading in towards a Yunlv YL-300 Pro adds 360 yuan to the credit.",
    ]
    write_pdf(
        KB / "qinyun-rental-and-trade-in.pdf",
        "Qinyun Music Instrument Rental and Trade-in Programme",
        [*rental, rows, *terms, *trade, trade_rows, *trade_tail],
    )


if __name__ == "__main__":
    violins()
    accessories()
    rental_and_trade_in()
