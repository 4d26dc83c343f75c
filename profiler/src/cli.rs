//! The command line, in the binary: the subcommands, composed from the option structs each
//! command's module defines (`export::ExportArgs`, `run::options::RunArgs`, ...). The library
//! cannot import it.

use std::{net::SocketAddr, time::Duration};

use clap::{Args, Parser, Subcommand};
use profiler::{
    bench::{overhead::OverheadArgs, precision::PrecisionArgs},
    bpf::{DEFAULT_SYSCALLS, Syscall, SyscallAttach},
    diff::DiffArgs,
    export::{ExportArgs, otlp::OtlpArgs},
    parse::{parse_duration, parse_interval},
    run::options::RunArgs,
    slow::SlowArgs,
    trace::TraceRequest,
};

/// Per-syscall latency of network servers, measured in the kernel with eBPF.
#[derive(Debug, Parser)]
#[command(name = "profiler", version, about, long_about = None, after_help = EXAMPLES)]
pub struct Cli {
    /// Show kernel-side diagnostics (forks followed, exits) and setup details.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// How syscalls are timed: fentry/fexit on the functions the syscall tables call, where
    /// the kernel allows them (untraced syscalls then cost nothing), or their tracepoints.
    /// auto (the default; PROFILER_ATTACH sets another) uses fentry where it loads and says
    /// why not with -vv.
    #[arg(long = "attach", global = true, value_enum, value_name = "HOW")]
    pub syscall_attach: Option<profiler::bpf::SyscallAttach>,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

const EXAMPLES: &str = "\
EXAMPLES:
    profiler attach --pid 1234 --duration 10s          # time the default syscalls of pid 1234
    profiler attach --syscalls close,read -- ./server   # start ./server and trace it, like strace -c
    profiler attach --all --syscalls epoll_wait --hist # every process, with histograms
    profiler bench overhead                             # what tracing adds per syscall
    profiler serve --pid 1234                           # Prometheus /metrics on 127.0.0.1:9464";

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Time the syscalls of running processes (and their children), or of a command.
    Attach(Box<AttachArgs>),
    /// Run the epoll server experiments: every variant under load, syscalls timed in the kernel.
    Run(Box<RunArgs>),
    /// Core-to-core round-trip latency of the ways two threads can talk.
    C2c(C2cArgs),
    /// Measure the profiler itself.
    #[command(subcommand)]
    Bench(BenchCommand),
    /// Keep timing processes and serve the counters as Prometheus metrics on /metrics.
    Serve(ServeArgs),
    /// A live view: each syscall's (or each process's) calls, errors, share and latency over
    /// the last interval, refreshed in place; plain tables with --batch or off a terminal.
    Top(Box<TopArgs>),
    /// Compare two saved runs (`--export-json` files): two machines, kernels or builds.
    Diff(DiffArgs),
    /// Write the man pages (section 8) and shell completions into DIR (for packaging).
    #[command(hide = true, name = "generate-assets")]
    GenerateAssets {
        /// Where: DIR/man8/*.8, DIR/completions/{profiler.bash,_profiler,profiler.fish}.
        dir: std::path::PathBuf,
    },
}

/// Writes a man page per command and subcommand (section 8, as bcc's tools) and the bash, zsh
/// and fish completions under `dir`.
pub fn generate_assets(dir: &std::path::Path) -> anyhow::Result<()> {
    use anyhow::Context as _;
    use clap::CommandFactory as _;
    let man = dir.join("man8");
    let completions = dir.join("completions");
    for d in [&man, &completions] {
        std::fs::create_dir_all(d).with_context(|| format!("creating {}", d.display()))?;
    }
    let command = Cli::command().version(env!("CARGO_PKG_VERSION"));
    // profiler.8, then profiler-attach.8, profiler-bench-overhead.8, ...
    fn pages(command: &clap::Command, name: &str, man: &std::path::Path) -> anyhow::Result<()> {
        use anyhow::Context as _;
        // The page's name is profiler-attach; its SYNOPSIS is what one types, profiler attach.
        let command = command
            .clone()
            .name(name.to_owned())
            .display_name(name.to_owned())
            .bin_name(name.replace('-', " "));
        let mut page = Vec::new();
        clap_mangen::Man::new(command.clone())
            .section("8")
            .render(&mut page)
            .context("rendering a man page")?;
        let path = man.join(format!("{name}.8"));
        std::fs::write(&path, page).with_context(|| format!("writing {}", path.display()))?;
        for sub in command.get_subcommands().filter(|s| !s.is_hide_set()) {
            pages(sub, &format!("{name}-{}", sub.get_name()), man)?;
        }
        Ok(())
    }
    pages(&command, "profiler", &man)?;
    // Completions offer what a user may type: the hidden subcommands (this one) left out.
    let visible = clap::Command::new("profiler")
        .version(env!("CARGO_PKG_VERSION"))
        .args(command.get_arguments().cloned())
        .subcommands(
            command
                .get_subcommands()
                .filter(|s| !s.is_hide_set())
                .cloned(),
        );
    let command = visible;
    for (shell, file) in [
        (clap_complete::Shell::Bash, "profiler.bash"),
        (clap_complete::Shell::Zsh, "_profiler"),
        (clap_complete::Shell::Fish, "profiler.fish"),
    ] {
        let mut out = Vec::new();
        clap_complete::generate(shell, &mut command.clone(), "profiler", &mut out);
        let path = completions.join(file);
        std::fs::write(&path, out).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

/// `profiler c2c` options.
#[derive(Debug, Args)]
#[command(after_help = "EXAMPLES:
    profiler c2c                                  # every mechanism, two CPUs picked for you
    profiler c2c --cpus 0,1 --round-trips 100000
    profiler c2c --mechanisms pipe,eventfd,unix-socket")]
pub struct C2cArgs {
    /// The two CPUs, as A,B (A starts each round trip).
    #[arg(long, value_parser = parse_cpu_pair)]
    pub cpus: Option<(usize, usize)>,
    /// Round trips per mechanism.
    #[arg(long, default_value_t = 1_000_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub round_trips: u64,
    /// Mechanisms, comma-separated, or `all`: spin-false-sharing, spin-aligned, spsc-ring,
    /// mutex-condvar, unix-socket, pipe, eventfd, rdma.
    #[arg(long, default_value = "all")]
    pub mechanisms: String,
    /// Upper bound on each mechanism's run.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub time_limit: Duration,
    /// Don't load the kernel programs (no syscall columns; no root needed).
    #[arg(long)]
    pub no_syscalls: bool,
    /// Print the report as JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// Parses `A,B` into two CPU numbers.
pub fn parse_cpu_pair(s: &str) -> Result<(usize, usize), String> {
    let parts: Vec<&str> = s.split(',').map(str::trim).collect();
    match parts.as_slice() {
        [a, b] => match (a.parse(), b.parse()) {
            (Ok(a), Ok(b)) if a != b => Ok((a, b)),
            (Ok(_), Ok(_)) => Err(format!(
                "'{s}' names one CPU twice: give two different CPUs, e.g. 0,1"
            )),
            _ => Err(format!("'{s}' is not two CPU numbers: use A,B such as 0,1")),
        },
        _ => Err(format!("'{s}' is not two CPU numbers: use A,B such as 0,1")),
    }
}

/// `profiler attach` options.
#[derive(Debug, Args)]
#[command(after_help = "EXAMPLES:
    profiler attach --pid 1234 --duration 10s
    profiler attach --pid 1234 --pid 1240 --interval 1s --hist
    profiler attach --syscalls accept4,close,epoll_wait,read,write -- ./server --port 8080")]
pub struct AttachArgs {
    /// What to trace, and how.
    #[command(flatten)]
    pub session: SessionArgs,
    /// Trace only the processes named: not the children they had already forked (found in
    /// /proc), nor those they fork from now on.
    #[arg(long, conflicts_with = "all")]
    pub no_children: bool,
    /// Stop after this long (e.g. 10s, 500ms, 2m); default: until Ctrl-C or the traced processes exit.
    #[arg(short, long, value_parser = parse_duration)]
    pub duration: Option<Duration>,
    /// Also print a table for each interval of this length (e.g. 1s; at least 20ms, the
    /// polling period).
    #[arg(short, long, value_parser = parse_interval)]
    pub interval: Option<Duration>,
    /// Add bcc-style ASCII latency histograms.
    #[arg(long)]
    pub hist: bool,
    /// OTLP push.
    #[command(flatten)]
    pub otlp: OtlpArgs,
    /// A command to start and trace from its first syscall.
    #[arg(
        last = true,
        value_name = "CMD",
        conflicts_with_all = ["pids", "all", "cgroups", "containers", "by_cgroup"]
    )]
    pub command: Vec<String>,
    /// Files to write the results to.
    #[command(flatten)]
    pub exports: ExportArgs,
}

/// `profiler top` options.
#[derive(Debug, Args)]
#[command(after_help = "EXAMPLES:
    profiler top --pid 1234                       # live, refreshed every second
    profiler top --all --group process --sort calls
    profiler top --batch --interval 5s --pid 1234 # one plain table per interval, like top -b

KEYS: q quit, s or 1-7 sort by a column, r reverse, / filter, g group by process or syscall,
c cumulative or last interval, space pause, arrows select a row (its histogram, its p99 over
the last minute). Ctrl-C, SIGTERM and SIGHUP restore the terminal too.")]
pub struct TopArgs {
    /// What to trace, and how.
    #[command(flatten)]
    pub session: SessionArgs,
    /// Refresh this often (e.g. 1s, 500ms; at least 100ms).
    #[arg(short, long, default_value = "1s", value_parser = parse_duration)]
    pub interval: Duration,
    /// Plain tables, one per interval, on stdout (the default when stdout is not a terminal).
    #[arg(short, long)]
    pub batch: bool,
    /// Stop after this many refreshes (as top -n).
    #[arg(short = 'n', long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub iterations: Option<u64>,
    /// Rows per syscall (with quantiles) or per process (or cgroup) and syscall.
    #[arg(long, value_enum, default_value_t = GroupArg::Syscall)]
    pub group: GroupArg,
    /// The column to sort by, largest first.
    #[arg(long, value_enum, default_value_t = SortArg::Share)]
    pub sort: SortArg,
    /// Only rows whose name (process, syscall) holds this text.
    #[arg(long, value_name = "TEXT", default_value = "")]
    pub filter: String,
    /// A command to start and watch from its first syscall.
    #[arg(
        last = true,
        value_name = "CMD",
        conflicts_with_all = ["pids", "all", "cgroups", "containers", "by_cgroup"]
    )]
    pub command: Vec<String>,
}

/// `top --group`.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum GroupArg {
    Syscall,
    Process,
}

/// `top --sort`.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum SortArg {
    Name,
    Calls,
    Errors,
    Share,
    Mean,
    P50,
    P99,
}

impl TopArgs {
    /// The view these options start with.
    #[must_use]
    pub fn view(&self) -> profiler::top::model::ViewSpec {
        use profiler::top::model::{Column, Group};
        profiler::top::model::ViewSpec {
            group: match self.group {
                GroupArg::Syscall => Group::Syscall,
                GroupArg::Process => Group::Process,
            },
            sort: match self.sort {
                SortArg::Name => Column::Name,
                SortArg::Calls => Column::Calls,
                SortArg::Errors => Column::Errors,
                SortArg::Share => Column::Share,
                SortArg::Mean => Column::Mean,
                SortArg::P50 => Column::P50,
                SortArg::P99 => Column::P99,
            },
            reverse: false,
            filter: self.filter.clone(),
        }
    }
}

/// What `attach` and `serve` trace and how: the one set of options both take, and the one
/// conversion to a [`TraceRequest`] (and from there to a session's configuration).
#[derive(Debug, Args)]
pub struct SessionArgs {
    /// A process to trace (repeatable); the children it forks are followed.
    #[arg(short, long = "pid", value_name = "PID")]
    pub pids: Vec<u32>,
    /// Trace every process on the machine.
    #[arg(long, conflicts_with = "pids")]
    pub all: bool,
    /// Trace the processes of this cgroup v2 and of the cgroups below it (repeatable; a
    /// per-cgroup table, and series with a `cgroup` label): a path relative to the cgroup2
    /// mount (/sys/fs/cgroup, or /sys/fs/cgroup/unified on hybrid hosts), or absolute below it.
    #[arg(long = "cgroup", value_name = "PATH", conflicts_with_all = ["pids", "all"])]
    pub cgroups: Vec<String>,
    /// Trace this container (repeatable): its name, an id prefix (4 hex digits or more), or a
    /// Kubernetes container as NAMESPACE/POD/CONTAINER, as its runtime's state names it
    /// (podman, docker, containerd, CRI-O). Its cgroup is then traced as --cgroup would, its
    /// rows and series named after it (`container_name`...).
    #[arg(long = "container", value_name = "NAME|ID", conflicts_with_all = ["pids", "all"])]
    pub containers: Vec<String>,
    /// With --all: also count every call under its cgroup, with a per-cgroup table (and a
    /// `cgroup` label on the per-cgroup series).
    #[arg(long, requires = "all", conflicts_with_all = ["pids", "cgroups"])]
    pub by_cgroup: bool,
    /// With --by-cgroup: at most this many cgroup rows, hence series per syscall (100 by
    /// default), chosen by syscall time when first seen and kept; the calls of the others are
    /// summed in one row, "other (past --cgroup-top K)".
    #[arg(long, value_name = "K", requires = "by_cgroup", value_parser = clap::value_parser!(u32).range(1..))]
    pub cgroup_top: Option<u32>,
    /// Syscalls to time, comma-separated. `all` also counts every other syscall of the traced
    /// processes (calls, errors, time) and lists them; with the tracepoint front end the share
    /// of syscall time the table leaves out is printed anyway.
    #[arg(short, long, value_delimiter = ',', default_values = DEFAULT_SYSCALLS)]
    pub syscalls: Vec<String>,
    /// Split each call's time into on-CPU, blocked (switched out, waiting) and runnable
    /// (waiting for a CPU), from sched_switch and sched_wakeup (series with a `state` label);
    /// costs 180-300 ns on every context switch of the machine on this project's VMs
    /// (docs/BENCHMARKS.md).
    #[arg(long)]
    pub off_cpu: bool,
    /// The slowest calls, with their stacks.
    #[command(flatten)]
    pub slow: SlowArgs,
}

impl SessionArgs {
    /// The trace these options ask for: `syscall_attach` is `--attach`, `children` whether
    /// forks are followed, `command` one to start (attach's `-- CMD`). Nothing to trace, an
    /// unknown syscall or container: one line saying what to give.
    pub fn trace_request(
        self,
        syscall_attach: Option<SyscallAttach>,
        children: bool,
        command: Vec<String>,
    ) -> anyhow::Result<TraceRequest> {
        if self.pids.is_empty()
            && !self.all
            && command.is_empty()
            && self.cgroups.is_empty()
            && self.containers.is_empty()
        {
            anyhow::bail!(
                "nothing to trace: give --pid PID, --all, --cgroup PATH, --container NAME{}",
                if children {
                    ", or a command after --"
                } else {
                    ""
                }
            );
        }
        let (syscalls, every) = Syscall::resolve_choice(&self.syscalls)?;
        let mut cgroups = self.cgroups;
        for wanted in &self.containers {
            cgroups.push(profiler::container::cgroup_of(wanted)?);
        }
        Ok(TraceRequest {
            syscalls,
            every,
            syscall_attach,
            pids: self.pids,
            all: self.all,
            children,
            command,
            off_cpu: self.off_cpu,
            cgroups,
            by_cgroup: self.by_cgroup,
            cgroup_top: self.cgroup_top.map(|k| k as usize),
            slow: self.slow.slow,
            slow_top: self.slow.slow_top,
        })
    }
}

/// `profiler serve` options.
#[derive(Debug, Args)]
#[command(after_help = "EXAMPLES:
    profiler serve --pid 1234                       # metrics on http://127.0.0.1:9464/metrics
    profiler serve --all --listen 0.0.0.0:9464      # every process, reachable from other hosts
    profiler serve --pid 1234 --syscalls read,write,close")]
pub struct ServeArgs {
    /// What to trace, and how (the children of a traced process are always followed).
    #[command(flatten)]
    pub session: SessionArgs,
    /// Address to serve /metrics on; loopback unless you name another.
    #[arg(long, default_value = "127.0.0.1:9464", value_name = "ADDR:PORT")]
    pub listen: SocketAddr,
    /// OTLP push, beside the scrapes.
    #[command(flatten)]
    pub otlp: OtlpArgs,
    /// TLS and basic auth, in the exporter-toolkit format of Prometheus's own exporters
    /// (tls_server_config: cert_file, key_file; basic_auth_users: user → bcrypt hash).
    #[arg(long, value_name = "FILE")]
    pub web_config: Option<std::path::PathBuf>,
    /// Drop root to this user once the programs are attached (no capability is kept).
    #[arg(long, value_name = "NAME")]
    pub user: Option<String>,
    /// Also serve the profiler's own cost: its programs' runs and run time as the kernel counts
    /// them (bpf(2) BPF_ENABLE_STATS, on while serve runs, nothing machine-wide written), and
    /// from them ns per traced call and per context switch (syscall_profiler_self_*). The
    /// statistics add two clock reads to every program run.
    #[arg(long)]
    pub self_cost: bool,
    /// The flight recorder: keep this many minutes of counters, an interval at a time (0: off).
    /// GET /recording, SIGUSR2 or --record-when writes them as a JSON export that `profiler
    /// diff` reads (each interval a run).
    #[arg(long, value_name = "MINUTES", default_value_t = 15)]
    pub record_minutes: u32,
    /// The flight recorder's interval.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = parse_duration)]
    pub record_every: Duration,
    /// Write a recording when an interval's latency quantile of a syscall crosses a threshold,
    /// e.g. close:p99>1ms (repeatable; at most one recording per window).
    #[arg(long, value_name = "SYSCALL:pQ>DURATION")]
    pub record_when: Vec<profiler::recorder::Trigger>,
    /// Where SIGUSR2 and --record-when write recordings (default: $TMPDIR, else /tmp); checked
    /// writable once --user has dropped root.
    #[arg(long, value_name = "DIR")]
    pub record_dir: Option<std::path::PathBuf>,
}

/// `profiler bench` subcommands.
#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// ns added per traced syscall, against no programs and against empty programs (the floor).
    Overhead(OverheadArgs),
    /// How wide run's intervals are against the floor: the smallest client comparing two warm
    /// servers, and run's own path on them, for the same time.
    Precision(PrecisionArgs),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cli_is_well_formed() {
        use clap::CommandFactory as _;
        Cli::command().debug_assert();
    }
}
