//! Every live job's secret (the bearer token of its barrier and rendezvous calls), kept in
//! 16 bytes a job: a secret is 32 hex digits (`random_hex(16)`), stored as its bytes by job
//! number in the core's [`Paged`] table, whose pages exist only while they hold a live job's
//! secret (a job queued for long does not keep a slot for every job numbered after it that
//! has long left). A B-tree map of the same took 30 to 55 bytes a job (its nodes half full
//! when filled in order; issue 34 item 3). The snapshot keeps the map's form. A secret of
//! another form (a journal of another version) is kept as text beside.
//!
//! New secrets are drawn from `/dev/urandom` 256 at a time ([`Secrets::fresh`]): one read
//! per 256 submissions instead of an open and a read each (issue 23, item 5).

use coalloc_core::paged::Paged;
use std::collections::BTreeMap;
use std::num::NonZeroU128;

/// The secrets, by job.
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct Secrets {
    /// A secret's 16 bytes, little-endian (never all zero: [`pack`] refuses that).
    #[serde(with = "map_form")]
    packed: Paged<NonZeroU128>,
    other: BTreeMap<u64, String>,
    /// Random bytes not yet handed out (not in a snapshot).
    #[serde(skip)]
    pool: Vec<u8>,
}

/// Bytes of a secret, and how many secrets one read from `/dev/urandom` makes.
const SECRET_BYTES: usize = 16;
const POOL_SECRETS: usize = 256;

fn pack(secret: &str) -> Option<NonZeroU128> {
    let b = secret.as_bytes();
    if b.len() != 32 || !b.iter().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f')) {
        return None;
    }
    let mut out = [0u8; 16];
    for (o, pair) in out.iter_mut().zip(b.chunks(2)) {
        *o = u8::from_str_radix(std::str::from_utf8(pair).ok()?, 16).ok()?;
    }
    NonZeroU128::new(u128::from_le_bytes(out))
}

/// `packed`'s serialized form: the map by job number of each secret's 16 bytes, as the
/// `BTreeMap<u64, [u8; 16]>` it was.
mod map_form {
    use super::{NonZeroU128, Paged};
    use serde::de::{Error, MapAccess, Visitor};
    use serde::{Deserializer, Serializer};

    /// With the length first: postcard cannot write a map of unknown length.
    pub fn serialize<S: Serializer>(p: &Paged<NonZeroU128>, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(Some(p.len()))?;
        for (job, v) in p.iter() {
            m.serialize_entry(&job, &v.get().to_le_bytes())?;
        }
        m.end()
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Paged<NonZeroU128>, D::Error> {
        struct Form;
        impl<'de> Visitor<'de> for Form {
            type Value = Paged<NonZeroU128>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("secrets by job number")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Self::Value, A::Error> {
                let mut p = Paged::default();
                while let Some((job, bytes)) = m.next_entry::<u64, [u8; 16]>()? {
                    let v = NonZeroU128::new(u128::from_le_bytes(bytes))
                        .ok_or_else(|| A::Error::custom("a secret of zero bytes"))?;
                    p.insert(job, v);
                }
                Ok(p)
            }
        }
        d.deserialize_map(Form)
    }
}

/// Lower-case hex digits of `bytes`.
fn to_hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(DIGITS[usize::from(b >> 4)] as char);
        out.push(DIGITS[usize::from(b & 15)] as char);
    }
    out
}

impl Secrets {
    /// A new secret: 32 random hex digits, as `crate::state::random_hex(16)` makes them.
    pub fn fresh(&mut self) -> std::io::Result<String> {
        if self.pool.len() < SECRET_BYTES {
            use std::io::Read;
            let mut buf = vec![0u8; SECRET_BYTES * POOL_SECRETS];
            std::fs::File::open("/dev/urandom")?.read_exact(&mut buf)?;
            self.pool = buf;
        }
        let at = self.pool.len() - SECRET_BYTES;
        let hex = to_hex(&self.pool[at..]);
        self.pool.truncate(at);
        Ok(hex)
    }

    pub fn insert(&mut self, job: u64, secret: &str) {
        match pack(secret) {
            Some(p) => {
                self.packed.insert(job, p);
            }
            None => {
                self.other.insert(job, secret.to_string());
            }
        }
    }

    pub fn get(&self, job: u64) -> Option<String> {
        if let Some(s) = self.other.get(&job) {
            return Some(s.clone());
        }
        self.packed.get(job).map(|p| to_hex(&p.get().to_le_bytes()))
    }

    pub fn remove(&mut self, job: u64) {
        self.other.remove(&job);
        self.packed.remove(job);
    }
}

#[cfg(test)]
mod tests {
    use super::Secrets;

    #[test]
    fn fresh_secrets_are_32_hex_digits_and_differ() {
        let mut s = Secrets::default();
        let all: std::collections::BTreeSet<String> =
            (0..600).map(|_| s.fresh().unwrap()).collect();
        assert_eq!(all.len(), 600);
        assert!(all
            .iter()
            .all(|x| x.len() == 32 && x.bytes().all(|c| c.is_ascii_hexdigit())));
    }

    #[test]
    fn secrets_come_back_as_given() {
        let mut s = Secrets::default();
        let hex = "00ff10a0b1c2d3e4f5061728394a5b6c";
        s.insert(3, hex);
        s.insert(1, "not hex at all");
        assert_eq!(s.get(3).as_deref(), Some(hex));
        assert_eq!(s.get(1).as_deref(), Some("not hex at all"));
        assert_eq!(s.get(2), None);
        assert_eq!(s.get(0), None);
        s.remove(3);
        assert_eq!(s.get(3), None);
        s.remove(1);
        assert_eq!(s.get(1), None);
    }

    #[test]
    fn removed_secrets_leave_nothing_behind() {
        let mut s = Secrets::default();
        let hex = |i: u64| format!("{:032x}", i + 1);
        for j in 1..=3000 {
            s.insert(j, &hex(j));
        }
        s.remove(2);
        assert_eq!(s.packed.len(), 2999);
        for j in (1..=2999).filter(|&j| j != 2) {
            s.remove(j);
        }
        assert_eq!(s.packed.len(), 1);
        assert_eq!(s.get(3000), Some(hex(3000)));
        assert_eq!(s.get(5), None);
        s.insert(3001, &hex(3001));
        assert_eq!(s.get(3001), Some(hex(3001)));
    }

    /// Secrets are written as the map they were kept in before, and read back from it.
    #[test]
    fn secrets_keep_the_map_form() {
        #[derive(serde::Serialize, serde::Deserialize)]
        struct MapForm {
            packed: std::collections::BTreeMap<u64, [u8; 16]>,
            other: std::collections::BTreeMap<u64, String>,
        }
        let mut s = Secrets::default();
        let hex = |i: u64| format!("{:032x}", i * 7919 + 1);
        for j in [3, 600, 1_200_000] {
            s.insert(j, &hex(j));
        }
        s.insert(9, "text");
        let old = MapForm {
            packed: [3, 600, 1_200_000]
                .map(|j| (j, super::pack(&hex(j)).unwrap().get().to_le_bytes()))
                .into(),
            other: [(9, "text".to_string())].into(),
        };
        let first = old.packed[&3];
        assert_eq!(first[0], 0, "the hex's first two digits are the first byte");
        assert_eq!(
            first[14..],
            [0x5c, 0xce],
            "3 · 7919 + 1 = 0x5cce: {first:?}"
        );
        let text = serde_json::to_string(&s).unwrap();
        assert_eq!(text, serde_json::to_string(&old).unwrap());
        // The snapshot's own byte form, which needs every length up front.
        let bytes = postcard::to_allocvec(&s).unwrap();
        assert_eq!(bytes, postcard::to_allocvec(&old).unwrap());
        let back: Secrets = postcard::from_bytes(&bytes).unwrap();
        assert_eq!(back.get(600), Some(hex(600)));
        let back: Secrets = serde_json::from_str(&text).unwrap();
        for j in [3, 600, 1_200_000] {
            assert_eq!(back.get(j), Some(hex(j)));
        }
        assert_eq!(back.get(9).as_deref(), Some("text"));
        let zero = r#"{"packed":{"1":[0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0]},"other":{}}"#;
        assert!(serde_json::from_str::<Secrets>(zero).is_err());
    }
}
