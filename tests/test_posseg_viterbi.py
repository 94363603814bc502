"""The part-of-speech decoder put in place of jieba's gives jieba's result."""

from __future__ import annotations

import jieba.posseg as pseg
from hypothesis import given, settings
from hypothesis import strategies as st
from jieba.posseg import char_state_tab_P, emit_P, start_P, trans_P
from jieba.posseg.viterbi import viterbi as library_viterbi

from rag_service import rewrite_rules  # noqa: F401  (installs the decoder)
from rag_service.posseg_viterbi import viterbi

# Common characters, rare ones (few states: the fallbacks when no state fits) and a character jieba's
# tables do not hold.
_HAN = "的了是在我有和不人这上也到说要会着看好自己买卖退换货价钱款单号保修电池屏幕颜色耳机镜片瓦罐淼犇鑫龘㐀"


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet=_HAN, min_size=1, max_size=14))
def test_same_route_and_score_as_jieba(text: str) -> None:
    assert viterbi(text, char_state_tab_P, start_P, trans_P, emit_P) == library_viterbi(
        text, char_state_tab_P, start_P, trans_P, emit_P
    )


def test_installed_for_posseg() -> None:
    assert pseg.viterbi is viterbi
    # A sentence with words outside the dictionary goes through the decoder.
    words = [(w.word, w.flag) for w in pseg.lcut("我在淼犇鑫小店买的瓦罐耳机能退吗")]
    assert "".join(w for w, _ in words) == "我在淼犇鑫小店买的瓦罐耳机能退吗"
