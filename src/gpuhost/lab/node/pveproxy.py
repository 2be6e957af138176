"""The node's HTTPS API on port 8006 (what pveproxy serves), for the paths in :mod:`api`."""

from __future__ import annotations

import json
import os
import ssl
import sys
import traceback
from http.cookies import SimpleCookie
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qsl, urlsplit

from gpuhost.lab.node.errors import PveError
from gpuhost.lab.node.state import load

PORT = 8006
PREFIX = "/api2/json"


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "pve-api-daemon/3.0"

    def log_message(self, fmt: str, *args: object) -> None:  # access log to stderr (init's log file)
        sys.stderr.write("%s - %s\n" % (self.address_string(), fmt % args))

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def do_PUT(self) -> None:
        self._dispatch("PUT")

    def do_DELETE(self) -> None:
        self._dispatch("DELETE")

    def _params(self) -> dict[str, str]:
        url = urlsplit(self.path)
        params = dict(parse_qsl(url.query, keep_blank_values=True))
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        if body:
            ctype = self.headers.get("Content-Type", "")
            if "json" in ctype:
                data = json.loads(body)
                params.update({k: (json.dumps(v) if isinstance(v, (dict, list)) else str(v)) for k, v in data.items()})
            else:
                params.update(dict(parse_qsl(body.decode(), keep_blank_values=True)))
        return params

    def _authuser(self, method: str) -> str:
        from gpuhost.lab.node import auth

        header = self.headers.get("Authorization", "")
        if header.startswith("PVEAPIToken"):
            return auth.verify_token(header)
        cookie = SimpleCookie(self.headers.get("Cookie", ""))
        if "PVEAuthCookie" not in cookie:
            raise PveError("No ticket", http_status=401)
        userid, _ = auth.verify_ticket(cookie["PVEAuthCookie"].value)
        if method != "GET":
            auth.verify_csrf(userid, self.headers.get("CSRFPreventionToken"))
        return userid

    def _dispatch(self, method: str) -> None:
        from gpuhost.lab.node import api, auth  # imported on first use: keeps node boot fast

        try:
            params = self._params()
            path = urlsplit(self.path).path
            if not path.startswith(PREFIX):
                raise PveError(f"Method '{method} {path}' not implemented", http_status=501)
            path = path[len(PREFIX) :] or "/"
            if path.rstrip("/") == "/access/ticket" and method == "POST":
                userid = auth.check_password(params.get("username", ""), params.get("password", ""))
                ticket, csrf = auth.new_ticket(userid)
                data: object = {
                    "ticket": ticket,
                    "CSRFPreventionToken": csrf,
                    "username": userid,
                    "cap": {"vms": {}, "nodes": {}, "storage": {}, "access": {}, "dc": {}},
                }
            else:
                data = api.handle(method, path, params, self._authuser(method))
            self._reply(200, "OK", {"data": data})
        except PveError as exc:
            body: dict[str, object] = {"data": None, "message": exc.message.rstrip("\n")}
            if exc.errors:
                body["errors"] = exc.errors
            self._reply(exc.http_status, exc.message.splitlines()[0].strip() if exc.message else "error", body)
        except Exception as exc:  # a bug in the lab: report it as PVE reports a dying handler
            traceback.print_exc()
            self._reply(500, str(exc).splitlines()[0] if str(exc) else "internal error", {"data": None})

    def _reply(self, status: int, reason: str, body: object) -> None:
        payload = json.dumps(body).encode()
        self.send_response(status, reason.replace("\r", " ").replace("\n", " "))
        self.send_header("Content-Type", "application/json;charset=UTF-8")
        self.send_header("Content-Length", str(len(payload)))
        self.send_header("Cache-Control", "max-age=0")
        self.send_header("Pragma", "no-cache")
        self.end_headers()
        self.wfile.write(payload)


def main() -> int:
    st = load()
    local = f"/etc/pve/nodes/{st.name}"
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(f"{local}/pve-ssl.pem", f"{local}/pve-ssl.key")
    server = ThreadingHTTPServer((st.address, PORT), Handler)
    server.daemon_threads = True
    server.socket = context.wrap_socket(server.socket, server_side=True)
    os.environ["PATH"] = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
