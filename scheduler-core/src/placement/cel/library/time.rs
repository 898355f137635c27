//! cel-go's timestamp and duration functions: the `timestamp` and `duration` conversions and
//! the accessors, with an optional time zone for timestamps.

use super::super::types::Type;
use super::super::value::time::{Duration, NANOS_PER_SECOND, Timestamp};
use super::super::value::{EvalResult, Value, no_overload};
use super::Library;

pub fn declare(lib: &mut Library) {
    use Type::*;
    lib.global("timestamp", vec![String], Timestamp, to_timestamp);
    lib.global("timestamp", vec![Timestamp], Timestamp, to_timestamp);
    lib.global("timestamp", vec![Int], Timestamp, to_timestamp);
    lib.global("duration", vec![String], Duration, to_duration);
    lib.global("duration", vec![Duration], Duration, to_duration);
    for &(name, imp) in TIMESTAMP_ACCESSORS {
        lib.member(name, vec![Timestamp], Int, imp);
        lib.member(name, vec![Timestamp, String], Int, imp);
    }
    for &(name, imp) in DURATION_ACCESSORS {
        lib.member(name, vec![Duration], Int, imp);
    }
}

/// One implementation per accessor name, each handing its name to [`access`].
macro_rules! accessors {
    ($list:ident: $($name:literal => $f:ident),* $(,)?) => {
        $(fn $f(a: &[Value]) -> EvalResult { access($name, a) })*
        const $list: &[(&str, super::Impl)] = &[$(($name, $f)),*];
    };
}

accessors!(TIMESTAMP_ACCESSORS:
    "getFullYear" => get_full_year,
    "getMonth" => get_month,
    "getDayOfYear" => get_day_of_year,
    "getDayOfMonth" => get_day_of_month,
    "getDate" => get_date,
    "getDayOfWeek" => get_day_of_week,
    "getHours" => get_hours,
    "getMinutes" => get_minutes,
    "getSeconds" => get_seconds,
    "getMilliseconds" => get_milliseconds,
);

/// The duration accessors share the timestamp ones' implementations.
const DURATION_ACCESSORS: &[(&str, super::Impl)] = &[
    ("getHours", get_hours),
    ("getMinutes", get_minutes),
    ("getSeconds", get_seconds),
    ("getMilliseconds", get_milliseconds),
];

fn to_timestamp(a: &[Value]) -> EvalResult {
    match &a[0] {
        Value::Timestamp(t) => Ok(Value::Timestamp(*t)),
        Value::String(s) => Timestamp::parse(s).map(Value::Timestamp),
        Value::Int(i) => Timestamp::from_unix(*i).map(Value::Timestamp),
        other => Err(no_overload("timestamp", &[other])),
    }
}

fn to_duration(a: &[Value]) -> EvalResult {
    match &a[0] {
        Value::Duration(d) => Ok(Value::Duration(*d)),
        Value::String(s) => Duration::parse(s).map(Value::Duration),
        other => Err(no_overload("duration", &[other])),
    }
}

/// The accessor `name` on a timestamp (in zone `tz`) or a duration.
fn access(name: &str, a: &[Value]) -> EvalResult {
    match a {
        [Value::Duration(d)] => {
            let n = d.nanos();
            Ok(Value::Int(match name {
                "getHours" => n / 3_600_000_000_000,
                "getMinutes" => n / 60_000_000_000,
                "getSeconds" => n / NANOS_PER_SECOND,
                "getMilliseconds" => n / 1_000_000,
                _ => return Err(no_overload(name, &[&a[0]])),
            }))
        }
        [Value::Timestamp(t), rest @ ..] => {
            let tz = match rest {
                [] => None,
                [Value::String(z)] => Some(&**z),
                _ => return Err(no_overload(name, &a.iter().collect::<Vec<_>>())),
            };
            let c = t.civil(tz)?;
            Ok(Value::Int(match name {
                "getFullYear" => c.year,
                "getMonth" => c.month - 1,
                "getDayOfYear" => c.day_of_year,
                "getDayOfMonth" => c.day - 1,
                "getDate" => c.day,
                "getDayOfWeek" => c.weekday,
                "getHours" => c.hour,
                "getMinutes" => c.minute,
                "getSeconds" => c.second,
                "getMilliseconds" => i64::from(t.subsec_nanos() / 1_000_000),
                _ => return Err(no_overload(name, &[&a[0]])),
            }))
        }
        _ => Err(no_overload(name, &a.iter().collect::<Vec<_>>())),
    }
}
