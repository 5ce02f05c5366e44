//! The PMI-1 "simple" wire protocol that MPICH's `PMI_Init` speaks on `PMI_FD` (MPICH
//! src/pmi/maint/pmi-1.1.txt): one request per line, `cmd=NAME key=value ...`, words split
//! on spaces, values without spaces. This module owns the parsing of a client's line into a
//! [`Request`] and the text of every answer; it does no I/O.

use std::fmt;

/// Longest line the client reads or writes (MPICH's `PMIU_MAXLINE`).
pub const MAX_LINE: usize = 1024;
/// `get_maxes`: longest KVS name, key and value (the figures MPICH's own hydra answers).
pub const KVSNAME_MAX: usize = 256;
/// See [`KVSNAME_MAX`].
pub const KEYLEN_MAX: usize = 64;
/// See [`KVSNAME_MAX`].
pub const VALLEN_MAX: usize = 1024;

/// One request of a PMI-1 client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    /// `cmd=init pmi_version=V pmi_subversion=S`.
    Init { version: u32, subversion: u32 },
    /// `cmd=get_maxes`.
    GetMaxes,
    /// `cmd=get_appnum`.
    GetAppnum,
    /// `cmd=get_universe_size`.
    GetUniverseSize,
    /// `cmd=get_my_kvsname`.
    GetMyKvsname,
    /// `cmd=put kvsname=N key=K value=V`.
    Put {
        kvsname: String,
        key: String,
        value: String,
    },
    /// `cmd=get kvsname=N key=K`.
    Get { kvsname: String, key: String },
    /// `cmd=barrier_in`.
    BarrierIn,
    /// `cmd=finalize`.
    Finalize,
    /// `cmd=abort exitcode=N [message=...]`.
    Abort { code: i32 },
    /// A command of the protocol coalloc does not offer (`publish_name`, `lookup_name`,
    /// `spawn`, ...): answered with its response name and `rc=-1`.
    Unsupported {
        response: &'static str,
        command: String,
    },
}

/// Why a line is not a request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    /// Longer than [`MAX_LINE`] bytes.
    #[error("line of {0} bytes, longer than the protocol's {MAX_LINE}")]
    TooLong(usize),
    /// A word that is not `key=value`.
    #[error("word `{0}` is not key=value")]
    NotKeyValue(String),
    /// No `cmd=` (or `mcmd=`) first.
    #[error("the line does not start with cmd=")]
    NoCommand,
    /// A command nobody knows.
    #[error("unknown command `{0}`")]
    Unknown(String),
    /// A required field is missing.
    #[error("`{command}` needs `{field}`")]
    Missing {
        command: &'static str,
        field: &'static str,
    },
    /// A field that must be a number is not.
    #[error("`{field}={value}` is not a number")]
    NotNumber { field: &'static str, value: String },
}

impl WireError {
    /// The response command a client waiting for an answer to this line expects, when known.
    pub fn response(&self) -> &'static str {
        match self {
            WireError::Missing { command, .. } => response_of(command).unwrap_or("error"),
            _ => "error",
        }
    }
}

/// The answer command of each request command.
fn response_of(command: &str) -> Option<&'static str> {
    Some(match command {
        "init" => "response_to_init",
        "get_maxes" => "maxes",
        "get_appnum" => "appnum",
        "get_universe_size" => "universe_size",
        "get_my_kvsname" => "my_kvsname",
        "put" => "put_result",
        "get" => "get_result",
        "barrier_in" => "barrier_out",
        "finalize" => "finalize_ack",
        "publish_name" => "publish_result",
        "unpublish_name" => "unpublish_result",
        "lookup_name" => "lookup_result",
        "spawn" => "spawn_result",
        "initack" => "initack",
        "singinit" => "singinit_info",
        _ => return None,
    })
}

/// Parse one line (without its `\n`) of a client.
pub fn parse(line: &str) -> Result<Request, WireError> {
    if line.len() > MAX_LINE {
        return Err(WireError::TooLong(line.len()));
    }
    let mut fields = Vec::new();
    for word in line.split(' ').filter(|w| !w.is_empty()) {
        let (k, v) = word
            .split_once('=')
            .ok_or_else(|| WireError::NotKeyValue(word.to_owned()))?;
        fields.push((k, v));
    }
    let command = match fields.first() {
        Some(("cmd", c)) | Some(("mcmd", c)) => *c,
        _ => return Err(WireError::NoCommand),
    };
    let get = |field: &'static str, command: &'static str| {
        fields
            .iter()
            .find(|(k, _)| *k == field)
            .map(|(_, v)| (*v).to_owned())
            .ok_or(WireError::Missing { command, field })
    };
    let number = |field: &'static str, command: &'static str| -> Result<i64, WireError> {
        let v = get(field, command)?;
        v.parse()
            .map_err(|_| WireError::NotNumber { field, value: v })
    };
    let small = |n: i64| u32::try_from(n).unwrap_or(u32::MAX);
    Ok(match command {
        "init" => Request::Init {
            version: small(number("pmi_version", "init")?),
            subversion: small(number("pmi_subversion", "init")?),
        },
        "get_maxes" => Request::GetMaxes,
        "get_appnum" => Request::GetAppnum,
        "get_universe_size" => Request::GetUniverseSize,
        "get_my_kvsname" => Request::GetMyKvsname,
        "put" => Request::Put {
            kvsname: get("kvsname", "put")?,
            key: get("key", "put")?,
            value: get("value", "put")?,
        },
        "get" => Request::Get {
            kvsname: get("kvsname", "get")?,
            key: get("key", "get")?,
        },
        "barrier_in" => Request::BarrierIn,
        "finalize" => Request::Finalize,
        "abort" => Request::Abort {
            code: number("exitcode", "abort")
                .ok()
                .and_then(|n| i32::try_from(n).ok())
                .unwrap_or(1),
        },
        other => match response_of(other) {
            Some(response) => Request::Unsupported {
                response,
                command: other.to_owned(),
            },
            None => return Err(WireError::Unknown(other.to_owned())),
        },
    })
}

/// One answer line, built field by field; `Display` writes it with its `\n`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    fields: Vec<(&'static str, String)>,
}

impl Answer {
    /// `cmd=NAME`.
    pub fn new(command: &str) -> Answer {
        Answer {
            fields: vec![("cmd", command.to_owned())],
        }
    }

    /// Add `key=value`; spaces and line ends in `value` become `_` (the protocol has no
    /// quoting).
    pub fn with(mut self, key: &'static str, value: impl fmt::Display) -> Answer {
        let v = value.to_string().replace([' ', '\n', '\r', '\t'], "_");
        self.fields.push((key, v));
        self
    }

    /// `cmd=NAME rc=-1 msg=WHY`: a refused request.
    pub fn error(command: &str, why: impl fmt::Display) -> Answer {
        Answer::new(command).with("rc", -1).with("msg", why)
    }
}

impl fmt::Display for Answer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (k, v)) in self.fields.iter().enumerate() {
            if i > 0 {
                f.write_str(" ")?;
            }
            write!(f, "{k}={v}")?;
        }
        f.write_str("\n")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_what_mpich_sends() {
        assert_eq!(
            parse("cmd=init pmi_version=1 pmi_subversion=1").unwrap(),
            Request::Init {
                version: 1,
                subversion: 1
            }
        );
        assert_eq!(parse("cmd=get_maxes").unwrap(), Request::GetMaxes);
        assert_eq!(
            parse("cmd=put kvsname=kvs_7 key=bc-0 value=ab12").unwrap(),
            Request::Put {
                kvsname: "kvs_7".into(),
                key: "bc-0".into(),
                value: "ab12".into()
            }
        );
        assert_eq!(
            parse("cmd=get kvsname=kvs_7 key=PMI_process_mapping").unwrap(),
            Request::Get {
                kvsname: "kvs_7".into(),
                key: "PMI_process_mapping".into()
            }
        );
        assert_eq!(parse("cmd=barrier_in").unwrap(), Request::BarrierIn);
        assert_eq!(
            parse("cmd=abort exitcode=3").unwrap(),
            Request::Abort { code: 3 }
        );
        // An empty value is a value (MPICH puts them).
        assert!(matches!(
            parse("cmd=put kvsname=k key=x value=").unwrap(),
            Request::Put { value, .. } if value.is_empty()
        ));
        assert_eq!(
            parse("cmd=publish_name service=s port=p").unwrap(),
            Request::Unsupported {
                response: "publish_result",
                command: "publish_name".into()
            }
        );
        assert!(matches!(
            parse("mcmd=spawn").unwrap(),
            Request::Unsupported {
                response: "spawn_result",
                ..
            }
        ));
    }

    #[test]
    fn refuses_malformed_lines() {
        assert_eq!(parse(""), Err(WireError::NoCommand));
        assert_eq!(parse("key=1 cmd=get"), Err(WireError::NoCommand));
        assert_eq!(parse("hello"), Err(WireError::NotKeyValue("hello".into())));
        assert_eq!(parse("cmd=dance"), Err(WireError::Unknown("dance".into())));
        let e = parse("cmd=put kvsname=k key=x").unwrap_err();
        assert_eq!(
            e,
            WireError::Missing {
                command: "put",
                field: "value"
            }
        );
        assert_eq!(e.response(), "put_result");
        let e = parse("cmd=init pmi_version=one pmi_subversion=1").unwrap_err();
        assert!(matches!(
            e,
            WireError::NotNumber {
                field: "pmi_version",
                ..
            }
        ));
        assert!(matches!(
            parse(&"x".repeat(2000)),
            Err(WireError::TooLong(2000))
        ));
    }

    #[test]
    fn answers_are_one_line_without_spaces_in_values() {
        let a = Answer::error("get_result", "key x not found\nreally");
        assert_eq!(
            a.to_string(),
            "cmd=get_result rc=-1 msg=key_x_not_found_really\n"
        );
        let a = Answer::new("maxes").with("kvsname_max", KVSNAME_MAX);
        assert_eq!(a.to_string(), "cmd=maxes kvsname_max=256\n");
    }
}
