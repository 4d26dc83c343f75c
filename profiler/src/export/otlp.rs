//! `--otlp-endpoint URL` (attach, serve): the counters pushed over OTLP/HTTP (protobuf,
//! `POST URL/v1/metrics`), cumulative since the start, built with `opentelemetry-proto`'s
//! messages (the SDK cannot be fed buckets counted elsewhere):
//!
//! - `syscall.latency` (s): an exponential histogram per syscall at scale 5, the same mapping as
//!   the Prometheus native histograms (OTLP's scale is Prometheus's schema; OTLP's bucket index
//!   is one less: bucket i is (2^(i/32), 2^((i+1)/32)]), with count, sum, min and max exact;
//! - a monotonic cumulative sum per counter of [`syscall_figures`] (its `counter` series, the
//!   one Prometheus has too): `syscall.calls`, `syscall.errors` (by `errno` class, each class
//!   once seen), `syscall.dropped`;
//! - `syscall.left_out_share` (a gauge per measurement, where it was measured): the share of the
//!   traced processes' syscall time the table leaves out, as JSON's `left_out_share`.
//!
//! The resource says which host and what was traced (`host.name`, `service.name`,
//! `syscall_profiler.target`); each point has the `syscall` attribute (and `variant`,
//! `concurrency`, `server_cpus` where the measurement has them).

use std::{
    io::{Read as _, Write as _},
    net::{TcpStream, ToSocketAddrs as _},
    time::Duration,
};

use anyhow::{Context as _, Result, bail};
use opentelemetry_proto::tonic::{
    collector::metrics::v1::ExportMetricsServiceRequest,
    common::v1::{AnyValue, InstrumentationScope, KeyValue, any_value},
    metrics::v1::{
        AggregationTemporality, ExponentialHistogram, ExponentialHistogramDataPoint, Gauge, Metric,
        NumberDataPoint, ResourceMetrics, ScopeMetrics, Sum, exponential_histogram_data_point,
        metric, number_data_point,
    },
    resource::v1::Resource,
};
use prost::Message as _;

use super::{ExportData, Measurement, prometheus_proto::native_index};
use crate::stats::{CounterSeries, Value, syscall_figures};

/// `--otlp-endpoint` and `--otlp-interval` (attach, serve).
#[derive(Clone, Debug, Default, clap::Args)]
pub struct OtlpArgs {
    /// Push the counters over OTLP/HTTP (protobuf) to this collector, e.g.
    /// http://127.0.0.1:4318 (metrics go to URL/v1/metrics): exponential histograms of the
    /// latency, calls and errors, cumulative.
    #[arg(long, value_name = "URL")]
    pub otlp_endpoint: Option<String>,
    /// How often to push.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = crate::parse::parse_duration, requires = "otlp_endpoint")]
    pub otlp_interval: Duration,
}

impl OtlpArgs {
    /// The endpoint (checked) and interval, when pushing was asked for.
    pub fn checked(&self) -> Result<Option<(String, Duration)>> {
        let Some(url) = &self.otlp_endpoint else {
            return Ok(None);
        };
        Endpoint::parse(url)?;
        if self.otlp_interval < Duration::from_millis(100) {
            bail!(
                "--otlp-interval {:?} is too short: give at least 100ms",
                self.otlp_interval
            );
        }
        Ok(Some((url.clone(), self.otlp_interval)))
    }
}

/// The scale of the exponential histograms: 2^5 = 32 buckets per power of two, as the kernel.
pub const SCALE: i32 = 5;

/// Where to push.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    host: String,
    port: u16,
    /// The request path (`/v1/metrics` after the URL's own path).
    path: String,
}

impl Endpoint {
    /// `http://HOST[:PORT][/PATH]`; the metrics go to `PATH/v1/metrics` (as OTLP/HTTP exporters
    /// do with a base URL). One line for anything else.
    pub fn parse(url: &str) -> Result<Self> {
        let Some(rest) = url.strip_prefix("http://") else {
            if url.starts_with("https://") {
                bail!(
                    "--otlp-endpoint {url}: https is not supported; give the collector's http:// address (an OpenTelemetry Collector's OTLP/HTTP receiver listens on http://HOST:4318)"
                );
            }
            bail!("--otlp-endpoint {url}: give an http:// URL, e.g. http://127.0.0.1:4318");
        };
        let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
        let port_of = |p: &str| -> Result<u16> {
            p.parse()
                .with_context(|| format!("--otlp-endpoint {url}: port {p} is not a number"))
        };
        // An IPv6 literal is bracketed: http://[::1]:4318.
        let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
            let Some((host, after)) = v6.split_once(']') else {
                bail!("--otlp-endpoint {url}: an IPv6 address needs its closing ']'");
            };
            match after.strip_prefix(':') {
                Some(p) => (host, port_of(p)?),
                None if after.is_empty() => (host, 4318),
                None => bail!("--otlp-endpoint {url}: give [ADDRESS]:PORT"),
            }
        } else {
            match authority.rsplit_once(':') {
                Some((h, p)) => (h, port_of(p)?),
                None => (authority, 4318),
            }
        };
        if host.is_empty() {
            bail!("--otlp-endpoint {url}: no host");
        }
        let base = path.trim_end_matches('/');
        Ok(Self {
            host: host.to_owned(),
            port,
            path: if base.is_empty() {
                "/v1/metrics".to_owned()
            } else {
                format!("/{base}/v1/metrics")
            },
        })
    }
}

impl Endpoint {
    /// HOST:PORT as a URL and a Host header write it (an IPv6 address in brackets).
    fn authority(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}

impl std::fmt::Display for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "http://{}{}", self.authority(), self.path)
    }
}

/// The longest one push may take, connecting and answering included: a collector that hangs
/// must not hold the profiler's exit (the last push is made then).
const PUSH_DEADLINE: Duration = Duration::from_secs(2);

/// Pushes snapshots to one endpoint.
pub struct Pusher {
    endpoint: Endpoint,
    resource: Vec<KeyValue>,
    start_unix_ns: u64,
}

impl Pusher {
    /// A pusher for `url`, its resource naming `target` (what was traced).
    pub fn new(url: &str, target: &str) -> Result<Self> {
        let hostname = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|h| h.trim().to_owned())
            .unwrap_or_default();
        Ok(Self {
            endpoint: Endpoint::parse(url)?,
            resource: vec![
                string("service.name", "syscall-profiler"),
                string("service.version", env!("CARGO_PKG_VERSION")),
                string("host.name", &hostname),
                string("syscall_profiler.target", target),
            ],
            start_unix_ns: unix_ns(),
        })
    }

    /// Sends `data`'s counters; an error names the endpoint and what went wrong.
    pub fn push(&self, data: &ExportData) -> Result<()> {
        let body = request(data, &self.resource, self.start_unix_ns, unix_ns()).encode_to_vec();
        post(&self.endpoint, &body).with_context(|| format!("pushing to {}", self.endpoint))
    }
}

fn unix_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

fn string(key: &str, value: &str) -> KeyValue {
    KeyValue {
        key: key.to_owned(),
        value: Some(AnyValue {
            value: Some(any_value::Value::StringValue(value.to_owned())),
        }),
        ..KeyValue::default()
    }
}

/// The attributes of one syscall's points in measurement `m`.
fn attributes(m: &Measurement, syscall: &str) -> Vec<KeyValue> {
    let mut out = vec![string("syscall", syscall)];
    out.extend(measurement_attributes(m));
    out
}

/// `variant`, `concurrency`, `server_cpus` where the measurement has them.
fn measurement_attributes(m: &Measurement) -> Vec<KeyValue> {
    let mut out = Vec::new();
    if let Some(v) = &m.variant {
        out.push(string("variant", v));
    }
    if let Some(c) = m.concurrency {
        out.push(string("concurrency", &c.to_string()));
    }
    if let Some(cpus) = &m.server_cpus {
        out.push(string("server_cpus", cpus));
    }
    out
}

/// The request for `data`'s summary measurements, cumulative from `start_ns` to `now_ns`.
#[must_use]
pub fn request(
    data: &ExportData,
    resource: &[KeyValue],
    start_ns: u64,
    now_ns: u64,
) -> ExportMetricsServiceRequest {
    let cumulative = AggregationTemporality::Cumulative as i32;
    let mut latency = Vec::new();
    // The declared counters, a sum per OTLP metric, in declaration order.
    let figures = syscall_figures();
    let mut counters: Vec<(CounterSeries, Vec<NumberDataPoint>)> = Vec::new();
    for series in figures.iter().filter_map(|f| f.counter) {
        if !counters.iter().any(|(c, _)| c.otlp == series.otlp) {
            counters.push((series, Vec::new()));
        }
    }
    for m in data.summaries() {
        for s in &m.syscalls.syscalls {
            let attrs = attributes(m, &s.name);
            // Bucket counts by OTLP index: each kernel bucket at its midpoint's index.
            let mut zero_count = 0;
            let mut counts: Vec<(i32, u64)> = Vec::new();
            for b in s.latency.buckets() {
                let mid = f64::midpoint(b.low as f64, b.high as f64);
                if mid <= 0.0 {
                    zero_count += b.count;
                    continue;
                }
                let index = native_index(mid / 1e9) - 1;
                match counts.last_mut() {
                    Some((i, c)) if *i == index => *c += b.count,
                    _ => counts.push((index, b.count)),
                }
            }
            let positive = counts.first().map(|&(offset, _)| {
                let last = counts.last().map_or(offset, |&(i, _)| i);
                let mut bucket_counts = vec![0; usize::try_from(last - offset + 1).unwrap_or(0)];
                for &(i, c) in &counts {
                    bucket_counts[usize::try_from(i - offset).unwrap_or(0)] += c;
                }
                exponential_histogram_data_point::Buckets {
                    offset,
                    bucket_counts,
                }
            });
            let any = s.calls > 0 && s.min_ns <= s.max_ns;
            latency.push(ExponentialHistogramDataPoint {
                attributes: attrs.clone(),
                start_time_unix_nano: start_ns,
                time_unix_nano: now_ns,
                count: s.latency.total(),
                sum: Some(s.total_ns as f64 / 1e9),
                scale: SCALE,
                zero_count,
                positive,
                min: any.then(|| s.min_ns as f64 / 1e9),
                max: any.then(|| s.max_ns as f64 / 1e9),
                ..ExponentialHistogramDataPoint::default()
            });
            for f in &figures {
                let (Some(series), Value::Count(n)) = (f.counter, (f.value)(s)) else {
                    continue;
                };
                if n == 0 && series.label.is_some() {
                    continue;
                }
                let mut attrs = attrs.clone();
                attrs.extend(series.label.map(|(k, v)| string(k, v)));
                if let Some((_, points)) = counters.iter_mut().find(|(c, _)| c.otlp == series.otlp)
                {
                    points.push(NumberDataPoint {
                        attributes: attrs,
                        start_time_unix_nano: start_ns,
                        time_unix_nano: now_ns,
                        value: Some(number_data_point::Value::AsInt(
                            i64::try_from(n).unwrap_or(i64::MAX),
                        )),
                        ..NumberDataPoint::default()
                    });
                }
            }
        }
    }
    let sum = |data_points| {
        metric::Data::Sum(Sum {
            data_points,
            aggregation_temporality: cumulative,
            is_monotonic: true,
        })
    };
    // Per cgroup (`--cgroup`, `--by-cgroup`): calls and time, with the cgroup's container.
    let mut cgroup_calls = Vec::new();
    let mut cgroup_time = Vec::new();
    for m in data.summaries() {
        for row in &m.syscalls.processes {
            let Some(cgroup) = &row.cgroup else { continue };
            for (s, counts) in m.syscalls.syscalls.iter().zip(&row.syscalls) {
                let mut attrs = attributes(m, &s.name);
                attrs.push(string("cgroup", cgroup));
                for (k, v) in row
                    .container
                    .iter()
                    .flat_map(crate::container::Container::otel_attributes)
                {
                    attrs.push(string(k, &v));
                }
                cgroup_calls.push(NumberDataPoint {
                    attributes: attrs.clone(),
                    start_time_unix_nano: start_ns,
                    time_unix_nano: now_ns,
                    value: Some(number_data_point::Value::AsInt(
                        i64::try_from(counts.calls).unwrap_or(i64::MAX),
                    )),
                    ..NumberDataPoint::default()
                });
                cgroup_time.push(NumberDataPoint {
                    attributes: attrs,
                    start_time_unix_nano: start_ns,
                    time_unix_nano: now_ns,
                    value: Some(number_data_point::Value::AsDouble(
                        counts.total_ns as f64 / 1e9,
                    )),
                    ..NumberDataPoint::default()
                });
            }
        }
    }
    let mut metrics = vec![
        Metric {
            name: "syscall.latency".to_owned(),
            description: "Syscall latency, entry to exit, timed in the kernel (each kernel bucket in the exponential bucket holding its midpoint: quantiles within about 4%).".to_owned(),
            unit: "s".to_owned(),
            data: Some(metric::Data::ExponentialHistogram(ExponentialHistogram {
                data_points: latency,
                aggregation_temporality: cumulative,
            })),
            ..Metric::default()
        },
    ];
    // Each counter counts calls.
    metrics.extend(counters.into_iter().map(|(series, points)| Metric {
        name: series.otlp.to_owned(),
        description: series.help.to_owned(),
        unit: "{call}".to_owned(),
        data: Some(sum(points)),
        ..Metric::default()
    }));
    // What the table leaves out, where every call was counted; absent, never 0, where not.
    let left_out: Vec<NumberDataPoint> = data
        .summaries()
        .into_iter()
        .filter_map(|m| {
            let left = m.syscalls.left_out()?;
            Some(NumberDataPoint {
                attributes: measurement_attributes(m),
                start_time_unix_nano: start_ns,
                time_unix_nano: now_ns,
                value: Some(number_data_point::Value::AsDouble(left.share)),
                ..NumberDataPoint::default()
            })
        })
        .collect();
    if !left_out.is_empty() {
        metrics.push(Metric {
            name: "syscall.left_out_share".to_owned(),
            description: "Share (0 to 1) of the traced processes' syscall time in syscalls the table does not time, from every call counted on the raw tracepoints.".to_owned(),
            unit: "1".to_owned(),
            data: Some(metric::Data::Gauge(Gauge {
                data_points: left_out,
            })),
            ..Metric::default()
        });
    }
    if !cgroup_calls.is_empty() {
        metrics.push(Metric {
            name: "syscall.cgroup.calls".to_owned(),
            description: "Completed syscalls per cgroup (--cgroup, --by-cgroup), with its container's container.* and k8s.* attributes.".to_owned(),
            unit: "{call}".to_owned(),
            data: Some(sum(cgroup_calls)),
            ..Metric::default()
        });
        metrics.push(Metric {
            name: "syscall.cgroup.time".to_owned(),
            description: "Time inside syscalls per cgroup (--cgroup, --by-cgroup).".to_owned(),
            unit: "s".to_owned(),
            data: Some(sum(cgroup_time)),
            ..Metric::default()
        });
    }
    ExportMetricsServiceRequest {
        resource_metrics: vec![ResourceMetrics {
            resource: Some(Resource {
                attributes: resource.to_vec(),
                ..Resource::default()
            }),
            scope_metrics: vec![ScopeMetrics {
                scope: Some(InstrumentationScope {
                    name: "syscall-profiler".to_owned(),
                    version: env!("CARGO_PKG_VERSION").to_owned(),
                    ..InstrumentationScope::default()
                }),
                metrics,
                ..ScopeMetrics::default()
            }],
            ..ResourceMetrics::default()
        }],
    }
}

/// One `POST` of `body` (protobuf) over HTTP/1.1; any 2xx is success.
fn post(endpoint: &Endpoint, body: &[u8]) -> Result<()> {
    let address = (endpoint.host.as_str(), endpoint.port)
        .to_socket_addrs()
        .context("resolving the host")?
        .next()
        .context("the host resolves to no address")?;
    let deadline = std::time::Instant::now() + PUSH_DEADLINE;
    let left = || {
        deadline
            .saturating_duration_since(std::time::Instant::now())
            .max(Duration::from_millis(1))
    };
    let mut stream = TcpStream::connect_timeout(&address, left())
        .context("connecting (is the collector listening?)")?;
    stream.set_write_timeout(Some(left()))?;
    let head = format!(
        "POST {} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/x-protobuf\r\nContent-Length: {}\r\nConnection: close\r\nUser-Agent: syscall-profiler/{}\r\n\r\n",
        endpoint.path,
        endpoint.authority(),
        body.len(),
        env!("CARGO_PKG_VERSION")
    );
    stream.write_all(head.as_bytes())?;
    stream.write_all(body)?;
    // The answer, read until the collector closes or the deadline passes.
    let mut response = Vec::new();
    let mut chunk = [0_u8; 4096];
    while response.len() < 64 * 1024 {
        if std::time::Instant::now() >= deadline {
            bail!(
                "the collector did not answer within {}s",
                PUSH_DEADLINE.as_secs()
            );
        }
        stream.set_read_timeout(Some(left()))?;
        match stream.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => response.extend_from_slice(&chunk[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(e) if response.is_empty() => return Err(e).context("reading the answer"),
            Err(_) => break,
        }
    }
    let text = String::from_utf8_lossy(&response);
    let status: u16 = text
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .context("no HTTP answer")?;
    if !(200..300).contains(&status) {
        let first = text.lines().next().unwrap_or_default();
        bail!("the collector answered {first}");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_parse_to_host_port_and_the_metrics_path() {
        let e = Endpoint::parse("http://127.0.0.1:4318").unwrap();
        assert_eq!(e.to_string(), "http://127.0.0.1:4318/v1/metrics");
        assert_eq!(
            Endpoint::parse("http://collector/otlp/")
                .unwrap()
                .to_string(),
            "http://collector:4318/otlp/v1/metrics"
        );
        // IPv6 literals, bracketed.
        let v6 = Endpoint::parse("http://[::1]:4319").unwrap();
        assert_eq!((v6.host.as_str(), v6.port), ("::1", 4319));
        assert_eq!(v6.to_string(), "http://[::1]:4319/v1/metrics");
        assert_eq!(Endpoint::parse("http://[::1]").unwrap().port, 4318);
        for bad in [
            "https://c:4318",
            "c:4318",
            "http://:4318",
            "http://c:port",
            "http://[::1:4318",
        ] {
            let e = Endpoint::parse(bad).unwrap_err().to_string();
            assert!(e.starts_with("--otlp-endpoint") && !e.contains('\n'), "{e}");
        }
    }
}
