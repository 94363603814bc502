"""What a question asks for and what a sentence states: typed values, product names and their variants.

Plain string work shared by the extractive answerer, the reranker and memory recall. Written by hand
because no library does this for mixed Chinese/English shop text: the question types and value patterns
are those of customer service (prices, durations, dates, phones, addresses, specifications), and the
product rules encode how shops name sibling models ("iPhone 16" vs "iPhone 16 Pro", "13 英寸" vs
"15-inch", "256GB" vs "512GB").
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from enum import Enum
from functools import lru_cache

from rag_core.text import EN_GENERIC_WORDS, HAN_CLASS
from rag_core.text import HAN as _CJK

# --- question types ---------------------------------------------------------------------------------


class Ask(Enum):
    PAYER = "payer"
    THRESHOLD = "threshold"
    PRICE = "price"
    DURATION = "duration"
    TIME = "time"
    DATE = "date"
    CONTACT = "contact"
    LOCATION = "location"
    PERCENT = "percent"
    COUNT = "count"
    SPEC = "spec"
    HOWTO = "howto"
    YESNO = "yesno"
    GENERAL = "general"


_ASK_PATTERNS: list[tuple[Ask, re.Pattern[str]]] = [
    (
        # "运费谁出", "who pays for the return shipping?": who bears a cost.
        Ask.PAYER,
        re.compile(
            r"谁(?:出|付|掏|承担|负责|买单)|由谁(?:出|付|承担|负责)|\bwho (?:pays|covers|bears|foots|is paying)\b"
            # "must we pay the return postage?", "运费要我出吗": whether the customer bears the carriage.
            # Not "must we pay for delivery?": whether delivery is free is a price question.
            r"|\b(?:do|will|would|must|should) (?:i|we) (?:have to |need to )?pay (?:for )?(?:the |any )?"
            r"(?:(?:return )?postage|return (?:shipping|delivery|courier)|carriage)\b"
            r"|(?:运费|邮费|快递费)(?:要|得|需要)?(?:我|我们|自己)(?:出|付|承担)|(?:我|我们|自己)(?:来)?(?:出|付|承担)(?:运费|邮费|快递费)",
            re.I,
        ),
    ),
    (
        # "满多少能免运费", "minimum spend for free delivery": the amount from which a rule applies.
        Ask.THRESHOLD,
        re.compile(
            r"满多少|多少(?:钱|元)?(?:才|就|可以|能)?(?:包邮|免运费|免费|免息|升级|成为)|门槛|最低消费|起订|起购|起送"
            r"|\bminimum\b|\bat least how much\b|\bthreshold\b|\bhow much (?:do|must|should) (?:i|we) (?:spend|buy|order)\b"
            r"|\bqualif(?:y|ies) for\b|\bspend to\b",
            re.I,
        ),
    ),
    (
        Ask.PERCENT,
        re.compile(
            r"费率|利率|手续费率|几折|打几折|折扣是多少|百分之|\brate\b|\bpercent|\binterest\b|\bhow big is the discount|\bdiscount\b.*\bhow (?:much|big)",
            re.I,
        ),
    ),
    (
        Ask.PRICE,
        re.compile(
            r"多少钱|啥价|什么价|最便宜|最贵|价格|价钱|售价|回收多少|收多少|卖多少钱|报价|多贵|几块|几元|卖多少|卖几|费用|收费|运费|邮费|要钱|花多少|起售价|起价|折多少|回收价|值多少|能换多少|补贴多少|便宜多少"
            r"|\bprices?\b|\bcosts?\b|\bfees?\b|(?<!full )(?<!one )(?<!per )(?<!single )(?<!on a )\bcharges?\b|\bpay\b.*\bhow much|\bhow much\b(?!\s+(?:memory|storage|ram|space|data|time|weight|battery)\b)(?![^?]*\b(?:weigh|weighs|hold|holds|fit|fits)\b)(?![^?]*\b(?:does|do|did) (?:it|they|this|that|the \w+) have\b)"
            r"|\bexpensive\b|\bcheap(?:er|est)?\b|\bworth\b|\b(?:what|how much)\b[^?]*\bget for\b",
            re.I,
        ),
    ),
    (
        Ask.DURATION,
        re.compile(
            r"多久|多长时间|多长|几天|几个月|几年|几小时|保修期|有效期|期限|时效|多快|多少天|几个工作日"
            r"|\bhow long\b|\bhow many (?:days|hours|weeks|months|years)\b|\bhow soon\b|\bhow quickly\b"
            # "which one has the longest warranty?": a warranty compared is compared by its length.
            r"|\b(?:longest|shortest)\b(?:[\w -]{0,20})\b(?:warranty|warranties|guarantee)\b",
            re.I,
        ),
    ),
    (
        # "几点下班", "what's the latest it arrives", "order cut-off": a time of day.
        Ask.TIME,
        re.compile(
            r"几点|最晚|最早|截止|截单|下班|关门|开门|营业时间"
            r"|\bwhat time\b|\bhow late\b|\bhow early\b|\blatest\b|\bearliest\b|\bcut-?off\b|\bopening hours\b|\bclos(?:e|es|ing) (?:at|time)\b"
            # "what hours are you open?", "your store hours": the times of day it is open, not a number of hours.
            r"|\bwhat (?:are )?(?:the |your |its |their )?(?:opening |business |store |shop |service )?hours\b"
            r"|\b(?:business|store|shop|trading|service) hours\b",
            re.I,
        ),
    ),
    (
        Ask.DATE,
        re.compile(
            r"什么时候|何时|时间|哪天|哪一天|几号|几点|日期|几月|\bwhen\b|\bwhat time\b|\bwhat date\b|\bwhich day\b",
            re.I,
        ),
    ),
    (
        # "能改几次", "一单最多寄几台", "how many times": a number of times or of items.
        Ask.COUNT,
        re.compile(
            r"几次|多少次|几台|几部|几件|几张|几单|多少台|多少件|多少部"
            r"|\bhow many (?:times|phones|devices|items|units|laptops|orders|pieces|claims)\b|\bhow often\b",
            re.I,
        ),
    ),
    (
        Ask.CONTACT,
        # "your support line's number", not an order, model or tracking number nor "the number of days".
        re.compile(
            r"电话|热线|联系|邮箱|客服号|\bphone\b|\bcall\b|\bcontact\b|\be-?mail\b|\bhotline\b"
            r"|\b(?:service|support|helpline|telephone|phone|contact|hotline) number\b",
            re.I,
        ),
    ),
    (Ask.LOCATION, re.compile(r"在哪|地址|哪里|位置|怎么走|\bwhere\b|\baddress\b|\blocation\b|\blocated\b", re.I)),
    (
        Ask.SPEC,
        re.compile(
            r"多大|多重|多少克|多少瓦|几瓦|瓦数|重量|尺寸|容量|续航|多少毫安|刷新率|分辨率|几核|内存多大|像素|屏幕多大"
            # How far, tall or long a thing is (not how long it takes): "能跑多远", "多高", "多少公里".
            r"|多远|多高|多宽|多少(?:公里|千米|米|厘米|毫米)|几(?:公里|米|厘米)|载重"
            r"|\bhow (?:big|heavy|large|many|far(?! (?:ahead|in advance|back|before))|tall|high|wide|light|thin|thick|deep|loud|bright)\b|\bweigh|\bwatts?\b|\bwattage\b|\bcapacity\b|\bsize\b|\bbattery life\b|\bhow much (?:memory|storage|ram|space)\b|\bhow much\b[^?]*\b(?:does|do|did) (?:it|they|this|that|the \w+) have\b",
            re.I,
        ),
    ),
    (
        Ask.HOWTO,
        re.compile(
            r"怎么|如何|怎样|咋(?!回事)|步骤|流程|办理|申请|操作|\bhow (?:do|can|should|to)\b|\bsteps?\b|\bprocess\b|\bprocedure\b",
            re.I,
        ),
    ),
    (
        Ask.YESNO,
        re.compile(
            r"吗[？?]?$|(?<=[\u4e00-\u9fff])(?:不|没)[？?]?$|能不能|可不可以|是否|有没有|是不是|会不会|要不要|支不支持|行不行"
            r"|^\s*(?:can|could|do|does|did|is|are|will|would|should|may|am)\b",
            re.I,
        ),
    ),
]


# "When will it arrive, and what does it cost?" asks both: "when" opens a condition only before its subject.
_CONDITION = re.compile(r"^(?:if|once|in case|when (?:i|we|you|it|they|my|our|the|a|an)\b)[^,?]{3,80},\s*(.+)$", re.I)


def question_asks(question: str) -> list[Ask]:
    """The kinds of answer the question wants, most specific first (empty: a general question)."""
    question = question.strip()
    # "If the fee goes up later, do I pay the difference?": the clause after the condition is what is asked.
    main = _CONDITION.match(question)
    if main is not None and (found := [ask for ask, pattern in _ASK_PATTERNS if pattern.search(main.group(1))]):
        return found
    found = [ask for ask, pattern in _ASK_PATTERNS if pattern.search(question)]
    if Ask.PAYER in found:
        # Who bears a cost is a rule, not an amount nor a date ("when I send it in").
        found = [a for a in found if a not in (Ask.PRICE, Ask.DATE)]
    return found


# --- typed values -----------------------------------------------------------------------------------

_NUM = r"\d+(?:[.,]\d+)*"
_SIZE = r"(?:[2-6]?X{0,3}[SL]|M)"
VALUE_PATTERNS: dict[Ask, re.Pattern[str]] = {
    Ask.PRICE: re.compile(rf"(?:[¥￥$]|RMB|CNY|USD|HK\$)\s?{_NUM}|{_NUM}\s?(?:元|块|万元|yuan\b|RMB\b|CNY\b)", re.I),
    Ask.DURATION: re.compile(
        rf"(?<!\d)(?!(?:19|20)\d\d\s?年)(?:{_NUM}|[一二两三四五六七八九十半]+)\s?(?:个)?(?:工作日|自然日|天|日内|小时|分钟|周|星期|个月|年)(?!\s?\d{{1,2}}\s?月)"
        rf"|{_NUM}(?:\s?(?:to|-|–)\s?{_NUM})?[\s-]?(?:business\s|working\s|calendar\s)?(?:days?|hours?|minutes?|weeks?|months?|years?)\b"
        r"|\b(?:one|two|three|four|five|six|seven|ten|twelve|fifteen|thirty)[\s-](?:business\s|working\s)?(?:days?|hours?|weeks?|months?|years?)\b",
        re.I,
    ),
    Ask.DATE: re.compile(
        r"\d{4}\s?年\s?\d{1,2}\s?月(?:\s?\d{1,2}\s?日)?|\d{1,2}\s?月\s?\d{1,2}\s?日|\d{1,2}[:：]\d{2}|\d{4}-\d{2}-\d{2}"
        r"|\b(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?\s\d{1,2}\b|\b\d{1,2}\s(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\b"
        r"|(?:周|星期)[一二三四五六日天]|\b(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)\b|\d{1,2}\s?(?:am|pm|点)",
        re.I,
    ),
    Ask.TIME: re.compile(
        r"(?<![\d.])\d{1,2}[:：]\d{2}(?![\d.])|\b\d{1,2}\s?(?:am|pm|a\.m\.|p\.m\.)|\d{1,2}\s?点(?!\d)", re.I
    ),
    Ask.CONTACT: re.compile(
        r"\+?\d{2,4}[-\s]\d{2,4}[-\s]\d{3,4}(?:[-\s]\d{3,4})?|\b1[3-9]\d{9}\b|\b400[-\s]?\d{3}[-\s]?\d{4}\b|[\w.+-]+@[\w-]+\.[\w.]+"
    ),
    Ask.LOCATION: re.compile(
        rf"{HAN_CLASS}{{1,12}}(?:路|街|大道|道)\s?\d+\s?号|\d+\s?号|{HAN_CLASS}{{2,12}}(?:大厦|广场|中心|商场|大楼)|\d+\s?(?:楼|层)"
        r"|\b\d+\s\w+\s(?:road|street|avenue|ave|blvd)\b",
        re.I,
    ),
    Ask.COUNT: re.compile(
        r"(?:\d+|[一二两三四五六七八九十])\s?(?:次|台|部|件|张|单|个)"
        r"|\b\d+\s(?:times|phones|devices|items|units|laptops|orders|pieces|claims)\b|\b(?:once|twice)\b",
        re.I,
    ),
    Ask.PERCENT: re.compile(rf"{_NUM}\s?%|百分之[一二三四五六七八九十\d]+|[一二三四五六七八九\d](?:\.\d)?\s?折"),
    Ask.SPEC: re.compile(
        rf"{_NUM}\s?(?:mAh|GB|TB|MB|克|千克|公斤|kg|g\b|英寸|寸|inch(?:es)?|-inch|mm|毫米|Hz|W\b|瓦|核|万像素|像素|小时|hours?|nits|尼特"
        r"|dB|分贝|℃|°C|m²|㎡|平方米|ml\b|mL\b|毫升|L\b|升|Pa\b|kWh|km\b|公里|千米|cm\b|厘米|m\b|米)"
        # A range of letter sizes ("XS to 3XL", "S–XXL", "M/L"): what "what sizes" asks for, with no figure in it.
        rf"|(?-i:\b{_SIZE}\s?(?:to|-|–|—|~|/|至|到)\s?{_SIZE}(?![A-Za-z]))",
        re.I,
    ),
}


def _values_of(ask: Ask) -> Ask:
    return Ask.PRICE if ask is Ask.THRESHOLD else ask  # a threshold is an amount


def values(text: str, ask: Ask) -> list[str]:
    pattern = VALUE_PATTERNS.get(_values_of(ask))
    return [m.group().strip() for m in pattern.finditer(text)] if pattern else []


def has_value(text: str, ask: Ask) -> bool:
    pattern = VALUE_PATTERNS.get(_values_of(ask))
    return bool(pattern and pattern.search(text))


_HOWTO_CUE = re.compile(
    r"请|进入|点击|选择|填写|上传|提交|拨打|登录|打开|携带|前往|预约|寄回|\b(?:go to|click|select|choose|fill|submit|upload|call|contact|email|log in|open|bring|visit|send)\b",
    re.I,
)
_YESNO_CUE = re.compile(
    r"可以|不可以|能|不能|支持|不支持|不予|免费|需要|不需要|无需|必须|仅|只|不|没有|均|都"
    r"|\b(?:can|cannot|can't|may|must|only|not|no|free|required|need|yes|all|any)\b",
    re.I,
)


# An amount from which a rule applies: "满 99 元", "¥8000 or more", "at least ¥500", "5000 元以上".
_THRESHOLD_CUE = re.compile(
    r"满\s?[¥￥]?\d|达到\s?[¥￥]?\d|\d\s?(?:元|块)?\s?(?:以上|及以上|起)|超过\s?[¥￥]?\d|不低于|至少"
    r"|\bor more\b|\bat least\b|\bminimum\b|\b(?:over|above|exceed(?:s|ing)?|from)\s(?:[¥￥$]|RMB|CNY)\s?\d",
    re.I,
)


# Who bears a cost: "由本店承担", "运费买家自付", "paid by the customer", "at our expense".
_PAYER_CUE = re.compile(
    r"承担|负责|自付|自理|由[^，。,.]{1,12}(?:支付|付|出)|\b(?:paid|covered|borne) by\b|\bat (?:our|your|the \w+'s) (?:own )?"
    r"(?:cost|expense)\b|\b(?:we|you|the customer|the buyer) (?:pays?|covers?|bears?)\b",
    re.I,
)


def shows(text: str, ask: Ask) -> bool:
    """Does the sentence carry what this kind of question wants?"""
    if ask is Ask.PAYER:
        return _PAYER_CUE.search(text) is not None
    if ask is Ask.THRESHOLD:
        return has_value(text, Ask.PRICE) and _THRESHOLD_CUE.search(text) is not None
    if ask is Ask.HOWTO:
        return _HOWTO_CUE.search(text) is not None
    if ask is Ask.YESNO:
        return _YESNO_CUE.search(text) is not None
    if ask is Ask.DATE:
        # "什么时候能收到" / "when will it arrive" is answered by a date or by a time limit ("7 个工作日内").
        return has_value(text, ask) or has_value(text, Ask.DURATION) or has_value(text, Ask.TIME)
    return has_value(text, ask)


# --- attribute values: storage, screen size, instalment periods ---------------------------------------------

_ATTRIBUTES: dict[str, re.Pattern[str]] = {
    # "12GB+512GB" is memory + storage: the storage is the second figure.
    "storage": re.compile(r"(?:(?<=\d[GT]B\+)|(?<![\d+]))(\d+)\s?(GB|TB|G|T)\b(?!\s?(?:内存|RAM|memory|\+))", re.I),
    "screen": re.compile(r"(\d{2}(?:\.\d)?)\s?(?:英寸|寸|-?inch(?:es)?|\")", re.I),
    "periods": re.compile(r"(\d{1,2})\s?(?:期|-?month(?:ly)? instal+ments?|instal+ments?\b|periods?\b)", re.I),
}


# Places and product categories are attributes too: "寄到美国运费" is about the United States' row, "手机延保"
# about phones, not laptops. Countries, regions and large cities in both languages are world knowledge,
# not any shop's wording.
_PLACES: dict[str, str] = {
    # "US" in capitals only: the English word "us" is not a country.
    "us": "美国|united states|(?-i:\\bU\\.?S\\.?A?\\b)|(?<!north )(?<!south )(?<!latin )(?<!central )\\bamerica\\b", "ca": "加拿大|canada", "uk": "英国|united kingdom|\\buk\\b|britain",
    "de": "德国|germany", "fr": "法国|france", "au": "澳大利亚|澳洲|australia", "nz": "新西兰|new zealand",
    "jp": "日本|japan", "kr": "韩国|south korea|\\bkorea", "sg": "新加坡|singapore", "my": "马来西亚|malaysia",
    "th": "泰国|thailand", "hk": "香港|hong kong", "mo": "澳门|macau|macao", "tw": "台湾|taiwan",
    "eu": "欧洲|europe", "na": "北美|north america", "oc": "大洋洲|oceania", "asia": "亚洲|\\basia\\b", "bj": "北京|beijing", "sh": "上海|shanghai", "gz": "广州|guangzhou", "sz": "深圳|shenzhen",
    "cd": "成都|chengdu", "hz": "杭州|hangzhou", "wh": "武汉|wuhan", "nj": "南京|nanjing", "cq": "重庆|chongqing",
    "xa": "西安|\\bxi'?an\\b", "tj": "天津|tianjin", "su": "苏州|suzhou",
    # More of the largest cities, by the province their shipping rows are written for (PROVINCE_OF).
    "nb": "宁波|ningbo", "qd": "青岛|qingdao", "dl": "大连|dalian", "xm": "厦门|xiamen", "cs": "长沙|changsha",
    "zz": "郑州|zhengzhou", "jn": "济南|\\bjinan\\b", "sy": "沈阳|shenyang", "hf": "合肥|hefei", "fz": "福州|fuzhou",
    "km": "昆明|kunming", "wx": "无锡|\\bwuxi\\b", "dg": "东莞|dongguan", "fs": "佛山|foshan", "heb": "哈尔滨|harbin",
    # The other provincial capitals: a customer names their city, the remote provinces' rows (Tibet, Xinjiang,
    # Qinghai, Inner Mongolia ...) name the province.
    "lsa": "拉萨|lhasa", "wlq": "乌鲁木齐|urumqi", "xnn": "西宁|xining", "hhh": "呼和浩特|hohhot", "ycn": "银川|yinchuan",
    "lzh": "兰州|lanzhou", "nnn": "南宁|nanning", "hko": "海口|haikou", "gyg": "贵阳|guiyang", "ncg": "南昌|nanchang",
    "tyn": "太原|taiyuan", "sjz": "石家庄|shijiazhuang", "ccn": "长春|changchun",
}  # fmt: skip
# China's provinces and regions: shipping fees, delivery times and store services are written per province
# ("甘肃、宁夏：每单 22 元", "京津冀地区满 69 包邮"). The four municipalities are the cities above.
_PROVINCES: dict[str, tuple[str, str]] = {
    # key: (names, one-character abbreviation used in runs such as "江浙沪", "京津冀", "港澳台")
    "hb_": ("河北|hebei", "冀"), "sx_": ("山西|shanxi", "晋"), "nm_": ("内蒙古|inner mongolia", "蒙"),
    "ln_": ("辽宁|liaoning", "辽"), "jl_": ("吉林|jilin", "吉"), "hl_": ("黑龙江|heilongjiang", "黑"),
    "js_": ("江苏|jiangsu", "苏"), "zj_": ("浙江|zhejiang", "浙"), "ah_": ("安徽|anhui", "皖"),
    "fj_": ("福建|fujian", "闽"), "jx_": ("江西|jiangxi", "赣"), "sd_": ("山东|shandong", "鲁"),
    "hn_": ("河南|henan", "豫"), "hub_": ("湖北|hubei", "鄂"), "hun_": ("湖南|hunan", "湘"),
    "gd_": ("广东|guangdong", "粤"), "gx_": ("广西|guangxi", "桂"), "hi_": ("海南|hainan", "琼"),
    "sc_": ("四川|sichuan", "川"), "gz_": ("贵州|guizhou", "贵"), "yn_": ("云南|yunnan", "云"),
    "xz_": ("西藏|tibet|xizang", "藏"), "sn_": ("陕西|shaanxi", "陕"), "gs_": ("甘肃|gansu", "甘"),
    "qh_": ("青海|qinghai", "青"), "nx_": ("宁夏|ningxia", "宁"), "xj_": ("新疆|xinjiang", "新"),
}  # fmt: skip
_PLACES.update({key: names for key, (names, _) in _PROVINCES.items()})
# The municipalities, Hong Kong, Macao and Taiwan by their abbreviations.
_ABBREVIATIONS = {abbr: key for key, (_, abbr) in _PROVINCES.items()} | {
    "京": "bj", "津": "tj", "沪": "sh", "渝": "cq", "港": "hk", "澳": "mo", "台": "tw", "江": "js_",
}  # fmt: skip
# "江浙沪", "京津冀", "港澳台", "云贵川": two or more abbreviations in a row name their provinces ("江浙" is
# 江苏 and 浙江). One character alone is a word, not a province.
_ABBREVIATION_RUN = re.compile("[" + "".join(_ABBREVIATIONS) + "]{2,}")
# A city's province: "杭州" is answered by the row for 江浙沪.
PROVINCE_OF = {
    "gz": "gd_", "sz": "gd_", "cd": "sc_", "hz": "zj_", "wh": "hub_", "nj": "js_", "xa": "sn_", "su": "js_",
    "nb": "zj_", "qd": "sd_", "dl": "ln_", "xm": "fj_", "cs": "hun_", "zz": "hn_", "jn": "sd_", "sy": "ln_",
    "hf": "ah_", "fz": "fj_", "km": "yn_", "wx": "js_", "dg": "gd_", "fs": "gd_", "heb": "hl_",
    "lsa": "xz_", "wlq": "xj_", "xnn": "qh_", "hhh": "nm_", "ycn": "nx_", "lzh": "gs_", "nnn": "gx_", "hko": "hi_",
    "gyg": "gz_", "ncg": "jx_", "tyn": "sx_", "sjz": "hb_", "ccn": "jl_",
}  # fmt: skip
# Places listed as exceptions ("其他地区（甘肃、宁夏除外）") are not where the sentence applies.
_EXCEPTED = re.compile(r"[（(][^）)]*(?:除外|以外|\bexcept\b|\bexcluding\b|\bother than\b)[^）)]*[）)]", re.I)
_CATEGORIES: dict[str, str] = {
    "phone": "手机|\\bphones?\\b|smartphones?", "laptop": "笔记本|电脑|\\blaptops?\\b|notebooks?",
    "tablet": "平板|\\btablets?\\b", "watch": "手表|\\bwatch(?:es)?\\b", "earphones": "耳机|earphones?|headphones?|earbuds?",
}  # fmt: skip
PLACES, CATEGORIES = _PLACES, _CATEGORIES
# The region a country is in: "寄到美国" is answered by the row for North America.
REGION_OF: dict[str, str] = {
    "us": "na", "ca": "na", "uk": "eu", "de": "eu", "fr": "eu", "au": "oc", "nz": "oc",
    "jp": "asia", "kr": "asia", "sg": "asia", "my": "asia", "th": "asia",
}  # fmt: skip
_REGIONS = frozenset(REGION_OF.values()) | frozenset(_PROVINCES)
_REGION_KEYS = _REGIONS | {f"+{r}" for r in _REGIONS}
_NAMED_KINDS = {
    kind: [(key, re.compile(pattern, re.I)) for key, pattern in table.items()]
    for kind, table in (("place", _PLACES), ("category", _CATEGORIES))
}


_HAN_PLACE = re.compile("|".join(n for names in _PLACES.values() for n in names.split("|") if _CJK.match(n)))


@lru_cache(maxsize=4096)
def places(text: str) -> frozenset[str]:
    """The places named in the text (cached: the reranker asks it of the same chunks again and again)."""
    text = _EXCEPTED.sub(" ", text)
    found = {key for key, pattern in _NAMED_KINDS["place"] if pattern.search(text)}
    # Runs of abbreviations are read once the names written in full are out ("浙江" is not "江浙").
    for run in _ABBREVIATION_RUN.findall(_HAN_PLACE.sub(" ", text)):
        found.update(_ABBREVIATIONS[ch] for ch in run)
    # A country comes with its region ("美国" is in "North America"), a city with its province; a region or
    # province named as such is marked "+na", so "the North America row" answers a US question but a Canada
    # row does not, and the Zhejiang row a Hangzhou question but a Guangzhou store not a Shenzhen one.
    implied = {REGION_OF[k] for k in found if k in REGION_OF} | {PROVINCE_OF[k] for k in found if k in PROVINCE_OF}
    return frozenset(found | implied | {f"+{k}" for k in found & _REGIONS})


def names_place_among(text: str, among: frozenset[str]) -> bool:
    """`bool(places(text) & among)`, reading the text for the places that can give one of `among` only.

    The reranker asks it of every chunk of the pool for the question's places; `places` scans a text for
    all of them (about 60 case-insensitive scans, the largest share of a new chunk's first reading). A key
    of `places` comes from a name found in the text, as itself, its region or province, or its "+" mark,
    so only the names of those sources are looked for; a text with one of their abbreviations is read
    by `places` itself (runs of abbreviations are read around the names written in full)."""
    if not among:
        return False
    return _names_place_among(text, among)


@lru_cache(maxsize=16384)
def _names_place_among(text: str, among: frozenset[str]) -> bool:
    patterns, abbreviations = _place_sources(among)
    if any(ch in text for ch in abbreviations):
        return bool(places(text) & among)
    text = _EXCEPTED.sub(" ", text)
    return any(pattern.search(text) for pattern in patterns)


@lru_cache(maxsize=1024)
def _place_sources(among: frozenset[str]) -> tuple[tuple[re.Pattern[str], ...], str]:
    """The name patterns and abbreviations of the places whose mention puts one of `among` in `places`."""
    keys = {
        k for k in _PLACES if k in among or REGION_OF.get(k) in among or PROVINCE_OF.get(k) in among or f"+{k}" in among
    }
    patterns = tuple(pattern for key, pattern in _NAMED_KINDS["place"] if key in keys)
    return patterns, "".join(ch for ch, key in _ABBREVIATIONS.items() if key in keys)


# A store's own heading ("杭州湖滨店（眼健康中心）", "上海南京西路旗舰店", "Hangzhou Lakeside store"): the name that
# tells it from the shop's other stores is what is left once the city and the kind of store are out.
_STORE_HEADING = re.compile(
    rf"^(?:\d+[.、]\s?)?({HAN_CLASS}{{2,14}}?)(?:旗舰|体验|直营|专卖)?(?:门店|分店|店)(?!{HAN_CLASS})"
    r"|^(?:the\s)?([A-Za-z][A-Za-z' ]{1,40}?)\s(?:flagship\s)?(?:store|shop|branch|outlet)\b",
    re.I,
)


@lru_cache(maxsize=4096)
def store_name(heading: str) -> str:
    """The distinguishing name of the store a heading is about ("湖滨" of "杭州湖滨店（眼健康中心）", "lakeside" of
    "Hangzhou Lakeside store"), lowered; "" when the heading is not a store's, or names only a city."""
    m = _STORE_HEADING.match(heading.strip())
    if m is None:
        return ""
    name = (m.group(1) or m.group(2)).strip()
    # Only the city it opens with: "南京西路" is a street of Shanghai, not Nanjing.
    for _, pattern in _NAMED_KINDS["place"]:
        found = pattern.match(name)
        if found:
            name = name[found.end() :]
            break
    name = " ".join(name.split()).lower()
    return name if len(name) >= (2 if _CJK.match(name) else 3) else ""


def attributes(text: str) -> dict[str, set[str]]:
    """Attribute values named in the text, normalised: {"storage": {"256gb"}, "screen": {"13"}, "place": {"us",
    "na"}} (a country comes with its region)."""
    out: dict[str, set[str]] = {}
    for kind, table in _NAMED_KINDS.items():
        keys = set(places(text)) if kind == "place" else {key for key, pattern in table if pattern.search(text)}
        if keys:
            out[kind] = keys
    for kind, pattern in _ATTRIBUTES.items():
        found: set[str] = set()
        for m in pattern.finditer(text):
            if kind == "storage":
                unit = m.group(2).upper()[0]
                found.add(f"{m.group(1)}{'tb' if unit == 'T' else 'gb'}")
            else:
                found.add(m.group(1).split(".")[0])
        if found:
            out[kind] = found
    return out


def attribute_fit(question: dict[str, set[str]], sentence: dict[str, set[str]]) -> float:
    """> 1 when the sentence names the question's attribute value, < 1 when it names only another value of
    the same kind (another storage tier or screen size), 1 when it says nothing of it."""
    fit = 1.0
    for kind, wanted in question.items():
        got = sentence.get(kind)
        if not got:
            continue
        if kind == "place":
            fit *= _place_fit(wanted, got)
            continue
        # A product category named again is weaker evidence than the exact tier, size or place.
        fit *= (1.5 if kind == "category" else 2.5) if wanted & got else 0.15
    return fit


def _place_fit(wanted: set[str], got: set[str]) -> float:
    countries_w, countries_g = wanted - _REGION_KEYS, got - _REGION_KEYS
    if countries_w & countries_g or any(f"+{r}" in got for r in wanted & _REGIONS):
        return 2.5  # the country itself, or its region named as such ("Zone 3 (North America, ...)")
    if countries_w and countries_g:
        return 0.15  # another country, even in the same region
    return 2.5 if wanted & got & _REGIONS else 0.15


TIER_KINDS = frozenset({"storage", "screen", "periods"})


# --- product names ------------------------------------------------------------------------------------

# Words that tell sibling models apart: "iPhone 16" is not "iPhone 16 Pro", "Galaxy S25" not "S25 Ultra".
VARIANT_WORDS = frozenset(
    [
        "pro",
        "max",
        "plus",
        "ultra",
        "mini",
        "lite",
        "air",
        "se",
        "fe",
        "neo",
        "edge",
        "fold",
        "flip",
        "slim",
        "turbo",
        "prime",
        "note",
        "标准版",
        "青春版",
        "至尊版",
        "大师版",
        "典藏版",
        "pro+",
    ]
)
# Words a question uses for "the model without a variant word".
BASE_WORDS = re.compile(
    r"标准款|标准版|基础款|普通款|普通版|入门款|\bstandard\b|\bbase model\b|\bbasic\b|\bregular\b|\bnon-pro\b", re.I
)

_NAME_RUN = re.compile(
    r"[A-Za-z][A-Za-z0-9+]*(?:[ \-]?(?:\d+[A-Za-z+]*|[A-Z][A-Za-z0-9+]*|[a-z]*\d[a-z0-9]*|pro|max|plus|ultra|mini|lite|air|se|fe|neo|gen|carbon)(?![A-Za-z]))*"
)
# Variant words that name the model without a variant ("云岭 3 标准版" is the plain 云岭 3).
_BASE_VARIANTS = frozenset(w for w in VARIANT_WORDS if BASE_WORDS.fullmatch(w))
_BRANDS_ZH = "小米 华为 三星 苹果 联想 荣耀 魅族 一加 真我 努比亚 红米 戴尔 惠普 华硕 宏碁 索尼 佳能 尼康 大疆 海尔 美的 格力 戴森"
_BRAND_ZH = re.compile("(?:" + "|".join(_BRANDS_ZH.split()) + r")\s?(?=[A-Za-z0-9])")
_GENERATION = re.compile(r"第\s?(\d+)\s?代")


@dataclass(frozen=True, slots=True)
class Product:
    text: str
    tokens: frozenset[str]

    @property
    def variants(self) -> frozenset[str]:
        return self.tokens & VARIANT_WORDS

    @property
    def core(self) -> frozenset[str]:
        return self.tokens - VARIANT_WORDS


def _tokens(name: str) -> frozenset[str]:
    name = _GENERATION.sub(r" gen \1 ", name)
    return frozenset(t for t in re.findall(rf"[a-z]+\+?|\d+|{HAN_CLASS}+", name.lower()) if t)


_NOT_NAMES = frozenset(
    [
        "a",
        "an",
        "the",
        # A determiner that opens a sentence is capitalised but names nothing ("Every ZephAir fan has …").
        "every",
        "each",
        "all",
        "any",
        "both",
        "our",
        "your",
        "their",
        "its",
        "this",
        "these",
        "those",
        "i",
        "my",
        "we",
        "you",
        "it",
        "is",
        "are",
        "do",
        "does",
        "how",
        "what",
        "which",
        "when",
        "where",
        "why",
        "can",
        "could",
        "will",
        "would",
        "should",
        "may",
        "gb",
        "tb",
        "mb",
        "mah",
        "hz",
        "usb",
        "type",
        "wifi",
        "wi",
        "ok",
        "app",
        "vip",
        "id",
        "pdf",
        "faq",
        "sms",
        "qr",
        "ip",
        "xdr",
        "oled",
        "lcd",
        "led",
        "cpu",
        "gpu",
        "ram",
        "ssd",
        "nfc",
        "rmb",
        "cny",
        "usd",
        "sku",
        "dhl",
        "sf",
        "ems",
        "vat",
        "ddu",
    ]
)


@lru_cache(maxsize=8192)
def products(text: str) -> tuple[Product, ...]:
    """Product-like names in the text: Latin runs with a digit, an inner capital or a variant word
    (iPhone 16 Pro, S25 Ultra, MateBook X Pro, ThinkPad X1 Carbon Gen 12, MacBook Air), with a Chinese
    brand right before them (小米 15 Pro, 小米15 Pro). Storage sizes and other values are not part of a name."""
    out: list[Product] = []
    taken: list[tuple[int, int]] = []
    for m in _brand_digit_runs(text):
        _add_product(out, text, m.start(), m.end(), m.group())
        taken.append(m.span())
    for m in _NAME_RUN.finditer(text):
        if taken and any(a <= m.start() < b for a, b in taken):
            continue
        _add_product(out, text, m.start(), m.end(), m.group())
    return tuple(out)


_BRAND_DIGITS = re.compile(
    "(?:" + "|".join(_BRANDS_ZH.split()) + r")\s?\d+[A-Za-z]*(?:\s(?:Pro|Max|Plus|Ultra|mini|Lite|SE|FE|[A-Z][a-z]*))*"
    # Any two-character Chinese name before a model number with a variant word: 华米 9 Pro, 荣耀 200 Ultra.
    rf"|{HAN_CLASS}{{2}}\s?\d+[A-Za-z]*(?:\s(?:Pro|Max|Plus|Ultra|mini|Lite|SE|FE|Air|Neo))+"
    # ... or with a Chinese edition word: 云岭 3 家庭版, 霜川 5 标准版 (the edition tells the siblings apart).
    rf"|{HAN_CLASS}{{2}}\s?\d+[A-Za-z]*\s?{HAN_CLASS}{{2}}版"
)
_INNER_CAP = re.compile(r"[a-z][A-Z]|[A-Z]{2,}[a-z]")
_LOWER_NOUN = re.compile(r"[ -][a-z]{3,}")
# A match of `_BRAND_DIGITS` is a brand or two Chinese characters (no digit among them), at most one space,
# then its first digit: it starts at most this far before the run of digits that digit begins.
_BRAND_REACH = max(2, *(len(b) for b in _BRANDS_ZH.split())) + 1
_DIGIT_RUN = re.compile(r"\d+")


def _brand_digit_runs(text: str) -> Iterator[re.Match[str]]:
    """`_BRAND_DIGITS.finditer(text)`, trying a match only a few characters before each run of digits.

    The pattern has no prefix the engine could skip to, so `finditer` tries it at every character (most of
    a Chinese chunk's first reading by `products`). Starts are tried in order, each once, from the last
    match's end, so the first that matches is the one `finditer` finds there."""
    pos, tried = 0, -1
    for run in _DIGIT_RUN.finditer(text):
        first = run.start()
        for at in range(max(pos, tried + 1, first - _BRAND_REACH), first - 1):
            tried = at
            m = _BRAND_DIGITS.match(text, at)
            if m is not None:
                yield m
                pos = m.end()
                break


_ASCII_DIGIT = re.compile("[0-9]")


def _add_product(out: list[Product], text: str, start: int, end: int, raw: str) -> None:
    if not _plain_words(raw):
        _add_name(out, text, start, end, raw)


def _plain_words(raw: str) -> bool:
    """An ASCII run with no digit, inner capital or variant word anywhere ("Return policy", most runs): the
    name `_add_name` makes of some of its words would have none, so it makes none. Told in C (the only
    digits of an ASCII run are 0-9)."""
    return (
        raw.isascii()
        and _ASCII_DIGIT.search(raw) is None
        and _INNER_CAP.search(raw) is None
        and VARIANT_WORDS.isdisjoint(raw.strip(" -").lower().split())
    )


def _add_name(out: list[Product], text: str, start: int, end: int, raw: str) -> None:
    words = raw.strip(" -").split()
    words = [w for w in words if not _is_value(w)]
    if words and words[-1] == "air" and _LOWER_NOUN.match(text, end):
        words.pop()  # "Crispo 6 air fryer": the appliance's name, not the MacBook's "Air"
    while words and _not_name(words[-1]):
        words.pop()
    while words and _not_name(words[0]):
        words.pop(0)
    while len(words) > 1 and words[0].isalpha() and words[0].islower() and words[1][:1].isupper():
        words.pop(0)  # "replace Aqua R7": a verb before the name
    if not words:
        return
    name = " ".join(words)
    lowered = {w.lower() for w in words}
    if not (any(ch.isdigit() for ch in name) or any(_INNER_CAP.search(w) for w in words) or lowered & VARIANT_WORDS):
        return
    if re.fullmatch(r"[\d.]+", name):
        return
    if not _CJK.match(name[0]):
        brand = _BRAND_ZH.search(text, max(0, start - 4), start + 1)
        if brand and brand.end() >= start - 1:
            name = f"{brand.group().strip()} {name}"
    gen = _GENERATION.match(text, end + (1 if text[end : end + 1] == " " else 0))
    if gen:
        name = f"{name} {gen.group()}"
    product = Product(name, _tokens(name))
    if product.core and all(p.text != name for p in out):
        out.append(product)


# Remembered, as `_is_value`: the same words of the same names come back in every new chunk.
@lru_cache(maxsize=16384)
def _not_name(word: str) -> bool:
    """A word a name does not start or end with: a value, an acronym of the trade, or a lowercase English
    function word ("if ThinkPad X1", "in 24", "after 10" are not names; "Surface Go" keeps its "Go")."""
    lowered = word.lower()
    return lowered in _NOT_NAMES or _is_value(word) or (word.islower() and lowered in EN_GENERIC_WORDS)


@lru_cache(maxsize=16384)
def _is_value(word: str) -> bool:
    return bool(re.fullmatch(r"\d*\s?(?:GB|TB|G|T|mAh|W|Hz|K|mm|g|kg|%)(?:\+\d*\s?(?:GB|TB)?)*", word, re.I))


def same_product(asked: Product, named: Product) -> float:
    """How well `named` (in a title, heading or sentence) fits the product the question asked about:
    1 same model, 0.8 a more specific naming of it (Gen 12 for "X1 Carbon"), 0 a sibling or another model,
    0.5 when they share too little to tell."""
    core_a, core_n = asked.core, named.core
    shared = core_a & core_n
    if not shared:
        return 0.0
    numbers_a = {t for t in core_a if t.isdigit()}
    numbers_n = {t for t in core_n if t.isdigit()}
    if numbers_a and numbers_n and not numbers_a & numbers_n:
        return 0.0  # iPhone 15 vs iPhone 16
    if asked.variants - _BASE_VARIANTS != named.variants - _BASE_VARIANTS:
        return 0.0  # iPhone 16 vs iPhone 16 Pro; S25 vs S25 Ultra (but "X 标准版" is plain "X")
    if core_a <= core_n:
        return 1.0 if core_a == core_n else 0.8
    missing = core_a - core_n
    # "小米15 Pro" asked, "Xiaomi 15 Pro" named: a brand word in another script is not a different model.
    if all(not t.isascii() for t in missing) or len(shared) >= max(2, len(core_a) - 1):
        return 0.8
    return 0.5


def product_fit(asked: list[Product], base_model: bool, named: list[Product]) -> float | None:
    """Best fit of the named products to what was asked; None when either side names no product.
    `base_model`: the question asks for the model without a variant word ("标准款", "the standard one")."""
    if not asked or not named:
        return None
    best = 0.0
    for a in asked:
        # "那标准款呢" after a Pro: the model without its variant word.
        wanted = Product(a.text, a.core) if base_model else a
        for n in named:
            best = max(best, same_product(wanted, n))
    return best


_TITLE_WORD = re.compile(r"(?<![A-Za-z0-9])[A-Z][a-z][A-Za-z]+(?![A-Za-z0-9])")


@lru_cache(maxsize=4096)
def title_products(title: str) -> tuple[Product, ...]:
    """The products a page title names: `products`, and in a Chinese title a capitalised Latin word, which
    is a brand or a product line there ("Vento 空气炸锅 商品详情"), not English prose."""
    found = products(title)
    if found or not _CJK.search(title):
        return found
    words = [m.group() for m in _TITLE_WORD.finditer(title) if m.group().lower() not in _NOT_NAMES]
    return tuple(Product(w, _tokens(w)) for w in dict.fromkeys(words))


def related_product(asked: list[Product], named: list[Product]) -> bool:
    """Does one of `named` belong to the line of an asked product: a shared name word and no other model
    number ("K3" or "Brisa Fans" for "K3 Pro" / "Brisa 300"; not "Nova 15" for "Nova 16")?
    A page titled by the family covers all its variants when no page is titled by the variant itself."""
    for a in asked:
        core_a = a.core
        numbers_a = {t for t in core_a if t.isdigit()}
        for n in named:
            numbers_n = {t for t in n.core if t.isdigit()}
            shared = core_a & n.core
            # A lone letter ("X" of "X1" and of "MateBook X") is no shared name.
            if any(len(t) > 1 or t.isdigit() for t in shared) and not (
                numbers_a and numbers_n and not numbers_a & numbers_n
            ):
                return True
    return False
