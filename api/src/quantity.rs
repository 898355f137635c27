//! Kubernetes quantities as the float64 the resource prioritizers compare.
//!
//! OCM reads `Quantity.AsApproximateFloat64()`, whose result depends on how `ParseQuantity` stored
//! the value: either an int64 mantissa with a decimal scale (the fast path) or an arbitrary
//! precision decimal. The float is then `mantissa * 10^scale` with Go's `math.Pow10`, so `3800m`
//! becomes `3800 * 0.001 = 3.8000000000000003`, not 3.8. Reproducing the same two paths is what
//! makes the min/max normalisation give upstream's integers.

use std::fmt;

use crate::quantity_suffix::Suffix;

/// Why a quantity string was rejected (the texts follow apimachinery's errors).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QuantityError {
    /// `quantities must match the regular expression ...`
    Format,
    /// `unable to parse quantity's suffix`
    Suffix,
}

impl fmt::Display for QuantityError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            QuantityError::Format => {
                "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
            }
            QuantityError::Suffix => "unable to parse quantity's suffix",
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

/// The `inf.Dec` path, for the quantities the fast path cannot hold.
///
/// The value is kept as decimal digits, like Go's big integers, so any length works. Non-zero
/// values are rounded up to nano units with `Round(amount, 9, RoundUp)`, which gives the
/// result a scale of exactly 9: fewer fraction digits are *widened* with zeros (`4.3Ki` becomes
/// 4403200000000 at scale 9), and that is what the float is computed from. Binary quantities
/// are then capped at the largest int64.
fn slow_path(parts: &Parts<'_>, base: u32, exponent: i64, format: Format) -> Result<f64, QuantityError> {
    // inf.Dec.SetString on the written value: unscaled digits and the count of fraction digits.
    let unsigned = parts.value.trim_start_matches(['+', '-']);
    let (int_part, frac_part) = unsigned.split_once('.').unwrap_or((unsigned, ""));
    if int_part.is_empty() && frac_part.is_empty() {
        // inf.Dec: "no digits read".
        return Err(QuantityError::Format);
    }
    let mut digits: Vec<u8> = int_part
        .bytes()
        .chain(frac_part.bytes())
        .map(|c| c - b'0')
        .collect();
    let mut scale: i64 = frac_part.len() as i64;
    if base == 10 {
        scale -= exponent;
    } else {
        multiply(&mut digits, 1u64 << exponent);
    }
    let first = digits.iter().position(|d| *d != 0).unwrap_or(digits.len());
    digits.drain(..first);
    if digits.is_empty() {
        // Zero is not rounded; Go still multiplies 0 by 10^-scale (NaN when that is infinite).
        return Ok(scaled(0.0, -scale));
    }
    // Round up (away from zero) to scale 9: drop extra fraction digits, or widen with zeros.
    let mut zeros: i64 = 0;
    if scale > 9 {
        let drop = usize::try_from(scale - 9).unwrap_or(usize::MAX);
        if drop >= digits.len() {
            digits = vec![1];
        } else {
            let keep = digits.len() - drop;
            let inexact = digits[keep..].iter().any(|d| *d != 0);
            digits.truncate(keep);
            if inexact {
                increment(&mut digits);
            }
        }
    } else {
        zeros = 9 - scale;
    }
    // Binary quantities are capped at the largest int64 (their scale was at most 0 above, so
    // `zeros` is small here).
    if format == Format::BinarySi && exceeds_max_int64_nanos(&digits, zeros) {
        let capped = i64::MAX as f64;
        return Ok(if parts.positive { capped } else { -capped });
    }
    // big.Float.SetInt(...).Float64(): the integer rounded to nearest-even, as Rust's parser does.
    let mut text: String = digits.iter().map(|d| char::from(b'0' + d)).collect();
    if zeros > 0 {
        text.push('e');
        text.push_str(&zeros.to_string());
    }
    let magnitude: f64 = text.parse().map_err(|_| QuantityError::Format)?;
    let signed = if parts.positive { magnitude } else { -magnitude };
    Ok(scaled(signed, -9))
}

/// `digits *= factor`, in place (most significant digit first).
fn multiply(digits: &mut Vec<u8>, factor: u64) {
    let mut carry: u128 = 0;
    for d in digits.iter_mut().rev() {
        let v = u128::from(*d) * u128::from(factor) + carry;
        *d = (v % 10) as u8;
        carry = v / 10;
    }
    while carry > 0 {
        digits.insert(0, (carry % 10) as u8);
        carry /= 10;
    }
}

/// `digits += 1`, in place.
fn increment(digits: &mut Vec<u8>) {
    for d in digits.iter_mut().rev() {
        if *d == 9 {
            *d = 0;
        } else {
            *d += 1;
            return;
        }
    }
    digits.insert(0, 1);
}

/// Whether `digits * 10^zeros` nano units (no leading zeros) exceed the largest int64.
fn exceeds_max_int64_nanos(digits: &[u8], zeros: i64) -> bool {
    const MAX_NANOS: &[u8] = b"9223372036854775807000000000";
    let len = digits.len() as i64 + zeros;
    if len != MAX_NANOS.len() as i64 {
        return len > MAX_NANOS.len() as i64;
    }
    let value = digits
        .iter()
        .map(|d| b'0' + d)
        .chain(std::iter::repeat_n(b'0', zeros.max(0) as usize));
    value.cmp(MAX_NANOS.iter().copied()) == std::cmp::Ordering::Greater
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

/// The base, power and format a suffix stands for (the format is what the quantity keeps).
fn interpret_suffix(suffix: &str) -> Option<(u32, i64, Format)> {
    match Suffix::named(suffix) {
        Some(Suffix::Decimal(e)) => return Some((10, i64::from(e), Format::DecimalSi)),
        Some(Suffix::Binary(e)) => return Some((2, i64::from(e), Format::BinarySi)),
        None => {}
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
            // The inf.Dec path rounds to nano units, which also widens a coarser scale to 9 digits:
            // 44032 at scale 1 becomes 4403200000000 at scale 9, and the float follows.
            ("4.3Ki", 4403.200000000001),
            ("1234567890123456789012", 1.234567890123457e21),
            // Longer than any machine integer; Go's big integers take it.
            ("1234567890123456789012345678901234567890", 1.2345678901234568e39),
            // Binary quantities are capped at the largest int64.
            ("9000000000000000000000Ki", 9.223372036854776e18),
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
