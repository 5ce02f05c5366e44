#!/usr/bin/env python3
"""A stub barrier server that releases every check-in at once: the CPU cost of one component
process (`coalloc-barrier` or `coalloc barrier`), measured without a coalloc server.

    python3 bench/barrier_stub.py 18999 &
    export COALLOC_URL=http://127.0.0.1:18999 COALLOC_BARRIER_URL=http://127.0.0.1:18999/b \\
        COALLOC_SECRET=x COALLOC_JOB_ID=1 COALLOC_LAUNCH=1 COALLOC_COMPONENT=0 \\
        COALLOC_COMPONENTS=1 COALLOC_SIZES=1 COALLOC_RANK_OFFSET=0 COALLOC_TOTAL=1 \\
        COALLOC_SITE=a COALLOC_PROCESSES=1
    perf stat -r 100 -e task-clock,page-faults,instructions:u,instructions:k,cycles \\
        target/release/coalloc-barrier
    kill %1
"""
import http.server, socketserver, sys


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        body = b'{"state":"released"}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True


Server(("127.0.0.1", int(sys.argv[1]) if len(sys.argv) > 1 else 18999), Handler).serve_forever()
