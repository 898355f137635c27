//! Quantities parsed like apimachinery's `ParseQuantity` (rounded up to nano units). Values are
//! held exactly as nano units in 128 bits, so quantities beyond about 10^29 are refused as too
//! large where apimachinery keeps arbitrary precision. Which of apimachinery's two representations a quantity has (an int64
//! with a decimal scale, or an arbitrary-precision decimal) is tracked too, because it decides
//! `asInteger`/`isInteger` (`1000m` is not an integer there) and `asApproximateFloat`.

use ocm_score_api::quantity::approximate_f64;
use ocm_score_api::quantity_suffix::Suffix;
use std::sync::Arc;

const NANOS: i128 = 1_000_000_000;

#[derive(Clone, Debug)]
pub struct Quantity {
    nanos: i128,
    /// The text it was parsed from (None once computed by `add`/`sub`).
    text: Option<Arc<str>>,
    repr: Repr,
}

/// apimachinery's representation of a quantity.
#[derive(Clone, Copy, Debug)]
enum Repr {
    /// `value * 10^scale` in an int64 (`int64Amount`).
    Int { value: i64, scale: i32 },
    /// An arbitrary-precision decimal (`inf.Dec`).
    Dec,
}

/// `value * 10^diff` (diff >= 0) without overflowing an int64.
fn scale_up(value: i64, diff: i32) -> Option<i64> {
    let factor = 10i64.checked_pow(u32::try_from(diff).ok()?)?;
    value.checked_mul(factor)
}

impl Repr {
    /// apimachinery's `int64Amount.Add`; `Dec` when either side is one or the sum overflows.
    fn add(self, other: Repr) -> Repr {
        let (Repr::Int { value: a, scale: sa }, Repr::Int { value: b, scale: sb }) = (self, other) else {
            return Repr::Dec;
        };
        if b == 0 {
            return self;
        }
        if a == 0 {
            return other;
        }
        let sum = if sa == sb {
            a.checked_add(b).map(|v| (v, sa))
        } else if sa > sb {
            scale_up(a, sa - sb)
                .and_then(|x| x.checked_add(b))
                .map(|v| (v, sb))
        } else {
            scale_up(b, sb - sa)
                .and_then(|x| a.checked_add(x))
                .map(|v| (v, sa))
        };
        sum.map_or(Repr::Dec, |(value, scale)| Repr::Int { value, scale })
    }

    fn negated(self) -> Repr {
        match self {
            Repr::Int { value, scale } => value
                .checked_neg()
                .map_or(Repr::Dec, |value| Repr::Int { value, scale }),
            Repr::Dec => Repr::Dec,
        }
    }
}

/// apimachinery's fast path: the `int64Amount` a quantity string parses to, if it has one.
fn int_repr(negative: bool, int_part: &str, frac_part: &str, exp10: i64, exp2: u32) -> Option<Repr> {
    let trimmed = int_part.trim_start_matches('0');
    let num = if trimmed.is_empty() { "0" } else { trimmed };
    let digits = (num.len() + frac_part.len()) as i64;
    let (scale, precision, mantissa) = if exp2 == 0 {
        (exp10, 18 - digits, 1i64)
    } else if frac_part.is_empty() {
        (
            0,
            15 - num.len() as i64 - i64::from(exp2) * 3 / 10 - 1,
            1i64 << exp2,
        )
    } else {
        (0, -1, 1)
    };
    if precision < 0 {
        return None;
    }
    let scale = scale - frac_part.len() as i64;
    if scale < -9 {
        return None;
    }
    let value: i64 = format!("{num}{frac_part}").parse().ok()?;
    let value = value.checked_mul(mantissa)?;
    Some(Repr::Int {
        value: if negative { -value } else { value },
        scale: i32::try_from(scale).ok()?,
    })
}

/// Quantities compare by value: `1k` equals `1000`.
impl PartialEq for Quantity {
    fn eq(&self, other: &Self) -> bool {
        self.nanos == other.nanos
    }
}

impl Eq for Quantity {}

impl PartialOrd for Quantity {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Quantity {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.nanos.cmp(&other.nanos)
    }
}

fn format_error() -> String {
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'".into()
}

fn too_large() -> String {
    "quantity too large".into()
}

/// `10^e` in 128 bits, if it fits.
fn pow10(e: u32) -> Option<i128> {
    10i128.checked_pow(e)
}

impl Quantity {
    pub fn parse(s: &str) -> Result<Quantity, String> {
        // apimachinery's ParseQuantity decides what is a quantity, and for a missing number its
        // answer depends on the path it takes (`Ki` and `e3` are zero, `Ei` and `e-10` errors):
        // the prioritizers' port of it (`placement::quantity`) decides here too.
        ocm_score_api::quantity::approximate_f64(s).map_err(|e| e.to_string())?;
        let (negative, body) = match s.as_bytes().first() {
            Some(b'-') => (true, &s[1..]),
            Some(b'+') => (false, &s[1..]),
            _ => (false, s),
        };
        let number_end = body
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(body.len());
        let (number, suffix) = body.split_at(number_end);
        // What is left with no number (`e3`, `.`, `Ki`) apimachinery reads as zero.
        let (int_part, frac_part) = number.split_once('.').unwrap_or((number, ""));
        if frac_part.contains('.') {
            return Err(format_error());
        }
        let (exp10, exp2): (i64, u32) = match Suffix::named(suffix) {
            Some(named) => {
                let (exp10, exp2) = named.exponents();
                (i64::from(exp10), exp2)
            }
            None => {
                let digits = suffix.strip_prefix(['e', 'E']).ok_or_else(format_error)?;
                let unsigned = digits.trim_start_matches(['+', '-']);
                if unsigned.is_empty()
                    || !unsigned.bytes().all(|b| b.is_ascii_digit())
                    || digits.len() - unsigned.len() > 1
                {
                    return Err(format_error());
                }
                // Go parses an int64 and keeps its low 32 bits (`1E9223372036854775807` is 0.1).
                let parsed = digits.parse::<i64>().map_err(|_| too_large())?;
                (i64::from(parsed as i32), 0)
            }
        };
        let mut mantissa: i128 = 0;
        for b in int_part.bytes().chain(frac_part.bytes()) {
            mantissa = mantissa
                .checked_mul(10)
                .and_then(|m| m.checked_add(i128::from(b - b'0')))
                .ok_or_else(too_large)?;
        }
        mantissa = mantissa.checked_mul(1i128 << exp2).ok_or_else(too_large)?;
        // nanos = mantissa * 10^(exp10 + 9 - fraction digits), rounded up away from zero.
        let shift = exp10 + 9 - frac_part.len() as i64;
        let magnitude = if mantissa == 0 {
            0
        } else if shift >= 0 {
            let factor = u32::try_from(shift).ok().and_then(pow10).ok_or_else(too_large)?;
            mantissa.checked_mul(factor).ok_or_else(too_large)?
        } else {
            match u32::try_from(-shift).ok().and_then(pow10) {
                // Rounded up without adding first: a mantissa near i128's limit must not overflow.
                Some(divisor) => mantissa / divisor + i128::from(mantissa % divisor != 0),
                // Smaller than a nano unit: rounds up to one.
                None => 1,
            }
        };
        // apimachinery caps binary quantities at the largest int64.
        let cap = i128::from(i64::MAX) * NANOS;
        let magnitude = if exp2 > 0 && magnitude > cap {
            cap
        } else {
            magnitude
        };
        let repr = if mantissa == 0 {
            Repr::Int { value: 0, scale: 0 }
        } else {
            int_repr(negative, int_part, frac_part, exp10, exp2).unwrap_or(Repr::Dec)
        };
        Ok(Quantity {
            nanos: if negative { -magnitude } else { magnitude },
            text: Some(Arc::from(s)),
            repr,
        })
    }

    /// An int taken as a whole quantity (the int operand of `add` and `sub`).
    pub fn whole(value: i64) -> Quantity {
        Quantity {
            nanos: i128::from(value) * NANOS,
            text: None,
            repr: Repr::Int { value, scale: 0 },
        }
    }

    pub fn plus(&self, other: &Quantity) -> Result<Quantity, String> {
        Quantity::computed(self.nanos.checked_add(other.nanos), self.repr.add(other.repr))
    }

    pub fn minus(&self, other: &Quantity) -> Result<Quantity, String> {
        Quantity::computed(
            self.nanos.checked_sub(other.nanos),
            self.repr.add(other.repr.negated()),
        )
    }

    fn computed(nanos: Option<i128>, repr: Repr) -> Result<Quantity, String> {
        Ok(Quantity {
            nanos: nanos.ok_or_else(too_large)?,
            text: None,
            repr,
        })
    }

    /// -1, 0 or 1.
    pub fn signum(&self) -> i64 {
        self.nanos.signum() as i64
    }

    /// apimachinery's `AsInt64`: only an `int64Amount` with a non-negative scale converts.
    pub fn as_int(&self) -> Option<i64> {
        match self.repr {
            Repr::Int { value, scale: 0 } => Some(value),
            Repr::Int { value, scale } if scale > 0 => scale_up(value, scale),
            _ => None,
        }
    }

    /// apimachinery's `AsApproximateFloat64`: `base * math.Pow10(exponent)` of its
    /// representation (a parsed quantity's digits, as `approximate_f64` computes them).
    pub fn approximate(&self) -> f64 {
        if let Some(f) = self.text.as_deref().and_then(|t| approximate_f64(t).ok()) {
            return f;
        }
        let pow10 = |e: i64| format!("1e{e}").parse::<f64>().unwrap_or(f64::NAN);
        match self.repr {
            Repr::Int { value, scale: 0 } => value as f64,
            Repr::Int { value, scale } => value as f64 * pow10(i64::from(scale)),
            Repr::Dec => self.nanos as f64 * pow10(-9),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nanos(s: &str) -> Result<i128, String> {
        Quantity::parse(s).map(|q| q.nanos)
    }

    #[test]
    fn parses_like_apimachinery() {
        assert_eq!(nanos("64Gi"), Ok(64 * (1 << 30) * NANOS));
        assert_eq!(nanos("750Mi"), Ok(750 * (1 << 20) * NANOS));
        assert_eq!(nanos("1.5k"), Ok(1_500 * NANOS));
        assert_eq!(nanos("-1m"), Ok(-1_000_000));
        assert_eq!(nanos("1e-12"), Ok(1), "rounded up to a nano unit");
        assert_eq!(nanos("1E3"), Ok(1_000 * NANOS));
        assert_eq!(nanos(".5"), Ok(NANOS / 2));
        assert_eq!(nanos("e3"), Ok(0));
        assert_eq!(nanos("."), Ok(0));
        assert_eq!(nanos("Ki"), Ok(0));
        // Found by the `quantity` fuzz target (an overflow): the exponent keeps Go's low 32 bits.
        assert_eq!(nanos("1E9223372036854775807"), Ok(NANOS / 10));
        assert_eq!(nanos("1e4294967296"), Ok(NANOS));
        // Found by the `quantity` fuzz target (an overflow): a 39-digit mantissa below a nano unit's
        // scale, rounded up.
        assert_eq!(
            nanos("0.00000000100000000000000000000000000040000000000"),
            Ok(2),
            "1.00…04 nano units round up to 2"
        );
        // Found by the `quantity` fuzz target: without a number, apimachinery's slow path (a
        // binary suffix past `Ti`, a scale below nano) has no digits to read and refuses.
        for bad in [
            "", "big", "1.2.3", "1Q", "1e", "1e+-2", "Ei", "Pi", "-Ei", "e-10", ".e-10",
        ] {
            assert!(Quantity::parse(bad).is_err(), "{bad}");
        }
        let int = |s: &str| Quantity::parse(s).expect("valid").as_int();
        assert_eq!(int("1m"), None);
        assert_eq!(int("1k"), Some(1000));
        assert_eq!(int("1.5k"), Some(1500));
        assert_eq!(int("64Gi"), Some(64 << 30));
        // Whole values that apimachinery holds at a negative scale or as a decimal are not ints.
        assert_eq!(int("1000m"), None);
        assert_eq!(int("1.0"), None);
        assert_eq!(int("1.5Gi"), None);
    }
}
