"""Writes the Word and PDF documents of the opticalshop knowledge base (kb/*.docx, kb/*.pdf).

The binary files are committed; this script is how they were made, so a fact can be changed in one
place and the files written again: `python eval/answers/opticalshop/make_binary_docs.py`. Needs
python-docx and fpdf2 (both in the project's venv). The PDF is English only: the machine that made it
had no CJK font, and fpdf2's core fonts are Latin-1.
"""

from __future__ import annotations

import sys
from pathlib import Path

# Run as a script: the shared writers sit one folder up.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from binary_docs import sections, write_pdf
from binary_docs import write_docx as _write_docx

KB = Path(__file__).resolve().parent / "kb"


def write_docx(name: str, title: str, parts: list[str | list[tuple[str, ...]]]) -> None:
    _write_docx(KB / name, title, parts)


def contact_lenses() -> None:
    write_docx(
        "shuiqin-contact-lenses.docx",
        "水沁（Shuiqin）隐形眼镜 商品详情",
        [
            "首页 > 隐形眼镜 > 水沁",
            "更新日期：2026 年 9 月 20 日。水沁（Shuiqin）是澄明眼镜的自有隐形眼镜品牌，有日抛、月抛和散光日抛，"
            "全部为透明片，不含彩色美瞳。首次配戴隐形眼镜的顾客，请先到门店做一次免费的隐形眼镜验配。",
            "## 型号与价格",
            [
                ("型号", "更换周期", "每盒片数", "材料与含水量", "度数范围", "售价"),
                ("水沁 日抛 30 片装", "每天更换", "30 片", "水凝胶，含水量 58%", "-0.50 至 -10.00", "139 元"),
                ("水沁 日抛 90 片装", "每天更换", "90 片", "水凝胶，含水量 58%", "-0.50 至 -10.00", "369 元"),
                ("水沁 月抛 6 片装", "开封后 30 天更换", "6 片", "硅水凝胶，含水量 46%", "-0.50 至 -12.00", "229 元"),
                (
                    "水沁 散光日抛 30 片装",
                    "每天更换",
                    "30 片",
                    "水凝胶，含水量 55%",
                    "近视 -0.50 至 -8.00，散光 -0.75 / -1.25 / -1.75",
                    "189 元",
                ),
            ],
            "一盒里的镜片是同一个度数。两只眼度数不同的，需要分别买两盒。",
            "## 怎么选",
            "日抛每天换新，不用护理液，适合偶尔戴或容易过敏的人。月抛的硅水凝胶透氧更好，适合每天戴 8 小时以上，"
            "但需要每天用护理液清洗（护理液价格见《护理用品与配件价格表》）。",
            "## 配戴时间",
            "日抛和散光日抛每天配戴不超过 10 小时。月抛每天配戴不超过 12 小时，不能戴着过夜。",
            "## 优惠",
            "水沁日抛 30 片装一次买 4 盒，结账立减 60 元。",
            "## 退换",
            "隐形眼镜属于卫生用品，拆封后不退不换。未拆封的 7 天内可以退货。隐形眼镜不享受会员折扣。",
            "## 保质期",
            "未开封保质期 5 年，以盒上印的日期为准。门店发货时保证剩余保质期不少于 1 年。",
        ],
    )


def price_list() -> None:
    write_docx(
        "care-accessories-prices.docx",
        "护理用品与配件价格表",
        [
            "更新日期：2026 年 10 月 1 日。下表是澄明眼镜门店和小程序统一售价。这些商品没有单独的商品详情页，规格以本表为准。",
            [
                ("品类", "商品", "规格", "售价"),
                ("隐形眼镜护理液", "水沁 多功能护理液", "360 ml，附镜盒", "45 元"),
                ("隐形眼镜护理液", "水沁 多功能护理液 便携装", "120 ml", "23 元"),
                ("隐形眼镜护理液", "水沁 双氧水护理液", "300 ml，附中和镜盒，适合敏感眼", "72 元"),
                ("清洁", "超纤眼镜布", "2 片装", "15 元"),
                ("清洁", "镜片防雾喷剂", "30 ml，一次喷涂约管 2 天", "29 元"),
                ("清洁", "超声波清洗机 C1", "450 ml 水槽，单档 3 分钟", "159 元"),
                ("清洁", "超声波清洗机 C1 Pro", "600 ml 水槽，三档定时，可放两副眼镜", "239 元"),
                ("配件", "折叠眼镜盒", "PU 皮，可压扁放包里", "39 元"),
                ("配件", "硅胶鼻托", "一对", "10 元"),
                ("配件", "儿童运动眼镜绑带", "可调节，适合 4–12 岁", "27 元"),
            ],
            "护理用品会员不打折。清洗机保修 1 年，其他护理用品和配件不保修。",
            "购买任意护理液两瓶及以上，赠送超纤眼镜布一包。",
        ],
    )


def installments() -> None:
    write_docx(
        "installment-options.docx",
        "分期付款",
        [
            "更新日期：2026 年 7 月 1 日。在澄明眼镜门店和小程序购物，单笔订单实付满 600 元即可分期。"
            "分期支持花呗和信用卡，验光服务费不能分期。",
            "## 花呗分期",
            "花呗分期手续费按总费率计算，平均分摊到每一期。",
            [
                ("期数", "总费率", "说明"),
                ("花呗 3 期", "0%", "免息"),
                ("花呗 6 期", "3.6%", "订单满 600 元可用"),
                ("花呗 12 期", "6.9%", "订单满 1000 元可用"),
            ],
            "护童儿童近视管理镜片（标准版和 Pro）享受花呗 12 期免息，免息部分由澄明承担。",
            "## 信用卡分期",
            "支持招商银行、中信银行和浦发银行的信用卡，门店刷卡或小程序支付都可以。手续费按每期收取。",
            [
                ("期数", "每期费率", "说明"),
                ("信用卡 3 期", "0%", "免息"),
                ("信用卡 6 期", "0.55%", "订单满 600 元可用"),
                ("信用卡 12 期", "0.68%", "订单满 1000 元可用"),
                ("信用卡 24 期", "0.62%", "订单满 3000 元可用，仅招商银行"),
            ],
            "例：3000 元的订单选信用卡 12 期，每期手续费 3000 × 0.68% = 20.4 元。",
            "## 提前还款和退货",
            "提前还清的，已收取的手续费不退。分期订单退货，本金和手续费按花呗或发卡银行的规则退还。",
        ],
    )


def care_plan() -> None:
    body = [
        "Last updated: 1 September 2026. ClearView is a yearly eye-care plan from Chengming Optical. It bundles "
        "eye tests with lens replacement and repair benefits, and works at every Chengming store. A plan runs "
        "for 12 months from the day it is bought.",
        "Who can buy it: anyone with a Chengming member account. You do not need to have bought glasses from us.",
    ]
    plans = [
        (
            "ClearView Solo - 268 yuan per year",
            "For one person. Two full eye tests a year, one corneal topography scan, and one pair of "
            "replacement lenses at 50% off.",
        ),
        (
            "ClearView Solo Plus - 428 yuan per year",
            "For one person. Four full eye tests a year including one binocular vision test, one pair of "
            "replacement lenses free of charge (same lens as before), and one free frame repair.",
        ),
        (
            "ClearView Family - 699 yuan per year",
            "For up to four people in one family. Two full eye tests per person a year, and myopia check-ups "
            "every three months for children under 16.",
        ),
    ]
    tail = [
        "Waiting period: free or discounted replacement lenses can be claimed from the 31st day of the plan; "
        "eye tests can be used from the first day.",
        "Cancelling: a plan cancelled within 14 days of purchase, with no benefit used, is refunded in full. "
        "After that, or once a benefit has been used, the plan cannot be refunded.",
        "How to use it: show the plan QR code in the Chengming mini program at the counter. Eye tests in the "
        "plan can be booked like any other test, online or through the hotline.",
        "Renewal: plans do not renew automatically. Renewing before the old plan ends gives one extra month.",
    ]
    write_pdf(KB / "vision-care-plan.pdf", "Chengming ClearView Care Plan", [*body, *sections(plans), *tail])


if __name__ == "__main__":
    contact_lenses()
    price_list()
    installments()
    care_plan()
