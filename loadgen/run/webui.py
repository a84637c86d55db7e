"""Locust's web UI for a sojourn scenario: the scenario, its phases and the run directory on the
page, and no form fields that the scenario overrides.

The scenario's LoadTestShape decides the users, their ramp-up and the run time, and its broker
is the "host": Locust's start form (2.x, a React app) still shows those fields, disabled at 0,
with a "no host attribute" warning. The page Locust serves is changed on its way out (a Flask
`after_request` hook, as Locust's own web UI examples extend it): a panel above the app
describes the scenario and the run directory, a small script removes the overridden fields
from the form as they appear, and `/sojourn/status` tells the panel where the run is and how to
analyse it once it has ended. Nothing of the page's own code is replaced: with another Locust
UI the panel is still there and the fields stay as Locust shows them.

`panel_html`, `describe_scenario` and `inject` are plain functions; `install` wires them into
the running web UI.
"""

from __future__ import annotations

import html
import json
from collections.abc import Callable
from typing import Any

from loadgen.redact import mask_text, mask_url

__all__ = ["HIDDEN_FIELDS", "describe_scenario", "panel_html", "inject", "install", "STATUS_PATH"]

HIDDEN_FIELDS = ("userCount", "spawnRate", "runTime", "host")
"""The start form's inputs (by name) that a sojourn scenario decides: users, ramp-up, run time, broker."""

STATUS_PATH = "/sojourn/status"

_PANEL_ID = "sojourn-scenario"

_STYLE = (
    "<style>"
    f"#{_PANEL_ID}{{font:14px/1.5 system-ui,sans-serif;padding:10px 24px;"
    "border-bottom:1px solid rgba(127,127,127,.35);background:rgba(127,127,127,.08)}"
    f"#{_PANEL_ID} h2{{font-size:16px;margin:0 0 4px}}#{_PANEL_ID} p{{margin:2px 0}}"
    f"#{_PANEL_ID} ul{{margin:2px 0;padding-left:20px}}#{_PANEL_ID} code{{font-size:13px}}"
    # Until the script below has removed them (it runs before the first paint, but a browser
    # without :has() or scripts keeps the fields, disabled, as Locust shows them).
    + ",".join(f'.MuiFormControl-root:has(input[name="{name}"])' for name in HIDDEN_FIELDS)
    + "{display:none}"
    "</style>"
)

_SCRIPT = """<script>(function () {
  var hidden = %(hidden)s;
  function sweep() {
    hidden.forEach(function (name) {
      document.querySelectorAll('input[name="' + name + '"]').forEach(function (input) {
        (input.closest(".MuiFormControl-root") || input).remove();
      });
    });
  }
  new MutationObserver(sweep).observe(document.documentElement, {childList: true, subtree: true});
  function show(status) {
    var dir = document.getElementById("sojourn-run-dir"), next = document.getElementById("sojourn-next");
    if (dir && status.run_dir) dir.textContent = status.run_dir;
    if (next) next.textContent = status.message || "";
  }
  function poll() {
    fetch(%(status)s, {cache: "no-store"}).then(function (r) { return r.json(); }).then(show)
      .catch(function () {}).then(function () { setTimeout(poll, 2000); });
  }
  setTimeout(poll, 2000);
})();</script>"""


def _value_text(value: Any) -> str:
    """A scenario value as the panel shows it: a processing time reads `4 ms` or
    `exponential, mean_ms 4`; a mapping `{k: v}`."""
    if hasattr(value, "to_dict"):
        value = value.to_dict()
        if isinstance(value, dict) and "distribution" in value:
            params = {k: v for k, v in value.items() if k != "distribution"}
            if value["distribution"] == "fixed" and set(params) == {"ms"}:
                return f"{params['ms']:g} ms"
            return ", ".join([str(value["distribution"]), *(f"{k} {_value_text(v)}" for k, v in params.items())])
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_value_text(v)}" for k, v in value.items()) + "}"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def describe_scenario(scenario) -> dict[str, Any]:
    """What the panel shows of `scenario`, as plain values (the broker's password masked)."""
    run = scenario.run
    return {
        "name": scenario.name,
        "description": scenario.description or "",
        "path": scenario.source_path or "",
        "overrides": [mask_text(o) for o in scenario.overrides],
        "broker": mask_url(scenario.broker.url),
        "queue": scenario.queue.name,
        "duration_s": run.duration_s,
        "warmup_s": run.warmup_s,
        "drain_timeout_s": run.drain_timeout_s,
        "producers": [f"{g.name} ×{g.count} at {g.rate_text()} msg/s each" for g in scenario.producers],
        "consumers": [
            f"{g.name} ×{g.count}, prefetch {g.prefetch}, processing {_value_text(g.processing)}"
            for g in scenario.consumers
        ],
        "phases": [
            {
                "name": p.name,
                "start_s": p.start_s,
                "end_s": p.end_s,
                "set": [f"{path} = {_value_text(value)}" for path, value in p.set],
            }
            for p in scenario.timeline
        ],
    }


def panel_html(desc: dict[str, Any], run_dir: str, message: str = "") -> str:
    """The panel above Locust's app: the scenario of `describe_scenario`, the run directory
    (`run_dir`: a path, or what it will be) and a line about the run (`message`)."""
    e = html.escape
    source = f" — <code>{e(desc['path'])}</code>" if desc["path"] else ""
    overrides = "".join(f" <code>--set {e(o)}</code>" for o in desc["overrides"])
    warmup = f", the first {desc['warmup_s']:g} s warm-up" if desc["warmup_s"] else ""
    phases = "".join(
        f"<li><b>{e(p['name'])}</b> {p['start_s']:g}–{p['end_s']:g} s"
        + (f": {e('; '.join(p['set']))}" if p["set"] else "")
        + "</li>"
        for p in desc["phases"]
    )
    groups = "".join(f"<li>producers {e(g)}</li>" for g in desc["producers"]) + "".join(
        f"<li>consumers {e(g)}</li>" for g in desc["consumers"]
    )
    parts = [
        f'<section id="{_PANEL_ID}">',
        f'<h2>sojourn scenario <span id="sojourn-scenario-name">{e(desc["name"])}</span>{source}{overrides}</h2>',
        f"<p>{e(desc['description'])}</p>" if desc["description"] else "",
        f"<p>{desc['duration_s']:g} s of load{warmup}, then up to {desc['drain_timeout_s']:g} s of drain; "
        "the scenario sets the users and the run time (press Start).</p>",
        f"<p>broker <code>{e(desc['broker'])}</code>, queue <code>{e(desc['queue'])}</code></p>",
        f"<ul>{groups}</ul>",
        f"<p>phases:</p><ul>{phases}</ul>" if phases else "<p>phases: none (base settings throughout)</p>",
        f'<p>run directory: <code id="sojourn-run-dir">{e(run_dir)}</code></p>',
        f'<p id="sojourn-next">{e(message)}</p>',
        "</section>",
    ]
    return "".join(parts)


def inject(page: str, head: str, body: str) -> str:
    """`page` with `head` at the end of its <head> and `body` at the start of its <body>."""
    at = page.find("</head>")
    if at >= 0:
        page = page[:at] + head + page[at:]
    start = page.find("<body")
    end = page.find(">", start) + 1 if start >= 0 else 0
    return page[:end] + body + page[end:]


def install(environment, scenario, status: Callable[[], dict[str, str]]) -> None:
    """Extend `environment.web_ui`: the panel and the field removal on its index page, and
    STATUS_PATH answering `status()` ({"run_dir", "message"}) as JSON."""
    from flask import jsonify, request

    web_ui = environment.web_ui
    if web_ui is None:
        return
    base = (getattr(environment.parsed_options, "web_base_path", "") or "").rstrip("/")
    desc = describe_scenario(scenario)
    script = _SCRIPT % {"hidden": json.dumps(list(HIDDEN_FIELDS)), "status": json.dumps(f"{base}{STATUS_PATH}")}

    @web_ui.app.after_request
    def _extend_index(response):
        if request.path not in (f"{base}/", base or "/") or response.mimetype != "text/html":
            return response
        now = status()
        page = response.get_data(as_text=True)
        response.set_data(inject(page, _STYLE, panel_html(desc, now["run_dir"], now["message"]) + script))
        return response

    @web_ui.app.route(f"{base}{STATUS_PATH}")
    @web_ui.auth_required_if_enabled
    def _sojourn_status():
        return jsonify(status())
