//! Versions parsed strictly as Semantic Versioning 2.0.0 (`MAJOR.MINOR.PATCH[-pre][+build]`, no
//! leading zeros, no `v` prefix), ordered by its precedence rules, build metadata ignored.

use std::cmp::Ordering;

#[derive(Clone, Debug, PartialEq, Eq)]
enum Identifier {
    Numeric(u64),
    Text(String),
}

#[derive(Clone, Debug)]
pub struct Semver {
    major: u64,
    minor: u64,
    patch: u64,
    pre: Vec<Identifier>,
}

fn numeric(part: &str, what: &str) -> Result<u64, String> {
    if part.is_empty() || !part.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("Invalid character(s) found in {what} number {part:?}"));
    }
    if part.len() > 1 && part.starts_with('0') {
        return Err(format!("{what} number must not contain leading zeroes {part:?}"));
    }
    part.parse()
        .map_err(|_| format!("{what} number {part:?} is too large"))
}

fn identifiers_ok(s: &str) -> bool {
    s.split('.')
        .all(|id| !id.is_empty() && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-'))
}

impl Semver {
    pub fn parse(s: &str) -> Result<Semver, String> {
        let (version, build) = match s.split_once('+') {
            Some((v, b)) => (v, Some(b)),
            None => (s, None),
        };
        if build.is_some_and(|b| !identifiers_ok(b)) {
            return Err(format!("Invalid build metadata in {s:?}"));
        }
        let (core, pre) = match version.split_once('-') {
            Some((c, p)) => (c, Some(p)),
            None => (version, None),
        };
        let parts: Vec<&str> = core.split('.').collect();
        let [major, minor, patch] = parts.as_slice() else {
            return Err("No Major.Minor.Patch elements found".into());
        };
        let mut semver = Semver {
            major: numeric(major, "Major")?,
            minor: numeric(minor, "Minor")?,
            patch: numeric(patch, "Patch")?,
            pre: Vec::new(),
        };
        if let Some(pre) = pre {
            if !identifiers_ok(pre) {
                return Err(format!("Invalid prerelease version in {s:?}"));
            }
            for id in pre.split('.') {
                semver.pre.push(if id.bytes().all(|b| b.is_ascii_digit()) {
                    Identifier::Numeric(numeric(id, "Prerelease")?)
                } else {
                    Identifier::Text(id.to_string())
                });
            }
        }
        Ok(semver)
    }

    pub fn major(&self) -> u64 {
        self.major
    }

    pub fn minor(&self) -> u64 {
        self.minor
    }

    pub fn patch(&self) -> u64 {
        self.patch
    }

    /// Semantic Versioning precedence.
    pub fn cmp(&self, other: &Semver) -> Ordering {
        let core = (self.major, self.minor, self.patch).cmp(&(other.major, other.minor, other.patch));
        if core != Ordering::Equal {
            return core;
        }
        match (self.pre.is_empty(), other.pre.is_empty()) {
            (true, true) => return Ordering::Equal,
            (true, false) => return Ordering::Greater,
            (false, true) => return Ordering::Less,
            _ => {}
        }
        for (a, b) in self.pre.iter().zip(&other.pre) {
            let o = match (a, b) {
                (Identifier::Numeric(x), Identifier::Numeric(y)) => x.cmp(y),
                (Identifier::Numeric(_), Identifier::Text(_)) => Ordering::Less,
                (Identifier::Text(_), Identifier::Numeric(_)) => Ordering::Greater,
                (Identifier::Text(x), Identifier::Text(y)) => x.cmp(y),
            };
            if o != Ordering::Equal {
                return o;
            }
        }
        self.pre.len().cmp(&other.pre.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> Semver {
        Semver::parse(s).expect("valid version")
    }

    #[test]
    fn parses_strictly_and_orders_by_precedence() {
        for bad in [
            "v1.2.3", "1.2", "01.2.3", "1.2.3-", "1.2.3-01", "1.2.3+", "n/a", "1.2.3.4",
        ] {
            assert!(Semver::parse(bad).is_err(), "{bad}");
        }
        assert_eq!(v("1.2.3-rc.1+b").cmp(&v("1.2.3")), Ordering::Less);
        assert_eq!(v("1.2.3-alpha").cmp(&v("1.2.3-alpha.1")), Ordering::Less);
        assert_eq!(v("1.2.3-2").cmp(&v("1.2.3-10")), Ordering::Less);
        assert_eq!(v("1.2.3-alpha").cmp(&v("1.2.3-2")), Ordering::Greater);
        assert_eq!(v("1.2.3+x").cmp(&v("1.2.3+y")), Ordering::Equal);
        assert_eq!(v("1.29.4").cmp(&v("1.30.0")), Ordering::Less);
    }
}
