"""The published report as a reader sees it: ``results/report.html`` rendered in headless Chromium, checked from
the page itself (the positions and colours plotly drew): no two chart labels overlap, and every colour a chart
draws is explained in that chart, in its legend or (a chart without one) in its title's words
(:data:`gnnbench.report.sections.charts.COLOR_WORDS`). Skipped without Chromium (``.ci/run`` installs it;
``GNNBENCH_REQUIRE_BROWSER=1`` makes its absence a failure)."""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
from itertools import combinations

import pytest

from gnnbench.report.sections.charts import COLOR_WORDS
from tests.helpers import ROOT

PUBLISHED = ROOT / "results" / "report.html"

# Runs in the page after plotly has drawn: per chart, its title, every text label's box, the colours of its
# points and bars, and the colours of its legend's symbols; written into the page for --dump-dom to return.
_CHECK = """<script>
(function () {
  function colour(el) {
    var s = getComputedStyle(el), f = s.fill, o = parseFloat(s.fillOpacity || '1');
    if (!f || f === 'none' || o === 0 || f === 'rgba(0, 0, 0, 0)') { f = s.stroke; }
    return f;
  }
  function uniq(xs) { return xs.filter(function (x, i) { return xs.indexOf(x) === i; }); }
  function check() {
    var out = [];
    document.querySelectorAll('.js-plotly-plot').forEach(function (div) {
      var title = div.querySelector('.gtitle');
      var labels = [];
      div.querySelectorAll('.scatterlayer .textpoint text, .annotation text').forEach(function (t) {
        if (!t.textContent.trim()) { return; }
        var r = t.getBoundingClientRect();
        labels.push([t.textContent, r.left, r.top, r.right, r.bottom]);
      });
      var drawn = [];
      div.querySelectorAll('.scatterlayer path.point, .barlayer .point path').forEach(function (p) {
        drawn.push(colour(p));
      });
      var legend = [];
      div.querySelectorAll('.legend .legendpoints path').forEach(function (p) { legend.push(colour(p)); });
      var full = div._fullLayout || {};
      out.push({id: div.id, title: title ? title.textContent : '', labels: labels, drawn: uniq(drawn),
                legend: uniq(legend), names: (div.data || []).map(function (t) { return t.name || ''; }),
                yrange: full.yaxis ? full.yaxis.range : null, xrange: full.xaxis ? full.xaxis.range : null,
                xtype: full.xaxis ? full.xaxis.type : null,
                shapes: (full.shapes || []).map(function (sh) { return [sh.type, sh.y0, sh.y1, sh.x0, sh.x1]; })});
    });
    var box = document.querySelector('.turn-on');
    var page = {scrollWidth: document.documentElement.scrollWidth, innerWidth: window.innerWidth,
                turnOnTop: box ? box.getBoundingClientRect().top + window.scrollY : null,
                turnOnText: box ? box.textContent : ''};
    var pre = document.createElement('pre');
    pre.id = 'gnnbench-check';
    pre.textContent = JSON.stringify({charts: out, page: page});
    document.body.appendChild(pre);
  }
  window.addEventListener('load', function () { setTimeout(check, 500); });
})();
</script>
"""


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


def _rgb(hex_colour: str) -> str:
    h = hex_colour.lstrip("#")
    return f"rgb({int(h[0:2], 16)}, {int(h[2:4], 16)}, {int(h[4:6], 16)})"


def _overlap(a, b) -> float:
    """The area two label boxes share, in square pixels."""
    w = min(a[3], b[3]) - max(a[1], b[1])
    h = min(a[4], b[4]) - max(a[2], b[2])
    return w * h if w > 0 and h > 0 else 0.0


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    browser = _chromium()
    if browser is None:
        if os.environ.get("GNNBENCH_REQUIRE_BROWSER"):
            pytest.fail("GNNBENCH_REQUIRE_BROWSER is set but no Chromium was found")
        pytest.skip("Chromium not installed (apt-get install chromium; .ci/run installs it)")
    tmp = tmp_path_factory.mktemp("browser")
    page = tmp / "report.html"
    text = PUBLISHED.read_text()
    page.write_text(text.replace("</body>", _CHECK + "</body>", 1))
    flags = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={tmp / 'profile'}",
        "--proxy-server=127.0.0.1:9",
        "--virtual-time-budget=15000",
        "--window-size=1400,2000",
    ]
    dom = subprocess.run([browser, *flags, "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=240)
    assert dom.returncode == 0, dom.stderr[-2000:]
    found = re.search(r'<pre id="gnnbench-check">(.*?)</pre>', dom.stdout, re.S)
    assert found, "the check script did not run in the page"
    out = json.loads(html.unescape(found.group(1)))
    assert len(out["charts"]) >= 3, f"plotly drew {len(out['charts'])} charts"
    return out


@pytest.fixture(scope="module")
def charts(rendered):
    return rendered["charts"]


def _chart(charts, prefix: str) -> list[dict]:
    return [c for c in charts if c["id"] == prefix or c["id"].startswith(prefix + "-")]


def test_no_two_chart_labels_overlap(charts):
    clashes = []
    for chart in charts:
        for a, b in combinations(chart["labels"], 2):
            if _overlap(a, b) > 1.0:
                clashes.append(f"{chart['id']}: {a[0]!r} over {b[0]!r}")
    assert not clashes, clashes
    assert any(chart["labels"] for chart in charts), "the trade-off chart labels its rows with a verdict"


def test_every_colour_a_chart_draws_is_in_its_legend(charts):
    words = {_rgb(k): v for k, v in COLOR_WORDS.items()}
    unexplained = []
    for chart in charts:
        if not chart["legend"] and len(chart["drawn"]) == 1 and chart["drawn"][0] not in words:
            continue  # one colour that carries no meaning (a single series): nothing to explain
        for colour in chart["drawn"]:
            if chart["legend"]:
                if colour not in chart["legend"]:
                    unexplained.append(f"{chart['id']}: {colour} is not in its legend")
            elif colour not in words or not re.search(rf"\b{words[colour]}\b", chart["title"]):
                unexplained.append(
                    f"{chart['id']} ({chart['title'][:60]}): {colour} is named neither in a legend nor "
                    f"in its title ({words.get(colour, 'no word for it')})"
                )
    assert not unexplained, unexplained


def test_the_check_itself_sees_an_overlap_and_an_unexplained_colour():
    """The two checks' arithmetic on constructed boxes and colours (they run without a browser)."""
    assert _overlap(["a", 0, 0, 50, 10], ["b", 40, 5, 90, 15]) == 50.0
    assert _overlap(["a", 0, 0, 50, 10], ["b", 50, 0, 90, 10]) == 0.0
    assert _rgb("#2a9d5b") == "rgb(42, 157, 91)" and COLOR_WORDS["#2a9d5b"] == "green"
    assert not re.search(r"\bred\b", "censored, measured") and re.search(r"\bred\b", "red: slower")


def test_no_horizontal_scroll_at_1400_px(rendered):
    page = rendered["page"]
    assert page["scrollWidth"] <= page["innerWidth"], page


def test_the_first_screen_holds_the_turn_on_box_with_a_command(rendered):
    page = rendered["page"]
    assert page["turnOnTop"] is not None and page["turnOnTop"] < 900, "the turn-on box starts on the first screen"
    assert "gnnbench run --preset" in page["turnOnText"] and "Measured:" in page["turnOnText"]


def test_the_accuracy_axes_are_scaled_where_the_decision_is_made(charts):
    """The trade-off charts draw the +-0.5 pp band and their accuracy axis is not set by an outlier (the
    reference's fanout at -6.5 pp sits at the edge, its value in its label)."""
    from gnnbench.measure.compare import NO_COST_PP

    tradeoffs = _chart(charts, "tradeoff")
    assert tradeoffs
    for chart in tradeoffs:
        assert any(sh[0] == "rect" and sh[1] == -NO_COST_PP and sh[2] == NO_COST_PP for sh in chart["shapes"]), chart
        assert chart["yrange"] and max(abs(v) for v in chart["yrange"]) <= 3.2, chart["yrange"]
    for chart in _chart(charts, "accuracy"):
        assert chart["xrange"] and max(abs(v) for v in chart["xrange"]) <= 3.2, chart["xrange"]


def test_the_best_set_is_plotted_on_the_first_screen(charts):
    top = _chart(charts, "tradeoff-top")
    assert top and any(n.startswith("the measured best set") for n in top[0]["names"]), top


def test_time_to_accuracy_curves_and_per_machine_history_with_dates(charts):
    curves = _chart(charts, "curves")
    assert curves and any("baseline" in n for n in curves[0]["names"]) and len(curves[0]["names"]) >= 2
    assert any(sh[0] == "line" for sh in curves[0]["shapes"]), "the target line"
    history = _chart(charts, "history")
    assert history and all(c["xtype"] == "date" for c in history)
