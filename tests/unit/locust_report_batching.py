"""Results reported in batches read in Locust's statistics as if each had been logged on its own."""

import random

from locust.env import Environment
from locust.stats import RequestStats

from loadgen.run.locust_stats import RequestBatcher, batcher


def _env() -> Environment:
    env = Environment()
    env.create_local_runner()  # registers Locust's own request listener (stats and errors)
    return env


def _results(n: int = 2_000) -> list[tuple[str, str, float, int]]:
    rng = random.Random(7)
    names = [("publish", "publish:(default):q"), ("consume", "consume:q")]
    return [
        (*rng.choice(names), rng.choice([rng.uniform(0, 5), rng.expovariate(1 / 300), 12_345.6]), rng.randint(1, 500))
        for _ in range(n)
    ]


def test_counts_times_bytes_and_percentiles_match_logging_each_result():
    expected = RequestStats()
    for request_type, name, ms, length in _results():
        expected.log_request(request_type, name, ms, length)
    env = _env()
    b = RequestBatcher(env, every_s=0)
    for request_type, name, ms, length in _results():
        b.report(request_type, name, ms, length, None)
    b.flush()
    got = env.stats
    for key, want in [*expected.entries.items(), (None, expected.total)]:
        have = got.total if key is None else got.entries[key]
        assert (have.num_requests, have.num_failures, have.total_content_length) == (
            want.num_requests,
            want.num_failures,
            want.total_content_length,
        )
        assert (have.min_response_time, have.max_response_time) == (want.min_response_time, want.max_response_time)
        assert abs(have.total_response_time - want.total_response_time) < 1e-6 * want.total_response_time
        assert dict(have.response_times) == dict(want.response_times)
        for p in (0.5, 0.95, 0.99, 1.0):
            assert have.get_response_time_percentile(p) == want.get_response_time_percentile(p)
    assert sum(got.total.num_reqs_per_sec.values()) == len(_results())


def test_results_reach_the_statistics_at_the_next_flush_not_before():
    env = _env()
    b = RequestBatcher(env, every_s=0)
    b.report("consume", "consume:q", 3.0, 100, None)
    assert env.stats.total.num_requests == 0 and b.pending() == 1
    b.flush()
    assert env.stats.entries[("consume:q", "consume")].num_requests == 1 and b.pending() == 0


def test_a_failure_is_counted_at_once_with_its_error():
    env = _env()
    b = RequestBatcher(env, every_s=0)
    b.report("publish", "publish:(default):q", 0.0, 100, RuntimeError("publish nacked by the broker"))
    entry = env.stats.entries[("publish:(default):q", "publish")]
    assert (entry.num_requests, entry.num_failures) == (1, 1)
    (error,) = env.stats.errors.values()
    assert "nacked" in str(error.error) and error.occurrences == 1


def test_the_end_of_the_test_flushes_what_is_pending():
    env = _env()
    b = RequestBatcher(env, every_s=0)
    b.report("consume", "consume:q", 3.0, 100, None)
    env.events.test_stop.fire(environment=env)
    assert env.stats.total.num_requests == 1


def test_every_user_of_a_process_shares_one_batcher_that_flushes_on_its_own():
    import gevent

    env = _env()
    assert batcher(env) is batcher(env)
    batcher(env).report("consume", "consume:q", 3.0, 100, None)
    gevent.sleep(0.25)
    assert env.stats.total.num_requests == 1
    batcher(env).close()


def test_every_successful_message_reaches_another_request_listener_once_in_order():
    env = _env()
    heard: list[tuple] = []
    env.events.request.add_listener(
        lambda request_type, name, response_time, response_length, exception, context, **_kw: heard.append(
            (request_type, name, response_time, response_length, exception, context)
        )
    )
    b = RequestBatcher(env, every_s=0)
    results = _results(500)
    for request_type, name, ms, length in results:
        b.report(request_type, name, ms, length, None)
    assert heard == []  # not before the flush
    b.flush()
    assert [h[:4] for h in heard] == results
    assert all(h[4] is None and h[5] == {"sojourn_batched": True} for h in heard)
    assert env.stats.total.num_requests == 500  # and Locust's own statistics counted each once, not twice


def test_a_failure_reaches_a_listener_once_at_once():
    env = _env()
    heard: list[BaseException | None] = []
    env.events.request.add_listener(lambda exception, **_kw: heard.append(exception))
    b = RequestBatcher(env, every_s=0)
    error = RuntimeError("publish nacked by the broker")
    b.report("publish", "publish:(default):q", 0.0, 100, error)
    b.flush()
    assert heard == [error]


def test_a_listener_that_raises_does_not_stop_the_others_or_the_statistics():
    env = _env()
    heard: list[str] = []

    def broken(**_kw):
        raise ValueError("a plugin's bug")

    env.events.request.add_listener(broken)
    env.events.request.add_listener(lambda name, **_kw: heard.append(name))
    b = RequestBatcher(env, every_s=0)
    b.report("consume", "consume:q", 3.0, 100, None)
    b.report("consume", "consume:q", 4.0, 100, None)
    b.flush()
    assert heard == ["consume:q", "consume:q"]
    assert env.stats.total.num_requests == 2


def test_locusts_own_statistics_listener_is_the_one_left_out():
    from loadgen.run.locust_stats import is_locust_statistics

    env = Environment()
    assert not any(map(is_locust_statistics, env.events.request._handlers))
    env.create_local_runner()
    assert sum(map(is_locust_statistics, env.events.request._handlers)) == 1
