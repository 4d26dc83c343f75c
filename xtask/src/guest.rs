//! `xtask guest-suite`: what the kernel matrix runs inside each guest, as root: the real-kernel
//! tests, the differential suite against strace, `profiler attach` counting a forking workload
//! exactly, and a short `profiler run` of all four servers. Prints one `guest: PASS|FAIL step` line per step; fails if any step failed.

use std::{
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use anyhow::{Context as _, Result, bail};

/// The fault tests whose outcome rests on the kernel: exits and forks seen by the kernel
/// program, the ARMED gate, /proc's view of threads and kernel threads. The others (a reader
/// that left, Ctrl-C in c2c, the traced interval, PDEATHSIG'd children) test the profiler's own
/// code, which is the same on every kernel; they run on the host only, which keeps the matrix
/// inside CI's budget under TCG (all ten took 190-300 s a guest).
const KERNEL_FAULT_TESTS: [&str; 5] = [
    "children_that_outlive_the_command_are_traced_to_their_end",
    "the_running_descendants_of_a_pid_are_traced_unless_no_children",
    "a_reused_pid_does_not_keep_attach_running",
    "in_flight_drops_are_at_most_one_per_thread_and_none_for_a_started_command",
    "a_kernel_thread_is_refused_and_a_thread_id_is_taken_for_its_process",
];

/// Closes per process in the attach check, and the processes the workload forks.
const CLOSES: u64 = 20_000;
const CHILDREN: u64 = 3;

/// Where the guest suite finds what it runs.
pub struct Suite {
    /// The matrix's name for this kernel.
    pub label: String,
    /// profiler/tests/kernel.rs, built.
    pub kernel_tests: PathBuf,
    /// profiler/tests/c2c.rs, built.
    pub c2c_tests: PathBuf,
    /// profiler/tests/faults.rs, built.
    pub fault_tests: PathBuf,
    /// profiler/tests/hosts.rs, built.
    pub hosts_tests: PathBuf,
    /// profiler/tests/differential.rs, built.
    pub differential_tests: PathBuf,
    /// The release profiler.
    pub profiler: PathBuf,
}

impl Suite {
    /// Runs every step, then fails if one failed.
    pub fn run(&self) -> Result<()> {
        let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
        println!("guest: {} kernel {}", self.label, release.trim());
        if self.label.ends_with("-lockdown") {
            return self.lockdown();
        }
        let layout = self.mount_cgroups()?;
        println!("guest: cgroups {layout}");
        // Every step runs with the default front end, auto: fentry/fexit, which these
        // kernels (not locked down, not preempting kernel code) accept; on 6.1-rt, the
        // tracepoints. But on 6.12 the differential suite runs on the tracepoints, the front end
        // of locked-down hosts such as the one the host suite runs on: each front end is held
        // to strace on two kernels of the matrix (fentry on 6.1, tracepoints on 6.12 and
        // 6.1-rt) and on the host (6.18, tracepoints), and its kernel tests run on 6.1 and 6.12
        // (fentry), 6.1-rt and the host (tracepoints). (The kernel tests ran twice on 6.1 and
        // 6.12 once, the second pass on the tracepoints: 2.3 and 3.1 minutes of CI's 45.)
        let tracepoints_here = self.label == "6.12";
        let steps: [(&str, &dyn Fn() -> Result<()>); 8] = [
            (
                "real-kernel tests, --attach auto: fentry, on RT the tracepoints (profiler/tests/kernel.rs)",
                &|| run_ok(Command::new(&self.kernel_tests).arg("--test-threads=1")),
            ),
            ("c2c kernel timer (profiler/tests/c2c.rs)", &|| {
                run_ok(Command::new(&self.c2c_tests).args([
                    "syscall_mechanisms_get_kernel_timed_send_columns",
                    "--exact",
                ]))
            }),
            (
                "fault tests that depend on the kernel (profiler/tests/faults.rs)",
                &|| {
                    run_ok(
                        Command::new(&self.fault_tests)
                            .args(KERNEL_FAULT_TESTS)
                            .args(["--exact", "--test-threads=1"]),
                    )
                },
            ),
            (
                "host configurations: 32-bit, pid namespace, capabilities, mounts (profiler/tests/hosts.rs)",
                &|| run_ok(Command::new(&self.hosts_tests).arg("--test-threads=1")),
            ),
            (
                "differential suite against strace, attach -- CMD; on 6.12 the tracepoints (profiler/tests/differential.rs)",
                &|| {
                    let mut command = Command::new(&self.differential_tests);
                    // The container case needs podman's state on a writable root: the host's.
                    command
                        .args(["--test-threads=1", "--skip", "container"])
                        .env("PROFILER_DIFFERENTIAL", "command");
                    if tracepoints_here {
                        command.env("PROFILER_ATTACH", "tracepoint");
                    }
                    run_ok(&mut command)
                },
            ),
            ("profiler attach: exact counts across forks", &|| {
                self.attach_counts_exactly()
            }),
            (
                "kernel.pid_max raised while tracing, and large from the start",
                &|| self.pid_max(),
            ),
            ("profiler run: lt, et, lt-pure, mp", &|| {
                self.run_all_variants()
            }),
        ];
        let mut failed = Vec::new();
        for (name, step) in steps {
            let started = Instant::now();
            println!("guest: --- {name}");
            let result = step();
            let secs = started.elapsed().as_secs_f64();
            match result {
                Ok(()) => println!("guest: PASS {name} ({secs:.0} s)"),
                Err(e) => {
                    println!("guest: FAIL {name} ({secs:.0} s): {e:#}");
                    failed.push(name);
                }
            }
        }
        if failed.is_empty() {
            println!("guest: all steps passed on {}", self.label);
            Ok(())
        } else {
            bail!(
                "{} of {} steps failed on {}",
                failed.len(),
                steps.len(),
                self.label
            )
        }
    }

    /// The locked-down guest's one step: the kernel says it is locked down for
    /// confidentiality, and `profiler attach` either counts a workload's closes exactly or
    /// refuses in one line that says the lockdown is why.
    fn lockdown(&self) -> Result<()> {
        let lockdown = Path::new("/sys/kernel/security/lockdown");
        if !lockdown.exists() {
            run_ok(Command::new("mount").args([
                "-t",
                "securityfs",
                "securityfs",
                "/sys/kernel/security",
            ]))?;
        }
        let mode = std::fs::read_to_string(lockdown).context("reading the lockdown mode")?;
        println!("guest: lockdown: {}", mode.trim());
        if !mode.contains("[confidentiality]") {
            bail!("the guest is not locked down for confidentiality: {mode}");
        }
        let xtask = std::env::current_exe()?;
        let out = Command::new(&self.profiler)
            .args(["attach", "--syscalls", "close", "--"])
            .arg(xtask)
            .args(["closer", "--closes", "1000", "--children", "0"])
            .stdin(Stdio::null())
            .output()
            .context("running profiler attach")?;
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        print!("{stdout}{stderr}");
        if out.status.success() {
            let counted = stdout
                .lines()
                .any(|l| l.starts_with("close ") && l.contains("1000 (EBADF)"));
            if !counted {
                bail!("attach ran but did not count the 1000 failed closes");
            }
            println!("guest: PASS lockdown: attach works and counts exactly");
            return Ok(());
        }
        let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
        if out.status.code() != Some(1) || lines.len() != 1 || !lines[0].contains("locked down") {
            bail!("attach failed without one line that names the lockdown: {stderr}");
        }
        println!("guest: PASS lockdown: refused in one line");
        Ok(())
    }

    /// The guest's cgroups, as the hosts users run have them: the 6.12 guest the unified layout
    /// (cgroup2 at /sys/fs/cgroup), the others systemd's hybrid one (v1 controllers under a
    /// tmpfs at /sys/fs/cgroup, cgroup2 at /sys/fs/cgroup/unified), so that the cgroup tests run
    /// on both. Mounted in the guest's own kernel, which boots with none: the host is untouched.
    fn mount_cgroups(&self) -> Result<&'static str> {
        let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
        let unified = mountinfo.lines().any(|l| {
            let fields: Vec<&str> = l.split_whitespace().collect();
            fields.get(4) == Some(&"/sys/fs/cgroup") && l.contains(" - cgroup2 ")
        });
        if self.label == "6.12" && unified {
            return Ok("unified: cgroup2 at /sys/fs/cgroup, as the guest booted");
        }
        let mount = |fstype: &str, options: &str, dir: &str| -> Result<()> {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {dir}"))?;
            run_ok(Command::new("mount").args(["-t", fstype, "-o", options, fstype, dir]))
                .with_context(|| format!("mounting {fstype} at {dir}"))
        };
        if self.label == "6.12" {
            mount("cgroup2", "rw", "/sys/fs/cgroup")?;
            return Ok("unified: cgroup2 at /sys/fs/cgroup");
        }
        // Over whatever the guest booted with: a v1 hierarchy (systemd's named one, which binds
        // no controller and so always mounts) beside cgroup2, as systemd's hybrid mode has it.
        mount("tmpfs", "mode=755", "/sys/fs/cgroup")?;
        mount("cgroup", "none,name=systemd", "/sys/fs/cgroup/systemd")?;
        mount("cgroup2", "rw", "/sys/fs/cgroup/unified")?;
        Ok("hybrid: v1 name=systemd at /sys/fs/cgroup/systemd, cgroup2 at /sys/fs/cgroup/unified")
    }

    /// `profiler attach -- closer`: the workload and its forked children each make exactly
    /// `CLOSES` failing close(-1) calls (the loader's own closes succeed), so EBADF counts are
    /// exact, per process and in total, with nothing dropped.
    fn attach_counts_exactly(&self) -> Result<()> {
        let json = Path::new("/tmp/guest-attach.json");
        let xtask = std::env::current_exe()?;
        let out = output(
            Command::new(&self.profiler)
                .args(["attach", "--syscalls", "close", "--export-json"])
                .arg(json)
                .arg("--")
                .arg(xtask)
                .args(["closer", "--closes", &CLOSES.to_string()])
                .args(["--children", &CHILDREN.to_string()]),
        )?;
        print!("{out}");
        let export: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(json)
                .with_context(|| format!("reading {}", json.display()))?,
        )
        .context("the attach export is not JSON")?;
        let measurement = &export["measurements"][0];
        let close = measurement["syscalls"]
            .as_array()
            .and_then(|s| s.iter().find(|s| s["name"] == "close"))
            .context("no close in the export")?;
        let ebadf = close["errors"]["by_errno"]["EBADF"].as_u64().unwrap_or(0);
        let processes = CHILDREN + 1;
        if ebadf != CLOSES * processes {
            bail!("EBADF closes: {ebadf}, expected {}", CLOSES * processes);
        }
        let exact: Vec<u64> = measurement["processes"]
            .as_array()
            .map(|p| {
                p.iter()
                    .filter(|p| p["syscalls"]["close"]["errors"].as_u64() == Some(CLOSES))
                    .filter_map(|p| p["pid"].as_u64())
                    .collect()
            })
            .unwrap_or_default();
        if exact.len() as u64 != processes {
            bail!(
                "{} processes with exactly {CLOSES} failed closes ({exact:?}), expected {processes}",
                exact.len()
            );
        }
        let lost = measurement["dropped"]["lost"].as_u64();
        if lost != Some(0) || close["dropped"].as_u64() != Some(0) {
            bail!("dropped events: {}", measurement["dropped"]);
        }
        Ok(())
    }

    /// `kernel.pid_max` (this guest's, never the host's), in three cases:
    /// - arrays sized at 32768 and pid_max raised while tracing, the workload's children then
    ///   numbered above the arrays: attach ends normally with its table, counts the process it
    ///   could see, and says what it did not (it used to fail reading TRACKED);
    /// - the same with the per-thread hash maps (`PROFILER_PER_THREAD=hash`): every call;
    /// - pid_max 4194304 (systemd's) from the start, the workload numbered above 100000: auto
    ///   chooses the hash maps, and every call is counted.
    fn pid_max(&self) -> Result<()> {
        const PID_MAX: &str = "/proc/sys/kernel/pid_max";
        const LAST_PID: &str = "/proc/sys/kernel/ns_last_pid";
        let original = std::fs::read_to_string(PID_MAX)?;
        let result = (|| -> Result<()> {
            for (mode, expected) in [("array", CLOSES), ("hash", CLOSES * (CHILDREN + 1))] {
                std::fs::write(PID_MAX, "32768")?;
                let (ebadf, not_seen) = self.closer_after_raise(mode)?;
                println!("guest: pid_max raised, {mode}: {ebadf} EBADF, not seen {not_seen:?}");
                if ebadf != expected {
                    bail!("{mode}: {ebadf} EBADF closes, expected {expected}");
                }
                let said = not_seen.iter().any(|l| l.contains("pid_max"));
                if said != (mode == "array") {
                    bail!("{mode}: not_seen {not_seen:?}");
                }
            }
            std::fs::write(PID_MAX, "4194304")?;
            std::fs::write(LAST_PID, "100000")?;
            self.attach_counts_exactly()
        })();
        std::fs::write(PID_MAX, original.trim())?;
        result
    }

    /// `attach -- closer` where the command waits at a gate; once it runs (so tracing has
    /// begun), pid_max is raised and the next pids set above 40000, then the gate opens. The
    /// EBADF closes counted and the export's `not_seen`.
    fn closer_after_raise(&self, mode: &str) -> Result<(u64, Vec<String>)> {
        let dir = Path::new("/tmp/guest-pid-max");
        let _ = std::fs::remove_dir_all(dir);
        std::fs::create_dir_all(dir)?;
        let (ready, gate, json) = (dir.join("ready"), dir.join("gate"), dir.join("a.json"));
        let script = format!(
            "touch {ready}; while [ ! -e {gate} ]; do sleep 0.05; done; exec {xtask} closer --closes {CLOSES} --children {CHILDREN}",
            ready = ready.display(),
            gate = gate.display(),
            xtask = std::env::current_exe()?.display(),
        );
        let mut attach = Command::new(&self.profiler)
            .args(["attach", "--syscalls", "close", "--export-json"])
            .arg(&json)
            .args(["--", "sh", "-c", &script])
            .env("PROFILER_PER_THREAD", mode)
            .stdout(Stdio::null())
            .spawn()?;
        let started = Instant::now();
        while !ready.exists() {
            if started.elapsed() > Duration::from_mins(2) {
                let _ = attach.kill();
                bail!("the command did not start under attach");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        std::fs::write("/proc/sys/kernel/pid_max", "4194304")?;
        std::fs::write("/proc/sys/kernel/ns_last_pid", "40000")?;
        std::fs::write(&gate, "")?;
        let status = attach.wait()?;
        if !status.success() {
            bail!("{mode}: attach exited with {status}");
        }
        let export: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json)?)?;
        let m = &export["measurements"][0];
        let ebadf = m["syscalls"]
            .as_array()
            .and_then(|s| s.iter().find(|s| s["name"] == "close"))
            .and_then(|c| c["errors"]["by_errno"]["EBADF"].as_u64())
            .unwrap_or(0);
        let not_seen = m["not_seen"]
            .as_array()
            .map(|l| {
                l.iter()
                    .filter_map(|s| s.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default();
        Ok((ebadf, not_seen))
    }

    /// A short `profiler run`: the four variants in the report and `dropped: 0` in every table;
    /// `--explain-cost` names the front end's programs and the servers' traced calls.
    fn run_all_variants(&self) -> Result<()> {
        let out = output(Command::new(&self.profiler).args([
            "run",
            "--variants",
            "lt,et,lt-pure,mp",
            "--requests",
            "1000",
            "--runs",
            "1",
            // The default experiment's busier scenario, without its baseline runs (time), with
            // the kernel's program statistics (--explain-cost, through BPF_ENABLE_STATS).
            "--concurrency",
            "10",
            "--explain-cost",
        ]))?;
        print!("{out}");
        // The programs that timed the servers' calls: fentry/fexit where auto chose them.
        let version = std::fs::read_to_string("/proc/sys/kernel/version")?;
        let exit_program = if version.contains("PREEMPT_RT") {
            "syscall_exit"
        } else {
            "fexit_"
        };
        for variant in ["lt", "et", "lt-pure", "mp"] {
            let rows: Vec<&str> = out
                .lines()
                .filter(|l| l.split_whitespace().next() == Some(variant))
                .collect();
            if !rows.iter().any(|l| l.contains(exit_program)) {
                bail!("--explain-cost shows no {exit_program} program for {variant}");
            }
            let calls = rows
                .iter()
                .find_map(|l| l.split("the server's traced calls: ").nth(1))
                .and_then(|rest| rest.split("/req").next())
                .and_then(|n| n.parse::<f64>().ok())
                .with_context(|| format!("--explain-cost has no traced-calls row for {variant}"))?;
            if calls < 5.0 {
                bail!(
                    "--explain-cost: {variant} made {calls} traced calls per request, expected about 11"
                );
            }
        }
        let header = out
            .lines()
            .find(|l| l.starts_with("metric "))
            .context("no side-by-side table in the report")?;
        let columns: Vec<&str> = header.split_whitespace().skip(1).collect();
        if columns != ["lt", "et", "lt-pure", "mp"] {
            bail!("side-by-side columns {columns:?}, expected lt et lt-pure mp");
        }
        let drops: Vec<&str> = out.lines().filter(|l| l.starts_with("dropped:")).collect();
        if drops.is_empty() {
            bail!("the report has no dropped: line");
        }
        if let Some(bad) = drops.iter().find(|l| !l.starts_with("dropped: 0 ")) {
            bail!("events were dropped: {bad}");
        }
        Ok(())
    }
}

/// How long one step may take under TCG before the suite reports it hung.
const STEP_TIMEOUT: Duration = Duration::from_mins(8);

fn run_ok(command: &mut Command) -> Result<()> {
    output_of(command, false).map(drop)
}

/// Runs `command`, fails unless it succeeds, returns its standard output.
fn output(command: &mut Command) -> Result<String> {
    output_of(command, true)
}

/// Runs `command` with a deadline; a hung command is reported with every process's state and
/// kernel stack (what the guest was waiting on), then killed.
fn output_of(command: &mut Command, capture: bool) -> Result<String> {
    command.stdin(Stdio::null()).stderr(Stdio::inherit());
    command.stdout(if capture {
        Stdio::piped()
    } else {
        Stdio::inherit()
    });
    let program = std::path::Path::new(command.get_program())
        .display()
        .to_string();
    let mut child = command
        .spawn()
        .with_context(|| format!("starting {program}"))?;
    let reader = child.stdout.take().map(|mut out| {
        std::thread::spawn(move || {
            let mut text = String::new();
            let _ = std::io::Read::read_to_string(&mut out, &mut text);
            text
        })
    });
    let Some(status) = crate::wait_or_kill(&mut child, STEP_TIMEOUT, dump_processes)? else {
        bail!(
            "{program} hung: no exit within {} min (process states above)",
            STEP_TIMEOUT.as_secs() / 60
        );
    };
    let text = reader
        .map(|r| r.join().unwrap_or_default())
        .unwrap_or_default();
    if !status.success() {
        bail!("{program} failed ({status}):\n{text}");
    }
    Ok(text)
}

/// Every user process: pid, state, what it waits in, and its kernel stack.
fn dump_processes() {
    println!("guest: process states at the timeout:");
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return;
    };
    for entry in entries.flatten() {
        let dir = entry.path();
        let Ok(cmdline) = std::fs::read(dir.join("cmdline")) else {
            continue;
        };
        if cmdline.is_empty() {
            continue; // a kernel thread
        }
        let read = |name: &str| std::fs::read_to_string(dir.join(name)).unwrap_or_default();
        let status = read("status");
        let state = status
            .lines()
            .find(|l| l.starts_with("State:"))
            .unwrap_or("");
        let cmd = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        println!(
            "guest:   {} {} wchan={} {}",
            entry.file_name().to_string_lossy(),
            state,
            read("wchan"),
            cmd.trim()
        );
        for line in read("stack").lines() {
            println!("guest:       {line}");
        }
    }
}

unsafe extern "C" {
    fn close(fd: i32) -> i32;
}

/// `xtask closer`: `closes` failing close(-1) calls here and in each of `children` copies of
/// itself, started before its own calls and waited for after them.
pub fn closer(closes: u64, children: u64) -> Result<()> {
    let me = std::env::current_exe()?;
    let spawned: Vec<_> = (0..children)
        .map(|_| {
            Command::new(&me)
                .args(["closer", "--closes", &closes.to_string(), "--children", "0"])
                .spawn()
        })
        .collect::<Result<_, _>>()
        .context("starting a closer child")?;
    for _ in 0..closes {
        // SAFETY: closing an invalid descriptor only fails with EBADF.
        unsafe { close(-1) };
    }
    for mut child in spawned {
        if !child.wait()?.success() {
            bail!("a closer child failed");
        }
    }
    Ok(())
}
