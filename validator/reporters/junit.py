"""JUnit XML, as CI systems read it: a testsuite per challenge, a testcase per check.

``failed`` checks become ``<failure>``, ``error`` (the code crashed, hung or was
not run) ``<error>``, ``skipped`` ``<skipped>``; advisories pass with their
advice in ``<system-out>``. Student text is made visible (:mod:`validator.reporters.sanitize`);
characters XML 1.0 cannot carry are replaced.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

from validator.reporters import write_atomic
from validator.questions import revealed_lines
from validator.reporters.figures import figure_lines
from validator.reporters.sanitize import one_line, safe_report
from validator.results import Report

_INVALID_XML = re.compile("[^\u0009\u000a\u000d\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def clean(text: str) -> str:
    return _INVALID_XML.sub("\ufffd", text)


def junit_tree(report: Report, *, name: str | None = None) -> ET.Element:
    report = safe_report(report)
    name = clean(one_line(name or report.student))
    root = ET.Element("testsuites", name=name)
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    for ch in report.challenges:
        counts = {"tests": len(ch.checks), "failures": 0, "errors": 0, "skipped": 0}
        seconds = sum(c.duration_s for c in ch.checks)
        suite = ET.SubElement(root, "testsuite", name=clean(ch.id), time=f"{seconds:.3f}")
        props = ET.SubElement(suite, "properties")
        for key, value in (("score", f"{ch.score:g}"), ("max_score", f"{ch.max_score:g}"),
                           ("seed", str(report.seed)), ("profile", report.profile)):
            ET.SubElement(props, "property", name=key, value=clean(value))
        if ch.problem:
            ET.SubElement(props, "property", name="problem", value=clean(ch.problem))
        for c in ch.checks:
            case = ET.SubElement(suite, "testcase", classname=clean(f"{name}.{ch.id}"), name=clean(c.id),
                                 time=f"{c.duration_s:.3f}")
            picture = "\n".join(figure_lines(c.figures)) if not c.ok else ""
            text = "\n".join(x for x in (c.title, c.message, picture, *revealed_lines(c),
                                          c.reproduce and f"reproduce: {c.reproduce}") if x)
            first = (c.message or c.status).splitlines()[0] if (c.message or c.status) else c.status
            if c.status == "failed":
                counts["failures"] += 1
                ET.SubElement(case, "failure", message=clean(first[:500]), type=c.kind).text = clean(text)
            elif c.status == "error":
                counts["errors"] += 1
                ET.SubElement(case, "error", message=clean(first[:500]), type=c.kind).text = clean(text)
            elif c.status == "skipped":
                counts["skipped"] += 1
                ET.SubElement(case, "skipped", message=clean(first[:500]))
            elif c.message:
                ET.SubElement(case, "system-out").text = clean(text)
        for key, value in counts.items():
            suite.set(key, str(value))
            totals[key] += value
    for key, value in totals.items():
        root.set(key, str(value))
    root.set("time", f"{report.duration_s:.3f}")
    return root


def junit_xml(report: Report, **kwargs) -> bytes:
    tree = junit_tree(report, **kwargs)
    ET.indent(tree)
    return ET.tostring(tree, encoding="utf-8", xml_declaration=True) + b"\n"


def write_junit(report: Report, path: str | Path, **kwargs) -> None:
    write_atomic(path, junit_xml(report, **kwargs))
