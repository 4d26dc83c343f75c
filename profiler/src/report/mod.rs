//! Turning a [`Snapshot`](crate::stats::Snapshot) into text: tables, histograms, units.

pub mod document;
pub mod histogram;
pub mod table;
pub mod units;
