//! `--otlp-endpoint`: the pushes decoded by a receiver built on the official OpenTelemetry
//! protobuf classes (PyPI `opentelemetry-proto`; no OpenTelemetry Collector is packaged where
//! this suite runs), and checked against the profiler's own JSON export: counts, and every
//! exponential bucket against the kernel buckets it holds. Loads BPF programs: root.

use std::{
    process::{Command, Stdio},
    time::{Duration, Instant},
};

mod common;

use common::{otlp::Receiver, serial};

/// OTLP bucket index (scale 5) of a kernel bucket, by its midpoint: bucket i is
/// (2^(i/32), 2^((i+1)/32)] seconds.
fn otlp_index(low: u64, high: u64) -> i64 {
    let mid = f64::midpoint(low as f64, high as f64) / 1e9;
    (mid.log2() * 32.0).ceil() as i64 - 1
}

fn point<'a>(request: &'a serde_json::Value, metric: &str, syscall: &str) -> &'a serde_json::Value {
    request["points"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["metric"] == metric && p["attributes"]["syscall"] == syscall)
        .unwrap_or_else(|| panic!("no {metric} point for {syscall}: {request}"))
}

/// `attach --otlp-endpoint` with a command: its last push holds exactly what its JSON export
/// holds. Calls equal; the exponential histogram's count, sum, min and max are the kernel's;
/// each exponential bucket holds exactly the kernel buckets whose midpoints lie in its bounds.
#[test]
fn attach_pushes_exponential_histograms_that_match_its_json() {
    let _serial = serial();
    let dir = common::scratch("otlp", "attach");
    let receiver = Receiver::start(&dir);
    let json = dir.join("a.json");
    let out = Command::new(env!("CARGO_BIN_EXE_profiler"))
        .args([
            "attach",
            "--syscalls",
            "close,read,openat",
            "--otlp-endpoint",
        ])
        .arg(format!("http://127.0.0.1:{}", receiver.port))
        .arg("--export-json")
        .arg(&json)
        .args([
            "--",
            "/bin/sh",
            "-c",
            "for i in $(seq 300); do cat /dev/null; cat /nonexistent 2>/dev/null; done; true",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "attach failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains("OTLP"),
        "no push failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let requests = receiver.requests();
    let last = requests.last().expect("at least the final push");
    assert_eq!(last["path"], "/v1/metrics");
    assert_eq!(last["content_type"], "application/x-protobuf");
    assert_eq!(last["resource"]["service.name"], "syscall-profiler");
    let data: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let syscalls = data["measurements"][0]["syscalls"].as_array().unwrap();
    for s in syscalls {
        let name = s["name"].as_str().unwrap();
        let calls = s["calls"].as_u64().unwrap();
        assert_eq!(point(last, "syscall.calls", name)["value"], calls, "{name}");
        // Every counter the figures declare, dropped calls included.
        assert_eq!(
            point(last, "syscall.dropped", name)["value"],
            s["dropped"].as_u64().unwrap(),
            "{name}"
        );
        let h = point(last, "syscall.latency", name);
        assert_eq!(h["kind"], "exponential_histogram");
        assert_eq!(h["scale"], 5);
        assert_eq!(h["temporality"], 2, "cumulative");
        assert_eq!(h["count"], calls, "{name}");
        let sum = s["total_ns"].as_f64().unwrap() / 1e9;
        assert!((h["sum"].as_f64().unwrap() - sum).abs() < 1e-9, "{name}");
        if calls > 0 {
            assert!(
                (h["min"].as_f64().unwrap() - s["min_ns"].as_f64().unwrap() / 1e9).abs() < 1e-12
            );
            assert!(
                (h["max"].as_f64().unwrap() - s["max_ns"].as_f64().unwrap() / 1e9).abs() < 1e-12
            );
        }
        // Every kernel bucket in the exponential bucket holding its midpoint, nothing else.
        let mut expected = std::collections::BTreeMap::<i64, u64>::new();
        for b in s["latency_buckets"].as_array().unwrap() {
            let (low, high) = (b["low"].as_u64().unwrap(), b["high"].as_u64().unwrap());
            *expected.entry(otlp_index(low, high)).or_default() += b["count"].as_u64().unwrap();
        }
        let offset = h["offset"].as_i64().unwrap();
        let got: std::collections::BTreeMap<i64, u64> = h["bucket_counts"]
            .as_array()
            .unwrap()
            .iter()
            .enumerate()
            .map(|(k, c)| (offset + k as i64, c.as_u64().unwrap()))
            .filter(|(_, c)| *c > 0)
            .collect();
        assert_eq!(got, expected, "{name}: exponential buckets");
    }
    // The share left out, where attach measured it (every call counted: this host's
    // tracepoints), as JSON has it.
    let left = &data["measurements"][0]["left_out_share"];
    let front = data["metadata"]["settings"]["attach"]
        .as_str()
        .unwrap_or_default();
    assert!(
        left.is_f64() || !front.starts_with("tracepoint"),
        "measured on the tracepoints: {front}"
    );
    let gauge = last["points"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["metric"] == "syscall.left_out_share");
    match (left.as_f64(), gauge) {
        (Some(share), Some(p)) => {
            assert_eq!(p["kind"], "gauge");
            assert!(
                (p["value"].as_f64().unwrap() - share).abs() < 1e-12,
                "{p} against {share}"
            );
        }
        (None, None) => {}
        (left, gauge) => panic!("JSON's left_out_share {left:?}, OTLP's {gauge:?}"),
    }
    // openat of a missing file: ENOENT, its own errno class.
    let errors = last["points"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["metric"] == "syscall.errors" && p["attributes"]["syscall"] == "openat")
        .expect("openat's errors");
    assert_eq!(errors["attributes"]["errno"], "ENOENT");
    assert!(errors["value"].as_u64().unwrap() >= 300, "{errors}");
    assert_eq!(errors["monotonic"], true);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `serve --otlp-endpoint` pushes at its interval, cumulative: the pushes grow to the calls a
/// tracked process made, while the Prometheus endpoint goes on answering.
#[test]
fn serve_pushes_at_its_interval() {
    let _serial = serial();
    let dir = common::scratch("otlp", "serve");
    let receiver = Receiver::start(&dir);
    // The target makes its calls once serve is attached (its first push has arrived): a
    // loop started at once could end before the programs are in place.
    let go = dir.join("go");
    let mut target = Command::new("sh")
        .args([
            "-c",
            &format!(
                "while [ ! -e {} ]; do sleep 0.05; done; for i in $(seq 200); do cat /dev/null; done; sleep 30",
                go.display()
            ),
        ])
        .spawn()
        .unwrap();
    let mut serve = Command::new(env!("CARGO_BIN_EXE_profiler"))
        .args(["serve", "--pid", &target.id().to_string()])
        .args(["--syscalls", "close", "--listen", "127.0.0.1:0"])
        .args(["--otlp-interval", "300ms", "--otlp-endpoint"])
        .arg(format!("http://127.0.0.1:{}", receiver.port))
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut pushes = Vec::new();
    while Instant::now() < deadline {
        if !go.exists() && !receiver.requests().is_empty() {
            std::fs::write(&go, "").unwrap();
        }
        pushes = receiver.requests();
        if pushes.len() >= 3
            && pushes.last().is_some_and(|r| {
                r["points"].as_array().unwrap().iter().any(|p| {
                    p["metric"] == "syscall.calls" && p["value"].as_u64().is_some_and(|v| v >= 200)
                })
            })
        {
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    // SAFETY: signalling our own child.
    unsafe { libc::kill(serve.id() as i32, libc::SIGTERM) };
    let status = serve.wait().unwrap();
    let _ = target.kill();
    let _ = target.wait();
    assert!(status.success(), "serve exits 0 on SIGTERM");
    assert!(pushes.len() >= 3, "pushes at 300 ms: {}", pushes.len());
    let calls: Vec<u64> = pushes
        .iter()
        .filter_map(|r| {
            r["points"]
                .as_array()
                .unwrap()
                .iter()
                .find(|p| p["metric"] == "syscall.calls")
                .and_then(|p| p["value"].as_u64())
        })
        .collect();
    assert!(
        calls.windows(2).all(|w| w[0] <= w[1]),
        "cumulative: {calls:?}"
    );
    assert!(*calls.last().unwrap() >= 200, "{calls:?}");
    std::fs::remove_dir_all(&dir).unwrap();
}
