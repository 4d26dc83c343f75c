//! `profiler bench precision`: the floor of a comparison's precision on this machine, as
//! `bench overhead` is the floor of its cost.
//!
//! Two warm servers, started once. First `run`'s own path on them (the warm engine: the
//! programs attached, calibrated slices in blocks of a random order) for `--time`, with one
//! fixed look at the end; then, on the same two servers for the same time with the programs
//! detached, the smallest client that can compare them: one pinned thread, blocking sockets,
//! no runtime, adjacent slices of the same request count in a random order, each pair's QPS
//! change, the same sign-test interval. Both widths and their ratio are printed: how far
//! `run` is from what the machine allows.

use std::{
    io::{Read as _, Write as _},
    net::{SocketAddr, TcpStream},
    path::PathBuf,
    sync::Arc,
    time::{Duration, Instant},
};

use anyhow::{Context as _, Result, bail};
use clap::{Args, Parser};

use crate::{
    inference::{Design, Estimate, Method},
    loadgen::Stop,
    parse::parse_duration,
    run::{
        model::{Judge, ScenarioResult, Subject, Variant, VariantResult},
        options::RunArgs,
        slices::{self, SplitMix},
    },
};

/// `profiler bench precision` options.
#[derive(Debug, Args)]
#[command(after_help = "EXAMPLES:
    profiler bench precision                       # lt against et, 30 s each way
    profiler bench precision --variants lt,lt      # A/A: the same server twice
    profiler bench precision --time 10s")]
pub struct PrecisionArgs {
    /// The two servers compared (the second against the first): built-in variants.
    #[arg(long, value_delimiter = ',', value_enum, default_values_t = [Variant::Lt, Variant::Et])]
    pub variants: Vec<Variant>,
    /// Time each way gets: run's path, then the floor client.
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    pub time: Duration,
    /// The servers binary [default: `servers` next to this executable].
    #[arg(long, value_name = "PATH")]
    pub server_bin: Option<PathBuf>,
    /// Two servers of your own instead of --variants, as run takes them (NAME=COMMAND, `{port}`
    /// where it listens; the second is compared with the first).
    #[arg(
        long = "server-cmd",
        value_name = "NAME=CMD",
        conflicts_with = "variants"
    )]
    pub server_cmds: Vec<String>,
}

/// One way of comparing the two servers.
#[derive(Clone, Debug)]
pub struct Way {
    /// How it is named.
    pub name: String,
    /// Requests per slice.
    pub slice_requests: u64,
    /// The QPS change of the second server against the first, with its interval.
    pub change: Estimate,
}

impl Way {
    /// The interval's width, percentage points (`None` without an interval).
    #[must_use]
    pub fn width(&self) -> Option<f64> {
        self.change.interval.map(|i| i.high - i.low)
    }
}

/// The measurement: run's path and the floor client.
#[derive(Clone, Debug)]
pub struct Precision {
    /// run's warm engine.
    pub run: Way,
    /// The floor client.
    pub floor: Way,
    /// The two servers' names, the reference first.
    pub names: [String; 2],
}

impl Precision {
    /// run's width over the floor's.
    #[must_use]
    pub fn ratio(&self) -> Option<f64> {
        Some(self.run.width()? / self.floor.width()?)
    }
}

#[derive(Parser)]
struct RunCommand {
    #[command(flatten)]
    run: RunArgs,
}

/// Runs the benchmark and prints its table.
pub fn run(args: &PrecisionArgs) -> Result<()> {
    let p = measure(args)?;
    println!(
        "bench precision: {} against {}, serial short-connection echo, {} each way",
        p.names[1],
        p.names[0],
        humantime::format_duration(args.time)
    );
    let mut table = crate::report::table::Table::new([
        "way",
        "pairs",
        "slice",
        "QPS change [interval] (level, pairs)",
        "width (points)",
    ]);
    for w in [&p.floor, &p.run] {
        table.row([
            w.name.clone(),
            w.change.n.to_string(),
            format!("{} requests", w.slice_requests),
            w.change.cell("pairs"),
            w.width().map_or("-".to_owned(), |x| format!("{x:.2}")),
        ]);
    }
    print!("{}", table.render());
    match p.ratio() {
        Some(r) => println!("run's interval is {r:.2}× as wide as the floor client's"),
        None => println!("no ratio: a way made too few pairs for an interval"),
    }
    Ok(())
}

/// Starts the two servers, measures both ways, stops them.
pub fn measure(args: &PrecisionArgs) -> Result<Precision> {
    if args.server_cmds.is_empty() && args.variants.len() != 2 {
        bail!(
            "--variants takes two servers (the second is compared with the first), e.g. lt,et or lt,lt"
        );
    }
    if !args.server_cmds.is_empty() && args.server_cmds.len() != 2 {
        bail!(
            "--server-cmd is given twice, one server each (the second is compared with the first): --server-cmd 'a=./srv {{port}}' --server-cmd 'b=./srv2 {{port}}'"
        );
    }
    crate::bpf::environment::prepare()?;
    let mut argv: Vec<String> = vec!["run".into(), "--concurrency".into(), "1".into()];
    if args.server_cmds.is_empty() {
        argv.extend([
            "--variants".into(),
            args.variants
                .iter()
                .map(|v| v.name())
                .collect::<Vec<_>>()
                .join(","),
        ]);
    } else {
        for c in &args.server_cmds {
            argv.extend(["--server-cmd".into(), c.clone()]);
        }
    }
    if let Some(bin) = &args.server_bin {
        argv.extend(["--server-bin".into(), bin.display().to_string()]);
    }
    let run_args = RunCommand::try_parse_from(&argv)
        .context("building run's options")?
        .run;
    let mut options = crate::run::options::from_args(&run_args)?;
    options.progress = false;
    // The same server twice: two servers, one name each.
    if options.variants.len() == 1 {
        options.variants.push(options.variants[0].clone());
    }
    let mut spec = options.scenarios[0].clone();
    spec.baseline = false;
    let variants: Vec<Subject> = options.variants.clone();
    let mut result = ScenarioResult {
        title: "bench precision".to_owned(),
        concurrency: 1,
        variants: variants
            .iter()
            .map(|v| VariantResult {
                variant: v.clone(),
                runs: Vec::new(),
                slices: Vec::new(),
                failure: None,
            })
            .collect(),
        mp_workers: None,
        server_cpus: options.server_cpus.clone(),
        shared_cpus: Vec::new(),
        // One look, at the end: the time, not the data, ends it.
        judge: Judge {
            design: Design::fixed(8192),
            margin_pct: options.margin_pct,
        },
        stopped: String::new(),
        slices: None,
    };
    let cancel = crate::trace::stop_on_signals()?;
    let _pinned = crate::run::collector_cpus(&options.client_cpus);
    let mut warm = slices::start_servers(&options, &spec, &variants, &mut result);
    let mut detaching = Vec::new();
    let outcome = (|| -> Result<Precision> {
        if let Some(why) = result.variants.iter().find_map(|v| v.failure.clone()) {
            bail!("a server did not start: {why}");
        }
        let started = Instant::now();
        slices::measure_warm(
            &options,
            &spec,
            &variants,
            &mut warm,
            &mut result,
            Some(started + args.time),
            &cancel,
            &|_| {},
            started,
            &mut detaching,
        )?;
        // The floor runs with nothing attached.
        for d in detaching.drain(..) {
            let _ = d.join();
        }
        if let Some(why) = result.variants.iter().find_map(|v| v.failure.clone()) {
            bail!("a server failed: {why}");
        }
        let Some(Stop::Requests(n)) = result.slices.as_ref().map(|d| d.window) else {
            bail!("run's path made no slices");
        };
        let change = result
            .variant_changes()
            .first()
            .map(|(.., c)| c.qps)
            .context("run's path made no pairs")?;
        let run = Way {
            name: "run's warm engine (programs attached, blocks of a random order)".to_owned(),
            slice_requests: n,
            change,
        };
        let addrs: Vec<SocketAddr> = warm.iter().flatten().map(slices::Warm::addr).collect();
        let floor = floor_client(
            addrs[0],
            addrs[1],
            n,
            options.payload,
            args.time,
            options.client_cpus.first().copied(),
            &cancel,
        )?;
        Ok(Precision {
            run,
            floor,
            names: [variants[0].to_string(), variants[1].to_string()],
        })
    })();
    for w in warm.into_iter().flatten() {
        w.stop();
    }
    for d in detaching {
        let _ = d.join();
    }
    outcome
}

/// The floor: one thread (pinned to `cpu`), blocking sockets, pairs of adjacent slices of `n`
/// requests against `a` and `b` in a random order, for `time`; the QPS change of `b` against
/// `a` per pair, with the sign test's interval at 95%.
fn floor_client(
    a: SocketAddr,
    b: SocketAddr,
    n: u64,
    payload: usize,
    time: Duration,
    cpu: Option<usize>,
    cancel: &Arc<std::sync::atomic::AtomicBool>,
) -> Result<Way> {
    let cancel = Arc::clone(cancel);
    let handle = std::thread::spawn(move || -> Result<Vec<f64>> {
        if let Some(cpu) = cpu {
            crate::cpus::affinity::pin_current(cpu).context("pinning the floor client")?;
        }
        let send = vec![b'x'; payload];
        let mut recv = vec![0u8; payload];
        let slice = |addr: SocketAddr, recv: &mut [u8]| -> Result<f64> {
            let t0 = Instant::now();
            for _ in 0..n {
                let mut s = TcpStream::connect(addr).context("the floor client's connect")?;
                s.set_nodelay(true)?;
                s.write_all(&send)?;
                s.read_exact(recv)?;
            }
            Ok(n as f64 / t0.elapsed().as_secs_f64())
        };
        // Warm both, as run's path found them.
        slice(a, &mut recv)?;
        slice(b, &mut recv)?;
        let mut rng = SplitMix::from_clock();
        let mut changes = Vec::new();
        let end = Instant::now() + time;
        while Instant::now() < end && !cancel.load(std::sync::atomic::Ordering::Relaxed) {
            let (qa, qb) = if rng.coin() {
                let qa = slice(a, &mut recv)?;
                (qa, slice(b, &mut recv)?)
            } else {
                let qb = slice(b, &mut recv)?;
                (slice(a, &mut recv)?, qb)
            };
            changes.push(100.0 * (qb - qa) / qa);
        }
        Ok(changes)
    });
    let changes = handle
        .join()
        .map_err(|_| anyhow::anyhow!("the floor client panicked"))??;
    let change = Estimate::paired(&changes, 0.05, Method::SignTest, None)
        .context("the floor client made no pairs")?;
    Ok(Way {
        name: "floor client (one thread, blocking sockets, adjacent pairs)".to_owned(),
        slice_requests: n,
        change,
    })
}
