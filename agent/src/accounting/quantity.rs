//! Exact parsing of Kubernetes resource quantities ("100m", "1.5Gi", "1e3", "129M", ...).
//!
//! All quantity arithmetic of the agent goes through this one function, so that unit mistakes (the
//! upstream agent's memory score bug) can only happen in one audited place. Values are computed with
//! integers, never through floating point: a quantity is turned into a whole number of accounting
//! units, rounding up any fraction exactly as Kubernetes' `MilliValue()` / `Value()` do.

use std::fmt;

use ocm_score_api::quantity_suffix::Suffix;

/// The unit a resource is accounted in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AccountingUnit {
    /// Thousandths of the quantity (millicores for `cpu`).
    Milli,
    /// Whole units (bytes for `memory`, devices for `nvidia.com/gpu`).
    Whole,
}

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid quantity {value:?}: {reason}")]
pub struct QuantityError {
    pub value: String,
    pub reason: &'static str,
}

/// Parses `text` as a Kubernetes quantity and returns it in `unit`s, rounded up (away from zero).
pub fn parse_quantity(text: &str, unit: AccountingUnit) -> Result<i64, QuantityError> {
    let fail = |reason| QuantityError {
        value: text.to_owned(),
        reason,
    };
    let bytes = text.as_bytes();
    let mut pos = 0;

    let negative = match bytes.first() {
        Some(b'-') => {
            pos += 1;
            true
        }
        Some(b'+') => {
            pos += 1;
            false
        }
        _ => false,
    };

    // Number: digits, optionally one '.', digits. At least one digit overall.
    let mut mantissa: u128 = 0;
    let mut fraction_digits: i32 = 0;
    let mut digits = 0;
    let mut seen_point = false;
    // Digits beyond what u128 can hold only matter if they are significant; reject them rather than
    // silently lose precision (no real quantity comes close).
    while pos < bytes.len() {
        match bytes[pos] {
            d @ b'0'..=b'9' => {
                mantissa = mantissa
                    .checked_mul(10)
                    .and_then(|m| m.checked_add(u128::from(d - b'0')))
                    .ok_or_else(|| fail("too many digits"))?;
                digits += 1;
                if seen_point {
                    fraction_digits += 1;
                }
            }
            b'.' if !seen_point => seen_point = true,
            b'.' => return Err(fail("more than one decimal point")),
            _ => break,
        }
        pos += 1;
    }
    if digits == 0 {
        return Err(fail("no digits"));
    }

    let (exp10, exp2) = parse_suffix(&text[pos..]).ok_or_else(|| fail("unknown suffix"))?;
    let scale = match unit {
        AccountingUnit::Milli => 3,
        AccountingUnit::Whole => 0,
    };
    let exp10 = exp10 - fraction_digits + scale;

    let magnitude = scale_exact(mantissa, exp10, exp2).ok_or_else(|| fail("out of range"))?;
    let magnitude = i64::try_from(magnitude).map_err(|_| fail("out of range"))?;
    Ok(if negative { -magnitude } else { magnitude })
}

/// The decimal and binary exponents a suffix stands for; `None` for an unknown suffix.
fn parse_suffix(suffix: &str) -> Option<(i32, u32)> {
    if let Some(named) = Suffix::named(suffix) {
        return Some(named.exponents());
    }
    // Decimal exponent: e or E, optional sign, at least one digit.
    let rest = suffix.strip_prefix(['e', 'E'])?;
    let digits = rest.strip_prefix(['+', '-']).unwrap_or(rest);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) || digits.len() > 4 {
        return None;
    }
    Some((rest.parse::<i32>().ok()?, 0))
}

/// `ceil(mantissa · 10^exp10 · 2^exp2)`, or `None` if it does not fit.
fn scale_exact(mantissa: u128, exp10: i32, exp2: u32) -> Option<u128> {
    if mantissa == 0 {
        return Some(0);
    }
    let numerator = mantissa.checked_mul(1u128.checked_shl(exp2)?)?;
    if exp10 >= 0 {
        numerator.checked_mul(10u128.checked_pow(exp10.unsigned_abs())?)
    } else {
        match 10u128.checked_pow(exp10.unsigned_abs()) {
            Some(denominator) => Some(numerator.div_ceil(denominator)),
            // The denominator exceeds any u128 numerator: a positive value below one unit.
            None => Some(1),
        }
    }
}

/// A quantity as it appears in an object: normally a string, but accept a bare JSON/YAML number too
/// (objects written by hand sometimes carry one).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct QuantityText(pub String);

impl fmt::Display for QuantityText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl<'de> serde::Deserialize<'de> for QuantityText {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = QuantityText;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a quantity string such as \"100m\" or \"1Gi\"")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(QuantityText(v.to_owned()))
            }
            fn visit_string<E: serde::de::Error>(self, v: String) -> Result<Self::Value, E> {
                Ok(QuantityText(v))
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Self::Value, E> {
                Ok(QuantityText(v.to_string()))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Self::Value, E> {
                Ok(QuantityText(v.to_string()))
            }
            fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Self::Value, E> {
                Ok(QuantityText(v.to_string()))
            }
        }
        d.deserialize_any(Visitor)
    }
}

#[cfg(test)]
mod tests {
    use super::AccountingUnit::{Milli, Whole};
    use super::*;

    #[test]
    fn spellings() {
        let table: &[(&str, AccountingUnit, i64)] = &[
            // The spellings the accounting issue names.
            ("100m", Milli, 100),
            ("1.5Gi", Whole, 1_610_612_736),
            ("1e3", Milli, 1_000_000),
            ("1e3", Whole, 1000),
            ("129M", Whole, 129_000_000),
            // Plain numbers, signs, fractions.
            ("4", Milli, 4000),
            ("+4", Milli, 4000),
            ("0", Milli, 0),
            ("0.5", Milli, 500),
            (".5", Milli, 500),
            ("5.", Milli, 5000),
            ("15.5", Milli, 15_500),
            ("3900m", Milli, 3900),
            ("500000u", Milli, 500),
            ("5e-1", Milli, 500),
            ("3.2e1", Milli, 32_000),
            ("1E3", Whole, 1000),
            ("1e+3", Whole, 1000),
            ("1e0", Whole, 1),
            ("2k", Milli, 2_000_000),
            ("1G", Whole, 1_000_000_000),
            ("16Gi", Whole, 17_179_869_184),
            ("0.5Gi", Whole, 536_870_912),
            ("15.5Gi", Whole, 16_642_998_272),
            ("1000Ki", Whole, 1_024_000),
            ("16386276Ki", Whole, 16_779_546_624),
            ("128974848000m", Whole, 128_974_848),
            ("1e10", Whole, 10_000_000_000),
            ("2E", Whole, 2_000_000_000_000_000_000),
            ("1Ei", Whole, 1 << 60),
            ("7Pi", Whole, 7 << 50),
            ("1Ti", Whole, 1 << 40),
            ("3T", Whole, 3_000_000_000_000),
            ("2P", Whole, 2_000_000_000_000_000),
            ("100n", Milli, 1),
            ("-1", Whole, -1),
            ("-100m", Milli, -100),
        ];
        for &(text, unit, want) in table {
            assert_eq!(parse_quantity(text, unit), Ok(want), "{text} in {unit:?}");
        }
    }

    #[test]
    fn fractions_round_up_like_kubernetes() {
        // Kubernetes rounds MilliValue()/Value() up to the next whole unit.
        assert_eq!(parse_quantity("1u", Milli), Ok(1));
        assert_eq!(parse_quantity("1.0001", Milli), Ok(1001));
        assert_eq!(parse_quantity("1.5", Whole), Ok(2));
        assert_eq!(parse_quantity("1m", Whole), Ok(1));
        assert_eq!(parse_quantity("1e-40", Whole), Ok(1));
        assert_eq!(parse_quantity("0e-40", Whole), Ok(0));
        assert_eq!(parse_quantity("-1.5", Whole), Ok(-2));
    }

    #[test]
    fn rejects_malformed_text_with_a_reason() {
        for text in [
            "", "abc", "Gi", "1.2.3", "1Kb", "1K", "1e", "1e+", "--1", "+-1", "1 Gi", " 1", "1Gi ", "1mi",
            "1ee3", "1e3.5", "0x10", ".", "+", "1e99999", "NaN", "inf",
        ] {
            let err = parse_quantity(text, Milli).expect_err(text);
            assert_eq!(err.value, text);
            assert!(err.to_string().contains(&format!("{text:?}")), "{err}");
        }
    }

    #[test]
    fn rejects_values_that_do_not_fit() {
        assert_eq!(
            parse_quantity("9Ei", Whole).map_err(|e| e.reason),
            Err("out of range")
        );
        assert_eq!(
            parse_quantity("1e30", Whole).map_err(|e| e.reason),
            Err("out of range")
        );
        assert_eq!(
            parse_quantity("1E", Milli).map_err(|e| e.reason),
            Err("out of range")
        );
        assert!(parse_quantity(&"9".repeat(60), Whole).is_err());
        assert_eq!(parse_quantity("9223372036854775807", Whole), Ok(i64::MAX));
    }

    #[test]
    fn accepts_bare_numbers_in_objects() {
        let q: QuantityText = serde_json::from_str("4").expect("int");
        assert_eq!(q.0, "4");
        let q: QuantityText = serde_json::from_str("1.5").expect("float");
        assert_eq!(parse_quantity(&q.0, Milli), Ok(1500));
        let q: QuantityText = serde_json::from_str("\"1Gi\"").expect("string");
        assert_eq!(q.0, "1Gi");
        assert!(serde_json::from_str::<QuantityText>("[1]").is_err());
    }
}
