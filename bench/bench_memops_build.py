"""How long the offline MemOps pipeline takes at the paper's scale (100 topics, 403 conversations).

Prints the wall time of each stage: plan (stages 1-3), template realization, deterministic
gates, long-context embedding at ~60k tokens (stage 4), and the whole `build` including writing
instances.jsonl. No model is called.
"""
from __future__ import annotations

import tempfile
import time
from dataclasses import replace
from pathlib import Path

from memlife.memops.scoring.metrics import gold_failures
from memlife.memops.data import gates, longctx, realize
from memlife.memops.build import build, params_for
from memlife.memops.data.plan import PlanParams, plan


def main() -> None:
    # The offline path: the template realizer, even though the paper profile names an LLM generator.
    params = replace(params_for("paper"), realizer="template", verifier="off")
    t = time.perf_counter()
    cps = plan(PlanParams(params.n_topics, params.seed, params.max_conversations))
    t_plan = time.perf_counter() - t
    t = time.perf_counter()
    insts = [realize.template_instance(cp) for cp in cps]
    t_real = time.perf_counter() - t
    t = time.perf_counter()
    n_fail = sum(bool(gates.check(i, gold_failures)) for i in insts)
    t_gate = time.perf_counter() - t
    t = time.perf_counter()
    longctx.filler_sessions()
    t_corpus = time.perf_counter() - t
    t = time.perf_counter()
    embedded = [longctx.embed(i, params.longctx_tokens, params.seed) for i in insts]
    t_embed = time.perf_counter() - t
    mean_tokens = sum(e.long_context.approx_tokens for e in embedded) / len(embedded)
    with tempfile.TemporaryDirectory() as d:
        t = time.perf_counter()
        res = build(params, Path(d), progress=False)
        t_build = time.perf_counter() - t
        size_mb = (Path(d) / "instances.jsonl").stat().st_size / 1e6
    probes = sum(len(cp.probes) for cp in cps)
    print(f"memops paper profile: {len(cps)} conversations, {probes} probes, {params.n_topics} topics")
    print(f"  plan (stages 1-3)          {t_plan:7.2f} s")
    print(f"  template realization       {t_real:7.2f} s")
    print(f"  deterministic gates        {t_gate:7.2f} s   ({n_fail} failing)")
    print(f"  filler sessions (once)     {t_corpus:7.2f} s")
    print(f"  long context (stage 4)     {t_embed:7.2f} s   (mean {mean_tokens:,.0f} tokens per history)")
    print(f"  full build + write         {t_build:7.2f} s   ({res.manifest['instances']} retained, {size_mb:.0f} MB)")


if __name__ == "__main__":
    main()
