//! syscall-profiler: what each system call really costs inside a running network server, timed
//! in the kernel with eBPF.
//!
//! - [`bpf`]: loads the kernel programs (`profiler-ebpf`), configures and reads them.
//! - [`stats`]: the merged measurements every report and export reads.
//! - [`samples`]: median, spread, outliers and Gini over repeated measurements.
//! - [`inference`]: what repeated runs allow a report to conclude: intervals with the level
//!   they achieve, the sequential design of `run`, verdicts.
//! - [`comparison`]: what a comparison of two kinds of runs found (the exports print it,
//!   `run` computes it).
//! - [`noise`]: the machine's own noise during a measurement (other tasks, steal).
//! - [`cpus`]: CPU lists, the CPUs this process may use, pinning (the `cpuset` crate, shared
//!   with `c2c`).
//! - [`cgroup`]: the cgroups `--cgroup` names, as the ids the kernel compares.
//! - [`process`]: starting commands stopped, pidfds, `/proc` (threads, descendants).
//! - [`output`]: printing that survives a closed stdout.
//! - [`trace`]: setting up a trace of processes, shared by `attach` and `serve`.
//! - [`attach`]: `profiler attach`.
//! - [`run`]: `profiler run`, the epoll server experiments end to end.
//! - [`loadgen`]: the tokio load generator `profiler run` drives servers with.
//! - [`report`]: tables and histograms.
//! - [`export`]: JSON, CSV, HdrHistogram, Prometheus, Markdown, HTML and folded-stack exports,
//!   and the OTLP push.
//! - [`serve`]: `profiler serve`, the counters as a Prometheus scrape target.
//! - [`slow`]: `--slow`, the slowest calls with their symbolized stacks.
//! - [`bench`]: `profiler bench`, the profiler measuring itself.
//! - [`c2c_timer`]: the kernel timer of `profiler c2c`'s sends (c2c itself is the `c2c` crate).

pub mod attach;
pub mod bench;
pub mod bpf;
pub mod c2c_timer;
pub mod cgroup;
pub mod comparison;
pub mod container;
pub mod diff;
pub use cpuset as cpus;
pub mod error;
pub mod export;
pub mod inference;
pub mod loadgen;
pub mod noise;
pub mod output;
pub mod parse;
pub mod process;
pub mod recorder;
pub mod report;
pub mod run;
pub mod samples;
pub mod serve;
pub mod slow;
pub mod stats;
pub mod top;
pub mod trace;
pub mod web;
