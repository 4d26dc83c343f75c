//! `profiler serve` for Prometheus with native histograms: the protobuf exposition format (a
//! stream of length-delimited `io.prometheus.client.MetricFamily` messages), chosen when the
//! scraper's `Accept` header asks for it, as Prometheus ≥ 2.40 does with
//! `--enable-feature=native-histograms`.
//!
//! It carries every series of the text format, unchanged (the text rendering is parsed back, so
//! the two can never disagree), and one more family, `syscall_profiler_syscall_latency_native_seconds`:
//! each syscall's latency as a native histogram at schema 5 (bucket boundaries 2^(i/32) s). A
//! family with both classic buckets and a native part is stored as native only by Prometheus
//! 2.42, so the classic `syscall_latency_seconds` stays classic and the native one has its own
//! name: both are queryable.
//!
//! **How the kernel's buckets map.** The kernel counts each latency exactly below 64 ns and in
//! 32 linear sub-buckets per power of two above (each at most 1/32 of its value wide). A
//! schema-5 bucket is 2^(1/32) − 1 ≈ 2.19% of its value wide, and its boundaries do not align
//! with the linear ones; each kernel bucket's count goes to the native bucket that holds the
//! kernel bucket's midpoint. A value lies within 1/64 of its kernel bucket's midpoint, and the
//! midpoint within one native bucket, so a quantile read from the native histogram is within
//! about 4% of the value the kernel recorded (1/64 + 2.19%, plus Prometheus's interpolation
//! inside the bucket, which stays within the bucket).
//!
//! The messages are declared here with `prost`'s derive, field for field as in Prometheus's
//! `io/prometheus/client/metrics.proto` (proto2: every scalar optional).

use prost::Message;

use crate::stats::LatencyHistogram;

/// The content type of the delimited protobuf format, as scrapers ask for it.
pub const CONTENT_TYPE: &str =
    "application/vnd.google.protobuf; proto=io.prometheus.client.MetricFamily; encoding=delimited";

/// Whether an `Accept` header asks for the delimited protobuf format.
#[must_use]
pub fn accepts(accept: &str) -> bool {
    accept.split(',').any(|part| {
        let part = part.to_ascii_lowercase();
        part.contains("application/vnd.google.protobuf")
            && part.contains("proto=io.prometheus.client.metricfamily")
            && part.contains("encoding=delimited")
    })
}

/// The schema of the native histograms: 2^5 = 32 buckets per power of two, as the kernel.
pub const SCHEMA: i32 = 5;

/// The zero bucket's width: none in practice (the kernel's smallest value is 0 ns, counted in
/// it); positive, so that an empty histogram is still read as native.
const ZERO_THRESHOLD: f64 = 1e-128;

#[derive(Clone, PartialEq, Message)]
struct LabelPair {
    #[prost(string, optional, tag = "1")]
    name: Option<String>,
    #[prost(string, optional, tag = "2")]
    value: Option<String>,
}

#[derive(Clone, PartialEq, Message)]
struct Gauge {
    #[prost(double, optional, tag = "1")]
    value: Option<f64>,
}

#[derive(Clone, PartialEq, Message)]
struct Counter {
    #[prost(double, optional, tag = "1")]
    value: Option<f64>,
}

#[derive(Clone, PartialEq, Message)]
struct Untyped {
    #[prost(double, optional, tag = "1")]
    value: Option<f64>,
}

#[derive(Clone, PartialEq, Message)]
struct Quantile {
    #[prost(double, optional, tag = "1")]
    quantile: Option<f64>,
    #[prost(double, optional, tag = "2")]
    value: Option<f64>,
}

#[derive(Clone, PartialEq, Message)]
struct Summary {
    #[prost(uint64, optional, tag = "1")]
    sample_count: Option<u64>,
    #[prost(double, optional, tag = "2")]
    sample_sum: Option<f64>,
    #[prost(message, repeated, tag = "3")]
    quantile: Vec<Quantile>,
}

#[derive(Clone, PartialEq, Message)]
struct Bucket {
    #[prost(uint64, optional, tag = "1")]
    cumulative_count: Option<u64>,
    #[prost(double, optional, tag = "2")]
    upper_bound: Option<f64>,
}

#[derive(Clone, PartialEq, Message)]
struct BucketSpan {
    #[prost(sint32, optional, tag = "1")]
    offset: Option<i32>,
    #[prost(uint32, optional, tag = "2")]
    length: Option<u32>,
}

#[derive(Clone, PartialEq, Message)]
struct Histogram {
    #[prost(uint64, optional, tag = "1")]
    sample_count: Option<u64>,
    #[prost(double, optional, tag = "2")]
    sample_sum: Option<f64>,
    #[prost(message, repeated, tag = "3")]
    bucket: Vec<Bucket>,
    #[prost(sint32, optional, tag = "5")]
    schema: Option<i32>,
    #[prost(double, optional, tag = "6")]
    zero_threshold: Option<f64>,
    #[prost(uint64, optional, tag = "7")]
    zero_count: Option<u64>,
    #[prost(message, repeated, tag = "12")]
    positive_span: Vec<BucketSpan>,
    #[prost(sint64, repeated, packed = "false", tag = "13")]
    positive_delta: Vec<i64>,
}

#[derive(Clone, PartialEq, Message)]
struct Metric {
    #[prost(message, repeated, tag = "1")]
    label: Vec<LabelPair>,
    #[prost(message, optional, tag = "2")]
    gauge: Option<Gauge>,
    #[prost(message, optional, tag = "3")]
    counter: Option<Counter>,
    #[prost(message, optional, tag = "4")]
    summary: Option<Summary>,
    #[prost(message, optional, tag = "5")]
    untyped: Option<Untyped>,
    #[prost(message, optional, tag = "7")]
    histogram: Option<Histogram>,
}

#[derive(Clone, PartialEq, Message)]
struct MetricFamily {
    #[prost(string, optional, tag = "1")]
    name: Option<String>,
    #[prost(string, optional, tag = "2")]
    help: Option<String>,
    #[prost(int32, optional, tag = "3")]
    r#type: Option<i32>,
    #[prost(message, repeated, tag = "4")]
    metric: Vec<Metric>,
}

const COUNTER: i32 = 0;
const GAUGE: i32 = 1;
const SUMMARY: i32 = 2;
const UNTYPED: i32 = 3;
const HISTOGRAM: i32 = 4;

/// One syscall's latency, for the native family.
pub struct NativeSeries<'a> {
    /// The series' labels, as the text format writes them (`syscall="close",pid="1"`).
    pub labels: String,
    /// The kernel's histogram, in ns.
    pub latency: &'a LatencyHistogram,
    /// Sum of the latencies, s.
    pub sum_s: f64,
}

/// The text exposition `text` (as [`super::prometheus::render`] writes it) and the native
/// latency histograms `natives` (family `NATIVE_FAMILY`), as one delimited protobuf stream.
#[must_use]
pub fn encode(text: &str, native_family: &str, natives: &[NativeSeries]) -> Vec<u8> {
    let mut families = parse_text(text);
    if !natives.is_empty() {
        families.push(MetricFamily {
            name: Some(native_family.to_owned()),
            help: Some(
                "Syscall latency, entry to exit, as a native histogram (schema 5: the kernel's 32 buckets per power of two, each kernel bucket in the native bucket holding its midpoint: quantiles within about 4%).".to_owned(),
            ),
            r#type: Some(HISTOGRAM),
            metric: natives
                .iter()
                .map(|n| Metric {
                    label: parse_labels(&n.labels),
                    histogram: Some(native(n.latency, n.sum_s)),
                    ..Metric::default()
                })
                .collect(),
        });
    }
    let mut out = Vec::with_capacity(32 * 1024);
    for family in families {
        // Writing into a Vec cannot fail.
        let _ = family.encode_length_delimited(&mut out);
    }
    out
}

/// The schema-5 index of the native bucket holding `seconds` (> 0): bucket i is
/// (2^((i-1)/32), 2^(i/32)].
#[must_use]
pub fn native_index(seconds: f64) -> i32 {
    // Rounded up; an exact power lands in the bucket it bounds from above.
    (seconds.log2() * f64::from(1 << SCHEMA)).ceil() as i32
}

/// The kernel histogram as a native histogram: each bucket's count at its midpoint's index.
fn native(latency: &LatencyHistogram, sum_s: f64) -> Histogram {
    let mut zero_count = 0;
    let mut counts: Vec<(i32, u64)> = Vec::new();
    for b in latency.buckets() {
        let mid_ns = f64::midpoint(b.low as f64, b.high as f64);
        if mid_ns <= 0.0 {
            zero_count += b.count;
            continue;
        }
        let index = native_index(mid_ns / 1e9);
        match counts.last_mut() {
            Some((i, c)) if *i == index => *c += b.count,
            _ => counts.push((index, b.count)),
        }
    }
    counts.sort_by_key(|(i, _)| *i);
    // Spans of consecutive indexes; deltas of counts, each against the previous bucket's.
    let mut spans: Vec<BucketSpan> = Vec::new();
    let mut deltas = Vec::with_capacity(counts.len());
    let (mut last_index, mut last_count) = (None::<i32>, 0i64);
    for (index, count) in counts {
        match last_index {
            Some(prev) if index == prev + 1 => {
                if let Some(span) = spans.last_mut() {
                    span.length = Some(span.length.unwrap_or(0) + 1);
                }
            }
            _ => spans.push(BucketSpan {
                offset: Some(last_index.map_or(index, |prev| index - prev - 1)),
                length: Some(1),
            }),
        }
        let count = i64::try_from(count).unwrap_or(i64::MAX);
        deltas.push(count - last_count);
        last_count = count;
        last_index = Some(index);
    }
    Histogram {
        sample_count: Some(latency.total()),
        sample_sum: Some(sum_s),
        bucket: Vec::new(),
        schema: Some(SCHEMA),
        zero_threshold: Some(ZERO_THRESHOLD),
        zero_count: Some(zero_count),
        positive_span: spans,
        positive_delta: deltas,
    }
}

/// The families of a text exposition (the subset this project writes: `# HELP`, `# TYPE`,
/// samples with labels; histograms as `_bucket{le}`, `_sum`, `_count`).
fn parse_text(text: &str) -> Vec<MetricFamily> {
    let mut families: Vec<MetricFamily> = Vec::new();
    let mut helps: Vec<(String, String)> = Vec::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            if let Some((name, help)) = rest.split_once(' ') {
                helps.push((name.to_owned(), unescape_help(help)));
            }
            continue;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            if let Some((name, kind)) = rest.split_once(' ') {
                let help = helps
                    .iter()
                    .find(|(n, _)| n == name)
                    .map(|(_, h)| h.clone());
                families.push(MetricFamily {
                    name: Some(name.to_owned()),
                    help,
                    r#type: Some(match kind {
                        "counter" => COUNTER,
                        "gauge" => GAUGE,
                        "histogram" => HISTOGRAM,
                        "summary" => SUMMARY,
                        _ => UNTYPED,
                    }),
                    metric: Vec::new(),
                });
            }
            continue;
        }
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let Some((series, value)) = line.rsplit_once(' ') else {
            continue;
        };
        let Ok(value) = parse_value(value) else {
            continue;
        };
        let (name, labels) = match series.split_once('{') {
            Some((name, labels)) => (name, labels.trim_end_matches('}')),
            None => (series, ""),
        };
        let Some(family) = families.last_mut() else {
            continue;
        };
        let family_name = family.name.clone().unwrap_or_default();
        let mut labels = parse_labels(labels);
        match family.r#type {
            Some(HISTOGRAM) => {
                let le = labels
                    .iter()
                    .position(|l| l.name.as_deref() == Some("le"))
                    .map(|i| labels.remove(i));
                let metric = metric_for(&mut family.metric, labels);
                let histogram = metric.histogram.get_or_insert_with(Histogram::default);
                if name == format!("{family_name}_bucket") {
                    let bound = le
                        .and_then(|l| l.value)
                        .and_then(|v| parse_value(&v).ok())
                        .unwrap_or(f64::INFINITY);
                    // +Inf is implied by the count.
                    if bound.is_finite() {
                        histogram.bucket.push(Bucket {
                            cumulative_count: Some(value as u64),
                            upper_bound: Some(bound),
                        });
                    }
                } else if name == format!("{family_name}_sum") {
                    histogram.sample_sum = Some(value);
                } else if name == format!("{family_name}_count") {
                    histogram.sample_count = Some(value as u64);
                }
            }
            Some(SUMMARY) => {
                let quantile = labels
                    .iter()
                    .position(|l| l.name.as_deref() == Some("quantile"))
                    .map(|i| labels.remove(i));
                let metric = metric_for(&mut family.metric, labels);
                let summary = metric.summary.get_or_insert_with(Summary::default);
                if name == format!("{family_name}_sum") {
                    summary.sample_sum = Some(value);
                } else if name == format!("{family_name}_count") {
                    summary.sample_count = Some(value as u64);
                } else if let Some(q) = quantile
                    .and_then(|l| l.value)
                    .and_then(|v| parse_value(&v).ok())
                {
                    summary.quantile.push(Quantile {
                        quantile: Some(q),
                        value: Some(value),
                    });
                }
            }
            Some(kind) => family.metric.push(Metric {
                label: labels,
                counter: (kind == COUNTER).then_some(Counter { value: Some(value) }),
                gauge: (kind == GAUGE).then_some(Gauge { value: Some(value) }),
                untyped: (kind == UNTYPED).then_some(Untyped { value: Some(value) }),
                ..Metric::default()
            }),
            None => {}
        }
    }
    families
}

/// The metric of `metrics` with `labels`, added if there is none yet.
fn metric_for(metrics: &mut Vec<Metric>, labels: Vec<LabelPair>) -> &mut Metric {
    let at = if let Some(i) = metrics.iter().position(|m| m.label == labels) {
        i
    } else {
        metrics.push(Metric {
            label: labels,
            ..Metric::default()
        });
        metrics.len() - 1
    };
    &mut metrics[at]
}

fn parse_value(text: &str) -> Result<f64, std::num::ParseFloatError> {
    match text {
        "+Inf" => Ok(f64::INFINITY),
        "-Inf" => Ok(f64::NEG_INFINITY),
        _ => text.parse(),
    }
}

/// `a="x",b="y\"z"` → pairs, with the text format's escapes (`\\`, `\"`, `\n`) undone.
fn parse_labels(text: &str) -> Vec<LabelPair> {
    let mut pairs = Vec::new();
    let mut rest = text;
    while let Some((name, after)) = rest.split_once("=\"") {
        let mut value = String::new();
        let mut chars = after.char_indices();
        let mut end = after.len();
        while let Some((i, c)) = chars.next() {
            match c {
                '\\' => match chars.next() {
                    Some((_, 'n')) => value.push('\n'),
                    Some((_, other)) => value.push(other),
                    None => {}
                },
                '"' => {
                    end = i + 1;
                    break;
                }
                other => value.push(other),
            }
        }
        pairs.push(LabelPair {
            name: Some(name.trim_start_matches(',').trim().to_owned()),
            value: Some(value),
        });
        rest = &after[end..];
    }
    pairs
}

fn unescape_help(text: &str) -> String {
    text.replace("\\n", "\n").replace("\\\\", "\\")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accept_headers_of_prometheus_choose_protobuf_and_others_text() {
        // Prometheus 2.42 with --enable-feature=native-histograms.
        assert!(accepts(
            "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited;q=0.7,text/plain;version=0.0.4;q=0.3,*/*;q=0.1"
        ));
        // Without the feature, curl, a browser.
        assert!(!accepts(
            "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"
        ));
        assert!(!accepts("*/*"));
    }

    #[test]
    fn native_indexes_follow_schema_5() {
        assert_eq!(native_index(1.0), 0);
        assert_eq!(native_index(2.0), 32);
        assert_eq!(native_index(1.01), 1);
        assert_eq!(native_index(0.5), -32);
        // 1 µs: 2^-19.93..., bucket -637 holds it.
        let i = native_index(1e-6);
        assert!(
            2f64.powf(f64::from(i - 1) / 32.0) < 1e-6 && 1e-6 <= 2f64.powf(f64::from(i) / 32.0)
        );
    }

    #[test]
    fn text_families_round_trip_with_labels_and_histograms() {
        let text = "# HELP x_calls_total Calls.\n# TYPE x_calls_total counter\nx_calls_total{syscall=\"close\",comm=\"a\\\"b\"} 3\n\
                    # HELP x_seconds Latency.\n# TYPE x_seconds histogram\n\
                    x_seconds_bucket{syscall=\"close\",le=\"0.5\"} 1\nx_seconds_bucket{syscall=\"close\",le=\"+Inf\"} 3\n\
                    x_seconds_sum{syscall=\"close\"} 1.5\nx_seconds_count{syscall=\"close\"} 3\n";
        let families = parse_text(text);
        assert_eq!(families.len(), 2);
        let calls = &families[0].metric[0];
        assert_eq!(calls.counter.as_ref().unwrap().value, Some(3.0));
        assert_eq!(calls.label[1].value.as_deref(), Some("a\"b"));
        let h = families[1].metric[0].histogram.as_ref().unwrap();
        assert_eq!((h.sample_count, h.sample_sum), (Some(3), Some(1.5)));
        assert_eq!(h.bucket.len(), 1, "+Inf is the count");
        assert_eq!(families[1].metric[0].label.len(), 1, "le is not a label");
    }

    #[test]
    fn native_histogram_keeps_every_count_and_encodes_spans_and_deltas() {
        let mut latency = LatencyHistogram::default();
        latency.record_n(1_000, 5); // 1 µs
        latency.record_n(1_020, 2); // the same native bucket or the next
        latency.record_n(1_000_000, 3); // 1 ms
        let h = native(&latency, 0.003);
        assert_eq!(h.sample_count, Some(10));
        let mut running = 0i64;
        let total: i64 = h
            .positive_delta
            .iter()
            .map(|d| {
                running += d;
                running
            })
            .sum();
        assert_eq!(total, 10, "the counts add up to the calls");
        let buckets: u32 = h.positive_span.iter().map(|s| s.length.unwrap()).sum();
        assert_eq!(buckets as usize, h.positive_delta.len());
        // The first span starts at the index of the kernel bucket holding 1 µs, by its midpoint.
        let first = latency.buckets().next().unwrap();
        let mid = (first.low + first.high) as f64 / 2.0;
        assert_eq!(h.positive_span[0].offset, Some(native_index(mid / 1e9)));
    }
}
