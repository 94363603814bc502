"""Question data for tests and benchmarks over the sample knowledge base in ``examples/kb/``.

Plain data, no tests.  Every ``expected`` substring appears verbatim in the named
document (in the PDFs: in the text that ``pypdf`` extracts), and each question is
meant to be answered best by that one document.

- ``QUESTIONS``: ``(question, expected source file name, expected answer substring)``.
- ``FOLLOWUPS``: ``(turns, expected source, expected substring)``; the last turn is a
  pronoun/ellipsis follow-up that needs the earlier turns.  On its own it would rather
  match a different document (another product's repair price, the general warranty
  policy, the domestic shipping policy, ...), so the question has to be rewritten.
- ``TOPIC_SWITCHES``: ``(history, new unrelated question)``; the new question must be
  answered on its own, without dragging the history into retrieval.
  ``TOPIC_SWITCH_EXPECTED[i]`` gives ``(expected source, expected substring)`` for
  ``TOPIC_SWITCHES[i]``.
"""

from __future__ import annotations

KB_DIR = "examples/kb"

QUESTIONS: list[tuple[str, str, str]] = [
    # --- Chinese -------------------------------------------------------------------------------
    ("iPhone 16 Pro 256GB 多少钱？", "iphone-16-pro.md", "8999"),
    ("iPhone 16 Pro 保修过了，换个电池要多少钱？", "iphone-16-pro.md", "799"),
    ("iPhone 16 有粉色的吗？", "iphone-16.html", "粉色"),
    ("小米15 Pro 电池容量多大？", "xiaomi-15-pro.md", "6100mAh"),
    ("三星 S25 Ultra 1TB 的卖多少？", "galaxy-s25-ultra.html", "13699"),
    ("15 寸的 MacBook Air M3 最便宜多少钱？", "macbook-air-m3.md", "9999"),
    ("ThinkPad X1 Carbon 第 12 代 OLED 屏的版本多少钱？", "thinkpad-x1-carbon-gen12.html", "16999"),
    ("华为 MateBook X Pro 有多重？", "huawei-matebook-x-pro.md", "980 克"),
    ("手机开机激活了还能七天无理由退吗？", "return-policy.txt", "已激活的手机"),
    ("退货的钱多久能退回到我的银行卡？", "return-policy.txt", "3 到 7 个工作日"),
    ("用花呗分期至少要买多少钱的东西？", "installment-payments.pdf", "600 元"),
    ("24 期分期的手续费率是多少？", "installment-payments.pdf", "12.5%"),
    ("手机买两年的延保要花多少钱？", "warranty-policy.pdf", "499 元"),
    ("买了意外保，手机摔坏了每次理赔自己要出多少钱？", "warranty-policy.pdf", "199 元服务费"),
    ("下单后一直没付款，订单多久会自动取消？", "order-lookup.txt", "30 分钟"),
    ("人工客服每天几点下班？", "order-lookup.txt", "21:00"),
    ("订单满多少钱可以包邮？", "shipping-policy.html", "99 元"),
    ("在北京下单能当天送到吗？", "shipping-policy.html", "11:00"),
    ("公司要开增值税专用发票，需要提供哪些信息？", "invoice-policy.txt", "纳税人识别号"),
    ("积分怎么抵现？多少积分换一块钱？", "membership-points.html", "100 积分可以抵扣 1 元"),
    ("要消费多少钱才能升到金卡会员？", "membership-points.html", "10000 元"),
    ("我的旧 iPhone 13 128GB 成色完好，能折多少钱？", "trade-in-price-list.pdf", "1900"),
    ("用旧电脑换购新笔记本有额外补贴吗？", "trade-in-price-list.pdf", "500 元"),
    ("你们深圳的门店地址在哪里？", "store-locations.md", "华强北路 1002 号"),
    ("大年初一门店开门吗？", "store-locations.md", "大年初一全天休息"),
    # --- English -------------------------------------------------------------------------------
    ("How much does it cost to ship an order to Singapore?", "international-shipping.md", "¥150"),
    ("Will I have to pay import duties on an international order?", "international-shipping.md", "DDU"),
    ("How big is the student discount on laptops?", "student-discount.html", "8%"),
    ("When does the Back to School promotion run?", "student-discount.html", "July 1 to September 30"),
    ("How much memory do I need for 4K video editing?", "laptop-buying-guide.md", "32GB or more"),
    ("Is a 256GB SSD enough for a laptop?", "laptop-buying-guide.md", "256GB SSD is enough"),
    ("I'm moving out of China. Will my warranty still work?", "warranty-faq-english.txt", "mainland China only"),
    ("How long do I have to buy the extended warranty after delivery?", "warranty-faq-english.txt", "within 30 days"),
    ("What's the starting price of the ThinkPad X1 Carbon Gen 12?", "thinkpad-x1-carbon-gen12.html", "11999"),
    ("How much is a battery replacement for the MacBook Air M3 out of warranty?", "macbook-air-m3.md", "1299"),
]

FOLLOWUPS: list[tuple[list[str], str, str]] = [
    # --- Chinese -------------------------------------------------------------------------------
    (["iPhone 16 Pro 256GB 多少钱？", "那它的电池更换多少钱？"], "iphone-16-pro.md", "799"),
    (["小米 15 Pro 有哪些颜色？", "它过了保修换屏幕要多少钱？"], "xiaomi-15-pro.md", "1580"),
    (["Galaxy S25 Ultra 是什么时候开卖的？", "在你们店买的话保修几年？"], "galaxy-s25-ultra.html", "2 年整机保修"),
    (["MacBook Air M3 有几种颜色？", "它的电池坏了换一块多少钱？"], "macbook-air-m3.md", "1299"),
    (["华为 MateBook X Pro 有多重？", "那保修期是多久？"], "huawei-matebook-x-pro.md", "主要部件保修 2 年"),
    (["iPhone 16 128GB 多少钱？", "屏幕摔碎了换一块要多少钱？"], "iphone-16.html", "1999"),
    (
        [
            "我想买一台商务笔记本。",
            "ThinkPad X1 Carbon Gen 12 最便宜的配置多少钱？",
            "它的键盘坏了，过保以后换要多少钱？",
        ],
        "thinkpad-x1-carbon-gen12.html",
        "1050",
    ),
    (
        ["我们公司要开增值税专用发票。", "那以后退货的时候需要注意什么？"],
        "invoice-policy.txt",
        "纸质发票与商品一同寄回",
    ),
    # --- English -------------------------------------------------------------------------------
    (
        ["How much is the ThinkPad X1 Carbon Gen 12?", "What about its warranty?"],
        "thinkpad-x1-carbon-gen12.html",
        "3-year on-site",
    ),
    (["Can you ship a laptop to Australia?", "How much would that cost?"], "international-shipping.md", "¥280"),
    (
        ["Do you have a student discount?", "Is there a limit on how many I can buy?"],
        "student-discount.html",
        "one discounted laptop",
    ),
    (
        [
            "I'm thinking about the Huawei MateBook X Pro.",
            "How much does it weigh?",
            "And how much is a battery replacement for it?",
        ],
        "huawei-matebook-x-pro.md",
        "759",
    ),
]

TOPIC_SWITCHES: list[tuple[list[str], str]] = [
    (["iPhone 16 Pro 多少钱？"], "你们的发票怎么开？"),
    (["小米 15 Pro 有哪些颜色？", "它的电池多大？"], "上海的门店几点关门？"),
    (["How much is the MacBook Air M3?"], "Do you ship to Japan?"),
    (["花呗分期最低要多少钱？"], "Galaxy S25 Ultra 有几种颜色？"),
    (["Do you have a student discount?", "How do I verify my status?"], "我的订单怎么取消？"),
]

TOPIC_SWITCH_EXPECTED: list[tuple[str, str]] = [
    ("invoice-policy.txt", "电子普通发票"),
    ("store-locations.md", "10:00 至 22:00"),
    ("international-shipping.md", "Japan"),
    ("galaxy-s25-ultra.html", "钛银蓝"),
    ("order-lookup.txt", "取消订单"),
]
