//! Containers, real ones (podman with runc, see common/podman.rs): their cgroup rows named as
//! their runtime names them, Kubernetes' names from the annotations a CRI runtime writes, and
//! `--container` choosing one. (The exact count of a container's calls against strace is the
//! differential suite's container case.)
//!
//! These load BPF programs (root) and run one at a time.

use std::{process::Stdio, time::Duration};

mod common;

use common::{podman::Container, profiler, read_json, serial};

/// The annotations containerd's and CRI-O's CRI plugins write into a pod's containers: podman
/// writes them into the OCI bundle's config.json as they would.
const POD: [&str; 6] = [
    "--annotation",
    "io.kubernetes.pod.name=web-0",
    "--annotation",
    "io.kubernetes.pod.namespace=shop",
    "--annotation",
    "io.kubernetes.container.name=app",
];

/// `attach --all --by-cgroup` while an annotated container makes 1000 close(-1) calls: its
/// cgroup's row is named shop/web-0/app in the table, the JSON, the Prometheus labels, the CSV
/// and the OTLP attributes, and counts those calls.
#[test]
fn an_annotated_container_is_named_as_its_pod() {
    let _serial = serial();
    let dir = common::scratch("containers", "pod");
    common::build_workloads(&dir, &["-static"]);
    let name = format!("sp-pod-{}", std::process::id());
    // It outlives its workload by a second, as a server does its requests: attach names a
    // cgroup while it exists (every 250 ms), and podman removes it when the container stops.
    let container = Container::start(
        &name,
        &POD,
        &dir,
        &[
            "/bin/sh",
            "-c",
            "/w/workloads gate /w/gate threads && /bin/busybox sleep 1",
        ],
    );
    let (json, prom, csv) = (dir.join("a.json"), dir.join("a.prom"), dir.join("a.csv"));
    let receiver = common::otlp::Receiver::start(&dir);
    let attach = profiler()
        .args(["attach", "--all", "--by-cgroup", "--syscalls", "close"])
        .arg("--export-json")
        .arg(&json)
        .arg("--export-prom")
        .arg(&prom)
        .arg("--export-csv")
        .arg(&csv)
        .arg("--otlp-endpoint")
        .arg(format!("http://127.0.0.1:{}", receiver.port))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = attach.id();
    // attach --all traces until Ctrl-C.
    let out =
        common::open_gate_once_tracing(attach, &dir.join("gate"), Duration::from_mins(1), || {
            assert_eq!(
                container.wait(Duration::from_mins(1)),
                0,
                "the workload failed"
            );
            // SAFETY: signalling our own child.
            unsafe { libc::kill(pid as i32, libc::SIGINT) };
        });
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() || out.status.code() == Some(130),
        "{stderr}"
    );
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(table.contains("shop/web-0/app"), "{table}\n{stderr}");

    let data = read_json(&json);
    let rows = data["measurements"][0]["processes"].as_array().unwrap();
    let row = rows
        .iter()
        .find(|r| r["container"]["id"] == container.id.as_str())
        .unwrap_or_else(|| panic!("no row of container {}: {rows:?}", container.id));
    let k8s = &row["container"]["kubernetes"];
    assert_eq!(
        (&k8s["namespace"], &k8s["pod"], &k8s["container"]),
        (&"shop".into(), &"web-0".into(), &"app".into()),
        "{row}"
    );
    assert_eq!(row["container"]["name"], name.as_str(), "{row}");
    // 4 threads of 250 close(-1) after the gate opened, and the shell's one failed close
    // around its child at most: the container's start came before the trace.
    let errors = row["syscalls"]["close"]["errors"].as_u64().unwrap_or(0);
    assert!(
        (1000..1010).contains(&errors),
        "close errors {errors}: {row}"
    );

    let text = std::fs::read_to_string(&prom).unwrap();
    let line = text
        .lines()
        .find(|l| {
            l.starts_with("syscall_profiler_cgroup_syscall_errors_total{")
                && l.contains(&format!("container_id=\"{}\"", container.id))
        })
        .unwrap_or_else(|| panic!("no cgroup series of the container:\n{text}"));
    for label in [
        "k8s_namespace=\"shop\"",
        "k8s_pod=\"web-0\"",
        "k8s_container=\"app\"",
        "container_runtime=\"podman\"",
        &format!("container_name=\"{name}\""),
    ] {
        assert!(line.contains(label), "{label} missing: {line}");
    }

    // CSV: the container's (cgroup, syscall) row, with its identity.
    let text = std::fs::read_to_string(&csv).unwrap();
    let header: Vec<&str> = text.lines().next().unwrap().split(',').collect();
    let col = |name: &str| header.iter().position(|c| *c == name).unwrap();
    let row: Vec<&str> = text
        .lines()
        .map(|l| l.split(',').collect::<Vec<_>>())
        .find(|f| f[col("container_id")] == container.id)
        .unwrap_or_else(|| panic!("no CSV row of the container:\n{text}"));
    assert_eq!(
        (
            row[col("k8s_namespace")],
            row[col("k8s_pod")],
            row[col("k8s_container")]
        ),
        ("shop", "web-0", "app")
    );
    assert!(
        row[col("errors")].parse::<u64>().unwrap() >= 1000,
        "{row:?}"
    );
    // OTLP: the cgroup's points carry OpenTelemetry's container and k8s attributes.
    let pushes = receiver.requests();
    let points = pushes.last().expect("no OTLP push arrived")["points"].clone();
    let point = points
        .as_array()
        .unwrap()
        .iter()
        .find(|p| {
            p["metric"] == "syscall.cgroup.calls"
                && p["attributes"]["container.id"] == container.id.as_str()
        })
        .unwrap_or_else(|| panic!("no OTLP point of the container: {points}"));
    assert_eq!(point["attributes"]["k8s.pod.name"], "web-0", "{point}");
    assert_eq!(point["attributes"]["k8s.namespace.name"], "shop", "{point}");
}

/// `--container` names a running container or fails in one line that lists those running.
#[test]
fn an_unknown_container_is_refused_in_one_line() {
    let _serial = serial();
    let dir = common::scratch("containers", "unknown");
    let name = format!("sp-known-{}", std::process::id());
    let _container = Container::start(&name, &[], &dir, &["/bin/busybox", "sleep", "30"]);
    let out = profiler()
        .args([
            "attach",
            "--container",
            "no-such-container",
            "--duration",
            "1s",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("--container no-such-container: no running container has that name")
            && stderr.contains(&name),
        "{stderr}"
    );
}

/// `--cgroup-top 1` with two busy containers (and whatever else runs): one cgroup keeps a row,
/// the others' calls are summed in "other (past --cgroup-top 1)", and together they are the
/// totals.
#[test]
fn container_rows_past_cgroup_top_are_summed_as_other() {
    let _serial = serial();
    let dir = common::scratch("containers", "top");
    let busy = ["/bin/sh", "-c", "while :; do : < /dev/null; done"];
    let pid = std::process::id();
    let _a = Container::start(&format!("sp-busy-a-{pid}"), &[], &dir, &busy);
    let _b = Container::start(&format!("sp-busy-b-{pid}"), &[], &dir, &busy);
    let json = dir.join("top.json");
    let out = profiler()
        .args(["attach", "--all", "--by-cgroup", "--cgroup-top", "1"])
        .args(["--syscalls", "close", "--duration", "1s", "--export-json"])
        .arg(&json)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let data = read_json(&json);
    let m = &data["measurements"][0];
    let rows = m["processes"].as_array().unwrap();
    let close = |r: &serde_json::Value| r["syscalls"]["close"]["calls"].as_u64().unwrap_or(0);
    assert_eq!(rows.len(), 2, "one row kept and one for the rest: {rows:?}");
    assert_eq!(rows[1]["cgroup"], "other (past --cgroup-top 1)", "{rows:?}");
    let total = m["syscalls"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "close")
        .and_then(|s| s["calls"].as_u64())
        .unwrap();
    assert!(close(&rows[0]) > 0 && close(&rows[1]) > 0, "{rows:?}");
    // The rows and the totals are read one after the other while the containers run on (100k
    // calls a second each), so they agree to within the calls of that moment.
    let rows_sum = close(&rows[0]) + close(&rows[1]);
    assert!(
        rows_sum.abs_diff(total) * 100 <= total,
        "rows {rows_sum} against the total {total}: {rows:?}"
    );
}
