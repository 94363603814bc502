from rag_core.recent import Recent


def test_the_least_recently_used_entry_goes_first() -> None:
    memo: Recent[str, int] = Recent(2)
    memo.put("a", 1)
    memo.put("b", 2)
    assert memo.get("a") == 1  # "a" is now the most recent, so "b" is the one to go
    memo.put("c", 3)
    assert (memo.get("a"), memo.get("b"), memo.get("c"), len(memo)) == (1, None, 3, 2)


def test_writing_an_entry_again_replaces_it_and_makes_it_recent() -> None:
    memo: Recent[str, int] = Recent(2)
    memo.put("a", 1)
    memo.put("b", 2)
    memo.put("a", 10)
    memo.put("c", 3)
    assert (memo.get("a"), memo.get("b"), memo.get("c")) == (10, None, 3)
    memo.clear()
    assert len(memo) == 0 and memo.get("a") is None


def test_an_entry_popped_is_gone_and_popping_a_missing_one_is_no_error() -> None:
    memo: Recent[str, int] = Recent(2)
    memo.put("a", 1)
    memo.pop("a")
    memo.pop("never-there")
    assert (memo.get("a"), len(memo)) == (None, 0)
