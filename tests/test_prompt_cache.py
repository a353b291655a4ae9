"""The provider's prompt cache as an estimate models it (memlife.models.prompt_cache), against cases
counted by hand, and the prompt_cache_key an endpoint is sent."""
from memlife.models import prompt_cache, tokens


def _user(n_words: int, tail: str = "") -> list[dict]:
    # " w" is one o200k token, so a content of n words is n tokens
    return [{"role": "user", "content": " w" * n_words + tail}]


def test_cached_tokens_are_the_shared_prefix_past_1024_in_steps_of_128():
    assert len(tokens.encoding().encode(" w" * 50)) == 50
    index = prompt_cache.PrefixIndex()
    assert index.observe(_user(3000, " first question")) == 0  # nothing before it
    # 4 role tokens + 3000 shared content tokens: 3004 tokens in common, 23 whole steps of 128 = 2944
    assert index.observe(_user(3000, " second question")) == 2944
    assert index.observe(_user(1100, " short")) == 1024  # 1104 shared: the first step only
    assert index.observe(_user(900, " shorter")) == 0  # under the minimum
    other = [{"role": "system", "content": "x"}, *_user(3000)]  # another head: nothing in common
    assert index.observe(other) == 0


def test_the_prompt_cache_key_names_the_head_and_goes_to_openai_by_default(isolated_llm):
    from memlife.models import endpoints

    a, b = _user(3000, " first?"), _user(3000, " second?")
    assert prompt_cache.cache_key(a) == prompt_cache.cache_key(b) != prompt_cache.cache_key(_user(10))
    endpoints.configure(None, models={"reader": {"base_url": "https://api.openai.com/v1", "model": "gpt-4o-mini"},
                                      "judge": {"base_url": "http://localhost:8000/v1", "model": "m",
                                                "context_window": 32768}})
    assert endpoints.endpoint_for("reader").prompt_cache_key is True
    assert endpoints.endpoint_for("judge").prompt_cache_key is False  # an unknown field may be an error there
    reader = isolated_llm.get_client("reader")
    req, key = reader._build(a, 16, 0.0, 0, None, None, None)
    body = reader.request_body(req)
    assert body["prompt_cache_key"] == prompt_cache.cache_key(a) and "prompt_cache_key" not in req  # wire only
