"""Writes the Word and PDF documents of the petshop knowledge base (kb/*.docx, kb/*.pdf).

The binary files are committed; this script is how they were made, so a fact can be changed in one
place and the files written again: `python eval/answers/petshop/make_binary_docs.py`. Needs
python-docx and fpdf2 (both in the project's venv). The PDF is English only: fpdf2's core fonts are
Latin-1 and the machine that made it had no CJK font.
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


def cat_trees() -> None:
    write_docx(
        "yuntuan-cat-trees.docx",
        "云团（Yuntuan）猫爬架 商品详情",
        [
            "首页 > 用品 > 猫爬架 > 云团",
            "更新日期：2026 年 8 月 3 日。云团（Yuntuan）猫爬架用实木颗粒板做主体，每根柱子都缠着天然剑麻绳，"
            "可以磨爪子。顶层的云朵窝铺着可拆洗的毛绒垫。按家里有几只猫、房间有多高来选：",
            "## 型号与价格",
            [
                ("型号", "高度", "占地面积", "适合", "最大承重", "自己安装约需", "售价"),
                ("云团 mini", "78 cm", "40 × 40 cm", "幼猫或 1 只成猫", "15 kg", "20 分钟", "229 元"),
                ("云团 标准版", "132 cm", "50 × 50 cm", "1–2 只猫", "25 kg", "35 分钟", "386 元"),
                ("云团 Max", "186 cm", "60 × 55 cm", "3 只以上的多猫家庭", "40 kg", "60 分钟", "658 元"),
            ],
            "## 安装",
            "包装里附有内六角扳手和图文说明书，一个人就能装好。云团 Max 比较高，随箱附带防倾倒绑带，"
            "必须用膨胀螺丝把绑带固定在墙上。不想自己装的，可以预约上门安装，费用见《配送范围与运费》。",
            "## 颜色",
            "云团 mini 和标准版有奶白色和浅灰色两种；云团 Max 只有浅灰色。",
            "## 保养",
            "剑麻柱被抓坏了可以单独换，不用换整个爬架，替换剑麻柱的价格见《零食、用品与配件价格表》。"
            "毛绒垫用 30 ℃ 以下的水手洗，不要甩干，晾干即可。",
        ],
    )


def price_list() -> None:
    write_docx(
        "treats-supplies-prices.docx",
        "零食、用品与配件价格表",
        [
            "更新日期：2026 年 9 月 20 日。以下商品没有单独的商品详情页，价格以本表为准，门店和小程序同价。"
            "会员折扣只适用于主粮和洗护，本表商品不打折，但可以用积分抵扣。",
            [
                ("品类", "商品", "规格", "售价"),
                ("零食", "圆爪 冻干鸡胸肉", "100 g，猫狗通用", "46 元"),
                ("零食", "圆爪 冻干三文鱼", "100 g，猫狗通用", "67 元"),
                ("罐头", "圆爪 主食猫罐（金枪鱼）", "85 g × 12 罐", "83 元"),
                ("罐头", "圆爪 主食猫罐（金枪鱼）整箱", "85 g × 24 罐", "159 元"),
                ("玩具", "羽毛逗猫棒", "一根杆 + 3 个替换头", "19 元"),
                ("玩具", "瓦楞纸猫抓板", "45 cm 长", "27 元"),
                ("牵引", "圆爪 胸背牵引绳 S 码", "胸围 30–40 cm", "64 元"),
                ("牵引", "圆爪 胸背牵引绳 M 码", "胸围 40–55 cm", "79 元"),
                ("牵引", "圆爪 胸背牵引绳 L 码", "胸围 55–75 cm", "92 元"),
                ("配件", "喂喂 W2 饮水机滤芯", "3 片装", "36 元"),
                ("配件", "喂喂 F1 备用粮桶", "4 L，适用 F1 标准版和 F1 Pro", "74 元"),
                ("配件", "云团 替换剑麻柱", "长 40 cm，1 根，三个型号通用", "34 元"),
                ("配件", "随行 航空箱尿垫", "10 片装", "29 元"),
                ("清洁", "宠物环境除臭喷雾", "500 ml", "53 元"),
            ],
            "零食和罐头拆封后不退不换，有质量问题的除外。冻干零食未开封保质期 12 个月，罐头 24 个月。",
        ],
    )


def installments() -> None:
    write_docx(
        "installment-guide.docx",
        "分期付款说明",
        [
            "更新日期：2026 年 6 月 1 日。在圆爪宠物小程序或门店购物，单笔订单实付满 600 元就可以分期，"
            "支持花呗分期和信用卡分期。洗护、寄养和宠物保险不能分期。",
            "## 花呗分期",
            "手续费按总费率计算，平均分到每一期。",
            [
                ("期数", "总费率", "说明"),
                ("花呗 3 期", "0%", "免息"),
                ("花呗 6 期", "4.2%", "订单满 600 元可用"),
                ("花呗 12 期", "7.2%", "订单满 1200 元可用"),
            ],
            "活动：云团 Max 猫爬架享受花呗 6 期免息，手续费由圆爪宠物承担。例：买一台云团 Max 选花呗 6 期，"
            "每期还 109.67 元。",
            "## 信用卡分期",
            "支持招商银行、工商银行和浦发银行的信用卡，在门店刷卡时告诉店员要分期即可，手续费按每期收取。",
            [
                ("期数", "每期费率", "说明"),
                ("信用卡 3 期", "0.3%", "订单满 600 元可用"),
                ("信用卡 6 期", "0.55%", "订单满 600 元可用"),
                ("信用卡 12 期", "0.62%", "订单满 1200 元可用"),
            ],
            "## 提前还款与退货",
            "可以提前还清，已经收取的手续费不退。分期订单退货的，本金和手续费按花呗或发卡银行的规则退回。",
        ],
    )


def insurance() -> None:
    intro = [
        "Effective from 1 July 2026. Pet Health Cover is a yearly medical insurance plan for cats and dogs, sold "
        "by Yuanzhua Pets and underwritten by Hengyue Property Insurance Co., Ltd. You pay once a year and we "
        "pay back part of your vet bills.",
        "Who can join: cats and dogs aged 3 months to 8 years on the day the plan starts. A plan can be renewed "
        "every year until the pet is 12 years old. Each pet needs its own plan.",
    ]
    plans = [
        (
            "Basic plan",
            "Covers accidents only (injuries, poisoning, swallowed objects). Yearly price: 399 yuan. Pays back "
            "60% of each bill after a 300 yuan deductible per claim, up to 6000 yuan a year.",
        ),
        (
            "Plus plan",
            "Covers accidents and illness, including surgery and hospital stays. Yearly price: 799 yuan. Pays "
            "back 70% of each bill after a 200 yuan deductible per claim, up to 15000 yuan a year.",
        ),
        (
            "Premium plan",
            "Everything in Plus, and also dental treatment and one free health check a year at a partner clinic. "
            "Yearly price: 1399 yuan. Pays back 80% of each bill with no deductible, up to 30000 yuan a year.",
        ),
    ]
    tail = [
        "Waiting periods: accidents are covered from the 3rd day after the plan starts. Illness is covered from "
        "the 31st day, after a 30-day waiting period. There is no waiting period when you renew without a break.",
        "Not covered: illness that started before the plan or during the waiting period, vaccines, deworming, "
        "neutering, pregnancy and birth, grooming, and pet food, including prescription diets.",
        "How to claim: 1. Pay the vet yourself and keep the invoice and the medical record. 2. Within 30 days of "
        "the treatment, open the Yuanzhua mini program, go to Insurance and tap Claim. 3. Upload photos of the "
        "invoice, the medical record and your pet. 4. The money is paid to your bank account within 7 working "
        "days after the claim is approved.",
        "Cancelling: you can cancel within 15 days of buying the plan for a full refund if no claim was made. "
        "After that, the unused months are refunded minus a 10% handling fee.",
        "Questions about a claim: call the Yuanzhua hotline and choose option 3, or call Hengyue directly on "
        "400-611-7320.",
    ]
    write_pdf(KB / "pet-health-cover.pdf", "Yuanzhua Pet Health Cover", [*intro, *sections(plans), *tail])


if __name__ == "__main__":
    cat_trees()
    price_list()
    installments()
    insurance()
