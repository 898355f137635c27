//! IP addresses and CIDRs as the Kubernetes `ip` and `cidr` libraries have them. Addresses parse
//! like Go's `netip.ParseAddr` (strict dotted quads, no zones) and IPv4-mapped IPv6 addresses are
//! refused, as Kubernetes does; a CIDR keeps the address it was written with until `masked()`.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

pub type Ip = IpAddr;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cidr {
    addr: IpAddr,
    bits: u8,
}

pub fn parse_ip(raw: &str) -> Result<IpAddr, String> {
    if raw.contains('%') {
        return Err(format!("IP address {raw:?} with zone value is not allowed"));
    }
    let addr: IpAddr = raw
        .parse()
        .map_err(|_| format!("IP Address {raw:?} parse error during conversion from string: ParseAddr({raw:?}): unable to parse IP"))?;
    if let IpAddr::V6(v6) = addr
        && v6.to_ipv4_mapped().is_some()
    {
        return Err(format!("IPv4-mapped IPv6 address {raw:?} is not allowed"));
    }
    Ok(addr)
}

pub fn parse_cidr(raw: &str) -> Result<Cidr, String> {
    let err = || {
        format!(
            "network address parse error during conversion from string: netip.ParsePrefix({raw:?}): invalid prefix"
        )
    };
    let (addr, bits) = raw.split_once('/').ok_or_else(err)?;
    if addr.contains('%') {
        return Err(err());
    }
    let addr: IpAddr = addr.parse().map_err(|_| err())?;
    let max = if addr.is_ipv4() { 32 } else { 128 };
    if bits.is_empty()
        || bits.len() > 3
        || !bits.bytes().all(|b| b.is_ascii_digit())
        || (bits.len() > 1 && bits.starts_with('0'))
    {
        return Err(err());
    }
    let bits: u8 = bits.parse().map_err(|_| err())?;
    if bits > max {
        return Err(err());
    }
    if let IpAddr::V6(v6) = addr
        && v6.to_ipv4_mapped().is_some()
    {
        return Err(format!("IPv4-mapped IPv6 address {raw:?} is not allowed"));
    }
    Ok(Cidr { addr, bits })
}

fn as_bits(addr: IpAddr) -> (u128, u8) {
    match addr {
        IpAddr::V4(v4) => (u128::from(u32::from(v4)), 32),
        IpAddr::V6(v6) => (u128::from(v6), 128),
    }
}

fn mask(value: u128, width: u8, bits: u8) -> u128 {
    let ones = if bits >= 128 {
        u128::MAX
    } else {
        (1u128 << bits) - 1
    };
    value & ones.checked_shl(u32::from(width - bits)).unwrap_or(0)
}

impl Cidr {
    /// The address as written (not masked).
    pub fn addr(&self) -> IpAddr {
        self.addr
    }

    /// The prefix length.
    pub fn bits(&self) -> u8 {
        self.bits
    }

    pub fn masked(&self) -> Cidr {
        let (value, width) = as_bits(self.addr);
        let masked = mask(value, width, self.bits);
        let addr = if width == 32 {
            IpAddr::V4(Ipv4Addr::from(masked as u32))
        } else {
            IpAddr::V6(Ipv6Addr::from(masked))
        };
        Cidr {
            addr,
            bits: self.bits,
        }
    }

    pub fn contains(&self, ip: IpAddr) -> bool {
        let (net, width) = as_bits(self.addr);
        let (value, ip_width) = as_bits(ip);
        width == ip_width && mask(net, width, self.bits) == mask(value, width, self.bits)
    }
}

impl std::fmt::Display for Cidr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.addr, self.bits)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_contains_like_kubernetes() {
        assert!(parse_ip("10.0.3.7").is_ok());
        assert!(parse_ip("01.2.3.4").is_err());
        assert!(parse_ip("::ffff:1.2.3.4").is_err_and(|e| e.contains("IPv4-mapped")));
        assert!(parse_ip("fe80::1%eth0").is_err_and(|e| e.contains("zone")));
        let c = parse_cidr("192.168.0.0/16").expect("valid");
        assert!(c.contains(parse_ip("192.168.1.20").expect("valid")));
        assert!(!c.contains(parse_ip("10.0.0.1").expect("valid")));
        assert!(!c.contains(parse_ip("::1").expect("valid")));
        assert_eq!(
            parse_cidr("1.2.3.4/8").map(|c| c.masked().to_string()),
            Ok("1.0.0.0/8".into())
        );
        assert_eq!(
            parse_cidr("2001:db8::1/32").map(|c| c.masked().to_string()),
            Ok("2001:db8::/32".into())
        );
        assert_eq!(
            parse_cidr("0.0.0.0/0").map(|c| c.contains(parse_ip("8.8.8.8").expect("ip"))),
            Ok(true)
        );
        for bad in ["1.2.3.4", "1.2.3.4/33", "1.2.3.4/08", "x/8"] {
            assert!(parse_cidr(bad).is_err(), "{bad}");
        }
    }
}
