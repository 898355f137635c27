//! Timestamps and durations as cel-go has them: timestamps from year 1 to 9999 with nanosecond
//! precision, parsed as Go's RFC 3339; durations as Go's `time.Duration` (signed 64-bit
//! nanoseconds, Go's duration syntax); a timestamp's calendar fields in a time zone (`UTC`,
//! an IANA name, or a `[+-]HH:MM` offset).

use super::digits::{place_point, shortest_digits};
use std::fmt;
use std::sync::LazyLock;

/// The IANA time zone database compiled into the binary.
static TIME_ZONES: LazyLock<jiff::tz::TimeZoneDatabase> = LazyLock::new(jiff::tz::TimeZoneDatabase::bundled);

/// `0001-01-01T00:00:00Z` and `9999-12-31T23:59:59Z` in Unix seconds.
const MIN_SECONDS: i64 = -62_135_596_800;
const MAX_SECONDS: i64 = 253_402_300_799;
pub const NANOS_PER_SECOND: i64 = 1_000_000_000;

/// An instant, and the UTC offset it was written with (Go keeps it: it is what `string()` and
/// the accessors without a time zone show). Equality and order ignore the offset.
#[derive(Clone, Copy, Debug)]
pub struct Timestamp {
    seconds: i64,
    nanos: u32,
    offset: i64,
}

impl PartialEq for Timestamp {
    fn eq(&self, other: &Self) -> bool {
        (self.seconds, self.nanos) == (other.seconds, other.nanos)
    }
}

impl Eq for Timestamp {}

impl PartialOrd for Timestamp {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Timestamp {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.seconds, self.nanos).cmp(&(other.seconds, other.nanos))
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Duration(i64);

const OVERFLOW: &str = "timestamp overflow";

impl Timestamp {
    /// Go's zero time, 0001-01-01T00:00:00Z: the zero value `optional.ofNonZeroValue` skips.
    pub const GO_ZERO: Timestamp = Timestamp {
        seconds: MIN_SECONDS,
        nanos: 0,
        offset: 0,
    };

    /// The same instant in UTC (what cel-go's accessors and `format` see).
    pub fn utc(self) -> Timestamp {
        Timestamp { offset: 0, ..self }
    }

    fn new(seconds: i64, nanos: u32, offset: i64) -> Result<Timestamp, String> {
        if (MIN_SECONDS..=MAX_SECONDS).contains(&seconds) {
            Ok(Timestamp {
                seconds,
                nanos,
                offset,
            })
        } else {
            Err(OVERFLOW.into())
        }
    }

    pub fn unix_seconds(&self) -> i64 {
        self.seconds
    }

    /// The nanoseconds past the whole second.
    pub fn subsec_nanos(&self) -> u32 {
        self.nanos
    }

    fn total_nanos(&self) -> i128 {
        i128::from(self.seconds) * i128::from(NANOS_PER_SECOND) + i128::from(self.nanos)
    }

    fn from_total_nanos(n: i128, offset: i64) -> Result<Timestamp, String> {
        let seconds =
            i64::try_from(n.div_euclid(i128::from(NANOS_PER_SECOND))).map_err(|_| OVERFLOW.to_string())?;
        let nanos =
            u32::try_from(n.rem_euclid(i128::from(NANOS_PER_SECOND))).map_err(|_| OVERFLOW.to_string())?;
        Timestamp::new(seconds, nanos, offset)
    }

    pub fn plus(self, d: Duration) -> Result<Timestamp, String> {
        Timestamp::from_total_nanos(self.total_nanos() + i128::from(d.0), self.offset)
    }

    pub fn minus(self, d: Duration) -> Result<Timestamp, String> {
        Timestamp::from_total_nanos(self.total_nanos() - i128::from(d.0), self.offset)
    }

    /// `self - other` as a duration.
    pub fn since(self, other: Timestamp) -> Result<Duration, String> {
        i64::try_from(self.total_nanos() - other.total_nanos())
            .map(Duration)
            .map_err(|_| "integer overflow".to_string())
    }

    /// Parses Go's RFC 3339 (`2006-01-02T15:04:05.999999999Z07:00`).
    pub fn parse(s: &str) -> Result<Timestamp, String> {
        let err = || "type conversion error from 'string' to 'google.protobuf.Timestamp'".to_string();
        let b = s.as_bytes();
        let num = |from: usize, len: usize| -> Result<i64, String> {
            let part = b.get(from..from + len).ok_or_else(err)?;
            if !part.iter().all(u8::is_ascii_digit) {
                return Err(err());
            }
            Ok(part.iter().fold(0i64, |acc, d| acc * 10 + i64::from(d - b'0')))
        };
        let sep = |at: usize, c: u8| if b.get(at) == Some(&c) { Ok(()) } else { Err(err()) };
        let (year, month, day) = (num(0, 4)?, num(5, 2)?, num(8, 2)?);
        sep(4, b'-')?;
        sep(7, b'-')?;
        sep(10, b'T')?;
        let (hour, minute, second) = (num(11, 2)?, num(14, 2)?, num(17, 2)?);
        sep(13, b':')?;
        sep(16, b':')?;
        let mut at = 19;
        let mut nanos: u32 = 0;
        if b.get(at) == Some(&b'.') {
            at += 1;
            let start = at;
            while b.get(at).is_some_and(u8::is_ascii_digit) {
                at += 1;
            }
            if at == start {
                return Err(err());
            }
            // Go keeps nine digits and drops the rest.
            for (i, d) in b[start..at].iter().take(9).enumerate() {
                nanos += u32::from(d - b'0') * 10u32.pow(8 - i as u32);
            }
        }
        let offset = match b.get(at) {
            Some(b'Z') if at + 1 == b.len() => 0,
            Some(sign @ (b'+' | b'-')) if at + 6 == b.len() => {
                sep(at + 3, b':')?;
                let (h, m) = (num(at + 1, 2)?, num(at + 4, 2)?);
                if h > 23 || m > 59 {
                    return Err(err());
                }
                let o = h * 3600 + m * 60;
                if *sign == b'-' { -o } else { o }
            }
            _ => return Err(err()),
        };
        if !(1..=12).contains(&month)
            || day < 1
            || day > days_in_month(year, month)
            || hour > 23
            || minute > 59
            || second > 59
        {
            return Err(err());
        }
        let seconds =
            days_from_civil(year, month, day) * 86_400 + hour * 3600 + minute * 60 + second - offset;
        Timestamp::new(seconds, nanos, offset)
    }

    pub fn from_unix(seconds: i64) -> Result<Timestamp, String> {
        Timestamp::new(seconds, 0, 0)
    }

    /// The civil fields in the zone `tz` (None: UTC).
    pub fn civil(&self, tz: Option<&str>) -> Result<Civil, String> {
        let offset = match tz {
            None => 0,
            Some(name) => zone_offset(name, self.seconds)?,
        };
        let local = self.seconds + offset;
        let days = local.div_euclid(86_400);
        let secs = local.rem_euclid(86_400);
        let (year, month, day) = civil_from_days(days);
        Ok(Civil {
            year,
            month,
            day,
            day_of_year: days - days_from_civil(year, 1, 1),
            // 1970-01-01 was a Thursday (4).
            weekday: (days + 4).rem_euclid(7),
            hour: secs / 3600,
            minute: secs % 3600 / 60,
            second: secs % 60,
        })
    }
}

impl fmt::Display for Timestamp {
    /// RFC 3339 at the offset it was written with, the fraction trimmed of trailing zeros, `Z`
    /// for UTC (Go's `RFC3339Nano`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let local = self.seconds + self.offset;
        let days = local.div_euclid(86_400);
        let secs = local.rem_euclid(86_400);
        let (y, mo, d) = civil_from_days(days);
        write!(
            f,
            "{y:04}-{mo:02}-{d:02}T{:02}:{:02}:{:02}",
            secs / 3600,
            secs % 3600 / 60,
            secs % 60
        )?;
        if self.nanos > 0 {
            let frac = format!("{:09}", self.nanos);
            write!(f, ".{}", frac.trim_end_matches('0'))?;
        }
        if self.offset == 0 {
            return f.write_str("Z");
        }
        let sign = if self.offset < 0 { '-' } else { '+' };
        let o = self.offset.abs();
        write!(f, "{sign}{:02}:{:02}", o / 3600, o % 3600 / 60)
    }
}

/// A timestamp's calendar fields in one time zone.
pub struct Civil {
    pub year: i64,
    pub month: i64,
    pub day: i64,
    pub day_of_year: i64,
    pub weekday: i64,
    pub hour: i64,
    pub minute: i64,
    pub second: i64,
}

/// The UTC offset in seconds of the zone `name` at `seconds`.
fn zone_offset(name: &str, seconds: i64) -> Result<i64, String> {
    let b = name.as_bytes();
    let fixed = |sign: i64, rest: &[u8]| -> Option<i64> {
        if rest.len() != 5 || rest[2] != b':' {
            return None;
        }
        let digits = |x: &[u8]| -> Option<i64> {
            x.iter().try_fold(0i64, |acc, d| {
                d.is_ascii_digit().then(|| acc * 10 + i64::from(d - b'0'))
            })
        };
        Some(sign * (digits(&rest[..2])? * 3600 + digits(&rest[3..])? * 60))
    };
    let parsed = match b.first() {
        Some(b'+') => fixed(1, &b[1..]),
        Some(b'-') => fixed(-1, &b[1..]),
        Some(c) if c.is_ascii_digit() => fixed(1, b),
        _ => None,
    };
    if let Some(offset) = parsed {
        return Ok(offset);
    }
    if name == "UTC" {
        return Ok(0);
    }
    let zone = TIME_ZONES
        .get(name)
        .map_err(|_| format!("unknown time zone {name}"))?;
    let instant = jiff::Timestamp::from_second(seconds).map_err(|e| e.to_string())?;
    Ok(i64::from(zone.to_offset(instant).seconds()))
}

fn is_leap(y: i64) -> bool {
    (y % 4 == 0 && y % 100 != 0) || y % 400 == 0
}

fn days_in_month(y: i64, m: i64) -> i64 {
    match m {
        2 if is_leap(y) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The inverse of [`days_from_civil`].
fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (
        if m <= 2 {
            yoe + era * 400 + 1
        } else {
            yoe + era * 400
        },
        m,
        d,
    )
}

impl Duration {
    pub const ZERO: Duration = Duration(0);

    pub fn nanos(&self) -> i64 {
        self.0
    }

    pub fn plus(self, o: Duration) -> Result<Duration, String> {
        self.0
            .checked_add(o.0)
            .map(Duration)
            .ok_or_else(|| "integer overflow".to_string())
    }

    pub fn minus(self, o: Duration) -> Result<Duration, String> {
        self.0
            .checked_sub(o.0)
            .map(Duration)
            .ok_or_else(|| "integer overflow".to_string())
    }

    /// Parses Go's duration syntax: `[-+]` then one or more `<decimal><unit>`, units `ns`,
    /// `us` (`µs`, `μs`), `ms`, `s`, `m`, `h`; a bare `0` is zero.
    pub fn parse(s: &str) -> Result<Duration, String> {
        let err = || "type conversion error from 'string' to 'google.protobuf.Duration'".to_string();
        let (negative, mut rest) = match s.as_bytes().first() {
            Some(b'-') => (true, &s[1..]),
            Some(b'+') => (false, &s[1..]),
            _ => (false, s),
        };
        if rest == "0" {
            return Ok(Duration(0));
        }
        if rest.is_empty() {
            return Err(err());
        }
        // Accumulate in i128 nanoseconds; anything beyond i64 is an overflow, as in Go.
        let mut total: i128 = 0;
        while !rest.is_empty() {
            let int_end = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
            let (int_part, after) = rest.split_at(int_end);
            let (frac_part, after) = match after.strip_prefix('.') {
                Some(a) => {
                    let end = a.find(|c: char| !c.is_ascii_digit()).unwrap_or(a.len());
                    a.split_at(end)
                }
                None => ("", after),
            };
            if int_part.is_empty() && frac_part.is_empty() {
                return Err(err());
            }
            let unit_end = after
                .find(|c: char| c == '.' || c.is_ascii_digit())
                .unwrap_or(after.len());
            let (unit, next) = after.split_at(unit_end);
            let scale: i128 = match unit {
                "ns" => 1,
                "us" | "µs" | "μs" => 1_000,
                "ms" => 1_000_000,
                "s" => 1_000_000_000,
                "m" => 60_000_000_000,
                "h" => 3_600_000_000_000,
                _ => return Err(err()),
            };
            let limit = i128::from(i64::MAX) + 1;
            let int_value = int_part.chars().try_fold(0i128, |acc, c| {
                let v = acc * 10 + i128::from(c as u8 - b'0');
                (v <= limit).then_some(v)
            });
            let int_value = int_value.ok_or_else(err)?;
            let mut value = int_value
                .checked_mul(scale)
                .filter(|v| *v <= limit)
                .ok_or_else(err)?;
            // The fraction, truncated to whole nanoseconds like Go.
            let mut frac_scale = scale;
            for c in frac_part.chars() {
                if frac_scale < 10 {
                    break;
                }
                frac_scale /= 10;
                value += i128::from(c as u8 - b'0') * frac_scale;
            }
            total += value;
            if total > limit {
                return Err(err());
            }
            rest = next;
        }
        let signed = if negative { -total } else { total };
        i64::try_from(signed).map(Duration).map_err(|_| err())
    }
}

impl fmt::Display for Duration {
    /// Seconds with the shortest fraction, as cel-go's `string(duration)`: `5400s`, `1.5s`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let seconds = (self.0 / NANOS_PER_SECOND) as f64 + (self.0 % NANOS_PER_SECOND) as f64 / 1e9;
        if seconds == 0.0 {
            return f.write_str("0s");
        }
        let (negative, digits, exp) = shortest_digits(seconds);
        write!(
            f,
            "{}{}s",
            if negative { "-" } else { "" },
            place_point(&digits, exp)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_parse_print_and_bound_like_cel_go() {
        let t = Timestamp::parse("2026-06-01T00:00:00.1234567891+02:00").expect("valid");
        assert_eq!(t.to_string(), "2026-06-01T00:00:00.123456789+02:00");
        assert_eq!(
            t,
            Timestamp::parse("2026-05-31T22:00:00.123456789Z").expect("valid")
        );
        assert!(Timestamp::parse("2026-06-01t00:00:00Z").is_err());
        assert!(Timestamp::parse("2026-02-29T00:00:00Z").is_err());
        assert!(Timestamp::parse("2024-02-29T00:00:00Z").is_ok());
        assert_eq!(
            Timestamp::parse("0000-12-31T00:00:00Z").err().as_deref(),
            Some(OVERFLOW)
        );
        let end = Timestamp::parse("9999-12-31T23:59:59Z").expect("valid");
        assert!(end.plus(Duration(NANOS_PER_SECOND)).is_err());
        let c = Timestamp::parse("2026-03-01T12:00:00Z")
            .and_then(|t| t.civil(Some("-03:00")))
            .expect("civil");
        assert_eq!(
            (c.year, c.month, c.day, c.hour, c.day_of_year, c.weekday),
            (2026, 3, 1, 9, 59, 0)
        );
    }

    #[test]
    fn durations_follow_go_syntax_and_range() {
        assert_eq!(Duration::parse("1h30m").map(|d| d.0), Ok(5_400_000_000_000));
        assert_eq!(Duration::parse("-1.5s").map(|d| d.0), Ok(-1_500_000_000));
        assert_eq!(Duration::parse("1.5µs").map(|d| d.0), Ok(1_500));
        for bad in ["", "1d", "1", "h", "3000000h", ".s", "1.5"] {
            assert!(Duration::parse(bad).is_err(), "{bad}");
        }
        assert_eq!(Duration(5_400_000_000_000).to_string(), "5400s");
        assert_eq!(Duration(-1_000).to_string(), "-0.000001s");
        assert_eq!(Duration(1_500_000_000).to_string(), "1.5s");
    }
}
