"""An OTLP/HTTP receiver for the tests: it decodes what it is sent with the
OpenTelemetry project's own definitions (the `opentelemetry-proto` package,
as Salt 3008's venv ships it) and writes one JSON line per request to a file:
{"path": "/v1/logs" | "/v1/traces" | "/v1/metrics", "request": <MessageToDict of the request>}.
No collector is installable here; in production an OpenTelemetry Collector's
otlp receiver takes its place (docs/opentelemetry.md).

    python otlp_receiver.py PORT OUT_FILE

Listens on 127.0.0.1:PORT until killed. Every request is answered 200 with an
empty response of its signal.
"""

import gzip
import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from google.protobuf.json_format import MessageToDict
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

SIGNALS = {
    "/v1/logs": (
        logs_service_pb2.ExportLogsServiceRequest,
        logs_service_pb2.ExportLogsServiceResponse,
    ),
    "/v1/traces": (
        trace_service_pb2.ExportTraceServiceRequest,
        trace_service_pb2.ExportTraceServiceResponse,
    ),
    "/v1/metrics": (
        metrics_service_pb2.ExportMetricsServiceRequest,
        metrics_service_pb2.ExportMetricsServiceResponse,
    ),
}


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        signal = SIGNALS.get(self.path)
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        if self.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        if signal is None:
            self.send_response(404)
            self.end_headers()
            return
        request_type, response_type = signal
        try:
            request = request_type.FromString(body)
        except Exception as error:  # a body that is not the signal's request
            self.send_response(400)
            self.end_headers()
            self.wfile.write(str(error).encode())
            return
        with open(sys.argv[2], "a", encoding="utf-8") as out:
            out.write(json.dumps({"path": self.path, "request": MessageToDict(request)}) + "\n")
        reply = response_type().SerializeToString()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, *args):
        pass


ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
