//! The named suffixes of Kubernetes quantities (`m`, `Ki`, `G`, ...): one table for every parser.
//!
//! The parsers differ on purpose (the agent's exact integers, the prioritizers' float64 port of
//! apimachinery, CEL's `quantity()`), and so does how each reads an exponent suffix (`e3`): the
//! named suffixes they share are defined here once.

/// What a named suffix multiplies the number by.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Suffix {
    /// `10^e`: `n`, `u`, `m`, none, `k`, `M`, `G`, `T`, `P`, `E`.
    Decimal(i32),
    /// `2^e`: `Ki`, `Mi`, `Gi`, `Ti`, `Pi`, `Ei`.
    Binary(u32),
}

impl Suffix {
    /// The named suffix `text` is, or `None` (an exponent like `e3`, or not a suffix at all).
    pub fn named(text: &str) -> Option<Suffix> {
        Some(match text {
            "n" => Suffix::Decimal(-9),
            "u" => Suffix::Decimal(-6),
            "m" => Suffix::Decimal(-3),
            "" => Suffix::Decimal(0),
            "k" => Suffix::Decimal(3),
            "M" => Suffix::Decimal(6),
            "G" => Suffix::Decimal(9),
            "T" => Suffix::Decimal(12),
            "P" => Suffix::Decimal(15),
            "E" => Suffix::Decimal(18),
            "Ki" => Suffix::Binary(10),
            "Mi" => Suffix::Binary(20),
            "Gi" => Suffix::Binary(30),
            "Ti" => Suffix::Binary(40),
            "Pi" => Suffix::Binary(50),
            "Ei" => Suffix::Binary(60),
            _ => return None,
        })
    }

    /// `(decimal exponent, binary exponent)`: the multiplier is `10^first · 2^second`.
    pub fn exponents(self) -> (i32, u32) {
        match self {
            Suffix::Decimal(e) => (e, 0),
            Suffix::Binary(e) => (0, e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_what_kubernetes_names_and_nothing_else() {
        assert_eq!(Suffix::named("m"), Some(Suffix::Decimal(-3)));
        assert_eq!(Suffix::named(""), Some(Suffix::Decimal(0)));
        assert_eq!(Suffix::named("Gi").map(Suffix::exponents), Some((0, 30)));
        assert_eq!(Suffix::named("E").map(Suffix::exponents), Some((18, 0)));
        // Lower-case `k` only, `K` is not a suffix; exponents are each parser's own.
        for not_named in ["K", "ki", "mi", "e3", "E3", "Kib", " m"] {
            assert_eq!(Suffix::named(not_named), None, "{not_named:?}");
        }
    }
}
