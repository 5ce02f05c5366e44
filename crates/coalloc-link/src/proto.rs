//! The site-agent wire protocol, both directions in one place (DESIGN.md "Sites apart" §2):
//! one JSON message per WebSocket frame (a text frame; a binary one when it carries file
//! bytes, raw beside the JSON: [`Framed`]), a serde enum per direction ([`FromAgent`],
//! [`ToAgent`]), the hello that opens every connection and its sans-IO check
//! ([`check_hello`]), and the enrolment token ([`EnrolToken`]) that `coalloc site add` prints.
//!
//! A connection: the agent sends [`FromAgent::Hello`] (protocol version, role, its site, its
//! credential, the launches it holds); the server answers [`ToAgent::Welcome`] or
//! [`ToAgent::Refused`] and closes. Then the server makes [`Call`]s (the `Backend` trait's
//! calls: seed 003 §4.3's GRAM role, carried over the link) and the agent answers each by its
//! number; the agent relays its components' barrier and rendezvous calls (seed 002 §3.3)
//! as [`FromAgent::Relay`] and the server answers each by its number.

use base64::Engine;
use coalloc_backends::{RemoteState, SiteLoad, SubmitRequest};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// The protocol version this build speaks. A hello with another one is refused.
/// 2: file operations (`Call::File`) and binary frames for their bytes.
/// 3: `Call::Discard`, launches whose job the server has dropped.
/// 4: advance reservations (issue 31): the hello's [`Hello::reserve`] and the calls
/// `ReserveEarliest`, `Reserve`, `Unreserve`, `Reservations`.
pub const VERSION: u32 = 4;

/// Which end of a link a hello comes from: a hello from a "server" reaching a server is a
/// mirrored request (two servers, or a reflected stream), refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    Agent,
    Server,
}

/// A launch an agent holds at its resource manager, reported in every hello so that the
/// server can compare it with what it still wants (DESIGN.md "Sites apart" §5).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeldLaunch {
    pub launch: u64,
    pub job: u64,
    pub component: usize,
    pub remote: String,
}

/// The first message of every connection.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hello {
    pub version: u32,
    pub role: Role,
    /// The site the agent acts for.
    pub site: String,
    /// The agent's credential (the secret of its enrolment token).
    pub secret: String,
    /// Where this agent's components reach it (the relay's base URL).
    pub relay_url: String,
    pub launches: Vec<HeldLaunch>,
    /// Whether the agent's site may make advance reservations (issue 31 item 3): its
    /// backend's `may_reserve` and the agent's own `reserve` setting. A hello without it
    /// (no agent of this version sends one) reads as "may not".
    #[serde(default)]
    pub reserve: Reserving,
}

/// What an agent says of its site's advance reservations in its hello.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Reserving {
    /// The site may reserve: the server's reservation calls are carried out.
    May,
    /// The site may not, and why; its reservation calls are refused with that reason.
    MayNot(String),
}

impl Default for Reserving {
    fn default() -> Self {
        Reserving::MayNot("the agent did not say whether its site may reserve".into())
    }
}

impl Reserving {
    pub fn may(&self) -> bool {
        matches!(self, Reserving::May)
    }
}

/// A backend call the server makes on the agent's site.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Call {
    Submit(Box<SubmitRequest>),
    /// A burst of one job's components on this site, answered by [`Answer::SubmittedMany`].
    SubmitMany(Vec<SubmitRequest>),
    Query(Vec<String>),
    Cancel(String),
    CancelUnrecorded {
        job: u64,
        component: usize,
        launch: u64,
    },
    Load,
    /// These launches' jobs are gone from the server: the site's backend may drop what it
    /// keeps of them ([`coalloc_backends::Backend::discard`]). Answered by `Done`; sent
    /// without waiting for it.
    Discard(Vec<String>),
    /// An operation on the site's files (transfers, outputs), relative paths under the
    /// agent's state directory.
    File(coalloc_backends::files::FileOp),
    /// `Backend::reserve_earliest` (issue 31): answered by [`Answer::Earliest`].
    ReserveEarliest {
        count: u32,
        duration_ms: i64,
        not_before_ms: i64,
    },
    /// `Backend::reserve`: answered by `Done`, or refused with the reason.
    Reserve {
        name: String,
        count: u32,
        start_ms: i64,
        duration_ms: i64,
    },
    /// `Backend::unreserve`: answered by `Done`.
    Unreserve(String),
    /// `Backend::reservations`: answered by [`Answer::Reservations`].
    Reservations,
}

/// A call's result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Answer {
    Submitted(String),
    SubmittedMany(Vec<Result<String, CallError>>),
    States(Vec<RemoteState>),
    Done,
    Load(SiteLoad),
    File(coalloc_backends::files::FileAnswer),
    /// The earliest start a site can hold, ms since the Unix epoch.
    Earliest(i64),
    /// The names of the site's coalloc reservations.
    Reservations(Vec<String>),
}

/// A call that failed at the site, in the backend's two classes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CallError {
    /// The request cannot run at that site (`BackendError::Rejected`).
    Rejected(String),
    /// The resource manager failed or did not answer (`BackendError::Unavailable`, I/O).
    Unavailable(String),
}

/// Agent to server.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum FromAgent {
    Hello(Hello),
    Answer {
        id: u64,
        result: Result<Answer, CallError>,
    },
    /// A component's call to the barrier or the rendezvous store, to be served as if it had
    /// reached the server's API directly.
    Relay {
        id: u64,
        method: String,
        /// Path and query, e.g. `/v1/jobs/7/kv/addr?wait_ms=1000`.
        path: String,
        authorization: Option<String>,
        body: String,
    },
}

/// Server to agent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ToAgent {
    Welcome {
        version: u32,
        role: Role,
        /// The server pings this often; silence for three periods ends the link.
        heartbeat_ms: u64,
    },
    Refused {
        reason: String,
    },
    Call {
        id: u64,
        call: Call,
    },
    RelayAnswer {
        id: u64,
        status: u16,
        body: String,
    },
}

/// A message whose file bytes (a [`coalloc_backends::files::FileOp::Append`]'s data, a
/// [`coalloc_backends::files::FileAnswer::Data`]) can travel raw beside its JSON in a binary
/// frame, instead of as base64 inside it (a third more bytes on the wire): see
/// `pump::frame`.
pub trait Framed {
    /// Take the bytes out (the message then serializes them as empty).
    fn take_payload(&mut self) -> Option<Vec<u8>>;
    /// Put bytes that came beside the JSON back in.
    fn put_payload(&mut self, payload: Vec<u8>);
}

fn call_payload(call: &mut Call) -> Option<&mut Vec<u8>> {
    match call {
        Call::File(coalloc_backends::files::FileOp::Append { data, .. }) => Some(data),
        _ => None,
    }
}

impl Framed for ToAgent {
    fn take_payload(&mut self) -> Option<Vec<u8>> {
        match self {
            ToAgent::Call { call, .. } => call_payload(call).map(std::mem::take),
            _ => None,
        }
    }
    fn put_payload(&mut self, payload: Vec<u8>) {
        if let ToAgent::Call { call, .. } = self {
            if let Some(d) = call_payload(call) {
                *d = payload;
            }
        }
    }
}

fn answer_payload(m: &mut FromAgent) -> Option<&mut Vec<u8>> {
    match m {
        FromAgent::Answer {
            result: Ok(Answer::File(coalloc_backends::files::FileAnswer::Data(d))),
            ..
        } => Some(d),
        _ => None,
    }
}

impl Framed for FromAgent {
    fn take_payload(&mut self) -> Option<Vec<u8>> {
        answer_payload(self).map(std::mem::take)
    }
    fn put_payload(&mut self, payload: Vec<u8>) {
        if let Some(d) = answer_payload(self) {
            *d = payload;
        }
    }
}

/// Whether an agent may relay a call to this path: the barrier and the rendezvous store of a
/// job, nothing else of the API.
pub fn relayable(method: &str, path: &str) -> bool {
    let path = path.split('?').next().unwrap_or("");
    let Some(rest) = path.strip_prefix("/v1/jobs/") else {
        return false;
    };
    let Some((job, tail)) = rest.split_once('/') else {
        return false;
    };
    if job.is_empty() || !job.bytes().all(|b| b.is_ascii_digit()) {
        return false;
    }
    match (method, tail) {
        ("POST", "barrier") => true,
        ("PUT" | "GET", t) => t.strip_prefix("kv/").is_some_and(|k| !k.is_empty()),
        _ => false,
    }
}

/// The SHA-256 of a secret, in hex: what the server keeps of an agent's credential.
pub fn secret_hash(secret: &str) -> String {
    hex(&Sha256::digest(secret.as_bytes()))
}

/// `n` random bytes from the operating system, in hex: the credentials the server makes
/// (enrolment secrets, API tokens) and the agent's reconnection jitter.
pub fn random_hex(n: usize) -> std::io::Result<String> {
    use std::io::Read;
    let mut buf = vec![0u8; n];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut buf)?;
    Ok(hex(&buf))
}

pub use coalloc_pin::{constant_time_eq, hex};

/// Why a hello is refused; the text goes to the agent and to the server's log.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("protocol version {0}; this server speaks version {VERSION}")]
    Version(u32),
    #[error("a hello from a server reached a server (mirrored request)")]
    Mirrored,
    #[error("site `{0}` is not an agent site of this server")]
    UnknownSite(String),
    #[error("site `{0}` has no enrolled agent: run `coalloc site add {0}`")]
    NotEnrolled(String),
    #[error("bad credential for site `{0}`")]
    BadCredential(String),
}

/// The sans-IO authenticator: check a hello against the credential hashes of the agent sites
/// (`hash_of(site)`: `None` for a site that is not an agent site, `Some(None)` for one with
/// no agent enrolled yet). Returns the site the agent may act for.
pub fn check_hello(
    hello: &Hello,
    hash_of: impl Fn(&str) -> Option<Option<String>>,
) -> Result<String, Refusal> {
    if hello.version != VERSION {
        return Err(Refusal::Version(hello.version));
    }
    if hello.role != Role::Agent {
        return Err(Refusal::Mirrored);
    }
    match hash_of(&hello.site) {
        None => Err(Refusal::UnknownSite(hello.site.clone())),
        Some(None) => Err(Refusal::NotEnrolled(hello.site.clone())),
        Some(Some(hash)) if constant_time_eq(&hash, &secret_hash(&hello.secret)) => {
            Ok(hello.site.clone())
        }
        Some(Some(_)) => Err(Refusal::BadCredential(hello.site.clone())),
    }
}

/// What `coalloc site add NAME` prints and `coalloc agent --token-file` reads: the server's
/// agent address (and its standbys'), its certificate's fingerprint, the site and the
/// agent's secret.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EnrolToken {
    /// `wss://HOST:PORT`.
    pub server: String,
    /// The other servers of the same journal (standbys, issue 32 item 2), `wss://HOST:PORT`
    /// each: an agent that loses its server tries them in turn, and stays with the one
    /// that welcomes it (a standby accepts no agent). The servers share one certificate.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub others: Vec<String>,
    /// `sha256:` and the hex SHA-256 of the server's certificate (DER).
    pub fingerprint: String,
    pub site: String,
    pub secret: String,
}

const TOKEN_PREFIX: &str = "coalloc-agent-1.";

/// Why a token could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not an enrolment token ({0}); make one with `coalloc site add NAME` on the server")]
pub struct BadToken(String);

impl EnrolToken {
    /// Every server's agent address: the issuing one's first.
    pub fn servers(&self) -> impl Iterator<Item = &str> {
        std::iter::once(self.server.as_str()).chain(self.others.iter().map(String::as_str))
    }

    pub fn encode(&self) -> String {
        let json = serde_json::to_vec(self).expect("a token serializes");
        format!(
            "{TOKEN_PREFIX}{}",
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(json)
        )
    }

    pub fn decode(text: &str) -> Result<EnrolToken, BadToken> {
        let body = text
            .trim()
            .strip_prefix(TOKEN_PREFIX)
            .ok_or_else(|| BadToken(format!("it does not start with `{TOKEN_PREFIX}`")))?;
        let json = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(body)
            .map_err(|e| BadToken(format!("base64: {e}")))?;
        let t: EnrolToken = serde_json::from_slice(&json).map_err(|e| BadToken(e.to_string()))?;
        if let Some(bad) = t.servers().find(|s| !s.starts_with("wss://")) {
            return Err(BadToken(format!("server `{bad}` is not wss://")));
        }
        if !t.fingerprint.starts_with("sha256:") {
            return Err(BadToken("the fingerprint is not sha256:".into()));
        }
        Ok(t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hello(site: &str, secret: &str) -> Hello {
        Hello {
            version: VERSION,
            role: Role::Agent,
            site: site.into(),
            secret: secret.into(),
            relay_url: "http://10.201.2.1:7100".into(),
            launches: vec![],
            reserve: Reserving::May,
        }
    }

    fn sites(site: &str) -> Option<Option<String>> {
        match site {
            "s1" => Some(Some(secret_hash("one"))),
            "s2" => Some(Some(secret_hash("two"))),
            "s3" => Some(None),
            _ => None,
        }
    }

    #[test]
    fn a_hello_is_accepted_only_for_its_own_site_version_and_role() {
        assert_eq!(check_hello(&hello("s1", "one"), sites), Ok("s1".into()));
        assert_eq!(check_hello(&hello("s2", "two"), sites), Ok("s2".into()));
        // s1's agent presenting s2's name.
        assert_eq!(
            check_hello(&hello("s2", "one"), sites),
            Err(Refusal::BadCredential("s2".into()))
        );
        assert_eq!(
            check_hello(&hello("s1", "wrong"), sites),
            Err(Refusal::BadCredential("s1".into()))
        );
        assert_eq!(
            check_hello(&hello("s3", "one"), sites),
            Err(Refusal::NotEnrolled("s3".into()))
        );
        assert_eq!(
            check_hello(&hello("nowhere", "one"), sites),
            Err(Refusal::UnknownSite("nowhere".into()))
        );
        let mut old = hello("s1", "one");
        old.version = 0;
        assert_eq!(check_hello(&old, sites), Err(Refusal::Version(0)));
        let mut mirrored = hello("s1", "one");
        mirrored.role = Role::Server;
        assert_eq!(check_hello(&mirrored, sites), Err(Refusal::Mirrored));
    }

    #[test]
    fn messages_round_trip_through_json() {
        let msgs = vec![
            FromAgent::Hello(hello("s1", "x")),
            FromAgent::Answer {
                id: 3,
                result: Ok(Answer::States(vec![
                    RemoteState::Running,
                    RemoteState::Failed("exit 3".into()),
                ])),
            },
            FromAgent::Answer {
                id: 4,
                result: Err(CallError::Rejected("too big".into())),
            },
            FromAgent::Answer {
                id: 6,
                result: Ok(Answer::Earliest(1_790_000_000_000)),
            },
            FromAgent::Answer {
                id: 7,
                result: Ok(Answer::Reservations(vec!["coalloc-J3-c0-1".into()])),
            },
            FromAgent::Relay {
                id: 5,
                method: "POST".into(),
                path: "/v1/jobs/2/barrier".into(),
                authorization: Some("Bearer s".into()),
                body: "{}".into(),
            },
        ];
        for m in msgs {
            let text = serde_json::to_string(&m).unwrap();
            assert_eq!(serde_json::from_str::<FromAgent>(&text).unwrap(), m);
        }
        let calls = vec![
            Call::Submit(Box::default()),
            Call::SubmitMany(vec![SubmitRequest::default(); 2]),
            Call::Query(vec!["12".into()]),
            Call::Cancel("12".into()),
            Call::CancelUnrecorded {
                job: 1,
                component: 2,
                launch: 3,
            },
            Call::Load,
            Call::File(coalloc_backends::files::FileOp::Append {
                path: "files/grid.dat".into(),
                offset: 3,
                data: vec![0, 255, 7],
            }),
            Call::ReserveEarliest {
                count: 4,
                duration_ms: 60_000,
                not_before_ms: 1_790_000_000_000,
            },
            Call::Reserve {
                name: "coalloc-J3-c0-1".into(),
                count: 4,
                start_ms: 1_790_000_060_000,
                duration_ms: 60_000,
            },
            Call::Unreserve("coalloc-J3-c0-1".into()),
            Call::Reservations,
        ];
        for call in calls {
            let m = ToAgent::Call { id: 9, call };
            let text = serde_json::to_string(&m).unwrap();
            assert_eq!(serde_json::from_str::<ToAgent>(&text).unwrap(), m);
        }
        assert!(serde_json::from_str::<ToAgent>("{\"type\":\"nonsense\"}").is_err());
    }

    #[test]
    fn a_hello_says_whether_its_site_may_reserve_and_one_that_does_not_say_may_not() {
        let mut h = hello("s1", "x");
        h.reserve = Reserving::MayNot("agent.reserve = false".into());
        let text = serde_json::to_string(&FromAgent::Hello(h.clone())).unwrap();
        assert!(
            text.contains("\"may_not\":\"agent.reserve = false\""),
            "{text}"
        );
        assert_eq!(
            serde_json::from_str::<FromAgent>(&text).unwrap(),
            FromAgent::Hello(h)
        );
        // A hello of version 3 had no `reserve`: it reads as "may not", with a reason.
        let old = r#"{"type":"hello","version":3,"role":"agent","site":"s1","secret":"x","relay_url":"","launches":[]}"#;
        match serde_json::from_str::<FromAgent>(old).unwrap() {
            FromAgent::Hello(h) => {
                assert!(!h.reserve.may());
                assert_eq!(h.reserve, Reserving::default());
                assert_eq!(check_hello(&h, sites), Err(Refusal::Version(3)));
            }
            other => panic!("{other:?}"),
        }
        assert!(Reserving::May.may());
    }

    #[test]
    fn only_barrier_and_rendezvous_calls_are_relayed() {
        assert!(relayable("POST", "/v1/jobs/12/barrier"));
        assert!(relayable("PUT", "/v1/jobs/12/kv/a%2Fb"));
        assert!(relayable("GET", "/v1/jobs/12/kv/x?wait_ms=100"));
        for (m, p) in [
            ("GET", "/v1/jobs"),
            ("DELETE", "/v1/jobs/12"),
            ("GET", "/v1/jobs/12/barrier"),
            ("POST", "/v1/jobs/x/barrier"),
            ("GET", "/v1/jobs/12/kv/"),
            ("GET", "/v1/sites"),
            ("POST", "/v1/jobs/1/edit"),
        ] {
            assert!(!relayable(m, p), "{m} {p}");
        }
    }

    #[test]
    fn tokens_round_trip_and_bad_ones_say_why() {
        let mut t = EnrolToken {
            server: "wss://10.200.0.1:7443".into(),
            others: vec![],
            fingerprint: "sha256:ab".into(),
            site: "s1".into(),
            secret: "x".into(),
        };
        // A token of one server has no `others` (and reads as before standbys).
        assert!(!t.encode().contains("b3RoZXJz"));
        assert_eq!(
            EnrolToken::decode(&format!("{}\n", t.encode())),
            Ok(t.clone())
        );
        t.others = vec!["wss://10.200.0.2:7443".into()];
        assert_eq!(EnrolToken::decode(&t.encode()), Ok(t.clone()));
        assert_eq!(
            t.servers().collect::<Vec<_>>(),
            ["wss://10.200.0.1:7443", "wss://10.200.0.2:7443"]
        );
        t.others = vec!["http://x".into()];
        assert_eq!(
            EnrolToken::decode(&t.encode()).unwrap_err().to_string(),
            "not an enrolment token (server `http://x` is not wss://); make one with `coalloc site add NAME` on the server"
        );
        for bad in ["", "hello", "coalloc-agent-1.!!!", "coalloc-agent-1.e30"] {
            assert!(EnrolToken::decode(bad).is_err(), "{bad}");
        }
    }
}
