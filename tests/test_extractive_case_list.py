"""A question naming no case of a list of parallel lines, one per case (delivery time per zone, hours per
desk), is answered by the list, as a price question naming no tier is; one naming a case keeps its line.
"What hours ..." asks for a time of day. Invented shops and wording."""

from __future__ import annotations

from rag_service.extractive import _parallel
from rag_service.facts import Ask, question_asks
from tests.extractive_kit import answer, chunk

# The list cut by the chunker's overlap: its last line ranks first, the others come in a chunk ranked lower.
DELIVERY_TAIL = chunk(
    "parcel-rules",
    "青禾园艺 寄送说明",
    "- 山区和海岛一般 5 到 9 天送达。\n暴雨天气会顺延。",
    section="## 送达时效",
    index=1,
)
DELIVERY_HEAD = chunk(
    "parcel-rules",
    "青禾园艺 寄送说明",
    "\n".join(
        [
            "苗木在每周二和周五统一打包寄出。",
            "- 华东城区一般 1 到 2 天送达。",
            "- 华中和华南城区一般 2 到 4 天送达。",
            "- 山区和海岛一般 5 到 9 天送达。",
        ]
    ),
    section="## 送达时效",
    index=0,
)
OTHER_PAGES = [
    chunk("pots", "青禾园艺 花盆", "陶土花盆有三种尺寸，口径 12、18 和 24 厘米。", section="## 花盆"),
    chunk("soil", "青禾园艺 营养土", "营养土每袋 5 升，开袋后半年内用完。", section="## 营养土"),
    chunk("care", "青禾园艺 养护", "新苗到手后先放阴凉处缓苗。", section="## 养护"),
]
DELIVERY_PAGES = [DELIVERY_TAIL, *OTHER_PAGES, DELIVERY_HEAD]
DESK_TAIL = chunk(
    "desk-hours",
    "Fernlight Pottery help desk",
    "The chat desk answers from 10:00 to 22:00 every day.",
    section="## Help desk",
    index=1,
)
DESK_HEAD = chunk(
    "desk-hours",
    "Fernlight Pottery help desk",
    "The phone desk answers from 8:30 to 17:00 on weekdays.\nThe chat desk answers from 10:00 to 22:00 every day.",
    section="## Help desk",
    index=0,
)
DESK_OTHERS = [
    chunk("glaze", "Fernlight glazes", "Our glazes are food safe once fired.", section="## Glazes"),
    chunk("kiln", "Fernlight kiln", "The kiln fires twice a week.", section="## Kiln"),
    chunk("clay", "Fernlight clay", "Stoneware clay comes in 10 kg bags.", section="## Clay"),
]
DESK_PAGES = [DESK_TAIL, *DESK_OTHERS, DESK_HEAD]


def test_a_duration_question_naming_no_case_gets_every_case_line() -> None:
    out = answer("苗木寄出后多久能送到", DELIVERY_PAGES)
    assert "1 到 2 天" in out and "2 到 4 天" in out and "5 到 9 天" in out


def test_a_duration_question_naming_its_case_keeps_that_line() -> None:
    out = answer("山区和海岛多久能送到", DELIVERY_PAGES)
    assert "5 到 9 天" in out
    assert "1 到 2 天" not in out


def test_what_hours_asks_for_a_time_of_day() -> None:
    assert Ask.TIME in question_asks("What hours is the help desk open?")
    assert Ask.TIME in question_asks("what are your store hours")
    assert Ask.TIME not in question_asks("How many hours does the battery last?")


def test_an_hours_question_naming_no_desk_gets_both_desks() -> None:
    out = answer("What hours is the help desk open?", DESK_PAGES)
    assert "8:30" in out and "10:00" in out


def test_an_hours_question_naming_one_desk_keeps_its_line() -> None:
    out = answer("What hours does the chat desk answer?", DESK_PAGES)
    assert "10:00" in out
    assert "8:30" not in out


def test_parallel_lines_share_their_wording_around_the_case() -> None:
    assert _parallel("华东城区一般 1 到 2 天送达。", "山区和海岛一般 5 到 9 天送达。")
    assert _parallel("The phone desk answers from 8:30 to 17:00.", "The chat desk answers from 10:00 to 22:00.")
    assert not _parallel("取货码 48 小时内有效。", "新苗到手后 3 天内别施肥。")
