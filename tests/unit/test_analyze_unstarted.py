"""`sojourn analyze` of a directory `sojourn run` left before its Locust began the run (the run.json
it hands the load generator, status `starting`: loadgen.run.handoff) says the run never started,
exit 2, before it starts Spark or looks for traces."""

from __future__ import annotations

import json

from loadgen.cli import main
from loadgen.run.runinfo import STARTING


def test_a_run_that_never_started_is_named_as_such_and_exits_2(tmp_path, capsys, monkeypatch):
    import analysis.session

    started = []
    monkeypatch.setattr(analysis.session, "get_spark", lambda *a, **k: started.append(a) or None)
    (tmp_path / "run.json").write_text(json.dumps({"schema_version": 5, "status": STARTING}))
    assert main(["analyze", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert f"{tmp_path / 'run.json'}: the run never started" in err
    assert "traces" not in err.split("error:", 1)[1]
    assert started == []
