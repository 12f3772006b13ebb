"""Summarizes a schemathesis run (its NDJSON events report) for `bench/run.sh serve-fuzz`.

Per operation: the test cases sent, the responses by status class, and the checks that failed; then one line
  RESULT serve-fuzz operations=<n> cases=<n> server_errors=<n> schema_violations=<n> failed_checks=<n> model_limits=<n>
server_errors: responses with a 5xx status (whether or not a check failed on them), except own_deadline: 504s
answering a request whose own deadline (/v2's parameters.timeout in microseconds, generate's timeout_ms) passed
before it ran, as the document says (schemathesis draws deadlines of a microsecond; its not_a_server_error check
still fails on them, shown in the table). schema_violations: failed response_schema_conformance,
status_code_conformance and content_type_conformance checks. failed_checks: every failed check (schemathesis runs
them all), but model_limits: positive_data_acceptance failures answered 400 for a limit of the model that JSON
Schema cannot state, and that the document states in words: a prompt's tokens (not its characters) against the
model's prompt length and context, and /v2 inputs against the model named by the path (their names, datatypes,
and data as long as the shape says). Each is shown with its message.

  python bench/serve_fuzz_report.py REPORT.ndjson OPENAPI.json

Requests with a method the document does not give a path (schemathesis probes each path with the others)
are one row, "other methods".
"""

import base64
import collections
import json
import sys

CONFORMANCE = {"response_schema_conformance", "status_code_conformance", "content_type_conformance"}
# The messages of the 400s that answer a model's limit no JSON Schema of the document can state (see above).
MODEL_LIMITS = (b"tokens, got", b"maximum context length of model", b"the encoder takes", b"outside the vocabulary",
                b"has no input", b"has no output", b"is missing input", b"no conversions", b"values for shape",
                b"elements for shape", b"expected shape", b"per-request shape")


def body_of(response):
    content = response.get("content") or {}
    return base64.b64decode(content["$base64"]) if "$base64" in content else str(content).encode()


def model_limit(check, response):
    """Whether a failed check is a schema-valid request refused (400) for a model limit the document states in words."""
    return (check == "positive_data_acceptance" and response["status_code"] == 400
            and any(m in body_of(response) for m in MODEL_LIMITS))


def own_deadline(response):
    """Whether a 504 answers a request whose own deadline passed (the servers' messages say so), not a server that hung."""
    body = body_of(response)
    return b"its deadline was" in body or b"its timeout was" in body


def main(path, document):
    with open(document, encoding="utf-8") as f:
        paths = json.load(f)["paths"]
    documented = {m.upper() + " " + p for p, ops in paths.items() for m in ops}
    cases = collections.defaultdict(set)  # operation -> case ids
    statuses = collections.defaultdict(collections.Counter)  # operation -> "2xx".. -> n
    failed = collections.defaultdict(collections.Counter)  # operation -> check -> n
    examples = {}  # (operation, check) -> one failing case's reproduction
    limits = collections.Counter()  # the first line of each model limit's message -> n
    deadline_checks = 0  # not_a_server_error failures on 504s past the request's own deadline
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
                        if model_limit(check["name"], interaction["response"]):
                            limits[op + ": " + body_of(interaction["response"]).decode("utf-8", "replace")[:160]] += 1
                            continue
                        failed[op][check["name"]] += 1
                        if check["name"] == "not_a_server_error" and status == 504 and own_deadline(interaction["response"]):
                            deadline_checks += 1
                            continue
                        examples.setdefault((op, check["name"]), (value, interaction["response"]))
    ops = sorted(cases, key=lambda op: (op == "(other methods)", op.split(" ")[-1], op))
    print("%-52s %6s %6s %6s %6s  %s" % ("operation", "cases", "2xx", "4xx", "5xx", "failed checks (5xx: of them 504 past the request's own deadline)"))
    for op in ops:
        s = statuses[op]
        checks = ", ".join("%s x%d" % kv for kv in sorted(failed[op].items())) or "-"
        if s["own_deadline"]:
            checks += " (504 own deadline x%d)" % s["own_deadline"]
        print("%-52s %6d %6d %6d %6d  %s" % (op, len(cases[op]), s["2xx"], s["4xx"], s["5xx"], checks))
    for (op, check), (value, response) in sorted(examples.items()):
        body = json.dumps(value.get("body"))[:300] if "body" in value else ""
        print("FAILED %s %s: %s %s -> %d %s" % (op, check, value.get("path_parameters", ""), body, response["status_code"],
                                               body_of(response).decode("utf-8", "replace")[:200]))
    for limit, n in sorted(limits.items()):
        print("MODEL LIMIT x%d %s" % (n, limit))
    for e in errors:
        print("SCHEMATHESIS ERROR " + e)
    total = sum(len(c) for c in cases.values())
    deadlines = sum(s["own_deadline"] for s in statuses.values())
    server_errors = sum(s["5xx"] for s in statuses.values()) - deadlines
    violations = sum(n for f in failed.values() for check, n in f.items() if check in CONFORMANCE)
    # A 504 past the request's own deadline fails not_a_server_error (and only that), as documented: not counted.
    failures = sum(n for f in failed.values() for n in f.values()) - deadline_checks
    tested = len([op for op in ops if op in documented])
    print("RESULT serve-fuzz operations=%d cases=%d server_errors=%d schema_violations=%d failed_checks=%d model_limits=%d"
          " own_deadline_504=%d" % (tested, total, server_errors, violations, failures, sum(limits.values()), deadlines))
    return 0 if server_errors == 0 and violations == 0 and failures == 0 and not errors else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
