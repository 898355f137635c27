//! The shortest decimal digits of a double and where its point goes: shared by how doubles and
//! durations print.

/// The shortest round-tripping decimal digits of a finite non-zero `d`, and the exponent of
/// the first digit (`d = 0.d1d2... * 10^(exp+1)`).
pub fn shortest_digits(d: f64) -> (bool, String, i32) {
    let text = format!("{:e}", d.abs());
    let (mantissa, exp) = text.split_once('e').unwrap_or((&text, "0"));
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    (d < 0.0, digits, exp.parse().unwrap_or(0))
}

/// `digits` with the decimal point placed after the digit of exponent `exp` (plain notation).
pub fn place_point(digits: &str, exp: i32) -> String {
    if exp < 0 {
        let zeros = "0".repeat(usize::try_from(-exp - 1).unwrap_or(0));
        format!("0.{zeros}{digits}")
    } else {
        let int_len = usize::try_from(exp + 1).unwrap_or(0);
        if digits.len() <= int_len {
            format!("{digits}{}", "0".repeat(int_len - digits.len()))
        } else {
            format!("{}.{}", &digits[..int_len], &digits[int_len..])
        }
    }
}
