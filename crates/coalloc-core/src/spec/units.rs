//! Durations, byte sizes and loosely typed scalars as users write them in TOML and JSON.
//!
//! A duration is an integer number of seconds or a string of number-unit pairs
//! (`"90s"`, `"10m"`, `"1h30m"`, `"250ms"`, `"2d"`). A size is an integer number of bytes or a
//! string with a decimal (`kB MB GB TB`) or binary (`KiB MiB GiB TiB`) unit.

use crate::model::Millis;
use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize, Serializer};
use std::fmt;

/// A number or a string, as the document had it. Rules about which one a field takes are
/// checked after parsing, so that the message can name the field.
#[derive(Debug, Clone, PartialEq)]
pub enum Scalar {
    Int(i64),
    Float(f64),
    Str(String),
    Bool(bool),
}

impl fmt::Display for Scalar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Scalar::Int(i) => write!(f, "{i}"),
            Scalar::Float(x) => write!(f, "{x}"),
            Scalar::Str(s) => write!(f, "\"{s}\""),
            Scalar::Bool(b) => write!(f, "{b}"),
        }
    }
}

impl Scalar {
    /// The value as text: strings as they are, numbers and booleans written out.
    pub fn to_text(&self) -> String {
        match self {
            Scalar::Str(s) => s.clone(),
            other => other.to_string(),
        }
    }
}

impl Serialize for Scalar {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Scalar::Int(i) => s.serialize_i64(*i),
            Scalar::Float(x) => s.serialize_f64(*x),
            Scalar::Str(v) => s.serialize_str(v),
            Scalar::Bool(b) => s.serialize_bool(*b),
        }
    }
}

impl<'de> Deserialize<'de> for Scalar {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Scalar;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a number or a string")
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<Scalar, E> {
                Ok(Scalar::Bool(v))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Scalar, E> {
                Ok(Scalar::Int(v))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Scalar, E> {
                i64::try_from(v)
                    .map(Scalar::Int)
                    .map_err(|_| E::custom(format!("number {v} is too large")))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Scalar, E> {
                Ok(Scalar::Float(v))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Scalar, E> {
                Ok(Scalar::Str(v.to_owned()))
            }
        }
        d.deserialize_any(V)
    }
}

const DURATION_UNITS: [(&str, Millis); 5] = [
    ("ms", 1),
    ("s", 1_000),
    ("m", 60_000),
    ("h", 3_600_000),
    ("d", 86_400_000),
];

/// Parse a duration; the error says what was expected.
pub fn parse_duration(v: &Scalar) -> Result<Millis, String> {
    match v {
        Scalar::Int(secs) if *secs < 0 => Err(format!("must not be negative (got {secs})")),
        Scalar::Int(secs) => secs
            .checked_mul(1_000)
            .ok_or_else(|| format!("{secs} seconds is too long")),
        Scalar::Str(s) => parse_duration_str(s),
        other => Err(format!(
            "expected seconds or a duration such as \"90s\", \"10m\", \"1h30m\" (got {other})"
        )),
    }
}

fn parse_duration_str(s: &str) -> Result<Millis, String> {
    let bad = || {
        format!("`{s}` is not a duration (expected seconds or a duration such as \"90s\", \"10m\", \"1h30m\")")
    };
    let t = s.trim();
    if t.starts_with('-') {
        return Err(format!("must not be negative (got \"{s}\")"));
    }
    if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()) {
        let secs: i64 = t.parse().map_err(|_| bad())?;
        return secs.checked_mul(1_000).ok_or_else(bad);
    }
    let mut rest = t;
    let mut total: Millis = 0;
    if rest.is_empty() {
        return Err(bad());
    }
    while !rest.is_empty() {
        let digits = rest.bytes().take_while(|b| b.is_ascii_digit()).count();
        if digits == 0 {
            return Err(bad());
        }
        let n: i64 = rest[..digits].parse().map_err(|_| bad())?;
        rest = &rest[digits..];
        let unit_len = rest.bytes().take_while(|b| b.is_ascii_alphabetic()).count();
        let unit = &rest[..unit_len];
        let scale = DURATION_UNITS
            .iter()
            .find(|(u, _)| *u == unit)
            .map(|(_, m)| *m)
            .ok_or_else(bad)?;
        total = n
            .checked_mul(scale)
            .and_then(|x| total.checked_add(x))
            .ok_or_else(bad)?;
        rest = &rest[unit_len..];
    }
    Ok(total)
}

/// Write a duration in the shortest exact form: `"1h30m"`, `"90s"`, `"1500ms"`.
pub fn format_duration(ms: Millis) -> String {
    if ms == 0 {
        return "0s".to_owned();
    }
    if ms % 1_000 != 0 {
        return format!("{ms}ms");
    }
    let mut out = String::new();
    let mut rest = ms;
    for (unit, scale) in DURATION_UNITS.iter().rev() {
        if *unit == "ms" {
            break;
        }
        if rest >= *scale {
            out.push_str(&format!("{}{unit}", rest / scale));
            rest %= scale;
        }
    }
    out
}

const SIZE_UNITS: [(&str, u64); 9] = [
    ("B", 1),
    ("kB", 1_000),
    ("MB", 1_000_000),
    ("GB", 1_000_000_000),
    ("TB", 1_000_000_000_000),
    ("KiB", 1 << 10),
    ("MiB", 1 << 20),
    ("GiB", 1 << 30),
    ("TiB", 1 << 40),
];

/// Parse a size in bytes.
pub fn parse_size(v: &Scalar) -> Result<u64, String> {
    match v {
        Scalar::Int(n) if *n < 0 => Err(format!("must not be negative (got {n})")),
        Scalar::Int(n) => Ok(*n as u64),
        Scalar::Str(s) => {
            let t = s.trim();
            if t.starts_with('-') {
                return Err(format!("must not be negative (got \"{s}\")"));
            }
            let digits = t.bytes().take_while(|b| b.is_ascii_digit()).count();
            let unit = t[digits..].trim();
            let n: u64 = t[..digits].parse().map_err(|_| size_error(s))?;
            let scale = if unit.is_empty() {
                1
            } else {
                SIZE_UNITS
                    .iter()
                    .find(|(u, _)| u.eq_ignore_ascii_case(unit) && (*u == unit || !u.contains('i')))
                    .map(|(_, m)| *m)
                    .ok_or_else(|| size_error(s))?
            };
            n.checked_mul(scale).ok_or_else(|| size_error(s))
        }
        other => Err(format!(
            "expected bytes or a size such as \"4GB\" or \"512MiB\" (got {other})"
        )),
    }
}

fn size_error(s: &str) -> String {
    format!("`{s}` is not a size (expected bytes or a size such as \"4GB\" or \"512MiB\")")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        let s = |x: &str| parse_duration(&Scalar::Str(x.into()));
        assert_eq!(parse_duration(&Scalar::Int(90)), Ok(90_000));
        assert_eq!(s("90s"), Ok(90_000));
        assert_eq!(s("1h30m"), Ok(5_400_000));
        assert_eq!(s("250ms"), Ok(250));
        assert_eq!(s("2d"), Ok(172_800_000));
        assert_eq!(s("42"), Ok(42_000));
        assert!(s("1x").unwrap_err().contains("is not a duration"));
        assert!(s("h").is_err());
        assert!(s("").is_err());
        assert!(s("-5m").unwrap_err().contains("negative"));
        assert!(parse_duration(&Scalar::Int(-1))
            .unwrap_err()
            .contains("negative"));
        for ms in [
            0,
            1,
            999,
            1_000,
            90_000,
            5_400_000,
            86_400_000 + 1_000,
            1_500,
        ] {
            assert_eq!(s(&format_duration(ms)), Ok(ms), "{ms}");
        }
        assert_eq!(format_duration(5_400_000), "1h30m");
    }

    #[test]
    fn sizes() {
        let s = |x: &str| parse_size(&Scalar::Str(x.into()));
        assert_eq!(s("4GB"), Ok(4_000_000_000));
        assert_eq!(s("4 GiB"), Ok(4 << 30));
        assert_eq!(s("4gb"), Ok(4_000_000_000));
        assert_eq!(s("17"), Ok(17));
        assert!(s("4 gib").is_err(), "binary units are case-sensitive");
        assert!(s("4 furlongs").is_err());
        assert!(parse_size(&Scalar::Int(-3))
            .unwrap_err()
            .contains("negative"));
    }
}
