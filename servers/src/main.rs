//! `servers`: run one of the epoll server designs under test.

use std::{net::IpAddr, process::ExitCode};

use clap::{Parser, ValueEnum, error::ErrorKind};
use servers::{ServerConfig, UsageError, Variant, parse_cpu_list, protocol::Protocol};

const EXAMPLES: &str = "\
EXAMPLES:
    servers --mode et                                   echo server, edge-triggered, free port
    servers --mode lt --protocol http --port 8080       HTTP/1.1 keep-alive on :8080
    servers --mode lt --lt-epollout --nofile 30000      LT with the EPOLLOUT-noise registration
    servers --mode mp --workers 4 --cpus 0-3            4 forked SO_REUSEPORT workers on CPUs 0-3

Once it accepts connections it prints one line `listening on ADDR:PORT` to stdout.
SIGTERM or SIGINT closes every connection and exits 0.";

/// The protocol spoken to clients.
#[derive(Debug, Clone, Copy, ValueEnum)]
enum ProtocolArg {
    /// Write back exactly the bytes read.
    Echo,
    /// HTTP/1.1, fixed 200 OK, keep-alive, pipelining.
    Http,
}

/// Epoll echo/HTTP servers in the LT, ET, LT-PURE and MP designs measured by syscall-profiler.
#[derive(Debug, Parser)]
#[command(name = "servers", version, after_help = EXAMPLES)]
struct Cli {
    /// Server design.
    #[arg(long, value_enum)]
    mode: Variant,
    /// Protocol spoken to clients.
    #[arg(long, value_enum, default_value = "echo")]
    protocol: ProtocolArg,
    /// lt/lt-pure: register clients for EPOLLIN|EPOLLOUT (reproduces the EPOLLOUT noise).
    #[arg(long)]
    lt_epollout: bool,
    /// echo: the server closes right after echoing instead of waiting for the client's EOF.
    #[arg(long)]
    server_closes: bool,
    /// mp: number of worker processes [default: CPUs the server may use].
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=1024))]
    workers: Option<u32>,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    bind: IpAddr,
    /// Port to listen on (0: pick a free one).
    #[arg(long, default_value_t = 0)]
    port: u16,
    /// Pin to these CPUs, like `taskset -c` (e.g. 0 or 0-3 or 0,2).
    #[arg(long, value_name = "LIST")]
    cpus: Option<String>,
    /// listen(2) backlog (the kernel caps it at net.core.somaxconn).
    #[arg(long, default_value_t = 4096, value_parser = clap::value_parser!(i32).range(1..))]
    backlog: i32,
    /// Size of the epoll_wait event array.
    #[arg(long, default_value_t = 1024, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    max_events: u32,
    /// Bytes per read; also the per-connection limit of unsent output (backpressure).
    #[arg(long, default_value_t = 16384, value_parser = clap::value_parser!(u32).range(64..=(64 << 20)))]
    buffer_size: u32,
    /// Raise RLIMIT_NOFILE to this many descriptors (needed for many idle connections).
    #[arg(long, value_parser = clap::value_parser!(u64).range(16..=(1 << 30)))]
    nofile: Option<u64>,
}

impl Cli {
    /// Checks option combinations and builds the server configuration.
    fn into_config(self) -> Result<ServerConfig, UsageError> {
        let variant = self.mode;
        if self.lt_epollout && !variant.is_level_triggered() {
            return Err(UsageError(
                "--lt-epollout only applies to --mode lt or lt-pure".into(),
            ));
        }
        if self.workers.is_some() && variant != Variant::Mp {
            return Err(UsageError("--workers only applies to --mode mp".into()));
        }
        let protocol = match self.protocol {
            ProtocolArg::Echo => Protocol::Echo {
                server_closes: self.server_closes,
            },
            ProtocolArg::Http if self.server_closes => {
                return Err(UsageError(
                    "--server-closes only applies to --protocol echo (HTTP closes on Connection: close)".into(),
                ));
            }
            ProtocolArg::Http => Protocol::Http,
        };
        let cpus = self.cpus.as_deref().map(parse_cpu_list).transpose()?;
        Ok(ServerConfig {
            variant,
            protocol,
            lt_epollout: self.lt_epollout,
            bind: self.bind,
            port: self.port,
            cpus,
            backlog: self.backlog,
            max_events: self.max_events as usize,
            buffer_size: self.buffer_size as usize,
            nofile: self.nofile,
            workers: self.workers.map(|n| n as usize),
        })
    }
}

/// Condenses a clap error into one line: its message up to the first blank line.
fn one_line(error: &clap::Error) -> String {
    let rendered = error.render().to_string();
    let message: Vec<&str> = rendered
        .lines()
        .take_while(|line| !line.trim().is_empty())
        .map(str::trim)
        .collect();
    let message = message.join(" ");
    let message = message.strip_prefix("error: ").unwrap_or(&message);
    format!("{message}; see `servers --help`")
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) => {
            let _ = e.print();
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("Error: {}", one_line(&e));
            return ExitCode::from(2);
        }
    };
    let config = match cli.into_config() {
        Ok(config) => config,
        Err(e) => {
            eprintln!("Error: {e}");
            return ExitCode::from(2);
        }
    };
    match servers::run(&config) {
        Ok(code) => ExitCode::from(u8::try_from(code).unwrap_or(1)),
        Err(e) => {
            eprintln!("Error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
