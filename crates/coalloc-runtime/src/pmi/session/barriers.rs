//! The barriers after the first one, job-wide through the rendezvous store, and the
//! store's answers (a client's `put` and `get`, the launch numbers, the barrier marks).

use super::super::wire::Answer;
use super::requests::found;
use super::{
    launch_key, Client, Event, JobBarrier, Pending, Phase, Session, LAUNCH_WAIT_MS, MARK_WAIT_MS,
};
use std::collections::BTreeSet;

impl Session {
    /// Every live rank entered the barrier: check in (epoch 0) or start a job barrier.
    pub(super) fn check_barrier(&mut self) {
        let live: Vec<&Client> = self.clients.iter().filter(|c| !c.exited).collect();
        if live.is_empty() || !live.iter().all(|c| c.in_barrier) {
            return;
        }
        match self.phase {
            Phase::Starting if self.launch_marked => {
                self.phase = Phase::CheckingIn;
                self.events.push_back(Event::CheckIn {
                    ok: true,
                    reason: None,
                });
            }
            Phase::Running if self.job_barrier.is_none() => {
                self.job_barrier = Some(JobBarrier::default());
                if self.launches.len() < self.setup.sizes.len() {
                    for c in 0..self.setup.sizes.len() {
                        self.get(
                            Pending::LaunchOf { component: c },
                            launch_key(c),
                            LAUNCH_WAIT_MS,
                        );
                    }
                } else {
                    self.mark_barrier();
                }
            }
            _ => {}
        }
    }

    /// The store's name of this attempt of the job.
    fn attempt(&self) -> String {
        let l: Vec<&str> = self.launches.values().map(String::as_str).collect();
        l.join(".")
    }

    fn barrier_key(&self, component: usize) -> String {
        format!("pmi/{}/barrier/{}/{component}", self.attempt(), self.epoch)
    }

    fn mark_barrier(&mut self) {
        let key = self.barrier_key(self.setup.component);
        self.put(Pending::BarrierMark, key, "in".into());
    }

    pub(super) fn release_barrier(&mut self) {
        for local in 0..self.clients.len() as u32 {
            let c = &mut self.clients[local as usize];
            if c.in_barrier && !c.exited {
                c.in_barrier = false;
                self.send(local, Answer::new("barrier_out").with("rc", 0));
            }
        }
        self.epoch += 1;
    }

    pub(super) fn put_done(&mut self, token: u64, result: Result<(), String>) {
        let Some(what) = self.pending.remove(&token) else {
            return;
        };
        match (what, result) {
            (Pending::Put { local }, Ok(())) => {
                self.send(local, Answer::new("put_result").with("rc", 0))
            }
            (Pending::Put { local }, Err(e)) => {
                self.log(format!("rank {}: put failed: {e}", self.rank_of(local)));
                self.send(local, Answer::error("put_result", e));
            }
            (Pending::LaunchMark, Ok(())) => {
                self.launch_marked = true;
                self.check_barrier();
            }
            (Pending::BarrierMark, Ok(())) => {
                let others = (0..self.setup.sizes.len()).filter(|c| *c != self.setup.component);
                let others: BTreeSet<usize> = others.collect();
                if others.is_empty() {
                    self.job_barrier = None;
                    self.release_barrier();
                    return;
                }
                for c in &others {
                    let key = self.barrier_key(*c);
                    self.get(Pending::BarrierSeen { component: *c }, key, MARK_WAIT_MS);
                }
                self.job_barrier = Some(JobBarrier { waiting: others });
            }
            (_, Err(e)) => self.fail(format!("the rendezvous store failed: {e}"), 1),
            _ => {}
        }
    }

    pub(super) fn get_done(&mut self, token: u64, result: Result<Option<String>, String>) {
        let Some(what) = self.pending.remove(&token) else {
            return;
        };
        match (what, result) {
            (Pending::Get { local, key }, Ok(Some(v))) => {
                self.cache.insert(key, v.clone());
                self.send(local, found(&v));
            }
            (Pending::Get { local, key }, Ok(None)) => {
                self.send(
                    local,
                    Answer::error("get_result", format!("key {key} not found")),
                );
            }
            (Pending::Get { local, .. }, Err(e)) => {
                self.log(format!("rank {}: get failed: {e}", self.rank_of(local)));
                self.send(local, Answer::error("get_result", e));
            }
            (Pending::LaunchOf { component }, Ok(Some(v))) => {
                self.launches.insert(component, v);
                if self.launches.len() == self.setup.sizes.len() {
                    self.mark_barrier();
                }
            }
            (Pending::LaunchOf { component }, Ok(None)) => {
                self.fail(
                    format!("component {component} never published its launch"),
                    1,
                );
            }
            (Pending::BarrierSeen { component }, Ok(Some(_))) => {
                let done = match &mut self.job_barrier {
                    Some(b) => {
                        b.waiting.remove(&component);
                        b.waiting.is_empty()
                    }
                    None => false,
                };
                if done {
                    self.job_barrier = None;
                    self.release_barrier();
                }
            }
            (Pending::BarrierSeen { component }, Ok(None)) => {
                let key = self.barrier_key(component);
                self.get(Pending::BarrierSeen { component }, key, MARK_WAIT_MS);
            }
            (_, Err(e)) => self.fail(format!("the rendezvous store failed: {e}"), 1),
            _ => {}
        }
    }
}
