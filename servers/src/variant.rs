//! The server designs under test, described once: the `--mode` names, what each one does, and
//! the order of the reference tables. `servers --mode`, the event loop and `profiler run`
//! all read this enum; the loop behaviour of each is in event_loop.rs.

use std::{fmt, str::FromStr};

use clap::{ValueEnum, builder::PossibleValue};

/// A server design.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Variant {
    /// Level-triggered; accept loops until EAGAIN; one read per event.
    Lt,
    /// Edge-triggered; accept, read and write loop until EAGAIN; EPOLLOUT only while blocked.
    Et,
    /// Level-triggered with exactly one accept per listener event.
    LtPure,
    /// Forked edge-triggered workers, each with its own SO_REUSEPORT socket.
    Mp,
}

impl Variant {
    /// All four, in the reference tables' order.
    pub const ALL: [Self; 4] = [Self::Lt, Self::Et, Self::LtPure, Self::Mp];

    /// The `--mode` name.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Self::Lt => "lt",
            Self::Et => "et",
            Self::LtPure => "lt-pure",
            Self::Mp => "mp",
        }
    }

    /// One line on what the design does, for help texts.
    #[must_use]
    pub const fn summary(self) -> &'static str {
        match self {
            Self::Lt => "level-triggered; accept loops until EAGAIN; one read per event",
            Self::Et => {
                "edge-triggered; accept/read/write loop until EAGAIN; EPOLLOUT only while blocked"
            }
            Self::LtPure => "level-triggered with exactly one accept per listener event",
            Self::Mp => "forked ET workers, each with its own SO_REUSEPORT socket",
        }
    }

    /// Whether `--lt-epollout` (EPOLLOUT kept registered) applies.
    #[must_use]
    pub const fn is_level_triggered(self) -> bool {
        matches!(self, Self::Lt | Self::LtPure)
    }
}

impl ValueEnum for Variant {
    fn value_variants<'a>() -> &'a [Self] {
        &Self::ALL
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        Some(PossibleValue::new(self.name()).help(self.summary()))
    }
}

impl fmt::Display for Variant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Variant {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        <Self as ValueEnum>::from_str(s.trim(), true)
            .map_err(|_| format!("unknown variant '{s}': use lt, et, lt-pure or mp"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_unknown_names_list_the_valid_ones() {
        for v in Variant::ALL {
            assert_eq!(v.name().parse::<Variant>(), Ok(v));
        }
        assert_eq!("LT-Pure".parse::<Variant>(), Ok(Variant::LtPure));
        assert!(
            "ltt"
                .parse::<Variant>()
                .unwrap_err()
                .contains("lt, et, lt-pure or mp")
        );
    }
}
