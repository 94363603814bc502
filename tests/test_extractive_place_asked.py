""" "Where is the X?" is answered by the line with an address, not by the line saying a store has an X (which names
it as the question does), on an invented camera shop's store page."""

from __future__ import annotations

from tests.extractive_kit import answer, chunk

STORES = [
    chunk(
        "stores",
        "光影相机 门店地址",
        "杭州湖滨店\n店内设有光影售后中心，可以当场清洁传感器和检修镜头。\n地址：杭州市上城区湖滨路 66 号 2 层。",
        section="杭州湖滨店",
        index=0,
    ),
    chunk(
        "stores",
        "光影相机 门店地址",
        "到店须知\n只有杭州一家门店设有售后中心，其他门店可以代收设备。",
        section="到店须知",
        index=1,
    ),
]


def test_the_address_not_the_line_naming_the_place() -> None:
    out = answer("杭州的售后中心在哪", STORES)
    assert "湖滨路 66 号" in out
