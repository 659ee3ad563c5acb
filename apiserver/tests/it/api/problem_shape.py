"""A schemathesis check, loaded by the property-based run (errors.rs): every error the API
answers, whatever the fuzzer sent, is an RFC 9457 problem (`application/problem+json`) whose
`status` is the response's, whose `instance` is the request id, and whose `type`, `title` and
`code` agree."""

import json

import schemathesis

PREFIX = "tag:kubenest.io,2026:problem:"


@schemathesis.check
def problem_shape(ctx, response, case):
    if response.status_code < 400:
        return None
    content_type = (response.headers.get("content-type") or [""])[0]
    assert content_type == "application/problem+json", f"an error as {content_type!r}, not a problem"
    problem = json.loads(response.content)
    assert isinstance(problem, dict), f"a problem is an object: {problem!r}"
    for member in ("type", "title", "status", "detail", "instance", "code"):
        assert member in problem, f"the problem has no {member!r}: {problem}"
    assert problem["status"] == response.status_code, f"status {problem['status']} on a {response.status_code}"
    assert problem["type"] == PREFIX + problem["code"], f"type {problem['type']!r} for code {problem['code']!r}"
    title = problem["code"].replace("_", " ")
    assert problem["title"] == title[:1].upper() + title[1:], f"title {problem['title']!r}"
    request_id = (response.headers.get("x-request-id") or [""])[0]
    assert request_id and problem["instance"] == request_id, f"instance {problem['instance']!r}, request id {request_id!r}"
    return None
