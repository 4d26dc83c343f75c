//! `profiler bench`: the profiler measuring itself.

pub mod overhead;
pub mod precision;
