"""One gateway in front of a fleet of model servers: the router (an `Upstream` over one
`ChatCompletionsUpstream` per replica), its policy, health and failover.

- `settings.py`: how each upstream is configured (`upstreams:` in the config file) and the
  fleet's own settings;
- `affinity.py`: the keys a session is recognised by (session headers, the prompt's opening);
- `policy.py`: which replica a model call goes to (affinity with bounded load, round-robin,
  least outstanding): pure, no I/O;
- `health.py`: each replica's circuit breaker, error rate and latency;
- `replica.py`: one model server as the router sees it (adapter, models, health, load);
- `resume.py`: a turn cut after text went out, asked of another replica as a continuation;
- `router.py`: the `Upstream` itself: discovery, probes, failover;
- `build.py`: the router from configuration.
"""
