//! Just enough of PKCS#10 to read a certificate request's subject: common name, organizations and
//! organizational units. The API server has already checked the request's signature; we only need
//! to know who the request asks to be.

/// The subject fields the approval rules look at.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RequestSubject {
    pub common_name: String,
    pub organizations: Vec<String>,
    pub organizational_units: Vec<String>,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RequestError {
    #[error("request is not PEM: {0}")]
    Pem(String),
    #[error("PEM block is {0:?}, expected \"CERTIFICATE REQUEST\"")]
    BlockType(String),
    #[error("malformed DER at byte {offset}: {what}")]
    Der { offset: usize, what: &'static str },
}

/// Parses a PEM `CERTIFICATE REQUEST` (what `spec.request` of a CSR holds) and returns its subject.
pub fn parse_pem_subject(pem: &[u8]) -> Result<RequestSubject, RequestError> {
    let der = pem_body(pem)?;
    parse_der_subject(&der)
}

fn pem_body(pem: &[u8]) -> Result<Vec<u8>, RequestError> {
    use base64::Engine as _;
    let text = std::str::from_utf8(pem).map_err(|_| RequestError::Pem("not UTF-8".into()))?;
    let mut lines = text
        .lines()
        .map(str::trim)
        .skip_while(|l| !l.starts_with("-----BEGIN "));
    let begin = lines
        .next()
        .ok_or_else(|| RequestError::Pem("no BEGIN line".into()))?;
    let label = begin.trim_start_matches("-----BEGIN ").trim_end_matches("-----");
    if label != "CERTIFICATE REQUEST" && label != "NEW CERTIFICATE REQUEST" {
        return Err(RequestError::BlockType(label.to_string()));
    }
    let mut body = String::new();
    let mut ended = false;
    for line in lines {
        if line.starts_with("-----END ") {
            ended = true;
            break;
        }
        body.push_str(line);
    }
    if !ended {
        return Err(RequestError::Pem("no END line".into()));
    }
    base64::engine::general_purpose::STANDARD
        .decode(body.as_bytes())
        .map_err(|e| RequestError::Pem(format!("bad base64: {e}")))
}

const TAG_SEQUENCE: u8 = 0x30;
const TAG_SET: u8 = 0x31;
const TAG_INTEGER: u8 = 0x02;
const TAG_OID: u8 = 0x06;
/// id-at-commonName, id-at-organizationName, id-at-organizationalUnitName (2.5.4.3 / .10 / .11).
const OID_CN: &[u8] = &[0x55, 0x04, 0x03];
const OID_O: &[u8] = &[0x55, 0x04, 0x0a];
const OID_OU: &[u8] = &[0x55, 0x04, 0x0b];

/// A DER TLV reader over a byte slice that remembers its absolute offset for error messages.
struct Der<'a> {
    bytes: &'a [u8],
    offset: usize,
}

impl<'a> Der<'a> {
    fn new(bytes: &'a [u8], offset: usize) -> Self {
        Der { bytes, offset }
    }

    fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    fn err(&self, what: &'static str) -> RequestError {
        RequestError::Der {
            offset: self.offset,
            what,
        }
    }

    /// Reads one element, returning its tag and a reader over its content.
    fn read(&mut self) -> Result<(u8, Der<'a>), RequestError> {
        let (&tag, rest) = self
            .bytes
            .split_first()
            .ok_or_else(|| self.err("unexpected end"))?;
        if tag & 0x1f == 0x1f {
            return Err(self.err("high tag numbers are not used in a CSR subject"));
        }
        let (&first, mut rest) = rest.split_first().ok_or_else(|| self.err("missing length"))?;
        let mut header = 2;
        let len = if first < 0x80 {
            usize::from(first)
        } else {
            let count = usize::from(first & 0x7f);
            if count == 0 || count > 4 || rest.len() < count {
                return Err(self.err("bad length"));
            }
            let len = rest[..count]
                .iter()
                .fold(0usize, |acc, b| (acc << 8) | usize::from(*b));
            rest = &rest[count..];
            header += count;
            len
        };
        if rest.len() < len {
            return Err(self.err("length past end of input"));
        }
        let content = Der::new(&rest[..len], self.offset + header);
        self.bytes = &rest[len..];
        self.offset += header + len;
        Ok((tag, content))
    }

    fn expect(&mut self, want: u8, what: &'static str) -> Result<Der<'a>, RequestError> {
        let at = self.offset;
        let (tag, content) = self.read()?;
        if tag != want {
            return Err(RequestError::Der { offset: at, what });
        }
        Ok(content)
    }
}

/// CertificationRequest ::= SEQUENCE { certificationRequestInfo SEQUENCE { version INTEGER,
/// subject Name, ... }, ... }; Name ::= SEQUENCE OF SET OF SEQUENCE { type OID, value ANY }.
pub fn parse_der_subject(der: &[u8]) -> Result<RequestSubject, RequestError> {
    let mut outer = Der::new(der, 0);
    let mut request = outer.expect(TAG_SEQUENCE, "expected CertificationRequest SEQUENCE")?;
    let mut info = request.expect(TAG_SEQUENCE, "expected CertificationRequestInfo SEQUENCE")?;
    info.expect(TAG_INTEGER, "expected version INTEGER")?;
    let mut name = info.expect(TAG_SEQUENCE, "expected subject Name SEQUENCE")?;
    let mut subject = RequestSubject::default();
    while !name.is_empty() {
        let mut rdn = name.expect(TAG_SET, "expected RelativeDistinguishedName SET")?;
        while !rdn.is_empty() {
            let mut attribute = rdn.expect(TAG_SEQUENCE, "expected AttributeTypeAndValue SEQUENCE")?;
            let oid = attribute.expect(TAG_OID, "expected attribute type OID")?;
            let value_at = attribute.offset;
            let (tag, value) = attribute.read()?;
            let text = || {
                directory_string(tag, value.bytes).ok_or(RequestError::Der {
                    offset: value_at,
                    what: "attribute value is not a supported string type",
                })
            };
            match oid.bytes {
                OID_CN => subject.common_name = text()?,
                OID_O => subject.organizations.push(text()?),
                OID_OU => subject.organizational_units.push(text()?),
                _ => {}
            }
        }
    }
    Ok(subject)
}

/// UTF8String, PrintableString, IA5String and TeletexString as Go's x509 reads them (BMPString and
/// UniversalString are not produced by OCM's klusterlet and are refused).
fn directory_string(tag: u8, bytes: &[u8]) -> Option<String> {
    match tag {
        0x0c | 0x13 | 0x16 | 0x14 => String::from_utf8(bytes.to_vec()).ok(),
        _ => None,
    }
}

/// Test support: encodes a syntactically valid CSR with the given subject. The public key and
/// signature are dummies; what we parse is only the subject.
#[cfg(test)]
pub(crate) mod encode {
    use super::*;

    fn tlv(tag: u8, content: &[u8]) -> Vec<u8> {
        let mut out = vec![tag];
        let len = content.len();
        if len < 0x80 {
            out.push(len as u8);
        } else if len < 0x100 {
            out.extend([0x81, len as u8]);
        } else {
            out.extend([0x82, (len >> 8) as u8, len as u8]);
        }
        out.extend_from_slice(content);
        out
    }

    fn attribute(oid: &[u8], value: &str) -> Vec<u8> {
        let seq = [tlv(TAG_OID, oid), tlv(0x0c, value.as_bytes())].concat();
        tlv(TAG_SET, &tlv(TAG_SEQUENCE, &seq))
    }

    pub fn csr_der(subject: &RequestSubject) -> Vec<u8> {
        let mut name = Vec::new();
        for o in &subject.organizations {
            name.extend(attribute(OID_O, o));
        }
        for ou in &subject.organizational_units {
            name.extend(attribute(OID_OU, ou));
        }
        name.extend(attribute(OID_CN, &subject.common_name));
        let info = [
            tlv(TAG_INTEGER, &[0]),
            tlv(TAG_SEQUENCE, &name),
            tlv(TAG_SEQUENCE, &[]),
            tlv(0xa0, &[]),
        ]
        .concat();
        let body = [tlv(TAG_SEQUENCE, &info), tlv(TAG_SEQUENCE, &[]), tlv(0x03, &[0])].concat();
        tlv(TAG_SEQUENCE, &body)
    }

    pub fn csr_pem(subject: &RequestSubject) -> Vec<u8> {
        use base64::Engine as _;
        let b64 = base64::engine::general_purpose::STANDARD.encode(csr_der(subject));
        let mut pem = String::from("-----BEGIN CERTIFICATE REQUEST-----\n");
        for chunk in b64.as_bytes().chunks(64) {
            pem.push_str(std::str::from_utf8(chunk).unwrap_or_default());
            pem.push('\n');
        }
        pem.push_str("-----END CERTIFICATE REQUEST-----\n");
        pem.into_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::encode::*;
    use super::*;

    /// A real CSR made with `openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes
    /// -subj "/O=g1/O=g2/CN=system:open-cluster-management:cluster:c1:addon:a:agent:a"`.
    const OPENSSL_CSR: &str = include_str!("testdata/openssl.csr");

    #[test]
    fn reads_a_real_openssl_request() {
        let s = parse_pem_subject(OPENSSL_CSR.as_bytes()).expect("openssl CSR parses");
        assert_eq!(
            s.common_name,
            "system:open-cluster-management:cluster:c1:addon:a:agent:a"
        );
        assert_eq!(s.organizations, vec!["g1", "g2"]);
        assert!(s.organizational_units.is_empty());
    }

    #[test]
    fn round_trips_long_subjects() {
        let subject = RequestSubject {
            common_name: "x".repeat(300),
            organizations: vec!["o1".into(), "o2".into(), "o3".into()],
            organizational_units: vec!["ou".into()],
        };
        assert_eq!(parse_pem_subject(&csr_pem(&subject)), Ok(subject));
    }

    #[test]
    fn refuses_other_pem_blocks_and_garbage() {
        let cert = b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n";
        assert_eq!(
            parse_pem_subject(cert),
            Err(RequestError::BlockType("CERTIFICATE".into()))
        );
        assert!(matches!(parse_pem_subject(b"hello"), Err(RequestError::Pem(_))));
        let truncated = &csr_der(&RequestSubject::default())[..6];
        assert!(matches!(
            parse_der_subject(truncated),
            Err(RequestError::Der { .. })
        ));
        assert!(matches!(
            parse_der_subject(&[0x02, 0x01, 0x00]),
            Err(RequestError::Der { offset: 0, .. })
        ));
    }
}
