//! URLs parsed the way Go's `url.ParseRequestURI` parses them (an absolute URI or an absolute
//! path; no fragment splitting; `scheme:opaque` accepted), as Kubernetes' CEL `url` has them.

use std::collections::BTreeMap;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Url {
    scheme: String,
    /// `host[:port]` as written, IPv6 literals in brackets.
    host: String,
    /// The path as written (still escaped).
    raw_path: String,
    raw_query: String,
    opaque: String,
}

fn is_unreserved(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~')
}

/// Decodes `%XX` escapes (and `+` as space in queries); `None` on a malformed escape.
fn unescape(s: &str, plus_is_space: bool) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' => {
                let hex = s.get(i + 1..i + 3)?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 3;
            }
            b'+' if plus_is_space => {
                out.push(b' ');
                i += 1;
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    Some(String::from_utf8_lossy(&out).into_owned())
}

impl Url {
    /// Validates `raw` as Go's `url.ParseRequestURI` does, then reads it without its fragment
    /// (Kubernetes keeps `url.Parse`'s result); the error follows Go's text.
    pub fn parse(raw: &str) -> Result<Url, String> {
        Url::parse_request_uri(raw)?;
        let without_fragment = raw.split_once('#').map_or(raw, |(u, _)| u);
        Url::parse_request_uri(without_fragment).or_else(|_| Url::parse_request_uri(raw))
    }

    fn parse_request_uri(raw: &str) -> Result<Url, String> {
        let fail =
            |why: &str| format!("URL parse error during conversion from string: parse \"{raw}\": {why}");
        if raw.bytes().any(|b| b < 0x20 || b == 0x7f) {
            return Err(fail("net/url: invalid control character in URL"));
        }
        if raw.is_empty() {
            return Err(fail("empty url"));
        }
        let mut url = Url {
            scheme: String::new(),
            host: String::new(),
            raw_path: String::new(),
            raw_query: String::new(),
            opaque: String::new(),
        };
        if raw == "*" {
            url.raw_path = "*".into();
            return Ok(url);
        }
        let mut rest = raw;
        for (i, c) in raw.char_indices() {
            if c.is_ascii_alphabetic() {
                continue;
            }
            if c.is_ascii_digit() || matches!(c, '+' | '-' | '.') {
                if i == 0 {
                    break;
                }
                continue;
            }
            if c == ':' {
                if i == 0 {
                    return Err(fail("missing protocol scheme"));
                }
                url.scheme = raw[..i].to_ascii_lowercase();
                rest = &raw[i + 1..];
            }
            break;
        }
        if let Some((before, query)) = rest.split_once('?') {
            url.raw_query = query.to_string();
            rest = before;
        }
        if !rest.starts_with('/') {
            if !url.scheme.is_empty() {
                url.opaque = rest.to_string();
                return Ok(url);
            }
            return Err(fail("invalid URI for request"));
        }
        if !url.scheme.is_empty() && rest.starts_with("//") {
            let authority_end = rest[2..].find('/').map_or(rest.len(), |i| i + 2);
            let authority = &rest[2..authority_end];
            rest = &rest[authority_end..];
            let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
            validate_host(host).map_err(|e| fail(&e))?;
            url.host = host.to_string();
        }
        if unescape(rest, false).is_none() {
            return Err(fail("invalid URL escape"));
        }
        url.raw_path = rest.to_string();
        Ok(url)
    }

    pub fn scheme(&self) -> &str {
        &self.scheme
    }

    /// `host[:port]` as written.
    pub fn host(&self) -> &str {
        &self.host
    }

    pub fn hostname(&self) -> &str {
        let (host, _) = split_port(&self.host);
        host.strip_prefix('[')
            .and_then(|h| h.strip_suffix(']'))
            .unwrap_or(host)
    }

    pub fn port(&self) -> &str {
        split_port(&self.host).1
    }

    /// Go's `URL.Query()`: `&`-separated pairs, malformed ones (and any with `;`) dropped, the
    /// values of a key in the order written.
    pub fn query(&self) -> BTreeMap<String, Vec<String>> {
        let mut query: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for pair in self.raw_query.split('&') {
            if pair.is_empty() || pair.contains(';') {
                continue;
            }
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            let (Some(k), Some(v)) = (unescape(k, true), unescape(v, true)) else {
                continue;
            };
            query.entry(k).or_default().push(v);
        }
        query
    }

    /// Go's `EscapedPath`: the path as written when it is a valid escaping, else re-escaped.
    pub fn escaped_path(&self) -> String {
        let valid = self
            .raw_path
            .bytes()
            .all(|b| is_unreserved(b) || b"!$&'()*+,;=:@[]/%".contains(&b));
        if valid {
            return self.raw_path.clone();
        }
        let decoded = unescape(&self.raw_path, false).unwrap_or_default();
        let mut out = String::new();
        for b in decoded.bytes() {
            if is_unreserved(b) || b"$&+,/:;=@".contains(&b) {
                out.push(char::from(b));
            } else {
                out.push_str(&format!("%{b:02X}"));
            }
        }
        out
    }
}

/// `host` and `port` of `host[:port]`, minding IPv6 brackets.
fn split_port(host: &str) -> (&str, &str) {
    let colon = if host.starts_with('[') {
        host.find(']')
            .and_then(|end| host[end..].find(':').map(|c| c + end))
    } else {
        host.rfind(':')
    };
    match colon {
        Some(c) => (&host[..c], &host[c + 1..]),
        None => (host, ""),
    }
}

fn validate_host(host: &str) -> Result<(), String> {
    let (name, port) = split_port(host);
    if host.contains(':') && !port.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("invalid port \":{port}\" after host"));
    }
    if host.starts_with('[') && !name.ends_with(']') {
        return Err("missing ']' in host".into());
    }
    for b in name.bytes() {
        let ok = b >= 0x80 || is_unreserved(b) || b"!$&'()*+,;=:[]<>\"%".contains(&b);
        if !ok {
            return Err(format!("invalid character {:?} in host name", char::from(b)));
        }
    }
    if unescape(name, false).is_none() {
        return Err("invalid URL escape".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_like_go_parse_request_uri() {
        let u = Url::parse("https://alpha-1.example.com:8443/p%20q?x=1&x=2&y").expect("valid");
        assert_eq!(
            (u.scheme.as_str(), u.hostname(), u.port()),
            ("https", "alpha-1.example.com", "8443")
        );
        assert_eq!(u.escaped_path(), "/p%20q");
        let v6 = Url::parse("http://[::1]:80/").expect("valid");
        assert_eq!((v6.hostname(), v6.port()), ("::1", "80"));
        assert_eq!(Url::parse("/x").map(|u| u.host), Ok(String::new()));
        assert!(Url::parse("x").is_err_and(|e| e.ends_with("invalid URI for request")));
        assert!(Url::parse("http://a:b/").is_err());
        assert!(Url::parse("http://a b/").is_err());
        assert!(Url::parse("mailto:x@y").is_ok());
    }
}
