//! Setting up a trace of chosen processes, the one path `attach` and `serve` share: the stop
//! signals, the pids turned into processes (thread ids, kernel threads, running descendants),
//! the programs attached, a started command tracked and resumed. A command started for the trace
//! is killed on every failure, so no error leaves it stopped or running untraced.

use std::{
    sync::{Arc, atomic::AtomicBool},
    time::Duration,
};

use anyhow::{Context as _, Result};

use crate::{
    bpf::{Session, SessionConfig, Syscall, Target},
    export::Metadata,
    process::{StoppedChild, Targets, resolve_targets},
    slow::Collector,
};

/// A flag set by SIGINT, SIGTERM or SIGHUP (a closed terminal, a dropped ssh session): the
/// commands stop, write what they measured, and exit. A second signal changes nothing.
pub fn stop_on_signals() -> Result<Arc<AtomicBool>> {
    let flag = Arc::new(AtomicBool::new(false));
    for signal in [
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGHUP,
    ] {
        signal_hook::flag::register(signal, Arc::clone(&flag))
            .context("installing the Ctrl-C handler")?;
    }
    Ok(flag)
}

/// What to trace.
#[derive(Clone, Debug)]
pub struct TraceRequest {
    /// Syscalls to time.
    pub syscalls: Vec<Syscall>,
    /// Running processes (thread ids are taken for their process).
    pub pids: Vec<u32>,
    /// Every process on the machine.
    pub all: bool,
    /// Also the children of `pids`: those already running and those forked from now on.
    pub children: bool,
    /// A command to start stopped, track, and resume: traced from its first syscall.
    pub command: Vec<String>,
    /// Split each call into on-CPU, blocked and runnable time (`--off-cpu`).
    pub off_cpu: bool,
    /// `--cgroup`: trace these cgroups' processes instead (paths below the cgroup2 mount).
    pub cgroups: Vec<String>,
    /// `--all --by-cgroup`: also count every call under its cgroup.
    pub by_cgroup: bool,
    /// `--cgroup-top`: at most this many cgroup rows; `None` for the default.
    pub cgroup_top: Option<usize>,
    /// `--slow`: record the calls at least this long with their stacks.
    pub slow: Option<Duration>,
    /// `--slow-top`: how many stacks the reports show.
    pub slow_top: u32,
    /// Whether every call is counted too (`--syscalls all`: always, and listed).
    pub every: crate::bpf::CountEvery,
    /// `--attach`: how the syscalls are timed (`None`: the default, auto).
    pub syscall_attach: Option<crate::bpf::SyscallAttach>,
}

impl TraceRequest {
    /// Whether tracing ends only on Ctrl-C or the duration: no set of processes to outlive.
    #[must_use]
    pub fn open_ended(&self) -> bool {
        self.all || !self.cgroups.is_empty()
    }

    /// The session's configuration for tracing `target` as asked: the one conversion from
    /// what a command was asked to what the kernel side loads, for attach, serve and run.
    #[must_use]
    pub fn session_config(&self, target: Target) -> SessionConfig {
        SessionConfig {
            follow_forks: self.children,
            off_cpu: self.off_cpu,
            by_cgroup: self.by_cgroup,
            cgroup_top: self.cgroup_top.unwrap_or(crate::bpf::DEFAULT_CGROUP_TOP),
            slow: self.slow,
            count_every: self.every,
            syscall_attach: self.syscall_attach,
            // In a child pid namespace this process's pid names another one for the kernel.
            exclude_self: !crate::process::in_child_pid_namespace(),
            ..SessionConfig::new(self.syscalls.clone(), target)
        }
    }

    /// The timed syscalls' names joined by `separator`.
    #[must_use]
    pub fn syscall_names(&self, separator: &str) -> String {
        let names: Vec<&str> = self.syscalls.iter().map(|s| s.name.as_str()).collect();
        names.join(separator)
    }

    /// The request as metadata settings: `pids` ("all" with `--all`) and `syscalls`, plus the
    /// command and the cgroups when there are some.
    pub fn describe_in(&self, metadata: &mut Metadata) {
        let pids = if self.all {
            "all".to_owned()
        } else {
            join(&self.pids, ",")
        };
        let settings = [
            ("pids", pids),
            ("command", self.command.join(" ")),
            ("cgroups", self.cgroups.join(",")),
            (
                "by_cgroup",
                if self.by_cgroup { "yes" } else { "" }.to_owned(),
            ),
            ("syscalls", self.syscall_names(",")),
        ];
        metadata.settings.extend(
            settings
                .into_iter()
                .filter(|(_, v)| !v.is_empty())
                .map(|(k, v)| (k.to_owned(), v)),
        );
    }
}

/// A running trace: the attached session and what it traces.
pub struct Trace {
    /// The attached programs.
    pub session: Session,
    /// The processes named, and the running descendants found for them.
    pub targets: Targets,
    /// How many of those descendants were still running when tracked.
    pub descendants: usize,
    /// The command started for the trace, resumed and tracked.
    pub child: Option<StoppedChild>,
    /// `--slow`: the thread reading the slow calls.
    pub slow: Option<Collector>,
}

impl Trace {
    /// Starts the trace `request` asks for; notes about the pids (a thread id taken for its
    /// process) go to stderr.
    pub fn start(request: &TraceRequest) -> Result<Self> {
        let in_namespace = crate::process::in_child_pid_namespace();
        if in_namespace && !request.all && request.cgroups.is_empty() {
            return Err(crate::error::SetupError::ChildPidNamespace.into());
        }
        if in_namespace {
            crate::errln!(
                "note: the profiler runs in a child pid namespace: its own calls are counted too (its pid there is not the one the kernel sees)"
            );
        }
        let child = if request.command.is_empty() {
            None
        } else {
            Some(StoppedChild::spawn(&request.command, false, None, false)?)
        };
        let started = Self::attach(request, child.as_ref());
        match started {
            Ok((session, targets, descendants, slow)) => {
                for note in &targets.notes {
                    crate::errln!("note: {note}");
                }
                Ok(Self {
                    session,
                    targets,
                    descendants,
                    child,
                    slow,
                })
            }
            Err(e) => {
                if let Some(child) = child {
                    child.kill();
                }
                Err(e)
            }
        }
    }

    fn attach(
        request: &TraceRequest,
        child: Option<&StoppedChild>,
    ) -> Result<(Session, Targets, usize, Option<Collector>)> {
        let (target, targets) = if request.all {
            (Target::All, Targets::default())
        } else if !request.cgroups.is_empty() {
            let cgroups = request
                .cgroups
                .iter()
                .map(|c| crate::cgroup::Cgroup::resolve(c))
                .collect::<Result<Vec<_>, _>>()?;
            (Target::Cgroups(cgroups), Targets::default())
        } else {
            let targets = resolve_targets(&request.pids, request.children)?;
            (Target::Processes(targets.named().to_vec()), targets)
        };
        let mut session = Session::start(&request.session_config(target))?;
        // Descendants found in /proc may have exited since: those are skipped, not an error.
        let mut descendants = 0;
        for &pid in targets.descendant_pids() {
            descendants += usize::from(session.track_if_running(pid)?);
        }
        // Reading before the command runs: its first slow call finds the reader there.
        let slow = session.start_slow_collector(request.slow_top, 0)?;
        if let Some(child) = child {
            session.track(child.pid)?;
            child.resume()?;
        }
        Ok((session, targets, descendants, slow))
    }

    /// What is traced, for the "Tracing ..." line: the command, all processes, or the pids with
    /// their running descendants.
    #[must_use]
    pub fn describe(&self, request: &TraceRequest) -> String {
        let children = if request.children {
            " and the children they fork"
        } else {
            ""
        };
        if self.child.is_some() {
            return format!("'{}'{children}", request.command.join(" "));
        }
        if request.all {
            return if request.by_cgroup {
                "all processes, per cgroup".to_owned()
            } else {
                "all processes".to_owned()
            };
        }
        if !request.cgroups.is_empty() {
            return format!(
                "the processes of cgroup{} {} and below",
                if request.cgroups.len() == 1 { "" } else { "s" },
                request.cgroups.join(", ")
            );
        }
        let named = self.targets.named();
        let pids = join(named, ", ");
        match self.descendants {
            0 => format!("pid {pids}{children}"),
            n => format!(
                "pid {pids} and {n} running descendant{} ({} processes){children}",
                if n == 1 { "" } else { "s" },
                named.len() + n
            ),
        }
    }
}

fn join(pids: &[u32], separator: &str) -> String {
    pids.iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(separator)
}
