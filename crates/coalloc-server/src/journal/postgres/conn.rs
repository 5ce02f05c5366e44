//! A PostgreSQL connection on a thread of its own. rust-postgres' blocking client drives a
//! tokio runtime of its own, which cannot be blocked on from a thread already inside one:
//! the server opens its journal from async code, and the API reads the history from
//! tokio's blocking threads. Every use of the connection is a closure handed to its thread,
//! so that the store can be called from anywhere; the hop costs a few microseconds beside a
//! commit's round trips.

use postgres::{Client, NoTls};
use std::sync::mpsc;

type Job = Box<dyn FnOnce(&mut Client) + Send>;

/// One connection and its thread (which ends, closing it, when this is dropped).
pub(crate) struct Conn {
    jobs: Option<mpsc::Sender<Job>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// The connection's thread is gone (it panicked).
#[derive(Debug)]
pub(crate) struct Gone;

impl Conn {
    /// Connect to `url` (a `postgres://` connection string) on a new thread.
    pub(crate) fn open(url: &str) -> Result<Conn, postgres::Error> {
        let (jobs, next) = mpsc::channel::<Job>();
        let (ready, connected) = mpsc::channel();
        let url = url.to_string();
        let thread = std::thread::Builder::new()
            .name("postgres".into())
            .spawn(move || match Client::connect(&url, NoTls) {
                Ok(mut client) => {
                    let _ = ready.send(Ok(()));
                    while let Ok(job) = next.recv() {
                        job(&mut client);
                    }
                }
                Err(e) => {
                    let _ = ready.send(Err(e));
                }
            })
            .expect("a thread for the PostgreSQL connection");
        match connected.recv() {
            Ok(Ok(())) => Ok(Conn {
                jobs: Some(jobs),
                thread: Some(thread),
            }),
            Ok(Err(e)) => {
                let _ = thread.join();
                Err(e)
            }
            Err(_) => panic!("the PostgreSQL connection's thread died while connecting"),
        }
    }

    /// Hand `f` to the connection's thread without waiting for it.
    pub(crate) fn spawn(&self, f: impl FnOnce(&mut Client) + Send + 'static) -> Result<(), Gone> {
        self.jobs
            .as_ref()
            .ok_or(Gone)?
            .send(Box::new(f))
            .map_err(|_| Gone)
    }

    /// Run `f` on the connection's thread and wait for its result.
    pub(crate) fn call<R: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Client) -> R + Send + 'static,
    ) -> Result<R, Gone> {
        let (done, result) = mpsc::sync_channel(1);
        self.spawn(move |c| {
            let _ = done.send(f(c));
        })?;
        result.recv().map_err(|_| Gone)
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        drop(self.jobs.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
