"""Stand-in replies (memlife.models.standin): shaped like a capable model's for each role the run sends."""
import json

from memlife.models import standin

# The part of MemOS's memory-reader prompt (memos.templates.mem_reader_prompts) that names the format.
MEMOS_PROMPT = """You are a memory extraction expert.
Return a single valid JSON object with the following structure:

{
  "memory list": [
    {
      "key": <string, a unique, concise memory title>,
      "memory_type": <string, Either "LongTermMemory" or "UserMemory">,
      "value": <A detailed, self-contained, and unambiguous memory statement>,
      "tags": <A list of relevant thematic keywords>
    }
  ],
  "summary": <a natural paragraph>
}

Conversation:
user:My locker number is 4471 now.
assistant:Noted, 4471.
user:And my gym is the one on Elm Street.
"""


def test_memos_memory_reader_gets_one_memory_per_user_line_in_its_format():
    reply = json.loads(standin.reply_text([{"role": "user", "content": MEMOS_PROMPT}], None))
    # MemOS's GeneralTextMemory.extract reads exactly these fields of each item
    assert [(m["key"], m["value"], m["tags"]) for m in reply["memory list"]] == [
        ("user statement 1", "My locker number is 4471 now.", ["conversation"]),
        ("user statement 2", "And my gym is the one on Elm Street.", ["conversation"])]
    assert reply["summary"].startswith("My locker number is 4471 now.")


def test_other_roles_keep_their_replies():
    assert standin.reply_text([{"role": "user", "content": "Answer CORRECT or INCORRECT."}], None) == "CORRECT"
    assert standin.reply_text([{"role": "user", "content": "What is my locker number?"}], None).startswith(
        "I do not know (")
