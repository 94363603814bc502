"""The text a search query is embedded as: the query without conversational filler.

Customers wrap questions in words that ask nothing: greetings and thanks ("你好", "thanks!"), requests to be
told ("请问", "麻烦问一下", "can you tell me"), announcements that a question follows ("有个问题想请教", "quick
question"), discourse markers ("对了", "by the way") and reactions to the last answer ("ok great"). No page
of a shop is written in them, so in a dense query they only pull toward other chatty text; and the query
embedder's cost grows with every token (about a millisecond each for the default model on one core).

Only the embedding sees this text: the question as asked, the rewritten query the answer and the reranker
read, and what is stored stay as they are. Each rule is a closed class of words, matched at a clause's
start (or as the whole clause), never a content word that only sometimes serves as filler ("还有货吗" asks
about stock; "另外一个颜色" is another colour). A query with nothing left but filler is kept whole.
"""

from __future__ import annotations

import re
from functools import lru_cache

# Clause ends: Chinese and English punctuation (a full stop only before a space or the end: "1.5", "e.g").
_CLAUSE = re.compile(r"([，,。！!？?；;：:~～…\n]+\s*|\.(?:\s+|$))")

# Whole clauses that ask nothing.
_ZH_GREETING = r"(?:你好|您好|你们好|大家好|嗨|哈喽|哈啰|在吗|在不在|亲|亲亲|老板|客服|打扰(?:一下|了)?|早上好|上午好|中午好|下午好|晚上好|早安)"
# The greetings that never start a content word ("亲子", "老板椅", "客服电话" do).
_ZH_HELLO = r"(?:你好|您好|你们好|大家好|嗨|哈喽|哈啰|在吗|打扰了|打扰一下)"
_ZH_THANKS = r"(?:谢谢|多谢|感谢|辛苦)(?:你|您|你们|啦|了|哈|啊|呀)*|麻烦(?:你|您)?了"
_ZH_MARKER = r"(?:对了|另外|还有|然后|那个|就是|嗯+|呃+|哦+|噢+|额+|好的|好吧|好|行|明白了?|了解了|知道了|收到|ok|okay)"
# "(我)(还/也)(想/要)(顺便/再)问一下(你们)(几个问题)": an announcement that a question follows.
_ZH_ASK = (
    r"(?:我们?)?(?:还|也|再)?(?:想|要|想要)?(?:再|顺便|顺带|另外)?"
    r"(?:问问|问一?下|问|咨询一?下|咨询|请教一?下|请教|打听一?下|打听|了解一?下)"
    r"(?:你们?|您|你们客服)?(?:一?个问题|几个问题|一些问题|两个问题|个事|件事|点事|一些事)?"
)
_ZH_HAVE_QUESTION = r"(?:我们?)?(?:还|也)?有(?:一?个|几个|两个|一些|点)(?:小)?(?:问题|事)(?:想|要)?(?:问问|问一?下|咨询一?下|请教一?下)?(?:你们?|您)?"
_ZH_PARTICLE = r"[呀啊哈吖啦哇~～]*"  # (not 呢 or 嘛: "那个呢" asks)
_EN_GREETING = (
    r"(?:hi|hello|hey|hiya|greetings|good\s+(?:morning|afternoon|evening|day))"
    r"(?:\s+(?:there|again|team|guys|all|everyone|folks))?"
)
_EN_THANKS = (
    r"(?:thanks|thank\s+you|thx|ty|many\s+thanks|cheers|much\s+appreciated|appreciate\s+it)"
    r"(?:\s+(?:so|very)\s+much|\s+a\s+lot|\s+again|\s+in\s+advance)*"
)
_EN_REACTION = r"(?:ok|okay|alright|all\s+right|great|cool|perfect|nice|awesome|sure|got\s+it|i\s+see|understood|oh|ah|um+|uh+|hmm+|well|so|also|and|no\s+worries)"
_EN_ANNOUNCE = (
    r"(?:(?:just\s+)?(?:a\s+)?quick\s+question|(?:i\s+)?(?:have|got)\s+(?:a|one|another|some|a\s+few|two|several)"
    r"\s+(?:more\s+|other\s+|quick\s+|small\s+)?questions?|one\s+more\s+(?:thing|question)|another\s+(?:thing|question)"
    r"|(?:sorry|apologies)\s+(?:to\s+bother\s+you|for\s+(?:bothering|troubling)\s+you|to\s+trouble\s+you)"
    r"|(?:i\s+)?hope\s+you(?:'re|\s+are)\s+(?:well|doing\s+well)|by\s+the\s+way|btw)"
)
_WHOLE = re.compile(
    rf"^(?:(?:(?:麻烦(?:你|您)?|请)?(?:{_ZH_GREETING}|{_ZH_THANKS}|{_ZH_MARKER}|{_ZH_ASK}|{_ZH_HAVE_QUESTION}){_ZH_PARTICLE})+|请问|麻烦(?:你|您)?"
    rf"|(?:{_EN_GREETING}|{_EN_THANKS}|{_EN_REACTION}|{_EN_ANNOUNCE})(?:\s+(?:{_EN_GREETING}|{_EN_THANKS}|{_EN_REACTION}))*)"
    r"[\s!！~～.。]*$",
    re.IGNORECASE,
)

_SOFT_START = re.compile(r"\s+(?=[\u3400-\u9fff])")
_SOFT_WHOLE = re.compile(
    rf"^(?:(?:麻烦(?:你|您)?|请)?(?:{_ZH_HELLO}|{_ZH_THANKS}|{_ZH_ASK}|{_ZH_HAVE_QUESTION}){_ZH_PARTICLE}|请问(?:一下|下)?)$"
)

# Words that open a clause and are followed by what it asks: stripped, repeatedly, from the clause's start.
_LEAD = re.compile(
    r"^(?:"
    # Chinese: a greeting or "oh right" glued on ("你好请问…", "对了我想问…"), "may I ask", "could you trouble to",
    # "I'd like to ask / know", "help me look up", "tell me".
    rf"{_ZH_HELLO}{_ZH_PARTICLE}|对了(?![吗吧么没呀啊嘛])|请问(?:一下|下)?|麻烦(?:你|您)?(?=问|帮|给|告诉|查|看|说)"
    r"|(?:我们?)?(?:还|也|再)?(?:想|要|想要)(?:再|顺便|顺带)?(?:问问|问一?下|问|咨询一?下|咨询|请教一?下|请教|打听一?下|了解一?下)(?:你们?|您)?"
    r"|(?:顺便|顺带|另外|再)(?:问问|问一?下|咨询一?下|请教一?下)|问一?下|咨询一?下|请教一?下"
    r"|(?:能不能|能否|可以|可不可以|能)?(?:帮我|帮忙|替我)(?:查|看|问|确认|核实)?(?:一下|下|看)?"
    r"|(?:能不能|能否|可以|可不可以|能)?(?:告诉我|跟我说|和我说)(?:一下|下)?"
    # English: a greeting with no comma, "please", "can you tell me", "I was wondering if", "do you know whether".
    rf"|{_EN_GREETING}\s+(?=\w)|please\s+"
    r"|(?:can|could|would|will)\s+you\s+(?:please\s+)?(?:tell\s+me|let\s+me\s+know|help\s+me(?:\s+with)?)\s*"
    r"(?:if\s+|whether\s+)?"
    r"|(?:do|does)\s+(?:you|anyone)\s+(?:happen\s+to\s+)?know\s+(?:if\s+|whether\s+)?"
    r"|(?:i(?:\s+was|\s+am|['’]m)\s+|just\s+)?wondering\s+(?:if\s+|whether\s+)?|i\s+wonder\s+(?:if\s+|whether\s+)"
    r"|(?:i(?:['’]d|\s+would)\s+like|i\s+want(?:ed)?|i\s+need|(?:i\s+)?just\s+wanted)\s+to\s+(?:know|ask|check)\s+(?:if\s+|whether\s+)?"
    r"|tell\s+me\s+(?:about\s+)?"
    r")",
    re.IGNORECASE,
)
# Anywhere: "by the way" and "please" between words, thanks closing a clause ("…多少钱谢谢").
_INSIDE = re.compile(
    r"[,，]?\s*\b(?:by\s+the\s+way|btw|please)\b\s*,?|请问(?:一下|下)?|(?<=\S)(?:谢谢|多谢)(?:你|您|啦|了)?(?=$|[，,。！!？?\s])",
    re.IGNORECASE,
)
# What a clause needs to say something: a letter, a digit or a Han character.
_CONTENT = re.compile(r"[A-Za-z0-9\u3400-\u9fff]")
_BLANK = re.compile(r"\s+")
_SPACES = re.compile(r"\s{2,}")
_QUESTION_MARK = re.compile(r"[?？]")
_TRAILING = re.compile(r"[\s，,、；;：:]+$")


_COURTESY = re.compile(rf"(?:{_ZH_HELLO}|{_ZH_THANKS}|{_EN_GREETING}|{_EN_THANKS})", re.IGNORECASE)


def is_courtesy(word: str) -> bool:
    """Is `word` a greeting or a thanks as a whole ("谢谢", "您好", "thank you")? A tagger may read one as a name
    (jieba tags 谢谢 as a person's), which would make "谢谢！能开发票吗" look like a question about someone new."""
    return _COURTESY.fullmatch(word.strip()) is not None


@lru_cache(maxsize=4096)
def search_text(query: str) -> str:
    """`query` without its conversational filler (module docstring); the query itself when nothing would be
    left."""
    parts = _CLAUSE.split(query.strip())
    kept: list[tuple[str, str]] = []
    for i in range(0, len(parts), 2):
        clause, end = parts[i], parts[i + 1] if i + 1 < len(parts) else ""
        lean = _lean_clause(clause)
        if _CONTENT.search(lean):
            kept.append((lean, end))
        elif kept and _QUESTION_MARK.search(end):
            # "Is it waterproof, by the way?": the question mark closes the question, not the filler.
            kept[-1] = (kept[-1][0], end)
    text = _TRAILING.sub("", "".join(lean + end for lean, end in kept)).strip()
    # Only spaces moved (the embedder's tokens are the same): the query as it came, its cache key unchanged.
    if not _CONTENT.search(text) or _BLANK.sub("", text) == _BLANK.sub("", query):
        return query
    return text


def _lean_clause(clause: str) -> str:
    text = clause.strip()
    if _WHOLE.match(text):
        return ""
    text = _SPACES.sub(" ", _INSIDE.sub(" ", text)).strip()
    # A space before Chinese also opens a phrase: the rewriter puts the product in front of the question
    # ("Z8 麻烦问下"). There only the unambiguous wrappers go ("客服" or "好" after a space is a word).
    head, *tail = _SOFT_START.split(_without_lead(text))
    segments = [head]
    for segment in tail:
        if not _SOFT_WHOLE.match(segment):
            segments.append(_without_lead(segment))
    return " ".join(s for s in segments if s)


def _without_lead(text: str) -> str:
    while True:
        found = _LEAD.match(text)
        if found is None or not found.group() or not _CONTENT.search(text[found.end() :]):
            return text
        text = text[found.end() :].lstrip(" ,，")
