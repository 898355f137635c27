//! Kubernetes quantities as the float64 the resource prioritizers compare.
//!
//! OCM reads `Quantity.AsApproximateFloat64()`, whose result depends on how `ParseQuantity` stored
//! the value: either an int64 mantissa with a decimal scale (the fast path) or an arbitrary
//! precision decimal. The float is then `mantissa * 10^scale` with Go's `math.Pow10`, so `3800m`
//! becomes `3800 * 0.001 = 3.8000000000000003`, not 3.8. Reproducing the same two paths is what
//! makes the min/max normalisation give upstream's integers.

use std::fmt;

/// Why a quantity string was rejected (the texts follow apimachinery's errors).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QuantityError {
    /// `quantities must match the regular expression ...`
    Format,
    /// `unable to parse quantity's suffix`
    Suffix,
    /// The number does not fit the 128-bit arithmetic used here (more than ~38 digits).
    TooLarge,
}

impl fmt::Display for QuantityError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            QuantityError::Format => {
                "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
            }
            QuantityError::Suffix => "unable to parse quantity's suffix",
            QuantityError::TooLarge => "the number has too many digits to evaluate",
        })
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Format {
    DecimalSi,
    BinarySi,
    DecimalExponent,
}

/// The pieces `parseQuantityString` cuts a quantity into.
struct Parts<'a> {
    positive: bool,
    /// Sign, digits and fraction as written (used by the arbitrary-precision path).
    value: &'a str,
    /// Integer digits without leading zeros ("0" when there are none).
    num: &'a str,
    /// Fraction digits.
    denom: &'a str,
    suffix: &'a str,
}

/// `Quantity.AsApproximateFloat64()` of the quantity `s` would parse to.
pub fn approximate_f64(s: &str) -> Result<f64, QuantityError> {
    if s.is_empty() {
        return Err(QuantityError::Format);
    }
    if s == "0" {
        return Ok(0.0);
    }
    let parts = split(s)?;
    let (base, exponent, format) = interpret_suffix(parts.suffix).ok_or(QuantityError::Suffix)?;

    // Fast path: an int64 mantissa and a decimal scale, used when the digits are few enough.
    let digits = (parts.num.len() + parts.denom.len()) as i64;
    let (mut scale, precision, mantissa): (i64, i64, i64) = match format {
        Format::DecimalSi | Format::DecimalExponent => (exponent, 18 - digits, 1),
        Format::BinarySi => {
            if exponent >= 0 && parts.denom.is_empty() {
                // exponent is a multiple of 10 up to 60, so float32(e)*3/10 is exact.
                let precision = 15 - parts.num.len() as i64 - exponent * 3 / 10 - 1;
                (0, precision, 1i64 << exponent)
            } else {
                (0, -1, 1)
            }
        }
    };
    if precision >= 0 {
        scale -= parts.denom.len() as i64;
        if scale >= -9 {
            // At most 18 digits (precision >= 0), so this always fits an i64.
            let value: i64 = format!("{}{}", parts.num, parts.denom)
                .parse()
                .map_err(|_| QuantityError::Format)?;
            if let Some(result) = value.checked_mul(mantissa) {
                let result = if parts.positive { result } else { -result };
                return Ok(scaled(result as f64, scale));
            }
        }
    }
    slow_path(&parts, base, exponent, format)
}

/// The `inf.Dec` path: exact decimal, rounded up to nano units, capped for binary quantities.
fn slow_path(parts: &Parts<'_>, base: u32, exponent: i64, format: Format) -> Result<f64, QuantityError> {
    // inf.Dec.SetString on the written value: unscaled digits and the count of fraction digits.
    let unsigned = parts.value.trim_start_matches(['+', '-']);
    let (int_part, frac_part) = unsigned.split_once('.').unwrap_or((unsigned, ""));
    let mut unscaled: u128 = 0;
    for c in int_part.bytes().chain(frac_part.bytes()) {
        unscaled = unscaled
            .checked_mul(10)
            .and_then(|v| v.checked_add(u128::from(c - b'0')))
            .ok_or(QuantityError::TooLarge)?;
    }
    let mut scale: i64 = frac_part.len() as i64;
    if base == 10 {
        scale -= exponent;
    } else {
        unscaled = unscaled
            .checked_mul(1u128 << exponent)
            .ok_or(QuantityError::TooLarge)?;
    }
    // Round non-zero values up (away from zero) to at most 9 fraction digits.
    if unscaled != 0 && scale > 9 {
        let drop = scale - 9;
        let (quotient, remainder) = if drop >= 39 {
            (0, unscaled)
        } else {
            let divisor = 10u128.pow(drop as u32);
            (unscaled / divisor, unscaled % divisor)
        };
        unscaled = quotient + u128::from(remainder != 0);
        scale = 9;
    }
    // Binary quantities are capped at the largest int64.
    if format == Format::BinarySi && exceeds_max_int64(unscaled, scale) {
        unscaled = i64::MAX as u128;
        scale = 0;
    }
    let magnitude = unscaled as f64;
    let base = if parts.positive { magnitude } else { -magnitude };
    Ok(scaled(base, -scale))
}

fn exceeds_max_int64(unscaled: u128, scale: i64) -> bool {
    const MAX: u128 = i64::MAX as u128;
    if scale <= 0 {
        let factor = 10u128.checked_pow((-scale) as u32);
        match factor.and_then(|f| unscaled.checked_mul(f)) {
            Some(v) => v > MAX,
            None => unscaled != 0,
        }
    } else {
        let divisor = 10u128.checked_pow(scale as u32);
        match divisor {
            // value > MAX  <=>  unscaled > MAX * 10^scale
            Some(d) => MAX.checked_mul(d).is_some_and(|limit| unscaled > limit),
            None => false,
        }
    }
}

/// `base * math.Pow10(exponent)`, skipping the multiplication for exponent 0 like Go does.
fn scaled(base: f64, exponent: i64) -> f64 {
    if exponent == 0 {
        base
    } else {
        base * go_pow10(exponent)
    }
}

/// Go's `math.Pow10`: table lookups, and a division for negative exponents.
pub(crate) fn go_pow10(n: i64) -> f64 {
    const TAB: [f64; 32] = [
        1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17,
        1e18, 1e19, 1e20, 1e21, 1e22, 1e23, 1e24, 1e25, 1e26, 1e27, 1e28, 1e29, 1e30, 1e31,
    ];
    const POS32: [f64; 10] = [1e0, 1e32, 1e64, 1e96, 1e128, 1e160, 1e192, 1e224, 1e256, 1e288];
    const NEG32: [f64; 11] = [
        1e-0, 1e-32, 1e-64, 1e-96, 1e-128, 1e-160, 1e-192, 1e-224, 1e-256, 1e-288, 1e-320,
    ];
    if (0..=308).contains(&n) {
        let n = n as usize;
        POS32[n / 32] * TAB[n % 32]
    } else if (-323..0).contains(&n) {
        let m = (-n) as usize;
        NEG32[m / 32] / TAB[m % 32]
    } else if n > 0 {
        f64::INFINITY
    } else {
        0.0
    }
}

fn is_digit(b: u8) -> bool {
    b.is_ascii_digit()
}

/// `parseQuantityString`: sign, integer digits, fraction, suffix.
fn split(s: &str) -> Result<Parts<'_>, QuantityError> {
    let bytes = s.as_bytes();
    let end = bytes.len();
    let mut pos = 0;
    let mut positive = true;
    match bytes[0] {
        b'-' => {
            positive = false;
            pos += 1;
        }
        b'+' => pos += 1,
        _ => {}
    }
    while pos < end && bytes[pos] == b'0' {
        pos += 1;
    }
    if pos >= end {
        return Ok(Parts {
            positive,
            value: "0",
            num: "0",
            denom: "",
            suffix: "",
        });
    }
    let num_start = pos;
    while pos < end && is_digit(bytes[pos]) {
        pos += 1;
    }
    let num = if pos == num_start { "0" } else { &s[num_start..pos] };
    if pos >= end {
        return Ok(Parts {
            positive,
            value: s,
            num,
            denom: "",
            suffix: "",
        });
    }
    let mut denom = "";
    if bytes[pos] == b'.' {
        pos += 1;
        let denom_start = pos;
        while pos < end && is_digit(bytes[pos]) {
            pos += 1;
        }
        denom = &s[denom_start..pos];
        if pos >= end {
            return Ok(Parts {
                positive,
                value: s,
                num,
                denom,
                suffix: "",
            });
        }
    }
    let value = &s[..pos];
    let suffix_start = pos;
    while pos < end && b"eEinumkKMGTP".contains(&bytes[pos]) {
        pos += 1;
    }
    if pos < end && (bytes[pos] == b'-' || bytes[pos] == b'+') {
        pos += 1;
    }
    while pos < end && is_digit(bytes[pos]) {
        pos += 1;
    }
    if pos < end {
        return Err(QuantityError::Format);
    }
    Ok(Parts {
        positive,
        value,
        num,
        denom,
        suffix: &s[suffix_start..],
    })
}

/// The suffix tables: base, power and the format the quantity keeps.
fn interpret_suffix(suffix: &str) -> Option<(u32, i64, Format)> {
    let decimal = match suffix {
        "n" => Some(-9),
        "u" => Some(-6),
        "m" => Some(-3),
        "" => Some(0),
        "k" => Some(3),
        "M" => Some(6),
        "G" => Some(9),
        "T" => Some(12),
        "P" => Some(15),
        "E" => Some(18),
        _ => None,
    };
    if let Some(e) = decimal {
        return Some((10, e, Format::DecimalSi));
    }
    let binary = match suffix {
        "Ki" => Some(10),
        "Mi" => Some(20),
        "Gi" => Some(30),
        "Ti" => Some(40),
        "Pi" => Some(50),
        "Ei" => Some(60),
        _ => None,
    };
    if let Some(e) = binary {
        return Some((2, e, Format::BinarySi));
    }
    let rest = suffix.strip_prefix(['e', 'E'])?;
    if rest.is_empty() {
        return None;
    }
    // Go parses an int64 and keeps its low 32 bits.
    let parsed: i64 = rest.parse().ok()?;
    Some((10, i64::from(parsed as i32), Format::DecimalExponent))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_go_float_results() {
        // Each expected value is what Go's AsApproximateFloat64 prints for the quantity.
        let cases: &[(&str, f64)] = &[
            ("3800m", 3.8000000000000003),
            ("0", 0.0),
            ("0m", 0.0),
            ("2", 2.0),
            ("500m", 0.5),
            ("2Gi", 2147483648.0),
            ("1Ti", 1099511627776.0),
            ("16G", 16e9),
            ("8000Mi", 8388608000.0),
            ("1.5", 1.5),
            ("100", 100.0),
            ("-2", -2.0),
            ("1e3", 1000.0),
            ("1E3", 1000.0),
            ("1e-30", 1e-9),
            ("2Pi", 2251799813685248.0),
            ("0.1", 0.1),
        ];
        for (input, expected) in cases {
            let got = approximate_f64(input).unwrap_or_else(|e| panic!("{input}: {e}"));
            assert_eq!(
                got.to_bits(),
                expected.to_bits(),
                "{input}: got {got:?}, want {expected:?}"
            );
        }
    }

    #[test]
    fn rejects_what_apimachinery_rejects() {
        assert_eq!(approximate_f64(""), Err(QuantityError::Format));
        assert_eq!(approximate_f64("5x"), Err(QuantityError::Format));
        assert_eq!(approximate_f64("5K"), Err(QuantityError::Suffix));
        assert_eq!(approximate_f64("1.2.3"), Err(QuantityError::Format));
        assert_eq!(approximate_f64("abc"), Err(QuantityError::Format));
    }

    #[test]
    fn pow10_follows_go_tables() {
        assert_eq!(go_pow10(-3), 0.001);
        assert_eq!(go_pow10(0), 1.0);
        assert_eq!(go_pow10(309), f64::INFINITY);
        assert_eq!(go_pow10(-324), 0.0);
    }
}
