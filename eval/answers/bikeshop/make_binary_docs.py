"""Writes the Word and PDF documents of the bikeshop knowledge base (kb/*.docx, kb/*.pdf).

The binary files are committed; this script is how they were made, so a fact can be changed in one
place and the files written again: `python eval/answers/bikeshop/make_binary_docs.py`. Needs
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


def kids_bikes() -> None:
    write_docx(
        "xiaodou-kids-bikes.docx",
        "小豆（Xiaodou）儿童自行车 商品详情",
        [
            "首页 > 儿童车 > 小豆",
            "更新日期：2026 年 8 月 25 日。小豆（Xiaodou）是骑迹单车的儿童车品牌，从不带踏板的滑步车到带变速的 "
            "20 寸车都有。买儿童车看身高，不要只看年龄：孩子坐在车座上，两只脚尖能同时着地就是合适的尺寸。",
            "## 型号与价格",
            [
                ("型号", "适合年龄", "适合身高", "辅助轮", "刹车", "整车重量", "售价"),
                ("小豆 滑步车", "1.5–3 岁", "80–100 cm", "无（没有踏板）", "无", "3.2 kg", "319 元"),
                ("小豆 12 寸", "2–4 岁", "85–105 cm", "有，可拆", "后抱刹", "6.8 kg", "459 元"),
                ("小豆 14 寸", "3–5 岁", "95–115 cm", "有，可拆", "前 V 刹 + 后抱刹", "7.4 kg", "529 元"),
                ("小豆 16 寸", "4–7 岁", "105–125 cm", "有，可拆", "前后 V 刹", "8.1 kg", "599 元"),
                ("小豆 20 寸", "6–10 岁", "120–140 cm", "不带辅助轮", "前后 V 刹，6 速变速", "10.5 kg", "869 元"),
            ],
            "12 寸、14 寸和 16 寸出厂装好辅助轮，孩子学会以后用扳手拧下两颗螺母就能拆掉。",
            "## 安全",
            "全系通过 GB 14746 儿童自行车安全要求。链条有全包链罩，不会夹到裤脚和手指。车把两端有防撞软塞。"
            "建议骑车时戴儿童头盔，价格见《配件与骑行装备价格表》。",
            "## 颜色",
            "滑步车：奶油黄、薄荷绿。12 寸、14 寸、16 寸：樱花粉、天空蓝、奶油黄。20 寸：天空蓝、石墨灰。",
            "## 保修",
            "小豆全系车架保修 3 年，其他零件保修 1 年。孩子长高了想换大一号，可以参加以旧换新，详见 Trade-In Programme。",
        ],
    )


def price_list() -> None:
    write_docx(
        "gear-and-parts-prices.docx",
        "配件与骑行装备价格表",
        [
            "更新日期：2026 年 9 月 30 日。以下为骑迹单车门店和小程序的统一售价，会员按等级另有折扣。"
            "这些商品没有单独的商品详情页，以本表为准。",
            [
                ("品类", "商品", "规格", "售价"),
                ("头盔", "盾甲（Dunjia）城市头盔 M 码", "头围 54–58 cm，带尾灯", "189 元"),
                ("头盔", "盾甲（Dunjia）城市头盔 L 码", "头围 58–62 cm，带尾灯", "209 元"),
                ("头盔", "盾甲 儿童头盔", "头围 48–54 cm", "139 元"),
                ("锁", "铁卫（Tiewei）U 型锁", "C 级锁芯，附两把钥匙", "172 元"),
                ("锁", "铁卫（Tiewei）折叠锁", "6 节钢片，可挂在车架上", "236 元"),
                ("车灯", "亮途（Liangtu）前灯 400", "400 流明，USB 充电", "109 元"),
                ("车灯", "亮途（Liangtu）前灯 800 Pro", "800 流明，USB-C 充电，可当充电宝", "158 元"),
                ("车灯", "亮途 尾灯", "刹车感应自动变亮", "49 元"),
                ("脚踏", "铝合金平踏", "一对", "59 元"),
                ("脚踏", "自锁脚踏", "一对，含锁片", "279 元"),
                ("工具", "落地式打气筒", "带气压表，美法嘴通用", "119 元"),
                ("载物", "挡泥板", "一对，适合 26–29 寸", "68 元"),
                ("载物", "后座儿童座椅", "限电助力车后货架，承重 22 kg", "258 元"),
                ("电池", "行云 E3 备用电池 36V 10Ah", "适用 E3 标准版", "1180 元"),
                ("电池", "行云 E3 备用电池 36V 14Ah", "适用 E3 长续航版，也可装在标准版上", "1460 元"),
                ("电池", "行云 E3 Max 备用电池 48V 17.5Ah", "仅适用 E3 Max", "1990 元"),
                ("充电器", "行云 36V 2A 充电器", "适用 E3 标准版、长续航版", "175 元"),
                ("充电器", "行云 48V 3A 充电器", "仅适用 E3 Max", "229 元"),
            ],
            "单独购买的备用电池保修 1 年；车灯保修 6 个月。配件满 99 元包邮。",
        ],
    )


def installments() -> None:
    write_docx(
        "pay-in-installments.docx",
        "分期付款说明",
        [
            "更新日期：2026 年 7 月 10 日。在骑迹单车门店或小程序购物，单笔订单实付满 1500 元即可分期付款，"
            "支持花呗分期和信用卡分期。维修保养费用不能分期。",
            "## 花呗分期",
            "花呗分期的手续费按总费率计算，平均分到每一期。",
            [
                ("期数", "总费率", "说明"),
                ("花呗 3 期", "0%", "免息"),
                ("花呗 6 期", "4.5%", "订单满 1500 元可用"),
                ("花呗 12 期", "7.5%", "订单满 1500 元可用"),
            ],
            "飞燕 R5 Pro 和行云 E3 Max 享受花呗 12 期免息，免息部分由骑迹承担。"
            "例：R5 Pro 6280 元选花呗 12 期免息，每期还 523.33 元。",
            "## 信用卡分期",
            "支持招商银行、建设银行和交通银行的信用卡，手续费按每期收取。",
            [
                ("期数", "每期费率", "说明"),
                ("信用卡 3 期", "0%", "免息"),
                ("信用卡 6 期", "0.58%", "订单满 1500 元可用"),
                ("信用卡 12 期", "0.64%", "订单满 1500 元可用"),
                ("信用卡 24 期", "0.71%", "订单满 5000 元可用，仅招商银行"),
            ],
            "## 提前还款与退货",
            "可以提前还清，已经收取的手续费不退。分期订单退货的，本金和手续费按花呗或发卡银行的规则退回。",
        ],
    )


def trade_in() -> None:
    intro = [
        "Effective from 1 August 2026. Bring your old bike to any Qiji Cycles store and get credit towards a new "
        "one. The old bike does not have to be from us, and it does not have to be the same type as the new one.",
        "Who can use it: anyone buying a new complete bike priced at 2000 yuan or more. One trade-in credit per new "
        "bike.",
    ]
    grades = [
        (
            "Grade A - like new",
            "Less than 2 years old, no crash damage, everything works. Credit: 35% of the original price, up to "
            "1800 yuan.",
        ),
        (
            "Grade B - used",
            "Normal wear, rides safely, may need new tyres or a chain. Credit: 20% of the original price, up to "
            "900 yuan.",
        ),
        (
            "Grade C - needs work",
            "Any other adult bike that still rolls, whatever its age or brand. Credit: a flat 165 yuan.",
        ),
    ]
    tail = [
        "Kids' bikes: a Xiaodou kids' bike bought from us less than 3 years ago can be traded up to the next size "
        "for 30% of its original price. This also works for a balance bike traded up to a 12-inch bike, and the "
        "2000 yuan minimum does not apply.",
        "E-bike batteries: bring an old e-bike battery of any brand and get 65 yuan off a new e-bike for a "
        "lead-acid battery, or 128 yuan off for a lithium battery. We recycle the battery safely.",
        "Not accepted: bikes with a cracked frame, e-bikes that have been modified to go faster, and bikes whose "
        "frame number has been removed.",
        "How it works: 1. Bring the bike and your ID card to a store (no booking needed). 2. A mechanic checks it; "
        "this takes about 20 minutes. 3. You get a credit code in the mini program. The credit is valid for 30 "
        "days and cannot be exchanged for cash.",
    ]
    write_pdf(KB / "trade-in-programme.pdf", "Qiji Cycles Trade-In Programme", [*intro, *sections(grades), *tail])


if __name__ == "__main__":
    kids_bikes()
    price_list()
    installments()
    trade_in()
