"""Writes the Word and PDF documents of the homeshop knowledge base (kb/*.docx, kb/*.pdf).

The binary files are committed; this script is how they were made, so a fact can be changed in one
place and the files written again: `python eval/answers/homeshop/make_binary_docs.py`. Needs
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


def washing_machines() -> None:
    write_docx(
        "jiece-washing-machines.docx",
        "洁澈滚筒洗衣机 商品详情",
        [
            "更新日期：2026 年 8 月 1 日。本页介绍青禾家电在售的三款洁澈（Jiece）滚筒洗衣机：10 公斤标准版、"
            "10 公斤洗烘一体和 12 公斤洗烘一体 Max。三款均为直驱变频电机，一级能效。",
            "## 型号与价格",
            [
                ("型号", "洗涤容量", "烘干容量", "外形尺寸（宽×深×高）", "颜色", "售价"),
                ("洁澈 XQG100-A1 标准版", "10 公斤", "无烘干", "595 × 565 × 850 mm", "白色", "2699 元"),
                ("洁澈 XQG100-HB1 洗烘一体", "10 公斤", "7 公斤", "595 × 585 × 850 mm", "白色、钛灰", "3499 元"),
                ("洁澈 XQG120-HB9 洗烘一体 Max", "12 公斤", "8 公斤", "595 × 620 × 850 mm", "钛灰", "4599 元"),
            ],
            "## 功能区别",
            "标准版没有烘干功能，只有 1400 转高速脱水。XQG100-HB1 洗烘一体采用冷凝式烘干；"
            "Max 采用热泵烘干，烘干温度不超过 55 ℃，羊毛和羽绒服也可以烘。"
            "Max 另有智能投放：洗衣液和柔顺剂仓可一次加满，约用 30 次。",
            "## 安装要求",
            "洗衣机需要就近的 220 V 三孔插座和水龙头，地面需平整。嵌入橱柜安装时，两侧和顶部各留 20 mm 以上的空隙。",
            "## 保修",
            "洁澈洗衣机整机保修 3 年，直驱变频电机保修 10 年。",
        ],
    )


def price_list() -> None:
    write_docx(
        "small-appliance-price-list.docx",
        "厨房小家电价格表",
        [
            "更新日期：2026 年 10 月 1 日。下表是青禾家电自有品牌厨房小家电的门店和官网统一售价。"
            "这些商品没有单独的商品详情页，规格以本表为准。",
            [
                ("品类", "型号", "规格", "颜色", "售价", "整机保修"),
                ("电水壶", "青禾 K17", "1.7 L，不锈钢内胆", "白色", "129 元", "1 年"),
                ("电水壶", "青禾 K17 Pro", "1.7 L，40–100 ℃ 六档恒温", "白色、薄荷绿", "199 元", "1 年"),
                ("电饭煲", "稻香 IH 3L", "3 L，适合 1–4 人，860 W", "米白", "499 元", "1 年"),
                ("电饭煲", "稻香 IH 4L", "4 L，适合 2–6 人，1100 W", "米白", "599 元", "1 年"),
                ("电饭煲", "稻香 IH 5L Pro", "5 L，铜晶球釜内胆，1300 W", "曜石黑", "899 元", "2 年"),
                ("破壁机", "青禾 B12", "1.2 L，9 档转速", "白色", "699 元", "2 年"),
                ("破壁机", "青禾 B15 Max", "1.5 L，静音罩，加热功能", "白色", "1099 元", "3 年"),
                ("微波炉", "青禾 M20", "20 L，机械旋钮", "白色", "349 元", "1 年"),
                ("微蒸烤一体机", "青禾 M25 Pro", "25 L，微波 + 蒸 + 烤", "黑色", "1399 元", "2 年"),
                ("电烤箱", "青禾 O32", "32 L，上下独立控温", "银色", "459 元", "1 年"),
            ],
            "稻香 IH 电饭煲的 IH 线盘另有 5 年保修。破壁机的电机保修与整机相同。",
            "以上价格不含以旧换新补贴。购买两件及以上厨房小家电，结账时立减 30 元。",
        ],
    )


def installments() -> None:
    write_docx(
        "installment-plans.docx",
        "分期付款说明",
        [
            "更新日期：2026 年 6 月 15 日。在青禾家电官网、App 和门店购物，单笔订单实付满 800 元即可选择分期付款。",
            "## 信用卡分期",
            "支持招商银行、工商银行、建设银行和交通银行的信用卡。手续费按每期收取，每期手续费 = 订单金额 × 每期费率。",
            [
                ("期数", "每期手续费率", "说明"),
                ("3 期", "0%", "免息，订单满 1000 元可用"),
                ("6 期", "0.45%", "订单满 800 元可用"),
                ("12 期", "0.65%", "订单满 800 元可用"),
                ("24 期", "0.58%", "订单满 3000 元可用"),
            ],
            "例如 6000 元的订单选择 12 期信用卡分期，每期手续费为 39 元。",
            "## 花呗分期",
            "花呗分期的手续费按总费率一次计算，平摊到每期：3 期总费率 1.8%，6 期总费率 4.5%，12 期总费率 7.5%。"
            "花呗分期不支持 24 期。青禾家电每年 6 月和 11 月的大促期间，花呗 6 期免息。",
            "## 提前还款与退货",
            "提前还清分期不退还已收取的手续费。分期订单退货时，按照发卡银行或花呗的规则退还本金和手续费。",
        ],
    )


def extended_warranty() -> None:
    body = [
        "Last updated: 1 July 2026. Qinghe Care extends the manufacturer's warranty of any appliance bought "
        "from Qinghe Home. A plan starts on the day the standard warranty of the whole unit ends.",
        "Who can buy it: a plan must be bought within 30 days of delivery (or of installation, for "
        "appliances that are installed). One plan covers one appliance and is tied to its serial number, so "
        "it stays with the appliance if you give it away.",
        "What it covers: the same faults as the standard warranty, with unlimited repairs, free parts and "
        "free labour. If a covered fault cannot be repaired, we replace the appliance with the same or an "
        "equivalent model.",
    ]
    rows = [
        ("Appliance price", "+1 year", "+3 years"),
        ("below 1,000 yuan", "59 yuan", "149 yuan"),
        ("1,000 to 2,999 yuan", "129 yuan", "299 yuan"),
        ("3,000 to 5,999 yuan", "219 yuan", "499 yuan"),
        ("6,000 yuan and above", "329 yuan", "759 yuan"),
    ]
    tail = [
        "Care Plus accidental damage cover: for small appliances priced below 1,000 yuan only, one year, "
        "89 yuan. It covers drops and liquid spills, once per plan year.",
        "Cancelling: a plan cancelled within 15 days of purchase is refunded in full. After 15 days the "
        "unused part is refunded pro rata, minus a 20 yuan handling fee. A plan with a repair claim "
        "cannot be cancelled.",
        "How to claim: call the repair booking line or book a repair in the Qinghe Home app and give your "
        "order number; the plan number is not needed.",
    ]
    write_pdf(
        KB / "extended-warranty-plans.pdf",
        "Qinghe Care Extended Warranty Plans",
        [*body, "## Plan prices by the appliance's purchase price", rows, *tail],
    )


if __name__ == "__main__":
    washing_machines()
    price_list()
    installments()
    extended_warranty()
