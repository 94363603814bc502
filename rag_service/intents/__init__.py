"""Structured conversation state: the user's goal as an intent with slots, kept in code.

The model only understands and phrases; the task's progress lives in the session (`TaskState`): which
intent is active, which slots are filled, which are missing, whether the task is done. A turn that
lacks a required slot asks for it; a filled task calls its action and is answered; a new task stops
sending the old task's rounds. No FastAPI here: the pipeline runs `IntentStage` as one named stage.
"""
