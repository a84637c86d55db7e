"""One load generator process's run: its context (clock, traces, control connection, drain), the
Locust glue, the samplers and captures beside the load, run.json, and what Locust reports and shows."""
