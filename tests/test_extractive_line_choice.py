"""Line choice among a page's lines of the asked type (fifteenth session), on invented shops:
- a pack size the customer states picks the lines of that size, not the size the rewriter carried over;
- "the regular one" is the standard edition, and a line naming its edition in letters ("Pro 版") is another."""

from __future__ import annotations

from tests.extractive_kit import answer, chunk

HONEY = chunk(
    "honey",
    "蜂语 槐花蜜 商品详情",
    "\n".join(
        [
            "蜂语（Fengyu）槐花蜜有两个版本：标准版和 Max 版。",
            "标准版 250ml 售价 39 元。",
            "标准版 500ml 售价 69 元。",
            "Max 版 250ml 售价 59 元。",
            "Max 版 500ml 售价 99 元。",
        ]
    ),
    section="标准版",
)


def test_the_size_the_customer_states_picks_its_lines() -> None:
    # The rewriter carried "500ml" from the turn before; the customer asks for the 250ml jar.
    out = answer("and the 250ml jar?", [HONEY], query="Fengyu honey 500ml: and the 250ml jar, how much?")
    assert "39 元" in out and "59 元" in out, out
    assert "69 元" not in out and "99 元" not in out, out


def test_a_size_and_the_regular_one_pick_one_line() -> None:
    out = answer("How much is the regular one, 500ml?", [HONEY])
    assert "69 元" in out, out
    assert "99 元" not in out and "39 元" not in out, out


def test_a_weight_the_customer_gives_of_their_pet_is_no_pack_size() -> None:
    food = chunk(
        "kibble",
        "Crunchpaw Kibble",
        "\n".join(["The 2kg bag costs 89 yuan.", "The 5kg bag costs 189 yuan."]),
        section="Prices",
    )
    out = answer("My dog weighs 5kg, how much is the kibble?", [food])
    assert "89 yuan" in out and "189 yuan" in out, out


def test_regular_price_is_no_edition() -> None:
    out = answer("What is the regular price of the Max 500ml?", [HONEY])
    assert "99 元" in out, out


BEANS_CLUB = chunk(
    "club",
    "Roastery Bean Club",
    "\n".join(
        [
            "Any of our single-origin beans can be ordered through the Bean Club.",
            "Members pick a delivery every 14, 28 or 42 days.",
            "Club orders ship free.",
        ]
    ),
    section="Bean Club",
)


def test_how_often_is_answered_by_an_interval() -> None:
    out = answer("Can I get the house beans through the club? How often would they arrive?", [BEANS_CLUB])
    assert "every 14, 28 or 42 days" in out.splitlines()[1], out


def test_how_often_is_answered_by_a_count_still() -> None:
    care = chunk(
        "care",
        "Grinder Care",
        "\n".join(["Burrs are sharpened for free twice a year.", "A burr set costs 120 yuan."]),
        section="Burrs",
    )
    out = answer("How often are the burrs sharpened for free?", [care])
    assert "twice a year" in out.splitlines()[1], out


def test_a_length_in_hours_is_no_opening_hours() -> None:
    # "36 hours" is how long the step lasts; a line about it is not about when the studio opens.
    steps = chunk("clay", "Clay Drying Policy", "Keep the piece under plastic for 36 hours.", section="Steps")
    studio = chunk(
        "clay",
        "Clay Drying Policy",
        "\n".join(["The studio offers a free 20-minute glazing demo.", "A wheel class takes 50 minutes."]),
        section="Studio sessions",
        index=1,
    )
    out = answer("How long should clay drying last?", [studio, steps])
    assert "36 hours" in out, out
