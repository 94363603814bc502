"""What the service learnt about a tenant's users: `/v1/users/{user_id}/memories` (admin keys)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from rag_service.api.deps import AdminDep, UserMemoryDep
from rag_service.api.models import MemoriesDeleted, UserMemories
from rag_service.user_memory import UserMemory

router = APIRouter(prefix="/v1/users", tags=["users"])


@router.get("/{user_id}/memories", response_model=UserMemories)
async def user_memories(user_id: str, memory: UserMemoryDep, principal: AdminDep) -> dict[str, Any]:
    facts = await memory.facts(UserMemory.key(principal.tenant, user_id))
    return {
        "user_id": user_id,
        "memories": [
            {"id": f.id, "fact": f.fact, "source_session": f.source_session, "updated_at": f.updated_at} for f in facts
        ],
    }


@router.delete("/{user_id}/memories", response_model=MemoriesDeleted)
async def forget_user(user_id: str, memory: UserMemoryDep, principal: AdminDep) -> dict[str, Any]:
    deleted = await memory.forget(UserMemory.key(principal.tenant, user_id))
    return {"user_id": user_id, "deleted": deleted}
