//! The OTLP receiver the tests push to: PyPI's official `opentelemetry-proto` classes decode
//! each push (no OpenTelemetry Collector is packaged where this suite runs).

use std::{
    io::{BufRead as _, BufReader},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
};

/// An OTLP/HTTP receiver: decodes each `POST /v1/metrics` with the official classes and appends
/// what it found, one JSON line per request, to argv[1]; prints its port.
const RECEIVER: &str = r#"
import json, sys
from http.server import BaseHTTPRequestHandler, HTTPServer
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2

out = open(sys.argv[1], "a", buffering=1)

class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        request = metrics_service_pb2.ExportMetricsServiceRequest()
        request.ParseFromString(body)
        found = {"path": self.path, "content_type": self.headers["Content-Type"], "points": [], "resource": {}}
        for rm in request.resource_metrics:
            for kv in rm.resource.attributes:
                found["resource"][kv.key] = kv.value.string_value
            for sm in rm.scope_metrics:
                for m in sm.metrics:
                    kind = m.WhichOneof("data")
                    for p in getattr(m, kind).data_points:
                        attrs = {kv.key: kv.value.string_value for kv in p.attributes}
                        point = {"metric": m.name, "unit": m.unit, "kind": kind, "attributes": attrs}
                        if kind == "exponential_histogram":
                            point.update(count=p.count, sum=p.sum, scale=p.scale, zero_count=p.zero_count,
                                         offset=p.positive.offset, bucket_counts=list(p.positive.bucket_counts),
                                         min=p.min, max=p.max,
                                         temporality=m.exponential_histogram.aggregation_temporality)
                        else:
                            double = p.WhichOneof("value") == "as_double"
                            point.update(value=p.as_double if double else p.as_int)
                            if kind == "sum":
                                point.update(monotonic=m.sum.is_monotonic,
                                             temporality=m.sum.aggregation_temporality)
                        found["points"].append(point)
        out.write(json.dumps(found) + "\n")
        response = metrics_service_pb2.ExportMetricsServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(response)))
        self.end_headers()
        self.wfile.write(response)

    def log_message(self, *args):
        pass

server = HTTPServer(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
"#;

pub struct Receiver {
    child: Child,
    pub port: u16,
    log: PathBuf,
}

impl Receiver {
    pub fn start(dir: &Path) -> Self {
        let python = super::python::python();
        let script = dir.join("receiver.py");
        std::fs::write(&script, RECEIVER).unwrap();
        let log = dir.join("received.jsonl");
        let mut child = Command::new(python)
            .arg(&script)
            .arg(&log)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port = line.trim().parse().expect("the receiver's port");
        Self { child, port, log }
    }

    /// Every request received so far, decoded.
    pub fn requests(&self) -> Vec<serde_json::Value> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
