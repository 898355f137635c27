//! Parsing answers of the Prometheus HTTP API (`/api/v1/query`), which Thanos Query serves too.
//!
//! Success: `{"status":"success","data":{"resultType":..., "result":...},"warnings":[...]}`.
//! Failure: `{"status":"error","errorType":"bad_data","error":"..."}` with a 4xx/5xx code, or, from
//! proxies and overloaded servers, any body at all.

use jiff::Timestamp;
use serde::{
    Deserialize, Deserializer,
    de::{IgnoredAny, MapAccess, Visitor},
};
use std::{borrow::Cow, fmt};

/// Labels of one series, in the order the API sent them. A handful per series, so a vector scanned
/// in place beats a map (this is on the path that decodes 10,000 series per score every round).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Labels(Vec<(String, String)>);

impl Labels {
    pub fn get(&self, name: &str) -> Option<&String> {
        self.0.iter().find(|(k, _)| k == name).map(|(_, v)| v)
    }

    /// Sets a label, replacing an earlier value.
    pub fn insert(&mut self, name: String, value: String) {
        match self.0.iter_mut().find(|(k, _)| *k == name) {
            Some(slot) => slot.1 = value,
            None => self.0.push((name, value)),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }
}

impl FromIterator<(String, String)> for Labels {
    fn from_iter<I: IntoIterator<Item = (String, String)>>(iter: I) -> Self {
        let mut labels = Labels::default();
        for (k, v) in iter {
            labels.insert(k, v);
        }
        labels
    }
}

impl<'de> Deserialize<'de> for Labels {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct LabelsVisitor;
        impl<'de> Visitor<'de> for LabelsVisitor {
            type Value = Labels;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object of label names to values")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Labels, A::Error> {
                let mut labels = Vec::with_capacity(map.size_hint().unwrap_or(4));
                while let Some(pair) = map.next_entry::<String, String>()? {
                    labels.push(pair);
                }
                Ok(Labels(labels))
            }
        }
        d.deserialize_map(LabelsVisitor)
    }
}

/// A decoded successful answer.
#[derive(Debug, Clone, PartialEq)]
pub struct QueryResponse {
    pub data: QueryData,
    /// Non-fatal problems, e.g. a Thanos partial response naming the store that did not answer.
    pub warnings: Vec<String>,
    /// Informational notes (newer Prometheus versions).
    pub infos: Vec<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum QueryData {
    Vector(Vec<VectorSample>),
    Matrix(Vec<RangeSeries>),
    Scalar(Point),
    String { timestamp: Timestamp, value: String },
}

impl QueryData {
    /// The `resultType` as the API names it.
    pub fn result_type(&self) -> &'static str {
        match self {
            Self::Vector(_) => "vector",
            Self::Matrix(_) => "matrix",
            Self::Scalar(_) => "scalar",
            Self::String { .. } => "string",
        }
    }
}

/// One series of an instant vector.
#[derive(Debug, Clone, PartialEq)]
pub struct VectorSample {
    pub labels: Labels,
    pub timestamp: Timestamp,
    pub value: SampleValue,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum SampleValue {
    /// A float sample; may be NaN or ±Inf, exactly as PromQL computed it.
    Float(f64),
    /// A native histogram sample, which has no single value to score.
    Histogram,
}

/// One series of a range vector.
#[derive(Debug, Clone, PartialEq)]
pub struct RangeSeries {
    pub labels: Labels,
    pub points: Vec<Point>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Point {
    pub timestamp: Timestamp,
    pub value: f64,
}

/// Why an answer could not be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResponseError {
    /// The API reported an error in its own format.
    #[error("query API answered HTTP {status} {error_type}: {message}")]
    Api {
        status: u16,
        error_type: String,
        message: String,
    },
    /// A non-success HTTP status without an API error body (a proxy, a load balancer, ...).
    #[error("query API answered HTTP {status}: {body}")]
    Http { status: u16, body: String },
    /// A success status whose body is not a valid API answer (e.g. cut off mid-way).
    #[error("query API answered HTTP {status} with a body that is not a valid answer: {message}")]
    Malformed { status: u16, message: String },
}

impl ResponseError {
    /// Whether trying again may help: server-side and transient failures yes, a bad query no.
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::Api {
                status, error_type, ..
            } => {
                matches!(
                    error_type.as_str(),
                    "timeout" | "canceled" | "internal" | "unavailable"
                ) || *status >= 500
                    || *status == 429
            }
            Self::Http { status, .. } => *status >= 500 || *status == 429 || *status == 408,
            Self::Malformed { .. } => true,
        }
    }

    /// A short stable name for metrics.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Api { .. } => "api_error",
            Self::Http { .. } => "http_status",
            Self::Malformed { .. } => "malformed",
        }
    }
}

/// Whether a warning is a PromQL annotation (`PromQL info: …`, `PromQL warning: …`): a remark on the
/// query itself, which Thanos reports among the warnings too (e.g. `rate()` of a metric whose name
/// does not end in `_total`), rather than a problem with the data, such as a store that did not
/// answer.
pub fn is_promql_annotation(warning: &str) -> bool {
    warning.starts_with("PromQL info:") || warning.starts_with("PromQL warning:")
}

/// Decodes an answer of the query endpoint, given its HTTP status code and body.
pub fn parse_response(status: u16, body: &[u8]) -> Result<QueryResponse, ResponseError> {
    let success = (200..300).contains(&status);
    let envelope: Envelope = match serde_json::from_slice(body) {
        Ok(envelope) => envelope,
        Err(e) if success => {
            return Err(ResponseError::Malformed {
                status,
                message: e.to_string(),
            });
        }
        Err(_) => {
            return Err(ResponseError::Http {
                status,
                body: snippet(body),
            });
        }
    };
    match (envelope.status.as_str(), envelope.data) {
        ("success", Some(data)) if success => Ok(QueryResponse {
            data: data
                .into_data()
                .map_err(|message| ResponseError::Malformed { status, message })?,
            warnings: envelope.warnings,
            infos: envelope.infos,
        }),
        ("error", _) => Err(ResponseError::Api {
            status,
            error_type: envelope.error_type.unwrap_or_else(|| "unknown".into()),
            message: envelope.error.unwrap_or_default(),
        }),
        _ if !success => Err(ResponseError::Http {
            status,
            body: snippet(body),
        }),
        (other, _) => Err(ResponseError::Malformed {
            status,
            message: format!("status {other:?} without data"),
        }),
    }
}

/// The start of a body for an error message, on one line.
fn snippet(body: &[u8]) -> String {
    const MAX: usize = 200;
    let text = String::from_utf8_lossy(&body[..body.len().min(MAX)]);
    let mut line: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if body.len() > MAX {
        line.push('…');
    }
    line
}

#[derive(Deserialize)]
struct Envelope<'a> {
    status: String,
    #[serde(borrow)]
    data: Option<WireData<'a>>,
    #[serde(rename = "errorType")]
    error_type: Option<String>,
    error: Option<String>,
    #[serde(default)]
    warnings: Vec<String>,
    #[serde(default)]
    infos: Vec<String>,
}

#[derive(Deserialize)]
#[serde(tag = "resultType", content = "result", rename_all = "lowercase")]
enum WireData<'a> {
    #[serde(borrow)]
    Vector(Vec<WireSample<'a>>),
    #[serde(borrow)]
    Matrix(Vec<WireSeries<'a>>),
    #[serde(borrow)]
    Scalar(WirePoint<'a>),
    #[serde(borrow)]
    String(WirePoint<'a>),
}

#[derive(Deserialize)]
struct WireSample<'a> {
    #[serde(default)]
    metric: Labels,
    #[serde(borrow)]
    value: Option<WirePoint<'a>>,
    histogram: Option<(f64, IgnoredAny)>,
}

#[derive(Deserialize)]
struct WireSeries<'a> {
    #[serde(default)]
    metric: Labels,
    #[serde(default, borrow)]
    values: Vec<WirePoint<'a>>,
}

/// `[<unix seconds as a number>, "<value as a string>"]`; the value is borrowed when it can be.
#[derive(Deserialize)]
struct WirePoint<'a>(f64, #[serde(borrow)] Cow<'a, str>);

impl WireData<'_> {
    fn into_data(self) -> Result<QueryData, String> {
        Ok(match self {
            Self::Vector(samples) => QueryData::Vector(
                samples
                    .into_iter()
                    .map(|s| match (s.value, s.histogram) {
                        (Some(point), _) => {
                            let point = point.decode()?;
                            Ok(VectorSample {
                                labels: s.metric,
                                timestamp: point.timestamp,
                                value: SampleValue::Float(point.value),
                            })
                        }
                        (None, Some((ts, _))) => Ok(VectorSample {
                            labels: s.metric,
                            timestamp: timestamp(ts)?,
                            value: SampleValue::Histogram,
                        }),
                        (None, None) => Err("a vector sample has neither value nor histogram".to_owned()),
                    })
                    .collect::<Result<_, _>>()?,
            ),
            Self::Matrix(series) => QueryData::Matrix(
                series
                    .into_iter()
                    .map(|s| {
                        Ok(RangeSeries {
                            labels: s.metric,
                            points: s
                                .values
                                .into_iter()
                                .map(WirePoint::decode)
                                .collect::<Result<_, String>>()?,
                        })
                    })
                    .collect::<Result<_, String>>()?,
            ),
            Self::Scalar(point) => QueryData::Scalar(point.decode()?),
            Self::String(WirePoint(ts, value)) => QueryData::String {
                timestamp: timestamp(ts)?,
                value: value.into_owned(),
            },
        })
    }
}

impl WirePoint<'_> {
    fn decode(self) -> Result<Point, String> {
        Ok(Point {
            timestamp: timestamp(self.0)?,
            value: parse_value(&self.1)?,
        })
    }
}

/// Sample values travel as strings so that NaN and ±Inf survive JSON.
pub fn parse_value(text: &str) -> Result<f64, String> {
    match text {
        "NaN" => Ok(f64::NAN),
        "+Inf" | "Inf" => Ok(f64::INFINITY),
        "-Inf" => Ok(f64::NEG_INFINITY),
        _ => text
            .parse::<f64>()
            .map_err(|_| format!("sample value {text:?} is not a number")),
    }
}

/// Unix seconds with a fraction to a timestamp, at the millisecond precision Prometheus keeps.
fn timestamp(seconds: f64) -> Result<Timestamp, String> {
    let invalid = || format!("sample timestamp {seconds} is not a valid time");
    let millis = (seconds * 1e3).round();
    if !millis.is_finite() || millis.abs() > 1e17 {
        return Err(invalid());
    }
    Timestamp::from_millisecond(millis as i64).map_err(|_| invalid())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(body: &str) -> QueryResponse {
        parse_response(200, body.as_bytes()).expect("valid answer")
    }

    #[test]
    fn vector_with_special_values() {
        let r = ok(r#"{"status":"success","data":{"resultType":"vector","result":[
            {"metric":{"cluster":"a","job":"x"},"value":[1700000000.5,"12.25"]},
            {"metric":{"cluster":"b"},"value":[1700000000.5,"NaN"]},
            {"metric":{"cluster":"c"},"value":[1700000000.5,"+Inf"]},
            {"metric":{"cluster":"d"},"value":[1700000000.5,"-Inf"]},
            {"metric":{"cluster":"e"},"value":[1700000000.5,"-3e2"]},
            {"metric":{},"value":[1700000000,"1"]}]}}"#);
        let QueryData::Vector(samples) = r.data else {
            panic!("vector expected")
        };
        assert_eq!(samples.len(), 6);
        assert_eq!(samples[0].labels.get("cluster").map(String::as_str), Some("a"));
        assert_eq!(samples[0].value, SampleValue::Float(12.25));
        assert_eq!(
            samples[0].timestamp,
            Timestamp::from_millisecond(1_700_000_000_500).expect("ts")
        );
        assert!(matches!(samples[1].value, SampleValue::Float(v) if v.is_nan()));
        assert_eq!(samples[2].value, SampleValue::Float(f64::INFINITY));
        assert_eq!(samples[3].value, SampleValue::Float(f64::NEG_INFINITY));
        assert_eq!(samples[4].value, SampleValue::Float(-300.0));
        assert!(samples[5].labels.is_empty());
        assert!(r.warnings.is_empty());
    }

    #[test]
    fn escaped_strings_decode() {
        let r = ok(r#"{"status":"success","data":{"resultType":"vector","result":[
            {"metric":{"cluster":"we\"ird","cluster":"dup"},"value":[1,"1\u0030"]}]}}"#);
        let QueryData::Vector(samples) = r.data else {
            panic!("vector expected")
        };
        assert_eq!(
            samples[0].labels.get("cluster").map(String::as_str),
            Some("we\"ird")
        );
        assert_eq!(samples[0].value, SampleValue::Float(10.0));
    }

    #[test]
    fn empty_vector_and_extra_fields() {
        // Thanos and newer Prometheus add fields (stats, analysis) that must not break decoding.
        let r = ok(
            r#"{"status":"success","data":{"result":[],"resultType":"vector","stats":{"x":1}},"extra":true}"#,
        );
        assert_eq!(r.data, QueryData::Vector(vec![]));
    }

    #[test]
    fn native_histogram_samples_are_marked() {
        let r = ok(r#"{"status":"success","data":{"resultType":"vector","result":[
            {"metric":{"cluster":"a"},"histogram":[1700000000,{"count":"2","sum":"3","buckets":[]}]}]}}"#);
        let QueryData::Vector(samples) = r.data else {
            panic!("vector expected")
        };
        assert_eq!(samples[0].value, SampleValue::Histogram);
    }

    #[test]
    fn matrix_scalar_string() {
        let r = ok(r#"{"status":"success","data":{"resultType":"matrix","result":[
            {"metric":{"cluster":"a"},"values":[[1,"1"],[2,"2.5"]]}]}}"#);
        let QueryData::Matrix(series) = r.data else {
            panic!("matrix expected")
        };
        assert_eq!(series[0].points.len(), 2);
        assert_eq!(series[0].points[1].value, 2.5);

        let r = ok(r#"{"status":"success","data":{"resultType":"scalar","result":[1700000000.123,"42"]}}"#);
        assert_eq!(r.data.result_type(), "scalar");
        let QueryData::Scalar(p) = r.data else {
            panic!("scalar expected")
        };
        assert_eq!(p.value, 42.0);
        assert_eq!(
            p.timestamp,
            Timestamp::from_millisecond(1_700_000_000_123).expect("ts")
        );

        let r = ok(r#"{"status":"success","data":{"resultType":"string","result":[1,"hello"]}}"#);
        assert_eq!(
            r.data,
            QueryData::String {
                timestamp: Timestamp::from_second(1).expect("ts"),
                value: "hello".into()
            }
        );
    }

    #[test]
    fn warnings_and_infos_are_kept() {
        let r = ok(r#"{"status":"success","data":{"resultType":"vector","result":[]},
            "warnings":["store eu-1 unavailable: partial response"],"infos":["note"]}"#);
        assert_eq!(
            r.warnings,
            vec!["store eu-1 unavailable: partial response".to_owned()]
        );
        assert_eq!(r.infos, vec!["note".to_owned()]);
    }

    #[test]
    fn a_thanos_partial_response_decodes_with_its_warning() {
        // As Thanos v0.41's querier answered with one of two sidecars stopped.
        let r = ok(
            r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{"monitor":"m-a"},"value":[1795453527.500,"1"]}],"analysis":{}},"warnings":["fetch series for {monitor=\"m-b\"} Addr: 127.0.0.1:19192 MinTime: -62167219200000 MaxTime: 9223372036854775807: rpc error: code = Unavailable desc = connection error: desc = \"transport: Error while dialing: dial tcp 127.0.0.1:19192: connect: connection refused\""]}"#,
        );
        let QueryData::Vector(samples) = r.data else {
            panic!("vector expected")
        };
        assert_eq!(samples.len(), 1);
        assert_eq!(r.warnings.len(), 1);
        assert!(
            r.warnings[0].starts_with("fetch series for {monitor=\"m-b\"} Addr: 127.0.0.1:19192"),
            "{:?}",
            r.warnings
        );
    }

    #[test]
    fn promql_annotations_are_told_from_store_failures() {
        // Both as Thanos v0.41's querier sent them.
        assert!(is_promql_annotation(
            "PromQL info: metric might not be a counter, name does not end in _total/_sum/_count/_bucket: \"http_requests\""
        ));
        assert!(is_promql_annotation(
            "PromQL warning: encountered a mix of histograms and floats for metric name \"x\""
        ));
        assert!(!is_promql_annotation(
            "fetch series for {monitor=\"m-b\"} Addr: 127.0.0.1:19192 MinTime: 0 MaxTime: 1: rpc error: code = Unavailable"
        ));
        assert!(!is_promql_annotation("receive series from 127.0.0.1:10901: EOF"));
    }

    #[test]
    fn api_error_bodies() {
        let e = parse_response(
            400,
            br#"{"status":"error","errorType":"bad_data","error":"parse error at char 4"}"#,
        )
        .expect_err("error");
        assert_eq!(
            e,
            ResponseError::Api {
                status: 400,
                error_type: "bad_data".into(),
                message: "parse error at char 4".into()
            }
        );
        assert!(!e.is_retryable());
        let e = parse_response(
            503,
            br#"{"status":"error","errorType":"timeout","error":"query timed out"}"#,
        )
        .expect_err("error");
        assert!(e.is_retryable());
        let e = parse_response(
            422,
            br#"{"status":"error","errorType":"execution","error":"many-to-many"}"#,
        )
        .expect_err("error");
        assert!(!e.is_retryable());
    }

    #[test]
    fn non_api_failures() {
        let e = parse_response(502, b"<html>Bad Gateway</html>\n").expect_err("error");
        assert_eq!(
            e,
            ResponseError::Http {
                status: 502,
                body: "<html>Bad Gateway</html> ".into()
            }
        );
        assert!(e.is_retryable());
        let e = parse_response(404, b"404 page not found").expect_err("error");
        assert!(!e.is_retryable());
        let long = vec![b'x'; 1000];
        let ResponseError::Http { body, .. } = parse_response(500, &long).expect_err("error") else {
            panic!("http error expected")
        };
        assert_eq!(body.chars().count(), 201);
    }

    #[test]
    fn malformed_success_bodies() {
        for body in [
            "",
            "not json",
            r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{"cluster":"a"},"value":[1,"#,
            r#"{"status":"success"}"#,
            r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,"abc"]}]}}"#,
            r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{}}]}}"#,
            r#"{"status":"success","data":{"resultType":"histogram","result":[]}}"#,
            r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":["1","1"]}]}}"#,
            r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1e300,"1"]}]}}"#,
        ] {
            let e = parse_response(200, body.as_bytes()).expect_err(body);
            assert!(
                matches!(e, ResponseError::Malformed { status: 200, .. }),
                "{body}: {e:?}"
            );
            assert!(e.is_retryable());
        }
    }

    #[test]
    fn values() {
        assert_eq!(parse_value("1e3"), Ok(1000.0));
        assert_eq!(parse_value("-0.5"), Ok(-0.5));
        assert_eq!(parse_value("+Inf"), Ok(f64::INFINITY));
        assert!(parse_value("NaN").expect("nan").is_nan());
        assert!(parse_value("").is_err());
        assert!(parse_value("12 cores").is_err());
    }
}
