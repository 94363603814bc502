"""`Chunk`'s fast copies give what `dataclasses.replace` gives, field by field."""

from __future__ import annotations

import dataclasses

from rag_service.domain import Chunk


def _chunk() -> Chunk:
    return Chunk(
        id="c1",
        doc_id="kettle-guide",
        source="kettle.md",
        title="Kettle guide",
        text="The lid opens with the button on the handle.",
        score=0.42,
        token_count=11,
        section="Lid",
        lang="en",
        index=3,
        aliases="",
    )


def test_rescored_is_replace_with_score() -> None:
    chunk = _chunk()
    copy = chunk.rescored(0.9)
    assert copy == dataclasses.replace(chunk, score=0.9)
    assert chunk.score == 0.42


def test_without_text_is_replace_with_empty_text() -> None:
    chunk = _chunk()
    copy = chunk.without_text()
    assert copy == dataclasses.replace(chunk, text="")
    assert [getattr(copy, f.name) for f in dataclasses.fields(Chunk) if f.name != "text"] == [
        getattr(chunk, f.name) for f in dataclasses.fields(Chunk) if f.name != "text"
    ]
    assert chunk.text.startswith("The lid")


def test_copies_keep_every_field() -> None:
    # Every field set to something other than its default, so a slot a copy left unset or took from another
    # field shows.
    values: dict[str, object] = {f.name: f"v-{f.name}" for f in dataclasses.fields(Chunk)}
    values.update(score=0.5, token_count=7, index=2)
    chunk = Chunk(**values)  # type: ignore[arg-type]
    assert chunk.rescored(0.25) == dataclasses.replace(chunk, score=0.25)
    assert chunk.without_text() == dataclasses.replace(chunk, text="")
    assert {f.name: getattr(chunk.rescored(0.5), f.name) for f in dataclasses.fields(Chunk)} == values
