//! Faults and hostile input, end to end through the `profiler` binary: a closed stdout, children
//! that outlive the command, pids that are not processes. Each test failed before its fix.
//!
//! These load BPF programs (root) and run one at a time.

use std::{
    io::{BufRead as _, BufReader},
    os::unix::process::CommandExt as _,
    path::PathBuf,
    process::{Command, Stdio},
    time::{Duration, Instant},
};

mod common;

use common::{profiler, read_json, serial, wait_for};

fn scratch(name: &str) -> PathBuf {
    common::scratch("faults", name)
}

fn calls_of(json: &serde_json::Value, syscall: &str) -> u64 {
    json["measurements"][0]["syscalls"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == syscall)
        .unwrap_or_else(|| panic!("no {syscall} in {json}"))["calls"]
        .as_u64()
        .unwrap()
}

/// `profiler attach --interval 100ms --export-json x -- CMD | head -1` used to panic with
/// "failed printing to stdout: Broken pipe", write no JSON and leave CMD running untraced.
#[test]
fn a_closed_stdout_stops_the_printing_but_not_the_tracing_or_the_exports() {
    let _serial = serial();
    let dir = scratch("closed-stdout");
    let json = dir.join("pipe.json");
    let mut attach = profiler()
        .args(["attach", "--syscalls", "close", "--interval", "100ms"])
        .arg("--export-json")
        .arg(&json)
        .args([
            "--",
            "/bin/sh",
            "-c",
            "for i in $(seq 30); do cat /dev/null; sleep 0.05; done; exit 3",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Read the first line, as `head -1` does, then close the pipe.
    let mut first = String::new();
    BufReader::new(attach.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    assert!(first.starts_with("--- last"), "first line: {first:?}");
    let status = wait_for(&mut attach, Duration::from_mins(1), "attach");
    let stderr = std::io::read_to_string(attach.stderr.take().unwrap()).unwrap();
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(status.code(), Some(3), "the command's own status: {stderr}");
    let json = read_json(&json);
    assert_eq!(
        json["metadata"]["settings"]["stopped"],
        "command exited with status 3"
    );
    assert!(
        calls_of(&json, "close") >= 30,
        "every cat closes at least one file, traced to the end: {json}"
    );
}

/// `profiler run` and `profiler bench` print once at the end; a reader that is gone by then
/// must not turn a finished measurement into a panic (exit 101).
#[test]
fn the_reports_of_run_and_bench_survive_a_reader_that_left() {
    let _serial = serial();
    for args in [
        &[
            "bench",
            "overhead",
            "--rounds",
            "1",
            "--iterations",
            "2000",
            "--no-bpftrace",
        ][..],
        &["c2c", "--round-trips", "2000", "--no-syscalls"][..],
    ] {
        let mut child = profiler()
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        drop(child.stdout.take());
        let status = wait_for(&mut child, Duration::from_mins(2), args[0]);
        let stderr = std::io::read_to_string(child.stderr.take().unwrap()).unwrap();
        assert!(
            status.success() && !stderr.contains("panicked"),
            "{args:?}: {status} {stderr}"
        );
    }
}

/// Runs `profiler attach ARGS` to the end and returns (status, stderr, JSON export).
fn attach_json(
    name: &str,
    args: &[&str],
    limit: Duration,
) -> (Option<i32>, String, serde_json::Value) {
    attach_json_then(name, args, limit, || {})
}

/// [`attach_json`], calling `tracing` once attach says it is tracing (its programs are attached).
fn attach_json_then(
    name: &str,
    args: &[&str],
    limit: Duration,
    tracing: impl FnOnce(),
) -> (Option<i32>, String, serde_json::Value) {
    let dir = scratch(name);
    let json = dir.join("a.json");
    let mut attach = profiler()
        .arg("attach")
        .arg("--export-json")
        .arg(&json)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let stderr = BufReader::new(attach.stderr.take().unwrap());
    let reader = std::thread::spawn(move || {
        let mut all = String::new();
        for line in stderr.lines().map_while(Result::ok) {
            if line.starts_with("Tracing ") {
                let _ = tx.send(());
            }
            all.push_str(&line);
            all.push('\n');
        }
        all
    });
    if rx.recv_timeout(limit).is_ok() {
        tracing();
    }
    // Within `limit` of the workload's end; past it, what attach said so far.
    let Some(status) = common::wait_or_kill(&mut attach, limit) else {
        let stderr = reader.join().unwrap();
        panic!("attach did not exit within {limit:?} of the workload's end; it said:\n{stderr}");
    };
    let stderr = reader.join().unwrap();
    assert!(!stderr.contains("panicked"), "{stderr}");
    let data = if json.exists() {
        read_json(&json)
    } else {
        serde_json::Value::Null
    };
    (status.code(), stderr, data)
}

/// `attach -- sh -c 'closer &'` reported the 5 closes of sh and stopped when sh exited; strace
/// -f counts the background child's too. Tracing now ends with the last tracked process.
#[test]
fn children_that_outlive_the_command_are_traced_to_their_end() {
    let _serial = serial();
    let (code, stderr, json) = attach_json(
        "outlive",
        &[
            "--syscalls",
            "close",
            "--",
            "/bin/sh",
            "-c",
            "(sleep 1; for i in $(seq 50); do cat /dev/null; done) & exit 4",
        ],
        Duration::from_mins(1),
    );
    assert_eq!(code, Some(4), "the command's own status: {stderr}");
    assert!(
        stderr.contains("tracing the processes it started until they exit"),
        "{stderr}"
    );
    assert!(
        calls_of(&json, "close") >= 50,
        "the background loop's cats were traced: {json}"
    );
    assert_eq!(
        json["metadata"]["settings"]["stopped"],
        "command exited with status 4"
    );
}

/// A process that was forked before attach (nginx's workers) is traced with its parent's pid,
/// and `--no-children` leaves it out.
#[test]
fn the_running_descendants_of_a_pid_are_traced_unless_no_children() {
    let _serial = serial();
    for no_children in [false, true] {
        // The subshell exists at once; its cats start once attach traces (the flag file).
        let flag = scratch("descendants-flag").join("go");
        let script = format!(
            "(while [ ! -e {} ]; do sleep 0.05; done; for i in $(seq 50); do cat /dev/null; done) & wait",
            flag.display()
        );
        // A process group of its own, so the test can end the subshell too.
        let mut parent = Command::new("/bin/sh")
            .args(["-c", &script])
            .process_group(0)
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(300));
        let pid = parent.id().to_string();
        let mut args = vec!["--syscalls", "close", "--pid", &pid];
        if no_children {
            args.push("--no-children");
        }
        // attach is held to its own exit once the shell's work is done: the 50 cats take
        // their time on a slow (emulated) machine.
        let (code, stderr, json) =
            attach_json_then("descendants", &args, Duration::from_mins(2), || {
                std::fs::write(&flag, "").unwrap();
                wait_for(&mut parent, Duration::from_mins(10), "the traced shell");
            });
        // SAFETY: signalling the process group we made.
        unsafe { libc::kill(-(parent.id() as i32), libc::SIGKILL) };
        let _ = parent.wait();
        assert_eq!(code, Some(0), "{stderr}");
        let closes = calls_of(&json, "close");
        if no_children {
            assert_eq!(closes, 0, "only the waiting sh was traced: {stderr}");
        } else {
            // The subshell, and maybe one of its short sleeps.
            assert!(
                stderr.contains("and 1 running descendant (2 processes)")
                    || stderr.contains("and 2 running descendants (3 processes)"),
                "the header says how many processes are tracked: {stderr}"
            );
            assert!(closes >= 50, "the subshell's cats were traced: {json}");
        }
    }
}

/// When a traced process exits and an unrelated process takes its pid, attach used to go on
/// until that one exited. Exits are now seen by the kernel program, so pid reuse does not count.
#[test]
fn a_reused_pid_does_not_keep_attach_running() {
    let _serial = serial();
    let mut victim = Command::new("sleep").arg("60").spawn().unwrap();
    let pid = victim.id();
    let dir = scratch("reuse");
    let json = dir.join("a.json");
    let mut attach = profiler()
        .args(["attach", "--syscalls", "close", "--pid", &pid.to_string()])
        .arg("--export-json")
        .arg(&json)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(attach.stderr.take().unwrap());
    let mut line = String::new();
    while !line.starts_with("Tracing ") {
        line.clear();
        assert!(
            stderr.read_line(&mut line).unwrap() > 0,
            "attach ended before tracing"
        );
    }
    victim.kill().unwrap();
    victim.wait().unwrap();
    // Take the pid with an unrelated process: ns_last_pid makes the next fork get pid.
    let mut impostor = None;
    for _ in 0..50 {
        std::fs::write("/proc/sys/kernel/ns_last_pid", (pid - 1).to_string()).unwrap();
        let mut candidate = Command::new("sleep").arg("60").spawn().unwrap();
        if candidate.id() == pid {
            impostor = Some(candidate);
            break;
        }
        let _ = candidate.kill();
        let _ = candidate.wait();
    }
    let mut impostor = impostor.expect("no fork got the reused pid in 50 tries");
    let status = wait_for(
        &mut attach,
        Duration::from_secs(10),
        "attach (the impostor still runs)",
    );
    let _ = impostor.kill();
    let _ = impostor.wait();
    let stderr = std::io::read_to_string(stderr).unwrap();
    assert!(status.success(), "{stderr}");
    let json = read_json(&json);
    assert_eq!(
        json["metadata"]["settings"]["stopped"],
        "every traced process exited"
    );
}

/// A python3 process whose two threads call close(-1) as fast as they can, plus its main thread.
const BUSY_THREADS: &str = "import os, threading
def spin():
    while True:
        try:
            os.close(-1)
        except OSError:
            pass
for _ in range(2):
    threading.Thread(target=spin, daemon=True).start()
threading.Event().wait()
";

/// Attaching to a busy 2-thread process reported 829 calls "in flight at attach": the exit
/// programs are attached before the entry programs, and every exit in between was counted. At
/// most one call per thread can be in flight; none for a command started under attach.
#[test]
fn in_flight_drops_are_at_most_one_per_thread_and_none_for_a_started_command() {
    let _serial = serial();
    let no_start = |json: &serde_json::Value| {
        json["measurements"][0]["dropped"]["by_reason"]["no_start"]
            .as_u64()
            .unwrap()
    };
    let mut busy = Command::new("python3")
        .args(["-c", BUSY_THREADS])
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let pid = busy.id().to_string();
    let (code, stderr, json) = attach_json(
        "drops-pid",
        &[
            "--syscalls",
            "close,read",
            "--duration",
            "2s",
            "--pid",
            &pid,
        ],
        Duration::from_mins(1),
    );
    let _ = busy.kill();
    let _ = busy.wait();
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        calls_of(&json, "close") > 1000,
        "the threads were busy: {json}"
    );
    assert!(
        no_start(&json) <= 3,
        "3 threads, at most 3 calls in flight: {}",
        json["measurements"][0]["dropped"]
    );

    let (_, stderr, json) = attach_json(
        "drops-cmd",
        &[
            "--syscalls",
            "close,read",
            "--duration",
            "3s",
            "--",
            "python3",
            "-c",
            BUSY_THREADS,
        ],
        Duration::from_mins(1),
    );
    // Under TCG most of the 3 s go to python's start-up, which closes files too.
    assert!(calls_of(&json, "close") > 100, "{stderr}");
    assert_eq!(no_start(&json), 0, "{}", json["measurements"][0]["dropped"]);
}

/// "Traced for 1.57s" for `--duration 1s`: the detach was counted in. The traced interval is
/// from the last attach to the final read of the counters.
#[test]
fn traced_for_is_the_traced_interval_without_load_or_detach() {
    let _serial = serial();
    let (code, stderr, json) = attach_json(
        "duration",
        &["--duration", "1s", "--all"],
        Duration::from_mins(1),
    );
    assert_eq!(code, Some(0), "{stderr}");
    let traced = json["metadata"]["duration_s"].as_f64().unwrap();
    assert!(
        (1.0..1.1).contains(&traced),
        "traced for {traced} s: {stderr}"
    );
}

/// `--pid 2` (kthreadd) ran on and reported nothing; a thread id did the same.
#[test]
fn a_kernel_thread_is_refused_and_a_thread_id_is_taken_for_its_process() {
    let _serial = serial();
    let (code, stderr, _) = attach_json("kthread", &["--pid", "2"], Duration::from_secs(30));
    assert_eq!(code, Some(1));
    assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
    assert!(stderr.contains("kernel thread 'kthreadd'"), "{stderr}");

    let mut busy = Command::new("python3")
        .args(["-c", BUSY_THREADS])
        .spawn()
        .unwrap();
    let pid = busy.id();
    let deadline = Instant::now() + Duration::from_secs(10);
    let tid = loop {
        let tids: Vec<u32> = std::fs::read_dir(format!("/proc/{pid}/task"))
            .unwrap()
            .filter_map(|e| e.unwrap().file_name().to_str()?.parse().ok())
            .filter(|&t| t != pid)
            .collect();
        if let Some(&tid) = tids.first() {
            break tid;
        }
        assert!(Instant::now() < deadline, "python started no thread");
        std::thread::sleep(Duration::from_millis(20));
    };
    let tid = tid.to_string();
    let (code, stderr, json) = attach_json(
        "tid",
        &["--syscalls", "close", "--duration", "1s", "--pid", &tid],
        Duration::from_mins(1),
    );
    let _ = busy.kill();
    let _ = busy.wait();
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stderr.contains(&format!("pid {tid} is a thread of process {pid} (python3)")),
        "{stderr}"
    );
    assert!(calls_of(&json, "close") > 1000, "{json}");
}

/// Whether `pid` is gone (or a zombie nobody has reaped yet).
fn gone(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |s| {
        s.rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'))
    })
}

/// Waits until a descendant of `parent` named `comm` runs; its pid.
fn wait_for_descendant(parent: &mut std::process::Child, comm: &str) -> u32 {
    let deadline = Instant::now() + Duration::from_mins(2);
    loop {
        assert!(
            parent.try_wait().unwrap().is_none(),
            "ended before starting {comm}"
        );
        assert!(Instant::now() < deadline, "{comm} never started");
        if let Some(pid) = profiler::process::descendants(parent.id())
            .into_iter()
            .find(|&p| profiler::process::proc_info(p).is_some_and(|i| i.comm == comm))
        {
            return pid;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `bench overhead` killed with SIGTERM left its bpftrace running, programs attached. Every
/// child the profiler starts now dies with it, on any signal, SIGKILL included.
#[test]
fn children_the_profiler_started_die_with_it_even_on_sigkill() {
    let _serial = serial();
    for signal in [libc::SIGTERM, libc::SIGKILL] {
        let mut bench = profiler()
            .args([
                "bench",
                "overhead",
                "--rounds",
                "3",
                "--iterations",
                "1000000",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let bpftrace = wait_for_descendant(&mut bench, "bpftrace");
        // SAFETY: signalling our own child.
        unsafe { libc::kill(bench.id() as i32, signal) };
        bench.wait().unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while !gone(bpftrace) {
            assert!(
                Instant::now() < deadline,
                "bpftrace {bpftrace} outlived the bench killed by signal {signal}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    let mut attach = profiler()
        .args(["attach", "--syscalls", "close", "--", "sleep", "600"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let sleep = wait_for_descendant(&mut attach, "sleep");
    attach.kill().unwrap();
    attach.wait().unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !gone(sleep) {
        assert!(
            Instant::now() < deadline,
            "the command outlived attach's SIGKILL"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// c2c on Ctrl-C exited 130 with no output. It now prints the mechanisms it had measured.
#[test]
fn c2c_interrupted_prints_what_it_measured() {
    let _serial = serial();
    let mut c2c = profiler()
        .args([
            "c2c",
            "--no-syscalls",
            "--time-limit",
            "1s",
            "--round-trips",
            "1000000000",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Once the handler is in place, give the first mechanism its 1 s.
    common::wait_until_catching(c2c.id(), libc::SIGINT, Duration::from_mins(1));
    std::thread::sleep(Duration::from_millis(1500));
    // SAFETY: signalling our own child.
    unsafe { libc::kill(c2c.id() as i32, libc::SIGINT) };
    let status = wait_for(&mut c2c, Duration::from_secs(10), "c2c after Ctrl-C");
    let stdout = std::io::read_to_string(c2c.stdout.take().unwrap()).unwrap();
    assert_eq!(status.code(), Some(130), "{stdout}");
    assert!(
        stdout.contains("interrupted: only the mechanisms above"),
        "{stdout}"
    );
    let first = stdout
        .lines()
        .find(|l| l.starts_with("spin-false-sharing"))
        .unwrap_or_else(|| panic!("the first mechanism is missing:\n{stdout}"));
    assert!(first.chars().any(|c| c.is_ascii_digit()), "{first}");
}

/// A directory removed while attach runs used to fail every export, the fine ones too: now the
/// export into the removed directory fails alone (exit 1, one line naming it) and the others
/// are written. An `--export-hdr` directory keeps no stale files of an earlier run.
#[test]
fn one_failing_export_does_not_cancel_the_others() {
    let _serial = serial();
    let dir = scratch("export-isolation");
    let doomed = dir.join("doomed");
    std::fs::create_dir_all(&doomed).unwrap();
    let hdr = dir.join("hdr");
    std::fs::create_dir_all(&hdr).unwrap();
    // A file an earlier export wrote (its manifest names it), and one it did not write.
    std::fs::write(hdr.join("old-variant-close.hgrm"), "stale").unwrap();
    std::fs::write(
        hdr.join(".syscall-profiler-hdr"),
        "old-variant-close.hgrm\n",
    )
    .unwrap();
    std::fs::write(hdr.join("someone-elses.hgrm"), "theirs").unwrap();
    let script = format!("sleep 1; rmdir {}; exit 0", doomed.display());
    let out = profiler()
        .args(["attach", "--syscalls", "close,read"])
        .arg("--export-json")
        .arg(dir.join("fine.json"))
        .arg("--export-csv")
        .arg(doomed.join("lost.csv"))
        .arg("--export-hdr")
        .arg(&hdr)
        .args(["--", "/bin/sh", "-c", &script])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("CSV export"), "{err}");
    assert!(!err.contains("JSON export"), "{err}");
    let json = read_json(&dir.join("fine.json"));
    assert!(json["measurements"][0]["syscalls"].is_array());
    let names: Vec<String> = std::fs::read_dir(&hdr)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        !names.iter().any(|n| n.starts_with("old-variant")),
        "{names:?}"
    );
    assert!(names.iter().any(|n| n == "someone-elses.hgrm"), "{names:?}");
    assert!(names.iter().any(|n| n.ends_with(".hgrm")), "{names:?}");
}

/// Inputs that used to be accepted and then silently wrong or hanging: `--pid 1 -- CMD` waited
/// for init forever, `--interval 1ms` was 20 ms, a 250-byte export name failed after the
/// measurement (its temporary name was past 255 bytes). The first two are refused up front in one
/// line (clap's error and its usage line); a 250-byte name is written, a 256-byte one refused
/// before anything is measured.
#[test]
fn contradictory_or_impossible_options_are_refused_up_front() {
    let dir = scratch("long-name");
    let fits = dir.join("x".repeat(250));
    let out = profiler()
        .args(["attach", "--syscalls", "close", "--export-json"])
        .arg(&fits)
        .args(["--", "true"])
        .output()
        .unwrap();
    assert!(
        out.status.success() && fits.is_file(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let too_long = dir.join("x".repeat(256)).display().to_string();
    for (args, says) in [
        (
            vec!["attach", "--pid", "1", "--", "true"],
            "cannot be used with",
        ),
        (
            vec!["attach", "--interval", "1ms", "--pid", "1"],
            "shorter than the 20ms",
        ),
        (
            vec!["attach", "--export-json", &too_long, "--", "true"],
            "longer than 255 bytes",
        ),
    ] {
        let started = Instant::now();
        let out = profiler().args(&args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_ne!(out.status.code(), Some(0), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(
            !err.contains("Tracing"),
            "{args:?}: refused before tracing: {err}"
        );
        assert!(started.elapsed() < Duration::from_secs(5), "{args:?}");
    }
}
