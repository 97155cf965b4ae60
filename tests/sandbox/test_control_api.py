"""The sandbox control API answers malformed requests with a 400 and a JSON error naming the problem."""

import requests

from sandbox.client import SandboxClient


def post(sandbox: SandboxClient, path: str, **kwargs: object) -> requests.Response:
    return sandbox.http.post(f"{sandbox.base_url}/_sandbox{path}", timeout=5, **kwargs)  # type: ignore[arg-type]


def test_fault_body_that_is_not_json_is_a_400(sandbox: SandboxClient) -> None:
    response = post(sandbox, "/faults", data="{not json", headers={"Content-Type": "application/json"})
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_json"


def test_fault_with_an_unknown_service_names_the_field(sandbox: SandboxClient) -> None:
    response = post(sandbox, "/faults", json={"service": "yahoo", "status": 503})
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "invalid_field"
    assert "service" in error["message"]


def test_fault_with_a_missing_status_names_the_field(sandbox: SandboxClient) -> None:
    response = post(sandbox, "/faults", json={"service": "gemini"})
    assert response.status_code == 400
    assert "status" in response.json()["error"]["message"]


def test_fault_with_a_bad_route_pattern_is_a_400(sandbox: SandboxClient) -> None:
    response = post(sandbox, "/faults", json={"service": "gmail", "status": 429, "route": "(unclosed"})
    assert response.status_code == 400
    assert "route" in response.json()["error"]["message"]


def test_unknown_control_route_is_a_json_404(sandbox: SandboxClient) -> None:
    response = sandbox.http.get(f"{sandbox.base_url}/_sandbox/nothing-here", timeout=5)
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"


def test_reset_clears_faults_and_the_request_log(sandbox: SandboxClient) -> None:
    sandbox.fault("gemini", 503, times=5)
    sandbox.reset()
    assert sandbox.call("GET", "/faults") == {"faults": []}
    assert sandbox.requests() == []


def test_request_log_filter_rejects_an_unknown_service(sandbox: SandboxClient) -> None:
    response = sandbox.http.get(f"{sandbox.base_url}/_sandbox/requests", params={"service": "nope"}, timeout=5)
    assert response.status_code == 400


def test_a_token_request_with_a_garbled_basic_header_is_invalid_client(sandbox: SandboxClient) -> None:
    response = sandbox.http.post(
        f"{sandbox.base_url}/google/token",
        data={"grant_type": "refresh_token", "refresh_token": "x"},
        headers={"Authorization": "Basic ünïcode"},
        timeout=5,
    )
    assert response.status_code == 401
    assert response.json()["error"] == "invalid_client"


def test_removing_one_fault_keeps_the_others_in_force_with_their_hits(sandbox: SandboxClient) -> None:
    gone = sandbox.fault("gemini", 503, times=5)
    kept = sandbox.fault("gmail", 500, route="messages/m1")
    sandbox.remove_fault(gone["id"])
    assert [(f["id"], f["service"]) for f in sandbox.call("GET", "/faults")["faults"]] == [(kept["id"], "gmail")]
    missing = sandbox.http.delete(f"{sandbox.base_url}/_sandbox/faults/{gone['id']}", timeout=5)
    assert missing.status_code == 404
    assert missing.json()["error"]["code"] == "not_found"


def test_every_control_route_is_in_the_readme_table() -> None:
    """The README's Control API table is how the app's side learns the control surface: a route missing from
    it is a route nobody can find."""
    import re
    from pathlib import Path

    from sandbox.app import create_app

    readme = (Path(__file__).resolve().parents[2] / "sandbox" / "README.md").read_text()
    documented = {
        (method, re.sub(r"[{<][^}>]*[}>]", "<>", path))
        for methods, path in re.findall(r"^\| `([A-Z/]+) (/_sandbox/[^`\[?]*)", readme, re.MULTILINE)
        for method in methods.split("/")
    }
    routes = {
        (method, re.sub(r"<[^>]*>", "<>", rule.rule))
        for rule in create_app().url_map.iter_rules()
        if rule.rule.startswith("/_sandbox/")
        for method in (rule.methods or set()) - {"HEAD", "OPTIONS"}
    }
    assert sorted(routes - documented) == []
