//! `profiler diff`: two saved runs, written by the real JSON exporter (synthetic `run` data with
//! a known change, and two real `attach` runs), compared by the real binary; bad inputs get one
//! line each.

use std::{path::Path, process::Command};

use profiler::export::{ExportData, Exporter, json::Json};

#[path = "fixtures/synthetic.rs"]
mod synthetic;

mod common;

use common::serial;
use synthetic::{Shape, run_data};

fn save(data: &ExportData, path: &Path) {
    std::fs::write(path, Json.render(data).unwrap()).unwrap();
}

fn diff(args: &[&Path]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_profiler"))
        .arg("diff")
        .args(args)
        .output()
        .unwrap()
}

/// Sets et's QPS run by run to `qps` (the fixture's runs spread too widely for a 25% change
/// to stand out).
fn set_et_qps(data: &mut ExportData, qps: &[f64]) {
    let runs = data
        .measurements
        .iter_mut()
        .filter(|m| m.variant.as_deref() == Some("et") && m.run.is_some());
    for (m, &value) in runs.zip(qps) {
        m.load.as_mut().unwrap().qps = value;
    }
}

/// B is A with et's QPS 25% higher in every run and another kernel: the diff opens with the
/// verdicts, names the kernel, calls et's QPS higher with an interval around +25% (8 runs a
/// side: enough to stand out of Holm's correction over all 38 figures), and lt's (the same
/// data) neither higher nor lower; its JSON carries the same numbers, every syscall of every
/// cell compared.
#[test]
fn diff_finds_a_known_change_and_names_what_differs() {
    let dir = common::scratch("diff", "known");
    let shape = Shape {
        runs: 8,
        ..Shape::small()
    };
    let qps = [1000.0, 1010.0, 990.0, 1005.0, 995.0, 1002.0, 998.0, 1008.0];
    let mut a = run_data(&shape);
    set_et_qps(&mut a, &qps);
    let mut b = run_data(&shape);
    set_et_qps(&mut b, &qps.map(|q| q * 1.25));
    b.metadata.kernel = "6.1.0-test".into();
    let (pa, pb, pj) = (dir.join("a.json"), dir.join("b.json"), dir.join("d.json"));
    save(&a, &pa);
    save(&b, &pb);
    let out = diff(&[&pa, &pb, Path::new("--export-json"), &pj]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "diff failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("What differs between A and B"), "{stdout}");
    assert!(
        stdout
            .lines()
            .any(|l| l.contains("kernel") && l.contains("6.18.0-test") && l.contains("6.1.0-test")),
        "{stdout}"
    );
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&pj).unwrap()).unwrap();
    let load = json["load"].as_array().unwrap();
    let qps = |variant: &str| {
        load.iter()
            .find(|c| c["variant"] == variant && c["figure"] == "qps")
            .unwrap_or_else(|| panic!("no QPS change for {variant}: {json}"))
    };
    let et = qps("et");
    assert_eq!(et["verdict"], "higher", "{et}");
    assert_eq!(et["runs"], serde_json::json!([8, 8]));
    let change = et["change_pct"].as_f64().unwrap();
    assert!((change - 25.0).abs() < 1e-6, "{change}");
    let interval = &et["estimate"]["interval"];
    assert!(interval["low"].as_f64().unwrap() > 20.0, "{interval}");
    assert!(interval["high"].as_f64().unwrap() < 30.0, "{interval}");
    assert!(interval["level"].as_f64().unwrap() >= 0.95, "{interval}");
    let lt = qps("lt")["verdict"].as_str().unwrap();
    assert!(lt != "higher" && lt != "lower", "{lt}");
    // The verdicts come first, before what differs.
    let verdicts = stdout
        .find("Verdicts: B against A")
        .expect("a verdict section");
    assert!(verdicts < stdout.find("What differs").unwrap(), "{stdout}");
    assert!(stdout.contains("1 higher, 0 lower"), "{stdout}");
    assert!(
        stdout.lines().any(|l| l.contains("et, c=10")
            && l.contains("QPS")
            && l.contains("+25.0%")
            && l.contains("higher")),
        "{stdout}"
    );
    // Every syscall of both cells, four figures each.
    let syscalls = json["syscalls"].as_array().unwrap();
    assert_eq!(syscalls.len(), 2 * 4 * 4, "{json}");
    assert!(json["unmatched"].as_array().unwrap().is_empty());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Two machines, one CPU set each (the reference's 4 cores against 20): the cells are compared
/// with each other, named "0-3→0-19", and said so.
#[test]
fn diff_joins_two_machines_with_one_cpu_set_each() {
    let dir = common::scratch("diff", "machines");
    let mut a = run_data(&Shape::small());
    let mut b = run_data(&Shape::small());
    for (data, cpus) in [(&mut a, "0-3"), (&mut b, "0-19")] {
        for m in &mut data.measurements {
            m.server_cpus = Some(cpus.into());
        }
    }
    let (pa, pb, pj) = (dir.join("a.json"), dir.join("b.json"), dir.join("d.json"));
    save(&a, &pa);
    save(&b, &pb);
    let out = diff(&[&pa, &pb, Path::new("--export-json"), &pj]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("different ones (0-3→0-19)"), "{stdout}");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&pj).unwrap()).unwrap();
    assert!(json["unmatched"].as_array().unwrap().is_empty(), "{json}");
    assert!(
        json["load"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["server_cpus"] == "0-3→0-19")
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// What cannot be compared is said, in one line each: a file that is not JSON, a JSON file that
/// is not an export, an export of another schema version, a missing file.
#[test]
fn diff_refuses_bad_inputs_in_one_line() {
    let dir = common::scratch("diff", "bad");
    let good = dir.join("good.json");
    save(&run_data(&Shape::small()), &good);
    let not_json = dir.join("not.json");
    std::fs::write(&not_json, "hello").unwrap();
    let not_export = dir.join("other.json");
    std::fs::write(&not_export, "{\"a\": 1}").unwrap();
    let old = dir.join("old.json");
    let mut value: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&good).unwrap()).unwrap();
    value["schema_version"] = 2.into();
    std::fs::write(&old, value.to_string()).unwrap();
    let attach = dir.join("attach.json");
    let mut value: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&good).unwrap()).unwrap();
    value["metadata"]["command"] = "attach".into();
    std::fs::write(&attach, value.to_string()).unwrap();
    let zero = std::path::PathBuf::from("/dev/zero");
    for (bad, expect) in [
        (&not_json, "is not JSON"),
        (&not_export, "no schema_version"),
        (&old, "schema_version 2"),
        (&dir.join("missing.json"), "reading"),
        // Read forever before: a device is refused at once.
        (&zero, "is not a regular file"),
        // A run against an attach compared nothing and exited 0.
        (&attach, "nothing in common to compare"),
    ] {
        let out = diff(&[&good, bad]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{bad:?} was accepted");
        assert_eq!(stderr.trim().lines().count(), 1, "one line: {stderr}");
        assert!(stderr.contains(expect), "{bad:?}: {stderr}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Two real `attach` runs of the same command: one measurement each, compared syscall by syscall
/// without an interval (there are no runs to judge the noise by), and said so.
#[test]
fn diff_compares_two_real_attach_runs() {
    let _serial = serial();
    let dir = common::scratch("diff", "attach");
    let mut files = Vec::new();
    for name in ["a.json", "b.json"] {
        let path = dir.join(name);
        let out = Command::new(env!("CARGO_BIN_EXE_profiler"))
            .args(["attach", "--syscalls", "close,read", "--export-json"])
            .arg(&path)
            .args([
                "--",
                "/bin/sh",
                "-c",
                "for i in 1 2 3 4 5; do cat /dev/null; done",
            ])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "attach failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        files.push(path);
    }
    let md = dir.join("d.md");
    let out = diff(&[&files[0], &files[1], Path::new("--export-md"), &md]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for syscall in ["close", "read"] {
        assert!(
            stdout.lines().any(|l| l.starts_with("attach")
                && l.contains(syscall)
                && l.contains("undecided: 1 and 1 measurement(s) have no spread to judge by")),
            "{syscall}: {stdout}"
        );
    }
    let markdown = std::fs::read_to_string(&md).unwrap();
    assert!(markdown.contains("### Syscalls: B against A"), "{markdown}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Two identical files: the diff says so first, and no figure is judged changed; the same run
/// saved twice was called "lower -40.4%" by the bootstrap it replaced.
#[test]
fn diff_of_identical_files_says_they_are_identical() {
    let dir = common::scratch("diff", "identical");
    let a = dir.join("a.json");
    save(&run_data(&Shape::small()), &a);
    let b = dir.join("b.json");
    std::fs::copy(&a, &b).unwrap();
    let out = diff(&[&a, &b]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let first = stdout
        .lines()
        .find(|l| !l.trim().is_empty() && !l.starts_with("=="))
        .unwrap();
    assert!(first.starts_with("Verdicts: B against A"), "{stdout}");
    assert!(
        stdout.contains("A and B hold identical measurements: nothing changed."),
        "{stdout}"
    );
    assert!(
        !stdout
            .lines()
            .any(|l| l.ends_with(" higher") || l.ends_with(" lower")),
        "{stdout}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
