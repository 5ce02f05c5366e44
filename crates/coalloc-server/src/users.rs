//! Who may do what (issue 20 item 6): every job has an owner, a user sees and changes only
//! their own jobs, the admin sees all. Local users are named by the operating system: the
//! CLI talks over the server's Unix socket and the server reads the peer's uid
//! (`SO_PEERCRED`, the way munge names Slurm users); the server's own uid and root are the
//! admin there. Remote users present a token the admin issued (`coalloc user add NAME`);
//! only its BLAKE3 hash is kept, in `DIR/users.json` (mode 0600), rewritten whole at each
//! change. The server's token (`DIR/token`) stays the admin's. A token may carry an expiry
//! (`coalloc user add NAME --expires 30d`); past it the token is refused, saying so, until
//! the admin removes the user and issues a new one.

use crate::link::proto::constant_time_eq;
use crate::state::{random_hex, Mirror};
pub use coalloc_backends::accounts::{user_ids, user_name};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Mutex;

/// Who made a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    /// The user's name: the owner of the jobs they submit.
    pub name: String,
    /// Sees and changes every job, manages users and sites.
    pub admin: bool,
}

/// One issued user, as kept on disk and listed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UserRecord {
    /// BLAKE3 of the token, in hex.
    pub hash: String,
    pub admin: bool,
    /// When the token stops being accepted (milliseconds since the Unix epoch); never
    /// when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires: Option<i64>,
}

/// What a presented token names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenCheck {
    /// A user whose token is valid now.
    Valid(Caller),
    /// A user whose token expired at this time (milliseconds since the Unix epoch).
    Expired { name: String, at: i64 },
    /// No user.
    Unknown,
}

/// The issued users, in `DIR/users.json`.
pub struct Users {
    path: PathBuf,
    users: Mutex<BTreeMap<String, UserRecord>>,
    mirror: Option<Mirror>,
}

/// Why a user cannot be added or removed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UserError {
    #[error("a user name is 1 to 64 letters, digits, `.`, `_` or `-`, got `{0}`")]
    BadName(String),
    #[error("user `{0}` exists; remove it first to issue a new token")]
    Exists(String),
    #[error("no user `{0}`")]
    Unknown(String),
    #[error("{0}")]
    Io(String),
}

fn hash(token: &str) -> String {
    blake3::hash(token.as_bytes()).to_hex().to_string()
}

impl Users {
    /// Read `path` (no file: no users yet).
    pub fn open(path: PathBuf) -> std::io::Result<Users> {
        let users = match std::fs::read_to_string(&path) {
            Ok(text) => serde_json::from_str(&text).map_err(std::io::Error::other)?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => BTreeMap::new(),
            Err(e) => return Err(e),
        };
        Ok(Users {
            path,
            users: Mutex::new(users),
            mirror: None,
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, UserRecord>> {
        self.users.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn save(&self, users: &BTreeMap<String, UserRecord>) -> Result<(), UserError> {
        let text = serde_json::to_string_pretty(users).map_err(|e| UserError::Io(e.to_string()))?;
        let mirror = self.mirror.as_ref();
        crate::state::save_shared(&self.path, "users.json", text.as_bytes(), mirror)
            .map_err(UserError::Io)
    }

    /// These users, each change also written to `mirror` first (the database the servers
    /// of one PostgreSQL journal share; a refusal there changes nothing).
    pub fn mirrored(self, mirror: Mirror) -> Users {
        Users {
            mirror: Some(mirror),
            ..self
        }
    }

    /// Issue a token to a new user, valid until `expires` (milliseconds since the Unix
    /// epoch) when given; only its hash is kept.
    pub fn add(&self, name: &str, admin: bool, expires: Option<i64>) -> Result<String, UserError> {
        let ok = (1..=64).contains(&name.len())
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b));
        if !ok {
            return Err(UserError::BadName(name.into()));
        }
        let mut users = self.lock();
        if users.contains_key(name) {
            return Err(UserError::Exists(name.into()));
        }
        let token = random_hex(32).map_err(|e| UserError::Io(e.to_string()))?;
        let mut next = users.clone();
        next.insert(
            name.into(),
            UserRecord {
                hash: hash(&token),
                admin,
                expires,
            },
        );
        self.save(&next)?;
        *users = next;
        Ok(token)
    }

    /// Take a user's token back.
    pub fn remove(&self, name: &str) -> Result<(), UserError> {
        let mut users = self.lock();
        let mut next = users.clone();
        if next.remove(name).is_none() {
            return Err(UserError::Unknown(name.into()));
        }
        self.save(&next)?;
        *users = next;
        Ok(())
    }

    /// The users, each with whether it is an admin and when its token expires.
    pub fn list(&self) -> Vec<(String, bool, Option<i64>)> {
        self.lock()
            .iter()
            .map(|(n, r)| (n.clone(), r.admin, r.expires))
            .collect()
    }

    /// The user a token was issued to, and whether it is still valid at `now`
    /// (milliseconds since the Unix epoch). Every user's hash is compared, each in constant
    /// time, so the answer's timing says nothing of which hash came close.
    pub fn by_token(&self, token: &str, now: i64) -> TokenCheck {
        let h = hash(token);
        let mut found = TokenCheck::Unknown;
        for (name, r) in self.lock().iter() {
            if constant_time_eq(&h, &r.hash) {
                found = match r.expires {
                    Some(at) if now >= at => TokenCheck::Expired {
                        name: name.clone(),
                        at,
                    },
                    _ => TokenCheck::Valid(Caller {
                        name: name.clone(),
                        admin: r.admin,
                    }),
                };
            }
        }
        found
    }
}

/// The wall clock now, in milliseconds since the Unix epoch (what expiries compare with).
pub fn now_ms() -> i64 {
    crate::driver::wall_ms()
}

/// Milliseconds since the Unix epoch as `YYYY-MM-DD HH:MM:SS UTC` (the proleptic Gregorian
/// calendar, by days since the epoch; after H. Hinnant's `civil_from_days`).
pub fn utc(ms: i64) -> String {
    let (days, rest) = (ms.div_euclid(86_400_000), ms.rem_euclid(86_400_000) / 1000);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02} UTC",
        rest / 3600,
        rest / 60 % 60,
        rest % 60
    )
}

/// The caller a local connection's peer uid names: the server's own uid and root are the
/// admin; anyone else is the user of that uid (`uid-N` when the system has no name for it).
pub fn caller_of_uid(uid: u32, server_uid: u32, name_of: impl Fn(u32) -> Option<String>) -> Caller {
    Caller {
        name: name_of(uid).unwrap_or_else(|| format!("uid-{uid}")),
        admin: uid == 0 || uid == server_uid,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn users(test: &str) -> (Users, PathBuf) {
        let dir = crate::scratch::dir(&format!("users-{test}"));
        let path = dir.join("users.json");
        (Users::open(path.clone()).unwrap(), path)
    }

    #[test]
    fn tokens_name_their_user_and_only_hashes_are_kept() {
        let (u, path) = users("hashes");
        let alice = u.add("alice", false, None).unwrap();
        let root = u.add("ops", true, None).unwrap();
        assert_eq!(alice.len(), 64);
        let caller = |name: &str, admin| Caller {
            name: name.into(),
            admin,
        };
        let valid = |c| TokenCheck::Valid(c);
        assert_eq!(u.by_token(&alice, 0), valid(caller("alice", false)));
        assert_eq!(u.by_token(&root, 0), valid(caller("ops", true)));
        assert_eq!(u.by_token("nope", 0), TokenCheck::Unknown);
        // One character off is refused.
        let mut near = alice.clone();
        near.replace_range(63.., if alice.ends_with('0') { "1" } else { "0" });
        assert_eq!(u.by_token(&near, 0), TokenCheck::Unknown);
        assert_eq!(
            u.add("alice", false, None),
            Err(UserError::Exists("alice".into()))
        );
        assert_eq!(
            u.add("a b", false, None),
            Err(UserError::BadName("a b".into()))
        );
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(
            !text.contains(&alice) && text.contains(&hash(&alice)),
            "{text}"
        );
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        // Kept across a restart; removal takes the token back.
        let again = Users::open(path.clone()).unwrap();
        assert_eq!(again.by_token(&alice, 0), valid(caller("alice", false)));
        again.remove("alice").unwrap();
        assert_eq!(again.by_token(&alice, 0), TokenCheck::Unknown);
        assert_eq!(
            again.remove("alice"),
            Err(UserError::Unknown("alice".into()))
        );
        assert_eq!(
            Users::open(path).unwrap().list(),
            vec![("ops".to_string(), true, None)]
        );
    }

    #[test]
    fn times_read_as_utc_dates() {
        assert_eq!(utc(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(utc(951_782_400_000), "2000-02-29 00:00:00 UTC");
        assert_eq!(utc(1_795_833_924_522), "2026-11-28 02:45:24 UTC");
        assert_eq!(utc(-1_000), "1969-12-31 23:59:59 UTC");
    }

    #[test]
    fn a_token_is_refused_from_its_expiry_on_and_the_expiry_is_kept() {
        let (u, path) = users("expiry");
        let carol = u.add("carol", false, Some(5_000)).unwrap();
        let carol_now = TokenCheck::Valid(Caller {
            name: "carol".into(),
            admin: false,
        });
        assert_eq!(u.by_token(&carol, 4_999), carol_now);
        let expired = TokenCheck::Expired {
            name: "carol".into(),
            at: 5_000,
        };
        assert_eq!(u.by_token(&carol, 5_000), expired);
        let again = Users::open(path).unwrap();
        assert_eq!(again.by_token(&carol, 9_000), expired);
        assert_eq!(
            again.list(),
            vec![("carol".to_string(), false, Some(5_000))]
        );
    }

    #[test]
    fn a_uid_names_its_user_and_the_server_uid_and_root_are_the_admin() {
        let names = |uid: u32| (uid == 1000).then(|| "alice".to_string());
        assert_eq!(
            caller_of_uid(1000, 500, names),
            Caller {
                name: "alice".into(),
                admin: false
            }
        );
        assert!(caller_of_uid(0, 500, names).admin);
        assert!(caller_of_uid(500, 500, names).admin);
        assert_eq!(caller_of_uid(1001, 500, names).name, "uid-1001");
        assert_eq!(user_name(0).as_deref(), Some("root"));
        assert_eq!(user_ids("root"), Some((0, 0)));
        assert_eq!(user_ids("no-such-user-here"), None);
    }

    #[test]
    fn secrets_compare_in_constant_time_by_value() {
        // The comparison is `subtle`'s: equal strings only, whatever prefix they share.
        assert!(constant_time_eq("abcd", "abcd"));
        assert!(!constant_time_eq("abcd", "abce"));
        assert!(!constant_time_eq("abcd", "abc"));
        assert!(!constant_time_eq("", "a"));
    }
}
