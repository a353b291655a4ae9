"""The deterministic scorer's error rate on wording it was not written for.

A paraphrase family is a stance a reader's answer can take — a correction told as history, a
superseded value given as current, a forgotten value repeated, a refusal, a hedge, a conclusion
in other words — with wordings that take it and the labels any reply in it must get
(tests/data/memops_paraphrases.yaml). `cases` fills every wording of a family from each probe's
gold data (values, targets and conclusions in their original wording, from the gold operation
trace), `scored` labels every case with `metrics.score`, and `error_rates` counts, per family,
the labels it decided otherwise than expected (errors) apart from those it left `undecided`.

Each family has `dev` wordings, on which the scorer's cue lists were tuned, and `heldout` ones,
written with them and never tuned on: the held-out rates are the scorer's error rates.
"""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import yaml

from memlife.memops.data.response import applicable_labels, gold_operations, leakage_applies, stale_applies
from memlife.memops.scoring import metrics
from memlife.memops.data.response import MemOpsResponse, ParsedResponse
from memlife.memops.data.schema import Instance, Probe, key_value

SPLITS = ("dev", "heldout")
CASE_COLUMNS = ("family", "split", "template", "instance_id", "probe_id", "answer", "expected")
APPLIES = ("stale", "leakage", "hedge", "reflect", "any")


def load_families(path: str | Path) -> dict:
    """The families of a YAML file: name -> {applies, expected, dev, heldout}; checked."""
    fams = yaml.safe_load(Path(path).read_text())
    for name, f in fams.items():
        if f.get("applies") not in APPLIES:
            raise ValueError(f"{path}: family {name}: applies must be one of {APPLIES}, got {f.get('applies')!r}")
        bad = set(f.get("expected", {})) - set(metrics.LABEL_NAMES)
        if bad or not f.get("expected"):
            raise ValueError(f"{path}: family {name}: expected labels must be among {metrics.LABEL_NAMES}")
        for split in SPLITS:
            if not f.get(split):
                raise ValueError(f"{path}: family {name}: no {split} wordings")
    return fams


def _first(ops, type_: str):
    return next((o for o in ops if o.type == type_), None)


def slots(instance: Instance, probe: Probe) -> dict[str, dict]:
    """The values each kind of family fills its wordings with for this probe, keyed by `applies`
    (a kind missing: no family of that kind applies to the probe)."""
    ops = gold_operations(instance, probe)
    req = probe.answer_key.required
    target = ops[0].target if ops else ""
    out: dict[str, dict] = {"any": {"target": target}}
    stale = {key_value(v) for v in stale_applies(instance, probe)}
    updates = [o for o in ops if o.type == "update" and o.new_value]
    current = [o for o in updates if key_value(o.new_value) in req]
    if stale and len(req) == 1 and current:
        new = current[-1]
        old = next((o.old_value for o in instance.operations
                    if o.type == "update" and o.old_value and key_value(o.old_value) in stale), None)
        if old:
            out["stale"] = {"new": new.new_value, "old": old, "target": new.target}
    forgotten = leakage_applies(instance, probe)
    forget = next((o for o in instance.operations if o.type == "forget" and o.old_value in forgotten), None)
    if forget is not None:
        out["leakage"] = {"forgotten": forget.old_value, "target": forget.target}
    if len(req) == 1:
        surface = {key_value(v): v for o in instance.operations for v in (o.old_value, o.new_value) if v}
        surface.update({key_value(n.value): n.value for n in instance.background.neighbours})
        new = surface.get(req[0])
        other = next((surface[key_value(f)] for f in probe.answer_key.forbidden if key_value(f) in surface), None)
        if new and other:
            out["hedge"] = {"new": new, "other": other, "target": target}
    rfl = _first(ops, "reflect")
    # a probe about the reflection alone: its required values are the conclusion's words
    if rfl is not None and rfl.new_value and all(o.type == "reflect" for o in ops):
        from memlife.memops.data.plan import as_person

        conc = as_person(rfl.new_value.strip().rstrip("."), "you")
        conc = conc[0].lower() + conc[1:]
        out["reflect"] = {"conclusion": conc, "Conclusion": conc[0].upper() + conc[1:], "target": rfl.target}
    return out


def _expected(family: dict, instance: Instance, probe: Probe) -> dict[str, bool]:
    """The family's expected labels that apply to this probe (those its gold response gets)."""
    applicable = applicable_labels(instance, probe)
    return {k: v for k, v in family["expected"].items() if k in applicable}


def cases(instances: list[Instance], families: dict, splits=SPLITS) -> pd.DataFrame:
    """One row per (family, wording, probe it applies to): the answer and its expected labels
    (a JSON object, only the labels that apply to the probe)."""
    rows = []
    for inst in instances:
        for probe in inst.probes:
            fill = slots(inst, probe)
            for name, fam in families.items():
                values = fill.get(fam["applies"])
                if values is None:
                    continue
                expected = _expected(fam, inst, probe)
                if not expected:
                    continue
                for split in splits:
                    for i, wording in enumerate(fam[split]):
                        rows.append({"family": name, "split": split, "template": i, "instance_id": inst.instance_id,
                                     "probe_id": probe.probe_id, "answer": wording.format(**values),
                                     "expected": json.dumps(expected, sort_keys=True)})
    return pd.DataFrame(rows, columns=list(CASE_COLUMNS))


def scored(case_frame: pd.DataFrame, instances: list[Instance]) -> pd.DataFrame:
    """The cases with the scorer's label for each expected one: one row per (case, label), with
    columns label, expected, got (True/False/"undecided"), wrong (decided and not expected)."""
    probes = {(i.instance_id, p.probe_id): (i, p) for i in instances for p in i.probes}
    rows = []
    for c in case_frame.to_dict("records"):
        inst, probe = probes[(c["instance_id"], c["probe_id"])]
        r = MemOpsResponse(answer=c["answer"], operations=[], provenance=[])
        got = metrics.score(ParsedResponse(raw=r.model_dump_json(), response=r), inst, probe)
        for label, want in json.loads(c["expected"]).items():
            g = getattr(got, label)
            rows.append({**{k: c[k] for k in CASE_COLUMNS if k != "expected"}, "label": label, "expected": want,
                         "got": g, "wrong": g != metrics.UNDECIDED and g != want})
    return pd.DataFrame(rows)


RATE_COLUMNS = ("family", "split", "n_cases", "n_labels", "n_decided", "undecided_share", "n_wrong", "error_rate")


def error_rates(labelled: pd.DataFrame) -> pd.DataFrame:
    """Per family and split (and "all" families): the cases, the labels scored, how many were
    decided and the undecided share, and the errors: n_wrong decided labels other than expected,
    error_rate = n_wrong / n_decided (NaN when nothing was decided)."""
    rows = []
    groups = [*labelled.groupby(["family", "split"], sort=True),
              *((("all", s), g) for s, g in labelled.groupby("split", sort=True))]
    for (family, split), g in groups:
        decided = g["got"].map(lambda v: v != metrics.UNDECIDED)
        n_dec = int(decided.sum())
        wrong = int(g["wrong"].sum())
        n_cases = len(g.drop_duplicates(["family", "template", "instance_id", "probe_id"]))
        rows.append({"family": family, "split": split, "n_cases": n_cases, "n_labels": len(g), "n_decided": n_dec,
                     "undecided_share": 1 - n_dec / len(g) if len(g) else float("nan"),
                     "n_wrong": wrong, "error_rate": wrong / n_dec if n_dec else float("nan")})
    return pd.DataFrame(rows, columns=list(RATE_COLUMNS))
