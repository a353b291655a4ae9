"""Modules and command lines that moved, and the error that says where they went.

The layout of 2026-12-03 (CHANGELOG.md, "layout") moved modules into places and left nothing at the
old paths. Without more, `python -m memlife.replies export` died with "No module named
memlife.replies", and `python -m memlife.longmem validate FILE` (the module stays, its command line
went) printed nothing and exited 0 on any file. :data:`MOVED` is the one table of what moved:

- a module that is gone: :func:`install` (called by ``import memlife``) puts a finder last on
  ``sys.meta_path`` that, for an old name and only after every other finder has missed it, raises
  ModuleNotFoundError naming where its code and its command line are now. ``python -m`` prints that
  and exits 1; ``import memlife.evict`` in a plug-in written before says the same. Nothing is
  re-exported: the finder never returns a module.
- a module that stays but lost its command line (``memlife.longmem``): its ``__main__`` guard calls
  :func:`refuse`, which prints the same message and returns 2.

tests/test_moved.py holds the table to CHANGELOG.md's table of moved paths, so a move written down
there and not here fails, and runs every old command line.

It imports nothing of memlife: ``import memlife`` loads it, and an import it is asked about costs a
dictionary lookup.
"""
from __future__ import annotations

import sys
from collections import namedtuple  # loaded by the interpreter already; dataclasses is not, and costs 6 ms

LAYOUT = "CHANGELOG.md, the layout of 2026-12-03"
STAGES = "CHANGELOG.md, the tracks by stage of 2026-12-06"

# now: where its code is now (modules); command: the command line that does its job now ("" where
# it had none); was: its old command line, as one typed it.
Move = namedtuple("Move", "now command was when", defaults=("", "", LAYOUT))


# Old module -> where it went. Every module of CHANGELOG.md's layout table that no longer exists,
# with the command line where it had one (from the modules' `main` before the move, c3a989e^), and
# memlife.longmem, which stays without its command line.
MOVED: dict[str, Move] = {
    "memlife.paths": Move("memlife.base.paths"),
    "memlife.config": Move("memlife.base.config", "python -m memlife.base.config show PROFILE",
                           "python -m memlife.config show quick"),
    "memlife.progress": Move("memlife.base.progress"),
    "memlife.parallel": Move("memlife.base.parallel"),
    "memlife.plugins": Move("memlife.base.plugins"),
    "memlife.report": Move("memlife.base.artifacts (save_table, save_figure) and memlife.running.publish (publish)",
                           "python -m memlife.running.publish publish --profile quick",
                           "python -m memlife.report publish --profile quick"),
    "memlife.serve": Move("memlife.models.serve", "python -m memlife.models.serve run",
                          "python -m memlife.serve run"),
    "memlife.proxy": Move("memlife.models.proxy"),
    "memlife.spending": Move("memlife.models.spending"),
    "memlife.api_rules": Move("memlife.models.api_rules"),
    "memlife.standin": Move("memlife.models.standin"),
    "memlife.tokens": Move("memlife.models.tokens"),
    "memlife.llm": Move("memlife.models.endpoints (configure, endpoint_for, the errors), memlife.models.llm "
                        "(get_client, Client, parse_json), memlife.models.reply_cache (memoized, request_key) and "
                        "memlife.models.accounting (Completion, usage, price_usd)"),
    "memlife.replies": Move("memlife.models.replies (reading) and memlife.models.replies_export (export)",
                            "python -m memlife.models.replies_export export",
                            "python -m memlife.replies export --profile quick"),
    "memlife.runner": Move("memlife.running.runner", "python -m memlife.running.runner",
                           "python -m memlife.runner 20_longmem_data --profile quick"),
    "memlife.estimate": Move("memlife.running.estimate", "python -m memlife.running.estimate",
                             "python -m memlife.estimate --profile quick"),
    "memlife.executed": Move("memlife.running.executed"),
    "memlife.evict": Move("memlife.restore.eviction.evict"),
    "memlife.units": Move("memlife.restore.data.units"),
    "memlife.corpus": Move("memlife.memops.data.corpus"),
    # The loader stays; the profile's data set and the command line went.
    "memlife.longmem": Move("memlife.restore.data.dataset (dataset_path, load_dataset, build_records, stats)",
                            "python -m memlife.restore.data.dataset validate FILE",
                            "python -m memlife.longmem validate FILE"),
    # The tracks by stage (2026-12-06): every module of a track moved into its stage.
    "memlife.memops.schema": Move("memlife.memops.data.schema (and REPLY_ALPHABET, outside_reply_alphabet, mentions)", when=STAGES),
    "memlife.memops.response": Move("memlife.memops.data.response (and, formerly the scorer's, gold_response, "
                                    "gold_operations, applicable_labels, leakage_applies, stale_applies, reflect_applies)", when=STAGES),
    "memlife.memops.backgrounds": Move("memlife.memops.data.backgrounds", when=STAGES),
    "memlife.memops.plan": Move("memlife.memops.data.plan", when=STAGES),
    "memlife.memops.phrase_banks": Move("memlife.memops.data.phrase_banks", when=STAGES),
    "memlife.memops.realize": Move("memlife.memops.data.realize", when=STAGES),
    "memlife.memops.corpus": Move("memlife.memops.data.corpus", when=STAGES),
    "memlife.memops.longctx": Move("memlife.memops.data.longctx", when=STAGES),
    "memlife.memops.gates": Move("memlife.memops.data.gates (check and check_raw take the scorer's gold_failures)", when=STAGES),
    "memlife.memops.describe": Move("memlife.memops.data.describe", when=STAGES),
    "memlife.memops.reading": Move("memlife.memops.systems.reading", when=STAGES),
    "memlife.memops.managed": Move("memlife.memops.systems.managed", when=STAGES),
    "memlife.memops.memos_worker": Move("memlife.memops.systems.memos_worker", when=STAGES),
    "memlife.memops.temp_lora": Move("memlife.memops.systems.temp_lora", when=STAGES),
    "memlife.memops.registry": Move("memlife.memops.systems.registry", when=STAGES),
    "memlife.memops.subjects": Move("memlife.memops.systems.subjects", when=STAGES),
    "memlife.memops.stance": Move("memlife.memops.scoring.stance (mentions: memlife.memops.data.schema)", when=STAGES),
    "memlife.memops.metrics": Move("memlife.memops.scoring.metrics (gold_response, gold_operations, applicable_labels and the *_applies: memlife.memops.data.response)", when=STAGES),
    "memlife.memops.judging": Move("memlife.memops.scoring.judging", when=STAGES),
    "memlife.memops.paraphrase": Move("memlife.memops.scoring.paraphrase", when=STAGES),
    "memlife.memops.aggregate": Move("memlife.memops.analyses.aggregate", when=STAGES),
    "memlife.memops.figures": Move("memlife.memops.analyses.figures", when=STAGES),
    "memlife.memops.controls": Move("memlife.memops.analyses.controls", when=STAGES),
    "memlife.memops.power": Move("memlife.memops.analyses.power", when=STAGES),
    "memlife.restore.units": Move("memlife.restore.data.units", when=STAGES),
    "memlife.restore.evict": Move("memlife.restore.eviction.evict (the importance prompt: memlife.restore.eviction.importance)", when=STAGES),
    "memlife.restore.read_context": Move("memlife.restore.reading.read_context", when=STAGES),
    "memlife.restore.prompts": Move("memlife.restore.reading.prompts (the importance prompt: memlife.restore.eviction.importance)", when=STAGES),
    "memlife.restore.arms": Move("memlife.restore.reading.arms (plan_question, plan_grid, check_reads too) and memlife.restore.judging.grading (records, to_frame, combine, write_records, judge_all, judge_audit, audit_sample, RECORD_COLUMNS)", when=STAGES),
    "memlife.restore.answer_text": Move("memlife.restore.judging.answer_text", when=STAGES),
    "memlife.restore.answer_judge": Move("memlife.restore.judging.answer_judge", when=STAGES),
    "memlife.restore.decompose": Move("memlife.restore.analyses.decompose (ARMS: memlife.restore.reading.arms; DETERMINISTIC_JUDGE, AUDIT_JUDGE_PREFIX, records_dir, reader_records_path: memlife.restore.judging.grading)", when=STAGES),
    "memlife.restore.paper_tables": Move("memlife.restore.analyses.paper_tables", when=STAGES),
    "memlife.restore.residuals": Move("memlife.restore.analyses.residuals", when=STAGES),
    "memlife.restore.figures": Move("memlife.restore.analyses.figures", when=STAGES),
    "memlife.restore.controls": Move("memlife.restore.analyses.controls", when=STAGES),
    "memlife.restore.power": Move("memlife.restore.analyses.power", when=STAGES),
    "memlife.restore.subjects": Move("memlife.restore.reading.subjects", when=STAGES),
    "memlife.memops.kits": Move("memlife.memops.data.kits", "python -m memlife.memops.data.kits",
                                "python -m memlife.memops.kits", STAGES),
    "memlife.memops.evaluate": Move("memlife.memops.systems.answering (answering: run, EvalConfig, run_key, the selection, "
                                    "the journal) and memlife.memops.scoring.labels (scoring and judging: run, rescore, "
                                    "wants_judge, judge_reply)",
                                    "python -m memlife.memops evaluate --instances FILE --out DIR",
                                    "python -m memlife.memops.evaluate --instances FILE --out DIR", STAGES),
    "memlife.restore.dataset": Move("memlife.restore.data.dataset", "python -m memlife.restore.data.dataset validate FILE",
                                    "python -m memlife.restore.dataset validate FILE", STAGES),
}


def message(old: str) -> str:
    """What to say to someone who asked for `old` (a module of :data:`MOVED`)."""
    move = MOVED[old]
    if move.command:
        module = move.command.split()[2]  # "python -m <module> ..."
        return (f"the command line of {old} moved: use `{move.command}` (`python -m {module} --help` for its "
                f"other commands; its code: {move.now}; {move.when})")
    return f"{old} moved to {move.now} ({move.when})"


# Stages that bear the name of a module that was there until 2026-12-06, and where that module went.
FORMER_MODULES = {
    "memlife.memops.systems": "memlife.memops.systems.baselines",
    "memlife.memops.analyses": "memlife.memops.analyses.paper_analyses",
    "memlife.restore.analyses": "memlife.restore.analyses.paper_analyses",
}


def former_module_attribute(package: str, name: str) -> AttributeError:
    """The error for a name asked of a stage that was a module (`from memlife.memops.systems import
    SYSTEMS`): the stage's ``__getattr__`` raises it, naming where the old module went."""
    return AttributeError(f"module {package!r} has no attribute {name!r}: {package} is a stage since the tracks "
                          f"by stage ({STAGES}); the module that was here is {FORMER_MODULES[package]}")


def refuse(old: str) -> int:
    """For a module that stays but lost its command line: say where it went, on stderr; exit 2."""
    print(f"python -m {old}: {message(old)}", file=sys.stderr)
    return 2


class _Finder:
    """Last on sys.meta_path: reached only for a name no other finder found."""

    memlife_moved = True  # how install() knows one is there, across a reload of this module

    @staticmethod
    def find_spec(fullname, path=None, target=None):
        if fullname in MOVED:
            raise ModuleNotFoundError(f"No module named {fullname!r}: {message(fullname)}", name=fullname)
        return None


def install() -> None:
    """Put the finder last on sys.meta_path, once: every existing module is found before it."""
    if not any(getattr(f, "memlife_moved", False) for f in sys.meta_path):
        sys.meta_path.append(_Finder())
