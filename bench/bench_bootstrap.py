"""Time the full question-clustered bootstrap at the restore paper's scale.

470 questions x 3 seeds, 6 policies x 3 budgets x 2 regimes (36 cells), 10,000 resamples; every
cell's shares with intervals (R1), the regime-gap tests with Holm (R2) and the matched-accuracy
contrasts (R3). The records are SYNTHETIC (tests/restore_simulate.py): only the shapes matter here.
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

from memlife.restore.analyses import decompose, paper_analyses

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the synthetic records' module
from restore_simulate import simulate_records  # noqa: E402

N_QUESTIONS, N_BOOT = 470, 10_000


def main() -> None:
    t0 = time.perf_counter()
    records = simulate_records(N_QUESTIONS, seeds=(0, 1, 2), rng_seed=0)
    t1 = time.perf_counter()
    obs = decompose.observations(records, source="synthetic")
    t2 = time.perf_counter()
    boot = paper_analyses.cell_bootstrap(obs, n_boot=N_BOOT, seed=0)
    t3 = time.perf_counter()
    r1 = paper_analyses.shares(boot)
    t4 = time.perf_counter()
    r2 = paper_analyses.regime_gap(boot)
    t5 = time.perf_counter()
    r3 = paper_analyses.matched_accuracy(boot, tolerance=0.02)
    t6 = time.perf_counter()
    print(f"records: {len(records):,} rows, {len(obs):,} observations, {len(boot.cells)} cells, "
          f"{N_QUESTIONS} question clusters, {N_BOOT:,} resamples")
    print(f"simulate records          {t1 - t0:7.2f} s  (synthetic input, not part of the bootstrap)")
    print(f"observations (decompose)  {t2 - t1:7.2f} s")
    print(f"count matrix + cell sums  {t3 - t2:7.2f} s")
    print(f"R1 shares, {len(paper_analyses.SHARES)} per cell      {t4 - t3:7.2f} s  ({len(r1)} cells)")
    print(f"R2 gaps + Holm            {t5 - t4:7.2f} s  ({len(r2)} tests)")
    print(f"R3 paired contrasts       {t6 - t5:7.2f} s  ({len(r3)} contrasts)")
    print(f"full bootstrap (R1-R3)    {t6 - t2:7.2f} s")


if __name__ == "__main__":
    main()
