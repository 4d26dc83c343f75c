//! The differential suite: the same workloads under each path that counts syscalls, every count
//! held to `strace -f -c`'s for the same program. A count differs only where the output says
//! what it did not see.
//!
//! Workloads (`tests/helpers/workloads.c`, built here with cc): threads, a fork storm,
//! signal-interrupted calls, an exec chain 64 → 64 and 64 → 32 bits; every syscall of a
//! program (`--syscalls all`); failed path lookups (ENOENT); bytes and short calls of the
//! read/write family. Counting paths: `attach -- CMD`,
//! `attach --pid`, a `serve --pid` scrape, `top --batch -- CMD` (its per-interval tables
//! summed), and the JSON, CSV and Prometheus exports and the OTLP push of the same attach. (`run --server-cmd` and `run --target --pid` count a server's
//! accepts and closes exactly per request in `tests/run.rs`.)
//!
//! These load BPF programs (root) and run one at a time.

use std::{
    collections::BTreeMap,
    io::{Read as _, Write as _},
    net::TcpStream,
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::Duration,
};

mod common;

use common::{profiler, read_json, serial};

/// Calls per syscall.
type Counts = BTreeMap<String, u64>;

/// The syscalls compared.
const SYSCALLS: &str = "close,read,execve";

fn scratch(name: &str) -> PathBuf {
    common::scratch("differential", name)
}

/// The workloads binary (64-bit) and the 32-bit close helper, built once per test.
fn build() -> (PathBuf, PathBuf) {
    let dir = scratch("build");
    let workloads = common::build_workloads(&dir, &[]);
    (workloads, common::close32(&dir))
}

/// strace's calls per syscall for `command`, run on its own.
fn strace_counts(command: &[&str]) -> BTreeMap<String, u64> {
    strace_counts_of(command, Some(SYSCALLS))
}

/// strace's calls per syscall for `command`: of `only`, or of every syscall (both tables).
fn strace_counts_of(command: &[&str], only: Option<&str>) -> BTreeMap<String, u64> {
    let out = scratch("strace").join("summary");
    let status = Command::new("strace")
        .args(["-f", "-qq", "-c"])
        .args(only.map(|s| format!("--trace={s}")))
        .arg("-o")
        .arg(&out)
        .arg("--")
        .args(command)
        .status()
        .expect("running strace (apt-get install strace)");
    assert!(status.success(), "strace {command:?}: {status}");
    profiler::run::strace::parse_summary(&std::fs::read_to_string(&out).unwrap())
        .into_iter()
        .map(|r| (r.syscall, r.calls))
        .collect()
}

/// The calls per syscall of an export's first measurement.
fn json_counts(json: &serde_json::Value) -> BTreeMap<String, u64> {
    json["measurements"][0]["syscalls"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["calls"].as_u64().unwrap_or(0) > 0)
        .map(|s| {
            (
                s["name"].as_str().unwrap().to_owned(),
                s["calls"].as_u64().unwrap(),
            )
        })
        .collect()
}

/// `syscall_profiler_syscall_calls_total{syscall="X"} N` lines of a Prometheus text page.
fn prometheus_counts(text: &str) -> BTreeMap<String, u64> {
    text.lines()
        .filter_map(|l| {
            let rest = l.strip_prefix("syscall_profiler_syscall_calls_total{")?;
            let name = rest.split("syscall=\"").nth(1)?.split('"').next()?;
            let value: f64 = rest.rsplit(' ').next()?.parse().ok()?;
            (value > 0.0).then(|| (name.to_owned(), value as u64))
        })
        .collect()
}

/// Whether the profiler said it saw every call (the line attach prints, the JSON's drops).
fn every_call_seen(json: &serde_json::Value) -> bool {
    let dropped = &json["measurements"][0]["dropped"];
    dropped["lost"].as_u64() == Some(0)
        && dropped["by_reason"]
            .as_object()
            .is_some_and(|r| r.values().all(|n| n.as_u64() == Some(0)))
}

/// `attach ... -- COMMAND`: its JSON, CSV and Prometheus exports.
fn attach_command(name: &str, command: &[&str]) -> Vec<(String, BTreeMap<String, u64>)> {
    let dir = scratch(name);
    let (json, csv, prom) = (dir.join("a.json"), dir.join("a.csv"), dir.join("a.prom"));
    // The OTLP push too, but in the guests (a user-space path, and a Python receiver).
    let receiver = (!kernel_programs_only()).then(|| common::otlp::Receiver::start(&dir));
    let mut attach = profiler();
    attach
        .args(["attach", "--syscalls", SYSCALLS, "--export-json"])
        .arg(&json)
        .arg("--export-csv")
        .arg(&csv)
        .arg("--export-prom")
        .arg(&prom);
    if let Some(receiver) = &receiver {
        attach
            .arg("--otlp-endpoint")
            .arg(format!("http://127.0.0.1:{}", receiver.port));
    }
    let out = attach.arg("--").args(command).output().unwrap();
    assert!(
        out.status.success(),
        "attach {command:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let data = read_json(&json);
    assert!(
        every_call_seen(&data),
        "{name}: drops {}",
        data["measurements"][0]["dropped"]
    );
    let csv_text = std::fs::read_to_string(&csv).unwrap();
    let mut lines = csv_text.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = |n: &str| header.iter().position(|c| *c == n).unwrap();
    let (syscall, calls) = (col("syscall"), col("calls"));
    let csv_counts: BTreeMap<String, u64> = lines
        .map(|l| l.split(',').collect::<Vec<_>>())
        .filter_map(|f| Some((f[syscall].to_owned(), f[calls].parse::<u64>().ok()?)))
        .filter(|(_, n)| *n > 0)
        .collect();
    let mut paths = vec![
        ("attach -- CMD (JSON)".to_owned(), json_counts(&data)),
        ("attach -- CMD (CSV)".to_owned(), csv_counts),
        (
            "attach -- CMD (Prometheus)".to_owned(),
            prometheus_counts(&std::fs::read_to_string(&prom).unwrap()),
        ),
    ];
    if let Some(receiver) = receiver {
        paths.push((
            "attach -- CMD (OTLP push)".to_owned(),
            otlp_counts(&receiver),
        ));
    }
    paths
}

/// `top --batch --interval 100ms -- COMMAND`: the calls of every interval's table, summed per
/// syscall (the rows' exact `calls` column; the `all` row left out).
fn top_batch(command: &[&str]) -> Counts {
    let out = profiler()
        .args([
            "top",
            "--batch",
            "--interval",
            "100ms",
            "--syscalls",
            SYSCALLS,
            "--",
        ])
        .args(command)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "top --batch {command:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let mut counts = Counts::new();
    let mut tables = 0;
    for line in text.lines() {
        if line.starts_with("--- top: interval ") {
            tables += 1;
            continue;
        }
        let cells: Vec<&str> = line.split_whitespace().collect();
        let (Some(name), Some(Ok(calls))) = (cells.first(), cells.get(1).map(|c| c.parse::<u64>()))
        else {
            continue;
        };
        if *name != "all" && *name != "name" {
            *counts.entry((*name).to_owned()).or_default() += calls;
        }
    }
    assert!(tables >= 1, "no table: {text}");
    counts.retain(|_, n| *n > 0);
    counts
}

/// The calls per syscall of the last OTLP push (`syscall.calls`, cumulative).
fn otlp_counts(receiver: &common::otlp::Receiver) -> Counts {
    let pushes = receiver.requests();
    let last = pushes.last().expect("no OTLP push arrived");
    last["points"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["metric"] == "syscall.calls")
        .filter_map(|p| {
            let n = p["value"].as_u64().filter(|n| *n > 0)?;
            Some((p["attributes"]["syscall"].as_str()?.to_owned(), n))
        })
        .collect()
}

/// The kernel matrix's guests (PROFILER_DIFFERENTIAL=command) hold the kernel programs to
/// strace through `attach -- CMD` and its file exports alone: --pid, the serve scrape and the
/// OTLP push read the same programs' counters through user-space paths, which the host suite
/// compares (under TCG they took most of the suite's time).
fn kernel_programs_only() -> bool {
    std::env::var("PROFILER_DIFFERENTIAL").as_deref() == Ok("command")
}

/// The workload started behind a gate file, traced by `attach --pid`, then let go.
fn attach_pid(name: &str, workloads: &Path, args: &[&str]) -> BTreeMap<String, u64> {
    let dir = scratch(name);
    let (gate, json) = (dir.join("gate"), dir.join("p.json"));
    let mut workload = Command::new(workloads)
        .arg("gate")
        .arg(&gate)
        .args(args)
        .spawn()
        .unwrap();
    let attach = profiler()
        .args(["attach", "--syscalls", SYSCALLS, "--pid"])
        .arg(workload.id().to_string())
        .arg("--export-json")
        .arg(&json)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let output = common::open_gate_once_tracing(attach, &gate, Duration::from_secs(30), || {
        workload.wait().unwrap();
    });
    assert!(
        output.status.success(),
        "attach --pid: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let data = read_json(&json);
    assert!(
        every_call_seen(&data),
        "{name}: drops {}",
        data["measurements"][0]["dropped"]
    );
    json_counts(&data)
}

/// `serve --pid` tracing the gated workload; one scrape once it has exited.
fn serve_scrape(name: &str, workloads: &Path, args: &[&str]) -> BTreeMap<String, u64> {
    let dir = scratch(name);
    let gate = dir.join("gate");
    let mut workload = Command::new(workloads)
        .arg("gate")
        .arg(&gate)
        .args(args)
        .spawn()
        .unwrap();
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let mut serve = profiler()
        .args(["serve", "--syscalls", SYSCALLS, "--pid"])
        .arg(workload.id().to_string())
        .arg("--listen")
        .arg(format!("127.0.0.1:{port}"))
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = serve.stderr.take().unwrap();
    let mut seen = Vec::new();
    let mut byte = [0u8; 1];
    while !String::from_utf8_lossy(&seen).contains("Serving metrics") {
        assert!(
            stderr.read(&mut byte).unwrap_or(0) > 0,
            "serve ended: {}",
            String::from_utf8_lossy(&seen)
        );
        seen.push(byte[0]);
    }
    std::fs::write(&gate, "").unwrap();
    workload.wait().unwrap();
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .write_all(b"GET /metrics HTTP/1.0\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut page = String::new();
    stream.read_to_string(&mut page).unwrap();
    // SAFETY: signalling the serve this test started.
    unsafe { libc::kill(serve.id() as i32, libc::SIGTERM) };
    assert!(serve.wait().unwrap().success());
    assert!(
        page.starts_with("HTTP/1.0 200") || page.starts_with("HTTP/1.1 200"),
        "{page}"
    );
    prometheus_counts(&page)
}

/// strace's counts `expected` of a workloads program less those of its start alone (`bin
/// none`): what a trace that begins after the start sees.
fn after_start(expected: &Counts, bin: &str) -> Counts {
    let startup = strace_counts(&[bin, "none"]);
    expected
        .iter()
        .map(|(k, v)| (k.clone(), v - startup.get(k).copied().unwrap_or(0).min(*v)))
        .filter(|(_, v)| *v > 0)
        .collect()
}

/// Every counting path against strace for one workload: equal, or the test names the path and
/// the syscall that differ. The paths that attach to a running process (`--pid`) begin after
/// the program's start (its execve, the loader's reads and closes): strace's count of a program
/// that does nothing else is taken off for them. `unseen` names syscalls left out of the
/// comparison, each for a reason its caller states.
fn compare(name: &str, workloads: &Path, args: &[&str], unseen: &[&str]) {
    let bin = workloads.to_str().unwrap();
    let mut command = vec![bin];
    command.extend(args);
    let keep = |mut counts: BTreeMap<String, u64>| {
        counts.retain(|name, n| *n > 0 && !unseen.contains(&name.as_str()));
        counts
    };
    let expected = keep(strace_counts(&command));
    let expected_after_start = keep(after_start(&expected, bin));
    let mut observed: Vec<(String, Counts, &Counts)> = attach_command(name, &command)
        .into_iter()
        .map(|(path, counts)| (path, keep(counts), &expected))
        .collect();
    if !kernel_programs_only() {
        observed.push((
            "attach --pid".to_owned(),
            keep(attach_pid(name, workloads, args)),
            &expected_after_start,
        ));
        observed.push((
            "serve --pid scrape".to_owned(),
            keep(serve_scrape(name, workloads, args)),
            &expected_after_start,
        ));
        observed.push((
            "top --batch -- CMD".to_owned(),
            keep(top_batch(&command)),
            &expected,
        ));
    }
    let wrong: Vec<String> = observed
        .iter()
        .filter(|(_, counts, expected)| counts != *expected)
        .map(|(path, counts, expected)| format!("{path}: {counts:?}, strace {expected:?}"))
        .collect();
    assert!(
        wrong.is_empty(),
        "{name}: differ from strace -f -c:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn threads_count_as_strace_counts() {
    let _serial = serial();
    let (workloads, _) = build();
    compare("threads", &workloads, &["threads"], &[]);
}

#[test]
fn a_fork_storm_counts_as_strace_counts() {
    let _serial = serial();
    let (workloads, _) = build();
    compare("forks", &workloads, &["forks"], &[]);
}

#[test]
fn signal_interrupted_calls_count_as_strace_counts() {
    let _serial = serial();
    let (workloads, _) = build();
    compare("signals", &workloads, &["signals"], &[]);
}

#[test]
fn an_exec_chain_counts_as_strace_counts() {
    let _serial = serial();
    let (workloads, _) = build();
    compare("exec64", &workloads, &["exec-threads"], &[]);
}

/// 64-bit, then an execve into a 32-bit program: the 32-bit program's own calls (strace counts
/// them in a second table, which `run --strace` used to leave out), and the execve that lands
/// in it, whose exit is a 32-bit one (the syscall tracepoints skip it; `compat_exit` times it).
#[test]
fn an_exec_into_a_32_bit_program_counts_as_strace_counts() {
    let _serial = serial();
    let (workloads, close32) = build();
    compare(
        "exec32",
        &workloads,
        &["exec", close32.to_str().unwrap()],
        &[],
    );
}

/// `--syscalls all`: every syscall of a program that runs 64-bit code, then 32-bit code after
/// an execve, counted on the raw tracepoints, against strace's count of every syscall. The
/// calls that never return (exit, exit_group) end no call and are left out; the share of time
/// the table leaves out is printed and exported.
#[test]
fn every_syscall_counts_as_strace_counts() {
    let _serial = serial();
    let (workloads, close32) = build();
    let command = [
        workloads.to_str().unwrap(),
        "exec",
        close32.to_str().unwrap(),
    ];
    let never_return = ["exit", "exit_group"];
    let mut expected = strace_counts_of(&command, None);
    expected.retain(|name, n| *n > 0 && !never_return.contains(&name.as_str()));
    // strace names a 32-bit socketcall(2) by the call it multiplexes: the workload's one
    // accept is the 32-bit helper's socketcall(SYS_ACCEPT), which the kernel numbers as
    // socketcall.
    if let Some(n) = expected.remove("accept") {
        *expected.entry("socketcall".to_owned()).or_default() += n;
    }
    let json = scratch("every").join("every.json");
    let out = profiler()
        .args(["attach", "--syscalls", "all", "--export-json"])
        .arg(&json)
        .arg("--")
        .args(command)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let data = read_json(&json);
    let m = &data["measurements"][0];
    let mut counted: BTreeMap<String, u64> = BTreeMap::new();
    for e in m["every_syscall"]
        .as_array()
        .expect("every_syscall in the JSON")
    {
        *counted
            .entry(e["name"].as_str().unwrap().to_owned())
            .or_default() += e["calls"].as_u64().unwrap();
    }
    counted.retain(|name, _| !never_return.contains(&name.as_str()));
    assert_eq!(counted, expected, "--syscalls all against strace -f -c");
    let share = m["left_out_share"].as_f64().expect("left_out_share");
    assert!(share > 0.0 && share < 1.0, "left out {share}");
    assert!(
        text.contains("left out: ") && text.contains("Every syscall of the traced processes"),
        "{text}"
    );
    // Without `all`: the share left out where the compat programs count it (the tracepoint
    // front end), "not measured" with fentry; the same share either way it is measured.
    // The Prometheus export carries the same share, and no gauge where it was not measured.
    let prom = scratch("every").join("every.prom");
    let default = profiler()
        .args(["attach", "--syscalls", "close,read,execve", "--export-json"])
        .arg(&json)
        .arg("--export-prom")
        .arg(&prom)
        .arg("--")
        .args(command)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&default.stdout);
    let data = read_json(&json);
    let m = data["measurements"][0].clone();
    // On the tracepoints the compat pair counts every call: measured, whatever the front end
    // was first planned to be (a kernel that refuses fentry only at attach, its lockdown
    // unreadable without securityfs, is loaded again for the tracepoints).
    let front = data["metadata"]["settings"]["attach"]
        .as_str()
        .unwrap_or_default();
    if front.starts_with("tracepoint") {
        assert!(
            m["left_out_share"].as_f64().is_some(),
            "attach on {front} measured no share left out: {text}"
        );
    }
    let gauge = std::fs::read_to_string(&prom)
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("syscall_profiler_left_out_share{} "))
        .map(|v| v.parse::<f64>().unwrap());
    if let Some(share) = m["left_out_share"].as_f64() {
        assert!(
            share > 0.0 && share < 1.0 && text.contains("left out: "),
            "{text}"
        );
        assert!(
            gauge.is_some_and(|g| (g - share).abs() < 1e-9),
            "Prometheus {gauge:?}, JSON {share}"
        );
    } else {
        assert!(text.contains("left out: not measured"), "{text}");
        assert_eq!(gauge, None, "a share that was not measured");
    }
}

/// ENOENT is its own errno class: a program probing paths that do not exist (openat, access
/// and newfstatat failing) has every failed call counted as ENOENT, as many as strace's error
/// count, where it used to be "other".
#[test]
fn failed_path_lookups_count_as_enoent() {
    let _serial = serial();
    let missing = "/nonexistent-syscall-profiler-test";
    let command = ["/bin/sh", "-c", &format!("ls {missing} {missing}2; exit 0")];
    let out = scratch("enoent").join("summary");
    let status = Command::new("strace")
        .args(["-f", "-qq", "-c", "--trace=openat,newfstatat,statx", "-o"])
        .arg(&out)
        .arg("--")
        .args(command)
        .stderr(Stdio::null())
        .status()
        .expect("running strace");
    assert!(status.success());
    let expected: BTreeMap<String, u64> =
        profiler::run::strace::parse_summary(&std::fs::read_to_string(&out).unwrap())
            .into_iter()
            .filter(|r| r.errors > 0)
            .map(|r| (r.syscall, r.errors))
            .collect();
    assert!(!expected.is_empty(), "strace saw no failed lookup");
    let json = scratch("enoent").join("e.json");
    let run = profiler()
        .args([
            "attach",
            "--syscalls",
            "openat,newfstatat,statx",
            "--export-json",
        ])
        .arg(&json)
        .arg("--")
        .args(command)
        .stderr(Stdio::null())
        .output()
        .unwrap();
    assert!(run.status.success());
    let data = read_json(&json);
    let counted: BTreeMap<String, u64> = data["measurements"][0]["syscalls"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| {
            let enoent = s["errors"]["by_errno"]["ENOENT"].as_u64()?;
            (enoent > 0).then(|| (s["name"].as_str().unwrap().to_owned(), enoent))
        })
        .collect();
    assert_eq!(
        counted, expected,
        "ENOENT per syscall against strace's errors"
    );
}

/// Bytes per call and short calls: every read and write of a program that reads files whole and
/// in fixed blocks, against strace's record of each call's requested size and return value:
/// per syscall, the bytes transferred, the calls that returned 0 and the short ones (fewer
/// bytes than asked) are equal.
#[test]
fn bytes_and_short_reads_count_as_strace_counts() {
    let _serial = serial();
    let command = [
        "/bin/sh",
        "-c",
        "cat /etc/services > /dev/null; dd if=/dev/zero of=/dev/null bs=1000 count=50 status=none; head -c 5000 /etc/services > /dev/null",
    ];
    let dir = scratch("bytes");
    let log = dir.join("strace.log");
    let status = Command::new("strace")
        .args([
            "-f",
            "-qq",
            "-e",
            "trace=read,write",
            "-e",
            "signal=none",
            "-o",
        ])
        .arg(&log)
        .arg("--")
        .args(command)
        .status()
        .expect("running strace");
    assert!(status.success());
    // (calls, bytes, zero, short) per syscall; a line ends "..., N)   = R" (a resumed call
    // too, its ")" padded to a column).
    let mut expected: BTreeMap<String, (u64, u64, u64, u64)> = BTreeMap::new();
    for line in std::fs::read_to_string(&log).unwrap().lines() {
        if line.ends_with("<unfinished ...>") {
            continue;
        }
        let name = ["read", "write"].into_iter().find(|n| {
            line.contains(&format!(" {n}(")) || line.contains(&format!("<... {n} resumed>"))
        });
        let split = line
            .rsplit_once(" = ")
            .and_then(|(call, ret)| Some((call.trim_end().strip_suffix(')')?, ret)));
        let (Some(name), Some((args, ret))) = (name, split) else {
            continue;
        };
        let ret: i64 = ret.split_whitespace().next().unwrap().parse().unwrap();
        let asked: u64 = args.rsplit(", ").next().unwrap().parse().unwrap();
        let e = expected.entry(name.to_owned()).or_default();
        e.0 += 1;
        if let Ok(got) = u64::try_from(ret) {
            e.1 += got;
            e.2 += u64::from(got == 0);
            e.3 += u64::from(got < asked);
        }
    }
    let json = dir.join("b.json");
    let (csv, prom) = (dir.join("b.csv"), dir.join("b.prom"));
    let out = profiler()
        .args(["attach", "--syscalls", "read,write", "--export-json"])
        .arg(&json)
        .arg("--export-csv")
        .arg(&csv)
        .arg("--export-prom")
        .arg(&prom)
        .arg("--")
        .args(command)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let data = read_json(&json);
    assert!(
        every_call_seen(&data),
        "{}",
        data["measurements"][0]["dropped"]
    );
    let counted: BTreeMap<String, (u64, u64, u64, u64)> = data["measurements"][0]["syscalls"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["calls"].as_u64() > Some(0))
        .map(|s| {
            let b = &s["bytes_per_call"];
            let calls = b["calls"].as_u64().unwrap();
            let share = |f: &str| (b[f].as_f64().unwrap() * calls as f64).round() as u64;
            (
                s["name"].as_str().unwrap().to_owned(),
                (
                    s["calls"].as_u64().unwrap(),
                    b["total"].as_u64().unwrap(),
                    share("zero_share"),
                    share("short_share"),
                ),
            )
        })
        .collect();
    assert_eq!(
        counted, expected,
        "(calls, bytes, returned 0, short) per syscall against strace's"
    );
    // The short calls as a counter: CSV's column and Prometheus's series, exactly strace's.
    let csv = std::fs::read_to_string(&csv).unwrap();
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = |name: &str| header.iter().position(|c| *c == name).unwrap();
    let prom = std::fs::read_to_string(&prom).unwrap();
    let mut checked = 0;
    for line in lines {
        let cells: Vec<&str> = line.split(',').collect();
        let Some(&(_, _, _, short)) = expected.get(cells[col("syscall")]) else {
            continue;
        };
        assert_eq!(cells[col("short_calls")], short.to_string(), "{line}");
        let series = format!(
            "syscall_profiler_syscall_short_calls_total{{syscall=\"{}\"}} {short}\n",
            cells[col("syscall")]
        );
        assert!(prom.contains(&series), "{series} not in\n{prom}");
        checked += 1;
    }
    assert_eq!(
        checked,
        expected.len(),
        "a CSV row for each of {expected:?}"
    );
}

/// A podman container's calls, traced by `attach --container NAME` (its cgroup), against
/// strace's count of the same program after its start (a static build: the busybox image has
/// no libc); the row is named as the container, from podman's own state.
#[test]
fn a_containers_calls_count_as_strace_counts() {
    let _serial = serial();
    let dir = scratch("container");
    let workloads = common::build_workloads(&dir, &["-static"]);
    let bin = workloads.to_str().unwrap();
    let expected = after_start(&strace_counts(&[bin, "threads"]), bin);
    let name = format!("sp-differential-{}", std::process::id());
    let container = common::podman::Container::start(
        &name,
        &[],
        &dir,
        &["/w/workloads", "gate", "/w/gate", "threads"],
    );
    let json = dir.join("c.json");
    let attach = profiler()
        .args(["attach", "--syscalls", SYSCALLS, "--container", &name])
        .arg("--export-json")
        .arg(&json)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = attach.id();
    // attach --container traces until Ctrl-C, as --cgroup does.
    let output =
        common::open_gate_once_tracing(attach, &dir.join("gate"), Duration::from_secs(30), || {
            assert_eq!(
                container.wait(Duration::from_mins(1)),
                0,
                "the workload failed"
            );
            // SAFETY: signalling our own child.
            unsafe { libc::kill(pid as i32, libc::SIGINT) };
        });
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success() || output.status.code() == Some(130),
        "{stderr}"
    );
    let data = read_json(&json);
    assert!(
        every_call_seen(&data),
        "drops {}",
        data["measurements"][0]["dropped"]
    );
    assert_eq!(
        json_counts(&data),
        expected,
        "attach --container against strace -f -c"
    );
    let rows = data["measurements"][0]["processes"].as_array().unwrap();
    let row = rows
        .iter()
        .find(|r| r["container"]["id"] == container.id.as_str())
        .unwrap_or_else(|| panic!("no row of container {}: {rows:?}", container.id));
    assert_eq!(row["container"]["name"], name.as_str(), "{row}");
    assert_eq!(row["container"]["runtime"], "podman", "{row}");
    assert!(
        row["container"]["source"]
            .as_str()
            .is_some_and(|s| s.ends_with("config.json")),
        "named from the runtime's state, not the path: {row}"
    );
    let table = String::from_utf8_lossy(&output.stdout);
    assert!(
        table.contains(&format!("{name} (podman {})", &container.id[..12])),
        "{table}"
    );
}
