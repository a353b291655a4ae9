"""No silent cut-offs: the readers' grammar fixes its separators and admits every gold response
(and nothing longer than it says), a reply that hits the token cap is labelled truncated and
counted apart from a malformed one — in the records, the run's notices and Table 3 — and
`make estimate` prices Temp-LoRA's training."""
import json
from pathlib import Path

import pytest

from memlife.memops.data.response import gold_response
from memlife.memops.systems import answering, reading, temp_lora
from memlife.memops.scoring import labels
from memlife.memops.analyses import aggregate
from memlife.memops.data.response import GRAMMAR_BOUNDS, MemOpsResponse, grammar_longest_reply, reply_grammar
from memlife.memops.data.schema import Instance

from conftest import completion

HERE = Path(__file__).parent
INSTANCE = Instance.model_validate(json.loads((HERE / "data" / "memops_instance.json").read_text()))


def _needs_tokenizer():
    pytest.importorskip("llguidance")
    from memlife.models import serve

    try:
        serve.model_path()
    except (ModuleNotFoundError, FileNotFoundError) as exc:
        pytest.skip(f"SmolLM2 GGUF not installed: {exc}")


def _longest(bounds):
    """The longest reply the bounds allow, built by hand: every string and list full."""
    b = {**GRAMMAR_BOUNDS, **bounds}
    op = {"type": "remember", "target": "t" * b["target"], "old_value": "o" * b["old_value"],
          "new_value": "n" * b["new_value"]}
    return MemOpsResponse.model_validate({"answer": "a" * b["answer"], "operations": [op] * b["operations_items"],
                                          "provenance": ["q" * b["provenance_quote"]] * b["provenance_items"]})


def test_the_grammar_admits_every_gold_reply_in_compact_form_and_nothing_padded():
    _needs_tokenizer()
    bounds = answering.gold_grammar_bounds([INSTANCE])
    g = reply_grammar(bounds)
    for p in INSTANCE.probes:
        gold = gold_response(INSTANCE, p)
        assert answering.grammar_admits(g, gold.raw), p.probe_id
        # the same reply with whitespace between its tokens is outside the grammar
        assert not answering.grammar_admits(g, json.dumps(gold.response.model_dump(), indent=2))
        assert not answering.grammar_admits(g, gold.response.model_dump_json().replace('":', '": ', 1))


def test_the_longest_reply_is_what_the_grammar_says_and_one_character_more_is_refused():
    _needs_tokenizer()
    bounds = {"answer": 30, "target": 5, "old_value": 6, "new_value": 7, "provenance_quote": 9,
              "operations_items": 3, "provenance_items": 2}
    g = reply_grammar(bounds)
    longest = _longest(bounds)
    assert answering.grammar_admits(g, longest.model_dump_json())
    assert grammar_longest_reply(bounds) == len(longest.model_dump_json())
    for field, value in (("answer", "a" * 31), ("provenance", ["q" * 9] * 3)):
        over = longest.model_copy(update={field: value})
        assert not answering.grammar_admits(g, over.model_dump_json()), field
    none = MemOpsResponse(answer="", operations=[], provenance=[])
    assert answering.grammar_admits(reply_grammar({"operations_items": 0, "provenance_items": 0}),
                                   none.model_dump_json())


def test_the_grammar_writes_one_byte_a_character_so_its_longest_reply_bounds_its_tokens():
    _needs_tokenizer()
    from memlife.models import tokens

    bounds = {"answer": 12, "operations_items": 0, "provenance_items": 0}
    g = reply_grammar(bounds)
    assert answering.grammar_admits(g, '{"answer":"the red door","operations":[],"provenance":[]}')
    for outside in ("the caf\u00e9", 'a \\"quote\\"', "a \\\\ slash", "tab\\there"):
        assert not answering.grammar_admits(g, '{"answer":"' + outside + '","operations":[],"provenance":[]}'), outside
    # the grammar's character class and REPLY_ALPHABET (what the kits are checked against) agree
    from memlife.memops.data.schema import REPLY_ALPHABET, outside_reply_alphabet

    every = "".join(sorted(REPLY_ALPHABET))
    wide = reply_grammar({"answer": len(every), "operations_items": 0, "provenance_items": 0})
    assert answering.grammar_admits(wide, '{"answer":"' + every + '","operations":[],"provenance":[]}')
    for ch in ("\x7f", "\x1f", "\u00a3"):
        assert not answering.grammar_admits(wide, '{"answer":"a' + ch + '","operations":[],"provenance":[]}'), ch
    assert outside_reply_alphabet('caf\u00e9 "x" \\') == ['"', "\\", "\u00e9"]
    # the worst case for a byte-level BPE: every character its own token, never more
    longest = _longest({**GRAMMAR_BOUNDS, "answer": 40}).model_dump_json().replace("a" * 40, "~!" * 20)
    assert tokens.count_embedded(longest) <= len(longest) == grammar_longest_reply({"answer": 40})


def test_the_cap_defaults_to_the_grammars_longest_reply_and_a_lower_one_is_refused():
    bounds = {"answer": 30, "target": 5, "old_value": 6, "new_value": 7, "provenance_quote": 9,
              "operations_items": 3, "provenance_items": 2}
    longest = grammar_longest_reply(bounds)
    assert answering.resolve_reply_cap(None, bounds, bounded=True) == longest
    assert answering.resolve_reply_cap(longest + 5, bounds, bounded=True) == longest + 5
    with pytest.raises(answering.ReplyRoomError, match=rf"reader_max_tokens={longest - 1} .* at least {longest}"):
        answering.resolve_reply_cap(longest - 1, bounds, bounded=True)
    # an API reader answers under the plain schema, not this grammar: its cap is its own
    assert answering.resolve_reply_cap(50, bounds, bounded=False) == 50


def test_check_reply_room_refuses_a_grammar_that_rules_out_a_gold_reply():
    _needs_tokenizer()
    tight = reading.Reader(_Client([]), max_tokens=1000, grammar_bounds={**answering.gold_grammar_bounds([INSTANCE]),
                                                                         "answer": 3})
    with pytest.raises(answering.ReplyRoomError, match="grammar rejects the gold response"):
        answering.check_reply_room(tight, [(INSTANCE, INSTANCE.probes)])
    fits = reading.Reader(_Client([]), max_tokens=1000, grammar_bounds=answering.gold_grammar_bounds([INSTANCE]))
    assert 0 < answering.check_reply_room(fits, [(INSTANCE, INSTANCE.probes)]) <= 1000


class _Client:
    """An embedded reader whose replies are given: (text, finish_reason) per call, in order."""

    model = "fake-embedded"
    is_embedded = True

    def __init__(self, replies):
        self.replies = list(replies)
        self.grammars, self.caps = [], []

    def complete_json(self, messages, *, schema, max_tokens, grammar=None, **kw):
        self.grammars.append(grammar)
        self.caps.append(max_tokens)
        text, finish = self.replies.pop(0)
        c = completion(text, finish_reason=finish)
        try:
            return schema.model_validate_json(text), c
        except ValueError:
            return None, c


def test_a_reply_cut_at_the_cap_is_truncated_not_malformed_in_records_notices_and_table3(tmp_path):
    _needs_tokenizer()
    good = gold_response(INSTANCE, INSTANCE.probes[0]).raw
    replies = [(good, "stop"),                                   # parses
               ('{"answer":"I think the answer is the', "length"),  # cut off at the cap
               ("I don't know.", "stop")]                        # ended on its own, not JSON
    client = _Client(replies)
    cfg = answering.EvalConfig(systems=["long_context"], settings=["adjacent"], max_probes=3, judge=False)
    recs = labels.run(answering.run([INSTANCE], cfg, tmp_path, reader_client=client, progress=False), [INSTANCE], cfg,
                      tmp_path, progress=False)
    assert all(g == client.grammars[0] and "char{0," in g for g in client.grammars)  # the grammar went out
    # with the cap that no grammatical reply can reach
    assert client.caps == [grammar_longest_reply(answering.gold_grammar_bounds([INSTANCE]))] * 3
    by = recs.set_index("probe_id")
    ids = [p.probe_id for p in answering.select_probes([INSTANCE], 3)[0]]
    assert by.loc[ids, "truncated"].tolist() == [False, True, False]
    assert by.loc[ids, "finish_reason"].tolist() == ["stop", "length", "stop"]
    assert by.loc[ids, "malformed"].tolist() == [False, True, True]  # the scorer's label: neither parsed
    assert "token cap" in by.loc[ids[1], "parse_error"] and "token cap" not in by.loc[ids[2], "parse_error"]
    # rescoring from the journal keeps the cause
    again = labels.run(answering.collect(tmp_path), [INSTANCE], cfg, tmp_path, progress=False).set_index("probe_id")
    assert "token cap" in again.loc[ids[1], "parse_error"] and bool(again.loc[ids[1], "truncated"])

    counts = answering.reply_counts(recs).loc[("long_context", "adjacent")]
    assert (counts["replies"], counts["truncated"], counts["malformed"]) == (3, 1, 1)
    notes = answering.run_notices(recs, answering.ingest_summary(tmp_path))
    assert any(n.startswith("replies cut off at the token cap") and "long_context/adjacent 1 of 3" in n for n in notes)
    assert not any("most replies malformed" in n for n in notes)  # 1 of 3 failed the format on its own

    recs["Method"] = "ours: long_context (Adjacent)"
    t3 = aggregate.table3_rows(recs, ["Method"]).iloc[0]
    assert (t3["n"], t3[aggregate.TRUNCATED_COUNT], t3[aggregate.MALFORMED_COUNT]) == (3, 1, 1)
    assert "Malformed" not in t3.index  # the counts replace the share that mixed the two


def test_most_replies_malformed_counts_only_those_not_cut_off():
    import pandas as pd

    recs = pd.DataFrame({"system": ["temp_lora"] * 4, "setting": ["adjacent"] * 4,
                         "malformed": [True] * 4, "truncated": [True, True, True, False], "truncated_tokens": [0] * 4})
    notes = answering.run_notices(recs, pd.DataFrame())
    assert notes == ["replies cut off at the token cap (kept, labelled truncated, scored as failures; raise "
                     "reader_max_tokens to give them room): temp_lora/adjacent 3 of 4"]
    notes = answering.run_notices(recs.assign(truncated=False), pd.DataFrame())
    assert notes == ["most replies malformed (ended on their own and did not parse; kept and labelled malformed): "
                     "temp_lora/adjacent 4 of 4"]


def test_estimate_prices_temp_lora_training_per_setting(tmp_path):
    _needs_tokenizer()
    from memlife.models import tokens
    from memlife.running import estimate

    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "t.yaml").write_text(
        "common: {seed: 0}\nnotebooks:\n  12_memops_eval:\n    systems: [bm25_turn, temp_lora]\n"
        "    settings: [adjacent, long_context]\n    max_instances: null\n    temp_lora_epochs: 2\n"
        "    temp_lora_settings: [adjacent]\n")
    data = tmp_path / "data" / "t" / "memops"
    data.mkdir(parents=True)
    (data / "instances.jsonl").write_text(json.dumps(INSTANCE.model_dump(mode="json")) + "\n")
    t = estimate.temp_lora_cost("t", [tmp_path / "elsewhere", tmp_path], root=tmp_path, step_seconds=10.0)
    assert t["base_model"] == "SmolLM2-135M-Instruct" and (t["epochs"], t["chunk_tokens"]) == (2, 1024)
    rows = {r["setting"]: r for r in t["settings"]}
    assert rows["adjacent"]["runs"] and not rows["long_context"]["runs"]
    for setting, r in rows.items():
        n = len(tokens.embedded_ids(temp_lora.TempLoRASystem.history_text(reading.history_for(INSTANCE, setting))))
        assert r["tokens"] == n and r["steps"] == 2 * -(-n // 1024)
        sched = temp_lora.temp_lora_schedule(n, temp_lora.TempLoRAConfig())
        assert r["hours"] == pytest.approx(sum(s.tokens for s in sched) / 2048 * 10.0 / 3600)
    text = "\n".join(estimate.render_temp_lora(t))
    assert "2 epochs per chunk" in text and "not run at this profile" in text


def test_the_embedded_readers_fit_fills_its_window_exactly_beside_the_longest_reply():
    """The embedded reader counts its prompt in its own tokenizer: what it keeps fits the window
    with the chat template and the cap, and one more line would not (no margin is wasted on
    o200k's counts, which an 8k window holding a ~2.5k-token reply cannot spare)."""
    _needs_tokenizer()
    from memlife.models import tokens

    lines = reading.format_turns(reading.history_for(INSTANCE, "long_context").turns()) * 20
    reader = reading.Reader(_Client([]), max_tokens=2456, context_window=8192,
                            grammar_bounds=answering.gold_grammar_bounds([INSTANCE]))
    question = INSTANCE.probes[0].question

    def need(kept):
        system, user = reader.messages("\n".join(kept), question)
        return (tokens.count_embedded(system["content"]) + tokens.count_embedded(user["content"])
                + tokens.CHAT_TEMPLATE_TOKENS + reader.max_tokens)

    kept, dropped = reader.fit(lines, question)
    assert dropped > 0 and kept == lines[len(lines) - len(kept):]
    assert need(kept) <= 8192 < need(lines[len(lines) - len(kept) - 1:]) + reader.question_allowance
    # an endpoint reader keeps its o200k margin: it keeps fewer lines of the same window
    endpoint = reading.Reader(type("E", (), {"is_embedded": False, "model": "m"})(), max_tokens=2456,
                              context_window=8192)
    assert len(endpoint.fit(lines, question)[0]) < len(kept)
