"""The tables near the end of the page that list their input as it is: pytest-benchmark timings and the
optimization registry.
"""

from __future__ import annotations

from gnnbench import registry
from gnnbench.report.html import esc
from gnnbench.report.inputs import ReportInputs


def pytest_benchmark_section(inputs: ReportInputs) -> str:
    if not inputs.pytest_benchmarks:
        return ""
    rows = []
    for doc in inputs.pytest_benchmarks:
        for b in doc["benchmarks"]:
            st = b["stats"]
            rows.append(
                f"<tr><td>{esc(b.get('group'))}</td><td>{esc(b['name'])}</td>"
                f"<td class='num'>{1e3 * st['median']:.3f}</td>"
                f"<td class='num'>{1e3 * st['q1']:.3f}-{1e3 * st['q3']:.3f}</td>"
                f"<td class='num'>{st['rounds']}</td></tr>"
            )
    return (
        "<h2>pytest-benchmark</h2><table id='pytest-benchmark'><tr><th>group</th><th>benchmark</th>"
        "<th>median ms</th><th>IQR ms</th><th>rounds</th></tr>" + "".join(rows) + "</table>"
    )


def registry_section() -> str:
    rows = "".join(
        f"<tr><td>{esc(o.name)}</td><td>{esc(o.description)}</td><td>{esc(o.expected_effect)}</td>"
        f"<td>{'CUDA' if o.requires else 'any'}</td><td>{'yes' if o.costs_accuracy else 'no'}</td></tr>"
        for o in registry.REGISTRY.values()
    )
    return (
        "<h2>Registry</h2><table id='registry'><tr><th>name</th><th>what it does</th><th>expected effect</th>"
        f"<th>device</th><th>may cost accuracy</th></tr>{rows}</table>"
    )
