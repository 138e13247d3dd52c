//! Protocol revisions and the two eras they fall into.
//!
//! Handshake-era revisions (2025-03-26 … 2025-11-25) negotiate once in `initialize` and
//! hold a session; the stateless era (2026-07-28) carries the revision on every request.

use std::fmt;

/// A protocol revision mcpx implements.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Revision {
    V2025_03_26,
    V2025_06_18,
    V2025_11_25,
    V2026_07_28,
}

/// Whether a revision uses the handshake (`Legacy`) or is stateless (`Modern`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Era {
    Legacy,
    Modern,
}

impl Revision {
    /// Every revision, oldest first.
    pub const ALL: [Revision; 4] =
        [Revision::V2025_03_26, Revision::V2025_06_18, Revision::V2025_11_25, Revision::V2026_07_28];
    /// The newest handshake-era revision: what `initialize` counter-offers.
    pub const LATEST_LEGACY: Revision = Revision::V2025_11_25;
    /// The newest stateless revision: what mcpx prefers when it probes an upstream.
    pub const LATEST_MODERN: Revision = Revision::V2026_07_28;

    pub fn parse(s: &str) -> Option<Revision> {
        Revision::ALL.into_iter().find(|r| r.as_str() == s)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Revision::V2025_03_26 => "2025-03-26",
            Revision::V2025_06_18 => "2025-06-18",
            Revision::V2025_11_25 => "2025-11-25",
            Revision::V2026_07_28 => "2026-07-28",
        }
    }

    pub fn era(self) -> Era {
        match self {
            Revision::V2026_07_28 => Era::Modern,
            _ => Era::Legacy,
        }
    }

    /// The revisions of one era, oldest first.
    pub fn of_era(era: Era) -> impl Iterator<Item = Revision> {
        Revision::ALL.into_iter().filter(move |r| r.era() == era)
    }

    /// Whether JSON-RPC batches are part of this revision (only 2025-03-26 had them).
    pub fn allows_batches(self) -> bool {
        self == Revision::V2025_03_26
    }
}

/// Version strings that announce a handshake-era client on the HTTP header, including
/// 2024-11-05, which mcpx does not serve but must not mistake for a modern request.
pub fn is_legacy_version_string(s: &str) -> bool {
    s == "2024-11-05" || Revision::parse(s).is_some_and(|r| r.era() == Era::Legacy)
}

impl fmt::Display for Revision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_revision_round_trips_through_its_string() {
        for r in Revision::ALL {
            assert_eq!(Revision::parse(r.as_str()), Some(r));
        }
        assert_eq!(Revision::parse("2024-11-05"), None);
        assert_eq!(Revision::parse("v999.0.0"), None);
    }

    #[test]
    fn only_2026_is_modern() {
        let modern: Vec<_> = Revision::of_era(Era::Modern).collect();
        assert_eq!(modern, vec![Revision::V2026_07_28]);
        assert!(is_legacy_version_string("2024-11-05"));
        assert!(!is_legacy_version_string("2026-07-28"));
    }
}
