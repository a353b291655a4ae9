"""Model access: every call to a language model, and what a call costs and leaves behind.

- `endpoints`: the endpoint of each role (profile and environment), the run's settings and modes,
  the parsers of every number a user sets, the errors.
- `llm`: the client (`get_client`): retries, rate limits, context windows, structured output and
  strict parsing of replies; the paper profile's pre-flight check.
- `reply_cache`: the canonical request, its key, the on-disk cache and `memoized`, the one path
  every reply takes (recording, cache, model, or a stand-in when estimating or collecting).
- `accounting`: the reply (`Completion`), prices (list, cached input, batch), the per-call log
  and usage summaries. `prompt_cache`: the provider's prompt cache, modelled for estimates.
- `batch_api`: the Batch API: input files (custom_id the cache key, split at the limits), the
  Files and Batches calls, output and error files read back; vLLM's `run_batch` files.
- `replies`: reading a recording of replies (`MEMLIFE_REPLIES`) and where each was made;
  `replies_export`: writing one from a run, and its command line.
- `spending`: the spending cap across processes. `api_rules`: what an endpoint accepts.
- `serve`: the embedded llama-server. `proxy`: the loopback endpoint Mem0 and MemOS call.
- `standin`: stand-in replies for estimates. `tokens`: token counting (o200k and the
  embedded model's own tokenizer).

Imports: `memlife.base` only. The tracks and the running place import it.
"""
