"""Running the project: notebooks as a DAG of runs, estimates before a run, and publishing.

- `runner`: runs one notebook for a profile under papermill (parameters, fingerprints, resume,
  usage and cost per run), `python -m memlife.running.runner NB --profile P`.
- `estimate`: what a run would send and cost, before any call (`make estimate`).
- `pilot`: a fraction of a profile run for real, and the whole run's calls, tokens, dollars and
  wall time forecast from it with intervals (`make pilot`).
- `scale`: a profile at a fraction of its items, and a project root that runs it (the pilot's and
  tools/rehearse.py's).
- `batch`: a profile's calls sent through a Batch API in waves until none is missing (`make batch`),
  and vLLM's `run_batch` files.
- `power`: the power of each of the papers' claims at a grid of sizes, and the least costly sizes
  that keep them (`python -m memlife.running.power`, notebook 01).
- `publish`: a finished run's tables and figures made the committed ones (`make publish`).
- `executed`: executed notebooks normalized and rendered to HTML for results/notebooks/.
- `results_page`: the page a reader lands on, results/notebooks/index.html (the README's findings, a
  key number per notebook, the run's profile and commit) and its picture by headless Chromium.

Imports: everything below it (base, models, the shared science, both tracks). Nothing imports it.
"""
