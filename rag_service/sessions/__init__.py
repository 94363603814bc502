"""Sessions: where conversations are kept, in layers a turn passes through from the top down.

    masking.py      PII masked before anything below sees it (rag_service.privacy is the masker)
    writebehind.py  ArchivedStore: the live store first, the archive behind it in batches; restores
                    sessions the live store lost; spool.py keeps what the archive could not take at
                    shutdown for the next start
    live_memory.py  the in-process live store (the embedded default)
    live_redis.py   the Redis live store (several processes, or hosts, share sessions)
    archive/        the SQL archive: schema, engine, migrations, encryption, the sessions and the
                    user-memory repositories

interface.py holds the protocols every layer implements (SessionStore, LiveStore, SessionArchive) and
the errors callers see; build.py composes the layers from the settings.

The archive's migrations (archive/migrations) are generated from archive/schema.py with `alembic
revision --autogenerate`: the command is in that module's docstring.
"""
