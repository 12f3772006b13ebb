#!/usr/bin/env python3
"""One line per module after its tests (run by Maven at the end of the test phase, see the parent pom):
how many tests ran, failed and were skipped, then each skipped test with its reason, read from surefire's
XML reports written since the build started (older reports of tests not run this time are left out).

    tools/test_summary.py MODULE_NAME REPORTS_DIR BUILD_STARTED_UTC(yyyy-MM-ddTHH:mm:ssZ)
"""
import calendar
import glob
import os
import sys
import time
import xml.etree.ElementTree as ET


def reason(skipped):
    """The message of @Disabled, or of a failed assumption (its first line, in the element's text)."""
    if skipped.get("message"):
        return skipped.get("message").strip()
    text = (skipped.text or "").strip().splitlines()
    if not text:
        return "no reason given"
    first = text[0]
    for prefix in ("org.opentest4j.TestAbortedException: ", "Assumption failed: "):
        if first.startswith(prefix):
            first = first[len(prefix):]
    return first


def main():
    module, reports, started = sys.argv[1], sys.argv[2], sys.argv[3]
    since = calendar.timegm(time.strptime(started, "%Y-%m-%dT%H:%M:%SZ")) - 1
    tests = failures = skipped = 0
    reasons = []
    for path in sorted(glob.glob(os.path.join(reports, "TEST-*.xml"))):
        if os.path.getmtime(path) < since:
            continue
        suite = ET.parse(path).getroot()
        tests += int(suite.get("tests", 0))
        failures += int(suite.get("failures", 0)) + int(suite.get("errors", 0))
        for case in suite.iter("testcase"):
            skip = case.find("skipped")
            if skip is not None:
                skipped += 1
                name = case.get("classname", "").rsplit(".", 1)[-1] + "." + case.get("name", "")
                reasons.append("  skipped %s: %s" % (name, reason(skip)))
    if tests == 0:
        return
    # 'N passed, N failed, N skipped' after one word with a colon: the plain closing line CI reads.
    print("%s: %d passed, %d failed, %d skipped" % (module, tests - failures - skipped, failures, skipped))
    for line in reasons:
        print(line)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
