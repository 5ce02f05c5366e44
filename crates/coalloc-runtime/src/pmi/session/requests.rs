//! A client's lines: parsed (the [`wire`](super::super::wire) module), answered at once
//! when the session knows the answer, or turned into a store call (`put`, `get`).

use super::super::wire::{self, Answer, Request, KEYLEN_MAX, KVSNAME_MAX, VALLEN_MAX};
use super::{Pending, Session};

impl Session {
    pub(super) fn line(&mut self, local: u32, line: &str) {
        let Some(client) = self.clients.get_mut(local as usize) else {
            return;
        };
        if let Some(response) = client.multiline {
            if line.trim() == "endcmd" {
                client.multiline = None;
                self.send(
                    local,
                    Answer::error(response, "coalloc does not offer spawn"),
                );
            }
            return;
        }
        let rank = self.rank_of(local);
        match wire::parse(line) {
            Ok(req) => self.request(local, req, line.starts_with("mcmd=")),
            Err(e) => {
                let shown: String = line.chars().take(120).collect();
                self.log(format!("rank {rank}: malformed PMI line `{shown}`: {e}"));
                self.send(local, Answer::error(e.response(), e));
            }
        }
    }

    fn request(&mut self, local: u32, req: Request, multiline: bool) {
        let rank = self.rank_of(local);
        match req {
            Request::Init { version: 1, .. } => {
                let a = Answer::new("response_to_init").with("rc", 0);
                self.send(local, a.with("pmi_version", 1).with("pmi_subversion", 1));
            }
            Request::Init {
                version,
                subversion,
            } => {
                self.log(format!(
                    "rank {rank}: PMI {version}.{subversion} asked; coalloc speaks PMI-1"
                ));
                let a = Answer::error("response_to_init", "coalloc speaks PMI-1 only");
                self.send(local, a.with("pmi_version", 1).with("pmi_subversion", 1));
            }
            Request::GetMaxes => {
                let a = Answer::new("maxes")
                    .with("rc", 0)
                    .with("kvsname_max", KVSNAME_MAX);
                self.send(
                    local,
                    a.with("keylen_max", KEYLEN_MAX)
                        .with("vallen_max", VALLEN_MAX),
                );
            }
            Request::GetAppnum => {
                self.send(local, Answer::new("appnum").with("rc", 0).with("appnum", 0))
            }
            Request::GetUniverseSize => {
                let a = Answer::new("universe_size").with("rc", 0);
                self.send(local, a.with("size", self.setup.total));
            }
            Request::GetMyKvsname => {
                let a = Answer::new("my_kvsname").with("rc", 0);
                self.send(local, a.with("kvsname", self.kvsname.clone()));
            }
            Request::Put {
                kvsname,
                key,
                value,
            } => {
                if let Some(why) = self.refuse_kv(&kvsname, &key, Some(&value)) {
                    self.log(format!("rank {rank}: put refused: {why}"));
                    return self.send(local, Answer::error("put_result", why));
                }
                self.cache.insert(key.clone(), value.clone());
                self.put(Pending::Put { local }, kvs_key(&key), value);
            }
            Request::Get { kvsname, key } => {
                if let Some(why) = self.refuse_kv(&kvsname, &key, None) {
                    self.log(format!("rank {rank}: get refused: {why}"));
                    return self.send(local, Answer::error("get_result", why));
                }
                let known = if key == "PMI_process_mapping" {
                    Some(self.process_mapping())
                } else {
                    self.cache.get(&key).cloned()
                };
                match known {
                    Some(v) => self.send(local, found(&v)),
                    // PMI-1: a key nobody put is an error, not a wait.
                    None => self.get(
                        Pending::Get {
                            local,
                            key: key.clone(),
                        },
                        kvs_key(&key),
                        0,
                    ),
                }
            }
            Request::BarrierIn => {
                if let Some(c) = self.clients.get_mut(local as usize) {
                    c.in_barrier = true;
                }
                self.check_barrier();
            }
            Request::Finalize => {
                if let Some(c) = self.clients.get_mut(local as usize) {
                    c.finalized = true;
                }
                self.send(local, Answer::new("finalize_ack").with("rc", 0));
            }
            Request::Abort { code } => {
                let why = format!("rank {rank} called MPI_Abort (exit code {code})");
                self.fail(why, if code == 0 { 1 } else { code });
            }
            Request::Unsupported { response, command } => {
                self.log(format!(
                    "rank {rank}: PMI `{command}` is not offered by coalloc"
                ));
                if multiline {
                    if let Some(c) = self.clients.get_mut(local as usize) {
                        c.multiline = Some(response);
                    }
                } else {
                    let why = format!("coalloc does not offer {command}");
                    self.send(local, Answer::error(response, why));
                }
            }
        }
    }

    /// Why a put or get must be refused, if it must.
    fn refuse_kv(&self, kvsname: &str, key: &str, value: Option<&str>) -> Option<String> {
        if kvsname != self.kvsname {
            return Some(format!("unknown kvsname {kvsname}"));
        }
        if key.is_empty() || key.len() > KEYLEN_MAX {
            return Some(format!("key of {} bytes (1 to {KEYLEN_MAX})", key.len()));
        }
        match value {
            Some(v) if v.len() > VALLEN_MAX => {
                Some(format!("value of {} bytes (at most {VALLEN_MAX})", v.len()))
            }
            _ => None,
        }
    }
}

pub(super) fn found(value: &str) -> Answer {
    Answer::new("get_result").with("rc", 0).with("value", value)
}

/// The store key of a PMI key.
pub(super) fn kvs_key(key: &str) -> String {
    format!("pmi/kvs/{key}")
}
