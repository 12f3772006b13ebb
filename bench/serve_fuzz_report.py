"""Summarizes a schemathesis run (its NDJSON events report) for `bench/run.sh serve-fuzz`.

Per operation: the test cases sent, the responses by status class, and the checks that failed; then one line
  RESULT serve-fuzz operations=<n> cases=<n> server_errors=<n> schema_violations=<n>
server_errors: responses with a 5xx status (whether or not a check failed on them), except own_deadline: 504s
answering a request whose own deadline (/v2's parameters.timeout in microseconds, generate's timeout_ms) passed
before it ran, as the document says (schemathesis draws deadlines of a microsecond; its not_a_server_error check
still fails on them, shown in the table). schema_violations: failed response_schema_conformance,
status_code_conformance and content_type_conformance checks.

  python bench/serve_fuzz_report.py REPORT.ndjson OPENAPI.json

Requests with a method the document does not give a path (schemathesis probes each path with the others)
are one row, "other methods".
"""

import base64
import collections
import json
import sys

CONFORMANCE = {"response_schema_conformance", "status_code_conformance", "content_type_conformance"}


def own_deadline(response):
    """Whether a 504 answers a request whose own deadline passed (the servers' messages say so), not a server that hung."""
    content = response.get("content") or {}
    body = base64.b64decode(content["$base64"]) if "$base64" in content else str(content).encode()
    return b"its deadline was" in body or b"its timeout was" in body


def main(path, document):
    with open(document, encoding="utf-8") as f:
        paths = json.load(f)["paths"]
    documented = {m.upper() + " " + p for p, ops in paths.items() for m in ops}
    cases = collections.defaultdict(set)  # operation -> case ids
    statuses = collections.defaultdict(collections.Counter)  # operation -> "2xx".. -> n
    failed = collections.defaultdict(collections.Counter)  # operation -> check -> n
    examples = {}  # (operation, check) -> one failing case's reproduction
    errors = []  # runtime errors of schemathesis itself
    with open(path, encoding="utf-8") as f:
        for line in f:
            event = json.loads(line)
            if "NonFatalError" in event or "FatalError" in event:
                e = event.get("NonFatalError") or event.get("FatalError")
                errors.append(str(e.get("label", "")) + ": " + str(e.get("info", e))[:200])
            finished = event.get("ScenarioFinished")
            if not finished:
                continue
            recorder = finished.get("recorder") or {}
            for case_id, case in (recorder.get("cases") or {}).items():
                value = case["value"]
                op = value["method"] + " " + value["path"]
                if op not in documented:
                    op = "(other methods)"
                interaction = (recorder.get("interactions") or {}).get(case_id)
                if interaction is None or interaction.get("response") is None:
                    continue
                cases[op].add(case_id)
                status = interaction["response"]["status_code"]
                statuses[op]["%dxx" % (status // 100)] += 1
                if status == 504 and own_deadline(interaction["response"]):
                    statuses[op]["own_deadline"] += 1
                for check in (recorder.get("checks") or {}).get(case_id, []):
                    if check["status"] == "failure":
                        failed[op][check["name"]] += 1
                        examples.setdefault((op, check["name"]), value)
    ops = sorted(cases, key=lambda op: (op == "(other methods)", op.split(" ")[-1], op))
    print("%-52s %6s %6s %6s %6s  %s" % ("operation", "cases", "2xx", "4xx", "5xx", "failed checks (5xx: of them 504 past the request's own deadline)"))
    for op in ops:
        s = statuses[op]
        checks = ", ".join("%s x%d" % kv for kv in sorted(failed[op].items())) or "-"
        if s["own_deadline"]:
            checks += " (504 own deadline x%d)" % s["own_deadline"]
        print("%-52s %6d %6d %6d %6d  %s" % (op, len(cases[op]), s["2xx"], s["4xx"], s["5xx"], checks))
    for (op, check), value in sorted(examples.items()):
        body = json.dumps(value.get("body"))[:300] if "body" in value else ""
        print("FAILED %s %s: %s %s" % (op, check, value.get("path_parameters", ""), body))
    for e in errors:
        print("SCHEMATHESIS ERROR " + e)
    total = sum(len(c) for c in cases.values())
    deadlines = sum(s["own_deadline"] for s in statuses.values())
    server_errors = sum(s["5xx"] for s in statuses.values()) - deadlines
    violations = sum(n for f in failed.values() for check, n in f.items() if check in CONFORMANCE)
    tested = len([op for op in ops if op in documented])
    print("RESULT serve-fuzz operations=%d cases=%d server_errors=%d schema_violations=%d own_deadline_504=%d"
          % (tested, total, server_errors, violations, deadlines))
    return 0 if server_errors == 0 and violations == 0 and not errors else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
