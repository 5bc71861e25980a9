"""A tiny HTTP server the kubelet's tests run as a pod (standard library only).

Listens on $PORT (the process kubelet's `python` image sets it to the local port
of the first declared container port) and answers:

    GET  /env/NAME       the variable's value (404 when unset)
    GET  /file/PATH      the file's content (404 when missing)
    GET  /write/PATH     writes the file; 200 "ok" or 500 with the error
    GET  /fetch/NAME     fetches the URL in variable NAME; its body
    GET  /whoami         who the API server says the pod's ServiceAccount token is
    GET  /healthz        200, or 500 after POST /sick (until the process restarts)
    GET  /ready          200 after POST /ready, else 503
"""

from __future__ import annotations

import http.server
import json
import os
import ssl
import sys
import urllib.request

SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
STATE = {"sick": False, "ready": False}


def whoami() -> str:
    with open(f"{SA_DIR}/token") as f:
        token = f.read().strip()
    context = ssl.create_default_context(cafile=f"{SA_DIR}/ca.crt")
    body = json.dumps(
        {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
    ).encode()
    request = urllib.request.Request(
        "https://kubernetes.default.svc/apis/authentication.k8s.io/v1/selfsubjectreviews",
        data=body,
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, context=context, timeout=10) as response:
        review = json.load(response)
    return str(review["status"]["userInfo"]["username"])


class Handler(http.server.BaseHTTPRequestHandler):
    def _send(self, code: int, text: str) -> None:
        body = text.encode()
        self.send_response(code)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:
        key = self.path.strip("/")
        if key in STATE:
            STATE[key] = True
            self._send(200, "ok")
        else:
            self._send(404, "no such switch")

    def do_GET(self) -> None:
        kind, _, rest = self.path.lstrip("/").partition("/")
        try:
            if kind == "env":
                value = os.environ.get(rest)
                self._send(200, value) if value is not None else self._send(404, "unset")
            elif kind == "file":
                with open("/" + rest) as f:
                    self._send(200, f.read())
            elif kind == "write":
                with open("/" + rest, "w") as f:
                    f.write("written")
                self._send(200, "ok")
            elif kind == "fetch":
                with urllib.request.urlopen(os.environ[rest], timeout=10) as response:
                    self._send(200, response.read().decode())
            elif kind == "whoami":
                self._send(200, whoami())
            elif kind == "healthz":
                self._send(500 if STATE["sick"] else 200, "sick" if STATE["sick"] else "ok")
            elif kind == "ready":
                self._send(200 if STATE["ready"] else 503, str(STATE["ready"]))
            else:
                self._send(404, "unknown")
        except FileNotFoundError as exc:
            self._send(404, str(exc))
        except Exception as exc:
            self._send(500, f"{type(exc).__name__}: {exc}")

    def log_message(self, format: str, *args: object) -> None:
        sys.stderr.write(format % args + "\n")


if __name__ == "__main__":
    port = int(os.environ["PORT"])
    http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()
