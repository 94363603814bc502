"""Generate the PDF documents of the sample knowledge base in ``examples/kb/``.

This is a development-time script: the generated PDFs are committed, so the
server and the tests never need fpdf2 or a CJK font at run time.

Usage::

    python scripts/build_kb_pdfs.py                 # writes examples/kb/*.pdf
    python scripts/build_kb_pdfs.py --font /path/to/font.ttf --out /tmp/kb
    python scripts/build_kb_pdfs.py --check         # build, then verify with pypdf

Requirements: ``fpdf2`` (dev extra) and a TrueType/OpenType font with CJK
glyphs.  On Debian/Ubuntu: ``apt-get install fonts-wqy-microhei`` (or
``fonts-noto-cjk``).  The font is looked up in ``--font``, then the
``KB_PDF_FONT`` environment variable, then a list of common system paths.

The output is deterministic (fixed creation date), so re-running the script
without content changes leaves the committed files byte-identical.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = REPO_ROOT / "examples" / "kb"

FONT_CANDIDATES = (
    "/usr/share/fonts/truetype/wqy/wqy-microhei.ttc",
    "/usr/share/fonts/truetype/wqy/wqy-zenhei.ttc",
    "/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc",
    "/usr/share/fonts/noto-cjk/NotoSansCJK-Regular.ttc",
    "/usr/share/fonts/truetype/arphic/uming.ttc",
    "/System/Library/Fonts/PingFang.ttc",
    "C:/Windows/Fonts/msyh.ttc",
)

CREATION_DATE = dt.datetime(2025, 3, 1, 9, 0, 0, tzinfo=dt.UTC)
AUTHOR = "星辰数码 Xingchen Digital"


@dataclass
class Section:
    heading: str
    paragraphs: list[str]


@dataclass
class Document:
    filename: str
    title: str
    intro: str
    sections: list[Section] = field(default_factory=list)
    subject: str = ""


DOCUMENTS: list[Document] = [
    Document(
        filename="installment-payments.pdf",
        title="分期付款说明",
        subject="星辰数码分期付款规则：期数、费率、免息条件、银行与花呗",
        intro=(
            "更新日期：2025 年 3 月 1 日。星辰数码支持花呗分期和信用卡分期，可选 3 期、6 期、12 期和 24 期。"
            "本文说明各期数的手续费率、免息条件、支持的银行和最低金额。"
        ),
        sections=[
            Section(
                "一、支持的分期方式",
                [
                    "1. 花呗分期：使用支付宝花呗付款时可以选择分期，单笔订单实付金额满 600 元可用，最多支持 12 期。",
                    "2. 信用卡分期：支持招商银行、工商银行、建设银行、中国银行、交通银行和浦发银行的信用卡，"
                    "单笔订单实付金额满 1000 元可用。",
                    "3. 24 期分期仅支持招商银行和工商银行的信用卡，并且单笔订单实付金额需要满 5000 元。",
                    "在门店购物时，可以通过收银台的 POS 机办理信用卡分期，规则与线上相同。",
                ],
            ),
            Section(
                "二、免息条件",
                [
                    "1. 单笔订单实付满 3000 元，可以享受 3 期和 6 期免息，花呗和信用卡均适用。",
                    "2. 单笔订单实付满 6000 元并且购买的是手机或笔记本电脑，可以享受 12 期免息。",
                    "3. 24 期不参加免息活动，需要按照费率支付手续费。",
                    "4. 免息期数的手续费由星辰数码承担，您只需要按期偿还本金。",
                    "5. 学生优惠订单同样可以享受上述免息活动。",
                ],
            ),
            Section(
                "三、手续费率",
                [
                    "不符合免息条件时，手续费按订单总金额一次性计算，并平均分摊到每一期。",
                    "3 期的总费率为 2.3%。",
                    "6 期的总费率为 4.5%。",
                    "12 期的总费率为 7.5%。",
                    "24 期的总费率为 12.5%。",
                    "举例：一笔 10000 元的订单选择 24 期，总手续费为 1250 元，每期应还 468.75 元，"
                    "其中本金 416.67 元，手续费 52.08 元。",
                    "举例：一笔 6000 元的手机订单选择 12 期免息，每期应还 500 元，没有手续费。",
                ],
            ),
            Section(
                "四、还款与提前还款",
                [
                    "分期账单从下单的次月开始，每月的还款日以银行或花呗的账单日为准。",
                    "提前还清全部剩余本金时，已经收取的手续费不予退还，尚未出账的手续费不再收取。",
                    "逾期还款会产生银行或花呗收取的逾期费用，并可能影响个人征信。",
                ],
            ),
            Section(
                "五、退货与分期",
                [
                    "分期订单办理退货后，尚未偿还的分期会自动取消。",
                    "免息订单退货时，不会产生任何手续费。",
                    "非免息订单全额退货时，已经支付的手续费会在 7 个工作日内一并退还。",
                    "部分退货时，剩余商品的分期金额会重新计算。",
                ],
            ),
            Section(
                "六、常见问题",
                [
                    "分期额度取决于您的信用卡额度或花呗可用额度，星辰数码无法为您调整。",
                    "如有其他疑问，请拨打客服热线 400-820-1234 咨询。",
                ],
            ),
        ],
    ),
    Document(
        filename="warranty-policy.pdf",
        title="星辰数码保修政策",
        subject="标准保修、星辰延保、星辰意外保与保外维修收费标准",
        intro=(
            "更新日期：2025 年 3 月 1 日。本政策适用于在星辰数码购买的所有手机、笔记本电脑和配件，"
            "说明标准保修、星辰延保、星辰意外保和保外维修的收费标准。"
            "各机型的专属保修条款以及屏幕、电池等部件的维修价格，请以对应的商品页面为准。"
        ),
        sections=[
            Section(
                "一、标准保修",
                [
                    "手机和笔记本电脑整机享受不少于 1 年的保修，部分机型的保修期更长，以商品页面为准。",
                    "充电器、数据线和耳机等原装配件保修 6 个月。",
                    "保修期从签收之日起计算，在门店购买的商品以发票日期为准。",
                    "保修期内，非人为原因造成的性能故障可以免费维修。",
                    "同一故障经过 2 次维修仍未修复的，可以免费更换同型号的新机。",
                    "办理保修时，请提供订单号或发票作为购买凭证。",
                ],
            ),
            Section(
                "二、不在保修范围内的情况",
                [
                    "1. 摔落、挤压或进水造成的损坏。",
                    "2. 私自拆机，或者在非授权网点维修过的设备。",
                    "3. 刷入非官方系统、root 或越狱导致的软件故障。",
                    "4. 外观划痕和正常使用造成的磨损。",
                    "5. 已经超出保修期限的设备。",
                ],
            ),
            Section(
                "三、星辰延保",
                [
                    "星辰延保在原厂保修期结束后继续提供保修，保修范围与标准保修相同。",
                    "手机的星辰延保价格为 1 年 299 元，2 年 499 元。",
                    "笔记本电脑的星辰延保价格为 1 年 599 元，2 年 999 元。",
                    "购买条件：需要在签收后 30 天内购买；设备需要通过检测，没有人为损坏；每台设备只能购买一次。",
                    "延保期内累计维修金额的上限为商品的购买价格。",
                    "设备转让时，延保服务可以联系客服办理过户，每台设备限过户 1 次。",
                ],
            ),
            Section(
                "四、星辰意外保",
                [
                    "星辰意外保保障摔落、碎屏和进水等意外损坏，保障期为 1 年。",
                    "手机意外保的价格为 399 元，保障期内最多可以申请 2 次，每次需要支付 199 元服务费。",
                    "笔记本电脑意外保的价格为 699 元，保障期内最多可以申请 2 次，每次需要支付 399 元服务费。",
                    "意外保需要在签收后 30 天内购买，设备丢失和被盗不在保障范围内。",
                ],
            ),
            Section(
                "五、保外维修收费标准",
                [
                    "故障检测：免费。",
                    "手机系统重装：50 元。笔记本电脑系统重装：99 元。",
                    "手机充电接口更换：199 元。",
                    "手机扬声器更换：159 元。",
                    "笔记本电脑清洁除尘：99 元。",
                    "笔记本电脑风扇更换：299 元。",
                    "上门取件寄修：保修期外往返运费 30 元，保修期内免费。",
                    "屏幕、电池和主板等主要部件的保外价格因机型而不同，请查阅对应的商品页面。",
                    "维修更换的部件享有 90 天保修。",
                ],
            ),
            Section(
                "六、维修方式与时效",
                [
                    "上海南京西路旗舰店和深圳华强北店设有维修中心，备件充足时，屏幕和电池更换约 1 小时完成。",
                    "其他门店代收或者快递寄修的设备，一般在 5 到 7 个工作日内返回。",
                    "报修请拨打客服热线 400-820-1234，或者在星辰数码 App 中申请售后。",
                ],
            ),
        ],
    ),
    Document(
        filename="trade-in-price-list.pdf",
        title="以旧换新回收价格表",
        subject="以旧换新回收价格、换新补贴与办理流程（2025 年 3 月至 6 月）",
        intro=(
            "更新日期：2025 年 3 月 1 日。本价格表适用于 2025 年 3 月 1 日至 2025 年 6 月 30 日期间"
            "在星辰数码办理的以旧换新业务。回收价格按照成色分为完好、轻微划痕和明显磨损三档。"
        ),
        sections=[
            Section(
                "一、成色说明",
                [
                    "完好：外观和屏幕没有明显划痕，所有功能正常。",
                    "轻微划痕：外观或屏幕有细小划痕，所有功能正常。",
                    "明显磨损：有明显的磕碰或掉漆，所有功能正常。",
                    "屏幕碎裂、无法开机或进水的设备不适用本价格表，需要单独评估，最低按 100 元回收。",
                ],
            ),
            Section(
                "二、旧手机回收价格",
                [
                    "iPhone 15 Pro 128GB：完好 4600 元，轻微划痕 4100 元，明显磨损 3300 元。",
                    "iPhone 15 128GB：完好 3400 元，轻微划痕 3000 元，明显磨损 2400 元。",
                    "iPhone 14 Pro 128GB：完好 3500 元，轻微划痕 3100 元，明显磨损 2500 元。",
                    "iPhone 13 128GB：完好 1900 元，轻微划痕 1650 元，明显磨损 1300 元。",
                    "小米 14 Pro 12GB+256GB：完好 2300 元，轻微划痕 2000 元，明显磨损 1600 元。",
                    "三星 Galaxy S24 Ultra 12GB+256GB：完好 4200 元，轻微划痕 3700 元，明显磨损 3000 元。",
                    "华为 Mate 60 Pro 12GB+512GB：完好 3800 元，轻微划痕 3400 元，明显磨损 2800 元。",
                    "iPhone 机型的存储容量每高一档，回收价格增加 300 元。",
                ],
            ),
            Section(
                "三、旧笔记本电脑回收价格",
                [
                    "MacBook Air M2 8GB+256GB：完好 4300 元，轻微划痕 3900 元，明显磨损 3200 元。",
                    "MacBook Air M1 8GB+256GB：完好 2900 元，轻微划痕 2600 元，明显磨损 2100 元。",
                    "ThinkPad T14 Gen 4 16GB+512GB：完好 3600 元，轻微划痕 3200 元，明显磨损 2600 元。",
                    "华为 MateBook 14 2023 款 16GB+1TB：完好 3100 元，轻微划痕 2750 元，明显磨损 2200 元。",
                ],
            ),
            Section(
                "四、换新补贴",
                [
                    "通过以旧换新购买新手机，在回收价之外额外补贴 300 元。",
                    "通过以旧换新购买新笔记本电脑，额外补贴 500 元。",
                    "每笔新机订单只能使用一台旧设备享受换新补贴。",
                    "回收款和补贴直接抵扣新机货款，如果回收款高于新机价格，差额会退回到您的支付账户。",
                ],
            ),
            Section(
                "五、办理流程",
                [
                    "1. 在星辰数码 App 的“以旧换新”页面选择旧机型号和成色，获得预估价格。",
                    "2. 购买新机时选择以旧换新，可以到门店办理，也可以预约快递上门取件。",
                    "3. 旧机送达后 2 个工作日内完成质检，质检价格与预估价格不一致时，我们会先与您确认。",
                    "4. 您确认后，回收款会在 1 个工作日内抵扣或退回。",
                ],
            ),
            Section(
                "六、注意事项",
                [
                    "旧设备需要退出 Apple ID、小米账号或华为账号，并关闭查找设备功能，否则无法回收。",
                    "请提前备份并清除个人数据，我们在回收后还会进行专业的数据擦除。",
                    "有锁机、维修过主板的设备和非国行设备不参加以旧换新。",
                    "如有疑问，请拨打客服热线 400-820-1234。",
                ],
            ),
        ],
    ),
]


def find_font(explicit: str | None) -> Path:
    """Return the path of a font with CJK glyphs, or exit with a helpful message."""
    candidates = [explicit, os.environ.get("KB_PDF_FONT"), *FONT_CANDIDATES]
    for cand in candidates:
        if cand and Path(cand).is_file():
            return Path(cand)
    sys.exit(
        "No CJK font found. Install one (e.g. `apt-get install fonts-wqy-microhei`) "
        "or pass --font /path/to/font.ttf (or set KB_PDF_FONT)."
    )


# Runs of ASCII letters/digits/symbols (prices, SKUs, phone numbers, "12GB+256GB") are never split;
# everything else (CJK characters, CJK punctuation) may wrap between any two characters.
_TOKEN_RE = re.compile(r"[A-Za-z0-9@.,_%+\-/:()¥×#&']+|\s+|.")
# Kinsoku: CJK punctuation that must not start a line stays at the end of the previous one.
_NO_LINE_START = set("，。、；：！？）》」』”’%")


def wrap_lines(text: str, max_width: float, width_of: Callable[[str], float]) -> list[str]:
    """Greedy line wrapping for mixed Chinese/English text.

    fpdf2's own word wrapping only breaks at spaces (long CJK runs get split at odd
    places) and its justified alignment inserts extra spaces that pypdf then extracts;
    wrapping here and emitting left-aligned cells keeps the extracted text clean.
    """
    lines: list[str] = []
    current = ""
    for token in _TOKEN_RE.findall(text):
        if not current and token.isspace():
            continue
        candidate = current + token
        if width_of(candidate) <= max_width or not current or token in _NO_LINE_START:
            current = candidate
            continue
        lines.append(current.rstrip())
        current = "" if token.isspace() else token
    if current.strip():
        lines.append(current.rstrip())
    return lines


def render(doc: Document, font_path: Path, out_dir: Path) -> Path:
    from fpdf import FPDF  # dev-only dependency

    pdf = FPDF(format="A4")
    pdf.set_margins(20, 20, 20)
    pdf.set_auto_page_break(auto=True, margin=20)
    pdf.set_title(doc.title)
    pdf.set_author(AUTHOR)
    pdf.set_subject(doc.subject or doc.title)
    pdf.set_creator("scripts/build_kb_pdfs.py")
    pdf.set_lang("zh-CN")
    pdf.set_creation_date(CREATION_DATE)
    pdf.add_font("cjk", "", str(font_path))
    pdf.add_page()

    def para(text: str, size: float, line_h: float, gap: float = 0.0) -> None:
        pdf.set_font("cjk", size=size)
        for line in wrap_lines(text, pdf.epw, pdf.get_string_width):
            pdf.cell(0, line_h, line, new_x="LMARGIN", new_y="NEXT")
        if gap:
            pdf.ln(gap)

    para(doc.title, 18, 10, gap=3)
    para(doc.intro, 10.5, 6.5, gap=2)
    for section in doc.sections:
        pdf.ln(2)
        para(section.heading, 13, 8, gap=1)
        for p in section.paragraphs:
            para(p, 10.5, 6.5, gap=1)

    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / doc.filename
    pdf.output(str(target))
    return target


def check(path: Path, doc: Document) -> None:
    """Verify with pypdf that the title and every sentence are extractable."""
    from pypdf import PdfReader

    reader = PdfReader(str(path))
    meta_title = reader.metadata.title if reader.metadata else None
    if meta_title != doc.title:
        raise SystemExit(f"{path.name}: metadata title {meta_title!r} != {doc.title!r}")
    text = "\n".join(page.extract_text() or "" for page in reader.pages)
    flat = "".join(text.split())
    if not flat.startswith("".join(doc.title.split())):
        raise SystemExit(f"{path.name}: extracted text does not start with the title")
    expected = [doc.intro] + [s.heading for s in doc.sections]
    expected += [p for s in doc.sections for p in s.paragraphs]
    for piece in expected:
        if "".join(piece.split()) not in flat:
            raise SystemExit(f"{path.name}: text not extracted correctly: {piece[:40]!r}")
    print(f"OK {path.name}: {len(reader.pages)} page(s), {len(flat)} non-space chars, title {meta_title!r}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--font", help="path to a TTF/OTF/TTC font with CJK glyphs")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output directory (default: examples/kb)")
    parser.add_argument("--check", action="store_true", help="verify the generated PDFs with pypdf")
    args = parser.parse_args(argv)

    font_path = find_font(args.font)
    for doc in DOCUMENTS:
        path = render(doc, font_path, args.out)
        print(f"wrote {path}")
        if args.check:
            check(path, doc)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
