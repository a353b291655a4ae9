"""Time the power table (memlife.running.power) at the paper profile's grids.

Every size of both tracks' grids, `REPS` simulated runs each, over every core, as
`python -m memlife.running.power --profile paper` runs them (200 runs a size); prints the time
per simulated run by track and size class and what the full table takes at 200 runs.
"""
from __future__ import annotations

import os
import time

from memlife.running import power as power_run

REPS = 10


def main() -> None:
    sizes = power_run.profile_sizes("paper")
    per = {}
    for track in power_run.GRIDS:
        grids = {track: power_run.GRIDS[track]}
        t0 = time.perf_counter()
        power_run.simulate(sizes, reps=REPS, n_boot=1000, seed=0, workers=0, grids=grids)
        per[track] = time.perf_counter() - t0
        own = sizes.topics if track == "memops" else sizes.questions
        n_sizes = len(set(grids[track]) | {own})  # the paper's own size is a size of its grid
        runs = REPS * n_sizes
        print(f"{track:8s} {runs:4d} runs over {n_sizes} sizes: {per[track]:6.1f} s "
              f"({per[track] / runs * 1000:.0f} ms a run, {os.cpu_count()} cores)")
    total = sum(per.values())
    print(f"the paper table at {REPS} runs a size: {total:.0f} s; at 200 (the command's default): "
          f"~{total * 200 / REPS / 60:.1f} min")


if __name__ == "__main__":
    main()
