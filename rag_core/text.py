"""Text facts shared by ingest and the service: which language a text is in, which line is a heading.

Hand-written: the rules are about mixed Chinese/English shop documents ("iPhone 16 Pro 256GB 多少钱" is
Chinese; "一、7 天无理由退货" is a heading), which no library models.
"""

from __future__ import annotations

import re

HAN = re.compile(r"[\u3400-\u9fff]")


def language(text: str) -> str:
    """ "zh" when Chinese carries the text ("iPhone 16 Pro 256GB 多少钱" is Chinese), else "en"."""
    cjk = len(HAN.findall(text))
    latin_words = len(re.findall(r"[A-Za-z]+", text))
    return "zh" if cjk and cjk * 2 >= latin_words else "en"


LIST_MARK = re.compile(r"^\s*(?:[-*•·]|\d{1,2}[.、)]|[（(]\d{1,2}[)）])\s*")
_HEADING_NUMBER = re.compile(
    r"^\s*(?:[一二三四五六七八九十]+、|第[一二三四五六七八九十\d]+[章节条部分]|\d+(?:\.\d+)*\s)"
)
_END_PUNCT = re.compile(r"[。！？!?；;：:，,.]\s*$")


def is_heading(line: str) -> bool:
    """A line that names a section rather than saying something: short, no sentence punctuation, no list
    marker ("价格与存储容量", "一、7 天无理由退货", "Shipping fees and delivery times")."""
    text = line.strip()
    if not text or (LIST_MARK.match(text) and not _HEADING_NUMBER.match(text)):
        return False
    if _END_PUNCT.search(text) or "：" in text[:-1] or ": " in text:
        return False
    size = len(text) if language(text) == "zh" else len(text.split()) * 3
    return size <= 30
