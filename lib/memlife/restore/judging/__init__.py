"""Restore, stage 4: judging (notebook 22).

`answer_judge` with `answer_text` (the offline grader of LongMemEval answers) and `grading` (the
answers graded by it and by the LLM judge, the judge audit, the per-question records and their files).

Imports: every earlier restore stage, `memlife.base`, `memlife.models`, the shared science.
"""
