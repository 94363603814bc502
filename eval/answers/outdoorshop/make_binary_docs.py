"""Writes the Word and PDF documents of the outdoorshop knowledge base (kb/*.docx, kb/*.pdf).

The binary files are committed; this script is how they were made, so a fact can be changed in one
place and the files written again: `python eval/answers/outdoorshop/make_binary_docs.py`. Needs
python-docx and fpdf2 (both in the project's venv). The PDF is English only: fpdf2's core fonts are
Latin-1 and the machine that made it had no CJK font.
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


def sleeping_bags() -> None:
    write_docx(
        "nuanyu-sleeping-bags.docx",
        "暖羽羽绒睡袋 商品详情",
        [
            "更新日期：2026 年 9 月 10 日。暖羽（Nuanyu）羽绒睡袋有三款：暖羽 0℃ Lite、暖羽 -5℃ 标准版和"
            "暖羽 -15℃ 旗舰版。三款都是木乃伊形，左右拉链可选。",
            "## 型号与价格",
            [
                ("型号", "舒适温度", "极限温度", "填充物", "蓬松度", "重量", "售价"),
                ("暖羽 0℃ Lite", "0 ℃", "-6 ℃", "白鸭绒", "600", "850 g", "499 元"),
                ("暖羽 -5℃ 标准版", "-5 ℃", "-12 ℃", "白鸭绒", "650", "1.1 kg", "899 元"),
                ("暖羽 -15℃ 旗舰版", "-15 ℃", "-25 ℃", "白鹅绒", "800", "1.6 kg", "2199 元"),
            ],
            "## 长度",
            "标准长度 190 cm，适合身高 178 cm 以下。加长款 205 cm，适合身高 193 cm 以下，每款加 100 元。",
            "## 保修",
            "暖羽 0℃ Lite 和暖羽 -5℃ 标准版保修 2 年。",
            "暖羽 -15℃ 旗舰版保修 3 年，并且终身免费补绒一次。",
            "## 收纳",
            "睡袋不要长期压缩在收纳袋里。回家后请把睡袋从压缩袋里拿出来，挂起来或者放进随附的大网袋保存，"
            "否则羽绒会失去蓬松度。",
            "## 怎么选",
            "舒适温度是普通成年人能整夜安睡的温度。建议选舒适温度比露营地夜间最低气温低 5 ℃ 左右的型号。",
        ],
    )


def price_list() -> None:
    write_docx(
        "accessories-price-list.docx",
        "户外配件价目表",
        [
            "更新日期：2026 年 10 月 1 日。下表是北岭户外配件的官网和门店统一售价。这些配件没有单独的商品页，"
            "规格以本表为准。",
            [
                ("品类", "型号", "规格", "售价"),
                ("头灯", "光影 H300", "300 流明，3 节 AAA 电池，续航 8 小时", "119 元"),
                ("头灯", "光影 H600 Pro", "600 流明，Type-C 充电锂电池，续航 12 小时，IPX6 防水", "259 元"),
                ("登山杖", "碳纤维登山杖（单支）", "三节伸缩，210 g", "189 元"),
                ("登山杖", "碳纤维登山杖（一对）", "三节伸缩，每支 210 g", "349 元"),
                ("登山杖", "铝合金登山杖（一对）", "四节伸缩，每支 290 g", "139 元"),
                ("气罐", "高山气罐 230g", "丁烷丙烷混合气", "29 元"),
                ("气罐", "高山气罐 450g", "丁烷丙烷混合气", "45 元"),
                ("水具", "钛水杯 450ml", "纯钛，可以直接上炉加热", "169 元"),
                ("防雨罩", "背包防雨罩 M", "适合 25–45 L 背包", "49 元"),
                ("防雨罩", "背包防雨罩 L", "适合 50–70 L 背包", "69 元"),
                ("睡垫", "自充气防潮垫", "5 cm 厚，R 值 3.5", "239 元"),
            ],
            "## 说明",
            "气罐只在中国大陆陆运发货。头灯保修 1 年，登山杖保修 2 年，其他配件保修 6 个月。",
        ],
    )


def installment() -> None:
    write_docx(
        "installment-payment.docx",
        "分期付款说明",
        [
            "北岭户外官网和小程序支持花呗分期和信用卡分期。单笔订单实付满 600 元才可以分期。",
            "## 花呗分期",
            [
                ("期数", "手续费率（总）", "说明"),
                ("3 期", "免息", "全场商品"),
                ("6 期", "4.5%", "由顾客承担"),
                ("12 期", "7.5%", "由顾客承担"),
            ],
            "## 信用卡分期",
            "支持招商银行、建设银行和工商银行的信用卡分期，可以选 3 期、6 期或者 12 期。手续费按各银行的规定收取，"
            "以银行页面为准，北岭户外不额外收费。",
            "## 提前还款",
            "花呗分期可以在支付宝里提前还清，已经收取的手续费不退；信用卡分期提前还款请咨询发卡银行。",
            "## 退货",
            "分期订单退货后，退款退回花呗或信用卡，未还的分期会自动取消。免息分期退货没有手续费。",
            "## 门店分期",
            "门店暂时只支持信用卡分期，不支持花呗分期。",
        ],
    )


def rental_pdf() -> None:
    paragraphs = [
        "Updated 1 October 2026. Beiling Outdoor rents camping gear from its Hangzhou West Lake flagship store "
        "and its Chengdu Chunxi Road store. The Beijing Wangjing store does not offer rentals.",
        "Rental prices (per day)",
        "- Yunqi 2 tent: 59 yuan per day, deposit 500 yuan.",
        "- Yunqi 4 family tent: 79 yuan per day, deposit 800 yuan.",
        "- Nuanyu sleeping bag (-5 C): 35 yuan per day, deposit 400 yuan.",
        "- Yanshan stove with pot: 20 yuan per day, deposit 200 yuan.",
        "- Xingzhe 65L backpack: 30 yuan per day, deposit 700 yuan.",
        "Weekend package: a Yunqi 2 tent, two sleeping bags and a stove from Friday evening to Monday noon "
        "for 229 yuan in total, deposit 1,000 yuan.",
        "How to rent",
        "1. Book at least 2 days in advance in the mini program under 'Gear Rental'.",
        "2. Pick up the gear at the store with your ID card and pay the deposit.",
        "3. Return the gear to the same store by 21:00 on the last rental day.",
        "Late returns cost one extra day's rent for every day late. Gear that is returned dirty is cleaned "
        "for a fee of 30 yuan. Lost or damaged gear is paid from the deposit at the replacement price.",
        "The deposit is refunded to the original payment method within 24 hours after the gear is checked.",
        "Members of the Shanyou Club at Gold level or above rent at 20% off.",
    ]
    write_pdf(KB / "gear-rental.pdf", "Gear Rental Program", paragraphs)


if __name__ == "__main__":
    sleeping_bags()
    price_list()
    installment()
    rental_pdf()
