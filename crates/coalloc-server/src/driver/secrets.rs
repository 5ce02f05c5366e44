//! Every live job's secret (the bearer token of its barrier and rendezvous calls), kept in
//! 16 bytes a job: a secret is 32 hex digits (`random_hex(16)`), stored as its bytes in a
//! map by job number. A map, not a vector indexed by number: a job queued for long would
//! keep a slot for every job numbered after it that has long left (16 bytes each, in memory
//! and in every snapshot). A secret of another form (a journal of another version) is kept
//! as text beside.
//!
//! New secrets are drawn from `/dev/urandom` 256 at a time ([`Secrets::fresh`]): one read
//! per 256 submissions instead of an open and a read each (issue 23, item 5).

use std::collections::BTreeMap;

/// The secrets, by job.
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct Secrets {
    packed: BTreeMap<u64, [u8; 16]>,
    other: BTreeMap<u64, String>,
    /// Random bytes not yet handed out (not in a snapshot).
    #[serde(skip)]
    pool: Vec<u8>,
}

/// Bytes of a secret, and how many secrets one read from `/dev/urandom` makes.
const SECRET_BYTES: usize = 16;
const POOL_SECRETS: usize = 256;

fn pack(secret: &str) -> Option<[u8; 16]> {
    let b = secret.as_bytes();
    if b.len() != 32 || !b.iter().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f')) {
        return None;
    }
    let mut out = [0u8; 16];
    for (o, pair) in out.iter_mut().zip(b.chunks(2)) {
        *o = u8::from_str_radix(std::str::from_utf8(pair).ok()?, 16).ok()?;
    }
    (out != [0; 16]).then_some(out)
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
        self.packed.get(&job).map(|p| to_hex(p))
    }

    pub fn remove(&mut self, job: u64) {
        self.other.remove(&job);
        self.packed.remove(&job);
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
}
