//! The Kubernetes `format` library: `format.named(name)`, one `format.<name>()` per named format,
//! and `validate(string)`, which is `optional.none()` for a valid string and otherwise the list of
//! what is wrong (the texts here are ours; only whether a string is valid follows Kubernetes).

use super::super::types::{Opaque as OpaqueType, Type};
use super::super::value::format::NamedFormat;
use super::super::value::time::Timestamp;
use super::super::value::url::Url;
use super::super::value::{EvalResult, Object, Value};
use super::optional::some;
use super::{Library, args::mismatch, opaque};

/// The formats, by the name `format.named` and `format.<name>()` take.
static FORMATS: [NamedFormat; 13] = [
    NamedFormat {
        name: "dns1123Label",
        validate: |s| dns_label(s, false, false),
    },
    NamedFormat {
        name: "dns1123Subdomain",
        validate: |s| dns_subdomain(s, false),
    },
    NamedFormat {
        name: "dns1035Label",
        validate: |s| dns_label(s, false, true),
    },
    NamedFormat {
        name: "qualifiedName",
        validate: qualified_name,
    },
    NamedFormat {
        name: "dns1123LabelPrefix",
        validate: |s| dns_label(s, true, false),
    },
    NamedFormat {
        name: "dns1123SubdomainPrefix",
        validate: |s| dns_subdomain(s, true),
    },
    NamedFormat {
        name: "dns1035LabelPrefix",
        validate: |s| dns_label(s, true, true),
    },
    NamedFormat {
        name: "labelValue",
        validate: label_value,
    },
    NamedFormat {
        name: "uri",
        validate: |s| Url::parse(s).err().into_iter().collect(),
    },
    NamedFormat {
        name: "uuid",
        validate: uuid,
    },
    NamedFormat {
        name: "byte",
        validate: base64,
    },
    NamedFormat {
        name: "date",
        validate: date,
    },
    NamedFormat {
        name: "datetime",
        validate: |s| {
            if Timestamp::parse(s).is_ok() {
                Vec::new()
            } else {
                vec!["invalid datetime".into()]
            }
        },
    },
];

fn lower_alnum(b: u8) -> bool {
    b.is_ascii_lowercase() || b.is_ascii_digit()
}

fn alnum(b: u8) -> bool {
    b.is_ascii_alphanumeric()
}

/// `[a-z0-9]([-a-z0-9]*[a-z0-9])?` (or starting with `[a-z]` for RFC 1035).
fn is_label(s: &str, rfc1035: bool) -> bool {
    let b = s.as_bytes();
    let (Some(first), Some(last)) = (b.first(), b.last()) else {
        return false;
    };
    let first_ok = if rfc1035 {
        first.is_ascii_lowercase()
    } else {
        lower_alnum(*first)
    };
    first_ok && lower_alnum(*last) && b.iter().all(|c| lower_alnum(*c) || *c == b'-')
}

/// A prefix may end in `-`: it is checked as if that dash were a letter.
fn mask_trailing_dash(s: &str, prefix: bool) -> String {
    match s.strip_suffix('-') {
        Some(head) if prefix && !head.is_empty() => format!("{head}a"),
        _ => s.to_string(),
    }
}

fn dns_label(s: &str, prefix: bool, rfc1035: bool) -> Vec<String> {
    let s = mask_trailing_dash(s, prefix);
    let mut errs = Vec::new();
    if s.len() > 63 {
        errs.push("must be no more than 63 characters".into());
    }
    if !is_label(&s, rfc1035) {
        errs.push(if rfc1035 {
            "must be an RFC 1035 label: lower case letters, digits or '-', starting with a letter and ending with a letter or digit".into()
        } else {
            "must be an RFC 1123 label: lower case letters, digits or '-', starting and ending with a letter or digit".into()
        });
    }
    errs
}

fn is_subdomain(s: &str) -> bool {
    !s.is_empty() && s.split('.').all(|l| is_label(l, false))
}

fn dns_subdomain(s: &str, prefix: bool) -> Vec<String> {
    let s = mask_trailing_dash(s, prefix);
    let mut errs = Vec::new();
    if s.len() > 253 {
        errs.push("must be no more than 253 characters".into());
    }
    if !is_subdomain(&s) {
        errs.push("must be an RFC 1123 subdomain: dot-separated RFC 1123 labels".into());
    }
    errs
}

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`.
fn is_name_part(s: &str) -> bool {
    let b = s.as_bytes();
    match (b.first(), b.last()) {
        (Some(f), Some(l)) => alnum(*f) && alnum(*l) && b.iter().all(|c| alnum(*c) || b"-_.".contains(c)),
        _ => false,
    }
}

fn qualified_name(s: &str) -> Vec<String> {
    let (prefix, name) = match s.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, s),
    };
    let mut errs = Vec::new();
    if let Some(p) = prefix {
        if p.is_empty() {
            errs.push("prefix part must be non-empty".into());
        } else if !is_subdomain(p) || p.len() > 253 {
            errs.push("prefix part must be an RFC 1123 subdomain".into());
        }
    }
    if name.is_empty() {
        errs.push("name part must be non-empty".into());
    } else {
        if name.len() > 63 {
            errs.push("name part must be no more than 63 characters".into());
        }
        if !is_name_part(name) {
            errs.push("name part must be alphanumeric characters, '-', '_' or '.', starting and ending with an alphanumeric character".into());
        }
    }
    errs
}

fn label_value(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > 63 {
        errs.push("must be no more than 63 characters".into());
    }
    if !s.is_empty() && !is_name_part(s) {
        errs.push("a label value must be empty or alphanumeric characters, '-', '_' or '.', starting and ending with an alphanumeric character".into());
    }
    errs
}

fn uuid(s: &str) -> Vec<String> {
    let b = s.as_bytes();
    let ok = b.len() == 36
        && b.iter().enumerate().all(|(i, c)| {
            if matches!(i, 8 | 13 | 18 | 23) {
                *c == b'-'
            } else {
                c.is_ascii_hexdigit()
            }
        });
    if ok {
        Vec::new()
    } else {
        vec!["does not match the UUID format".into()]
    }
}

/// Standard base64 with padding.
fn base64(s: &str) -> Vec<String> {
    let b = s.as_bytes();
    let body = b
        .strip_suffix(b"==")
        .or_else(|| b.strip_suffix(b"="))
        .unwrap_or(b);
    let ok = b.len().is_multiple_of(4)
        && body
            .iter()
            .all(|c| c.is_ascii_alphanumeric() || *c == b'+' || *c == b'/');
    if ok {
        Vec::new()
    } else {
        vec!["invalid base64".into()]
    }
}

fn date(s: &str) -> Vec<String> {
    let ok = s.len() == 10 && Timestamp::parse(&format!("{s}T00:00:00Z")).is_ok();
    if ok {
        Vec::new()
    } else {
        vec!["invalid date".into()]
    }
}

pub fn declare(lib: &mut Library) {
    let format = || opaque(OpaqueType::Format);
    lib.global(
        "format.named",
        vec![Type::String],
        Type::optional(format()),
        named,
    );
    lib.member(
        "validate",
        vec![format(), Type::String],
        Type::optional(Type::list(Type::String)),
        validate,
    );
    for (f, imp) in CONSTRUCTORS {
        lib.global(f, vec![], format(), *imp);
    }
}

fn named(a: &[Value]) -> EvalResult {
    let [Value::String(name)] = a else {
        return Err(mismatch("format.named", a));
    };
    Ok(match FORMATS.iter().find(|f| f.name == &**name) {
        Some(f) => some(Value::object(Object::Format(f))),
        None => Value::Optional(None),
    })
}

fn validate(a: &[Value]) -> EvalResult {
    let [Value::Object(o), Value::String(s)] = a else {
        return Err(mismatch("validate", a));
    };
    let Object::Format(f) = &**o else {
        return Err(mismatch("validate", a));
    };
    let errs = (f.validate)(s);
    Ok(if errs.is_empty() {
        Value::Optional(None)
    } else {
        some(Value::list(errs.iter().map(|e| Value::str(e)).collect()))
    })
}

/// `format.<name>()`, one function per format.
macro_rules! constructors {
    ($($f:literal => $fn:ident : $i:literal),* $(,)?) => {
        $(fn $fn(_: &[Value]) -> EvalResult { Ok(Value::object(Object::Format(&FORMATS[$i]))) })*
        const CONSTRUCTORS: &[(&str, super::Impl)] = &[$(($f, $fn)),*];
    };
}

constructors!(
    "format.dns1123Label" => dns1123_label: 0,
    "format.dns1123Subdomain" => dns1123_subdomain: 1,
    "format.dns1035Label" => dns1035_label: 2,
    "format.qualifiedName" => qualified_name_format: 3,
    "format.dns1123LabelPrefix" => dns1123_label_prefix: 4,
    "format.dns1123SubdomainPrefix" => dns1123_subdomain_prefix: 5,
    "format.dns1035LabelPrefix" => dns1035_label_prefix: 6,
    "format.labelValue" => label_value_format: 7,
    "format.uri" => uri_format: 8,
    "format.uuid" => uuid_format: 9,
    "format.byte" => byte_format: 10,
    "format.date" => date_format: 11,
    "format.datetime" => datetime_format: 12,
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constructors_name_their_formats_and_validate() {
        for (f, imp) in CONSTRUCTORS {
            let Ok(Value::Object(o)) = imp(&[]) else {
                panic!("{f}")
            };
            let Object::Format(format) = &*o else {
                panic!("{f}")
            };
            assert_eq!(format!("format.{}", format.name), *f);
        }
        assert!(dns_label("abc", false, false).is_empty());
        assert!(!dns_label("ABC", false, false).is_empty());
        assert!(dns_label("abc-", true, false).is_empty());
        assert!(!dns_label("1abc", false, true).is_empty());
        assert!(dns_subdomain("a.b-c.d", false).is_empty());
        assert!(qualified_name("example.com/my_name").is_empty());
        assert!(!qualified_name("/x").is_empty());
        assert!(label_value("").is_empty());
        assert!(uuid("123e4567-e89b-12d3-a456-426614174000").is_empty());
        assert!(base64("aGk=").is_empty() && !base64("aGk").is_empty());
        assert!(date("2024-02-29").is_empty() && !date("2023-02-29").is_empty());
    }
}
