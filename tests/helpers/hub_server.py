"""A local stand-in for the Hugging Face hub: serves one dataset repo from a folder over HTTP.

It speaks the part of the hub's protocol that ``huggingface_hub`` (``hf_hub_download``,
``snapshot_download``, ``list_repo_files``) uses for a public dataset repo, so code under test talks
to it exactly as to the hub when ``HF_ENDPOINT`` points here:

* ``HEAD|GET /datasets/<repo>/resolve/<revision>/<path>``: the file, with ``X-Repo-Commit``,
  ``ETag``/``X-Linked-Etag`` (sha256 of the content, as for LFS files) and ``Content-Length``;
* ``GET /api/datasets/<repo>/revision/<revision>``: repo info (``sha`` and ``siblings``);
* ``GET /api/datasets/<repo>/tree/<revision>[/<path>]?recursive=...``: the file listing.

Every request is recorded in ``server.requests`` as ``(method, path)``; `downloaded` lists the repo
files whose content was sent (GET on ``resolve``). Anything else answers 404.

    with HubServer(folder, repo_id="snap-stanford/stark") as hub:
        env = {"HF_ENDPOINT": hub.url, "HF_HUB_OFFLINE": "0"}

``python -m tests.helpers.hub_server <folder>`` serves a folder until interrupted.
"""

from __future__ import annotations

import hashlib
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlparse

COMMIT = "0123456789abcdef0123456789abcdef01234567"


class HubServer:
    """Serve the files under ``folder`` as the dataset repo ``repo_id`` on 127.0.0.1 (a free port)."""

    def __init__(self, folder: Path | str, repo_id: str = "snap-stanford/stark", port: int = 0):
        self.folder = Path(folder)
        self.repo_id = repo_id
        self.requests: list[tuple[str, str]] = []
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", port), self._handler())
        self._httpd.daemon_threads = True
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------ lifecycle
    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def start(self) -> "HubServer":
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self) -> "HubServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # ------------------------------------------------------------------ what was asked for
    def downloaded(self) -> list[str]:
        """Repo paths whose content was sent, in request order."""
        prefix = f"/datasets/{self.repo_id}/resolve/"
        with self._lock:
            return [p[len(prefix):].split("/", 1)[1] for m, p in self.requests
                    if m == "GET" and p.startswith(prefix)]

    def files(self) -> list[str]:
        return sorted(str(p.relative_to(self.folder)) for p in self.folder.rglob("*") if p.is_file())

    # ------------------------------------------------------------------ protocol
    def _handler(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # quiet
                pass

            def _record(self) -> str:
                path = unquote(urlparse(self.path).path)
                with server._lock:
                    server.requests.append((self.command, path))
                return path

            def _send(self, status: int, body: bytes = b"", headers: dict | None = None, head: bool = False):
                self.send_response(status)
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if not head:
                    self.wfile.write(body)

            def _json(self, obj) -> None:
                self._send(200, json.dumps(obj).encode(), {"Content-Type": "application/json"})

            def _not_found(self, head: bool = False) -> None:
                self._send(404, b'{"error": "Entry not found"}',
                           {"Content-Type": "application/json", "X-Error-Code": "EntryNotFound"}, head)

            def do_HEAD(self):
                self._resolve(self._record(), head=True)

            def do_GET(self):
                path = self._record()
                api = f"/api/datasets/{server.repo_id}/"
                if path.startswith(api + "revision/"):
                    return self._json({"id": server.repo_id, "sha": COMMIT, "private": False,
                                       "siblings": [{"rfilename": f} for f in server.files()]})
                if path.startswith(api + "tree/"):
                    rest = path[len(api + "tree/"):]
                    sub = rest.split("/", 1)[1] if "/" in rest else ""
                    query = parse_qs(urlparse(self.path).query)
                    recursive = query.get("recursive", ["False"])[0].lower() == "true"
                    return self._json(self._tree(sub, recursive))
                self._resolve(path, head=False)

            def _tree(self, sub: str, recursive: bool) -> list[dict]:
                base = server.folder / sub if sub else server.folder
                if not base.is_dir():
                    return []
                entries = []
                for p in sorted(base.rglob("*") if recursive else base.iterdir()):
                    rel = str(p.relative_to(server.folder))
                    if p.is_dir():
                        entries.append({"type": "directory", "path": rel, "oid": COMMIT[:40]})
                    else:
                        data = p.read_bytes()
                        entries.append({"type": "file", "path": rel, "size": len(data),
                                        "oid": hashlib.sha1(data).hexdigest()})
                return entries

            def _resolve(self, path: str, head: bool) -> None:
                prefix = f"/datasets/{server.repo_id}/resolve/"
                if not path.startswith(prefix) or "/" not in path[len(prefix):]:
                    return self._not_found(head)
                rel = path[len(prefix):].split("/", 1)[1]
                file = (server.folder / rel).resolve()
                if not file.is_file() or server.folder.resolve() not in file.parents:
                    return self._not_found(head)
                data = file.read_bytes()
                etag = f'"{hashlib.sha256(data).hexdigest()}"'
                headers = {"X-Repo-Commit": COMMIT, "ETag": etag, "X-Linked-Etag": etag,
                           "Content-Type": "application/octet-stream", "Accept-Ranges": "bytes"}
                self._send(200, data, headers, head)

        return Handler


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        raise SystemExit("usage: python -m tests.helpers.hub_server <folder in the hub repo's layout>")
    with HubServer(args[0]) as hub:
        print(f"serving {args[0]} as {hub.repo_id} at {hub.url} (HF_ENDPOINT={hub.url}); Ctrl-C stops")
        threading.Event().wait()


if __name__ == "__main__":
    main()
