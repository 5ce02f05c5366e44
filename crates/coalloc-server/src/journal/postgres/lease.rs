//! The journal's lease (issue 32, item 2): which of the servers on one PostgreSQL database
//! leads. The `lease` table's one row says who holds it (`holder`, `owner`, the API's `url`),
//! under which fencing number (`epoch`, which every journal write checks: see the module
//! above) and until when (`expires`, by the database's clock, so that the hosts' clocks do
//! not matter).
//!
//! - The leader renews the lease every quarter of its term (`server.lease`, 3 s by default)
//!   on a connection of its own (`Renewer`). A renewal that finds the epoch moved, or no
//!   renewal succeeding for a whole term, deposes it: [`OnLost`] is called (`coalloc serve`
//!   exits at once; its writes would be refused by the fence anyway). A leader frozen
//!   (or starved) past its term asks the database once more before it gives up: if no one
//!   took the lease meanwhile, it is still its own.
//! - A server that finds the lease live and held by another waits as a standby
//!   ([`super::PgJournal::lead`]): it tries again every [`poll`] and takes the lease once it
//!   has expired, raising the epoch. A leader killed with `kill -9` is replaced within a term
//!   and a poll of its last renewal; one stopped cleanly releases the lease (its expiry set
//!   to now) so that a standby takes it at once. A standby whose connection is lost (the
//!   database restarted) connects again and waits on; its session is named `coalloc journal
//!   HOST:PID` in `pg_stat_activity`.
//! - The same server started again (same `owner`: host and state directory) takes the lease
//!   at once, live or not, as a restart always has: a restart need not wait out its own
//!   lease.
//! - A leader frozen inside a transaction (SIGSTOP, a cut network) would hold the row lock
//!   its fence takes and keep a standby's raise waiting: the leader's sessions are given
//!   `idle_in_transaction_session_timeout` of one term, so PostgreSQL ends such a
//!   transaction, and the standby waits for locks at most a term (`lock_timeout`) before it
//!   tries again.

use super::conn::Conn;
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// How a server holds the lease.
#[derive(Debug, Clone)]
pub struct LeaseTerms {
    /// How long the lease lasts unrenewed (`server.lease`).
    pub ttl: Duration,
    /// This server's process, as messages show it (`HOST:PID`).
    pub holder: String,
    /// This server, across restarts (`HOST:STATE-DIRECTORY`): the same owner takes the lease
    /// at once.
    pub owner: String,
    /// Where this server's API answers (standbys name it): the bound address, with the host's
    /// name for an unspecified one (`0.0.0.0`, `[::]`).
    pub url: String,
    /// This server's tag in its launches' names at the resource managers
    /// ([`coalloc_backends::kind::name_tag`]): the first server's is kept in the database
    /// (table `tag`) for all, so that a standby finds the launches of the leader it
    /// replaces by their names, as a restart does.
    pub name_tag: String,
}

impl LeaseTerms {
    /// The terms of a server of state directory `state` whose API is at `url`.
    pub fn of(ttl: Duration, state: &std::path::Path, url: &str) -> LeaseTerms {
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .unwrap_or_default()
            .trim()
            .to_string();
        let dir = std::fs::canonicalize(state).unwrap_or_else(|_| state.to_path_buf());
        LeaseTerms {
            ttl,
            holder: format!("{host}:{}", std::process::id()),
            owner: format!("{host}:{}", dir.display()),
            url: advertised(url, &host),
            name_tag: coalloc_backends::kind::name_tag(state),
        }
    }

    fn ttl_ms(&self) -> i64 {
        self.ttl.as_millis().max(1) as i64
    }
}

/// `url` (`SCHEME://ADDRESS:PORT`) with `host` for an unspecified address: what other hosts
/// can reach.
fn advertised(url: &str, host: &str) -> String {
    for any in ["://0.0.0.0:", "://[::]:"] {
        if !host.is_empty() && url.contains(any) {
            return url.replacen(any, &format!("://{host}:"), 1);
        }
    }
    url.to_string()
}

/// Who holds the lease, as a standby sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leader {
    pub epoch: i64,
    /// `HOST:PID` of the leader's process.
    pub holder: String,
    /// Its API.
    pub url: String,
}

/// What is done when the lease is lost (on the renewals' thread), with the reason.
pub type OnLost = Box<dyn FnOnce(String) + Send>;

/// How often a standby tries to take the lease: a tenth of a term, between 50 and 250 ms.
pub fn poll(ttl: Duration) -> Duration {
    (ttl / 10).clamp(Duration::from_millis(50), Duration::from_millis(250))
}

/// The columns a lease of item 1's schema lacks.
pub(super) const SCHEMA: &str = r#"
    DO $$ BEGIN
        IF NOT EXISTS (SELECT 1 FROM information_schema.columns
                       WHERE table_schema = current_schema() AND table_name = 'lease'
                         AND column_name = 'expires') THEN
            ALTER TABLE lease ADD COLUMN owner TEXT NOT NULL DEFAULT '',
                              ADD COLUMN url TEXT NOT NULL DEFAULT '',
                              ADD COLUMN expires TIMESTAMPTZ NOT NULL DEFAULT now();
        END IF;
    END $$;
"#;

/// Set up a leader's session: commits wait for the WAL's flush, and a transaction left idle
/// for a term is ended by PostgreSQL (a frozen leader holds no lock a standby waits on).
pub(super) fn leader_session(
    c: &mut postgres::Client,
    ttl: Duration,
) -> Result<(), postgres::Error> {
    c.batch_execute(&format!(
        "SET synchronous_commit = on; SET idle_in_transaction_session_timeout = {}",
        ttl.as_millis().max(1)
    ))
}

/// A leading (or standing by) journal's session: [`leader_session`], named `coalloc journal
/// HOLDER` (`application_name`, as `pg_stat_activity` shows it).
pub(super) fn journal_session(
    c: &mut postgres::Client,
    ttl: Duration,
    holder: &str,
) -> Result<(), postgres::Error> {
    leader_session(c, ttl)?;
    c.query_one(
        "SELECT set_config('application_name', $1, false)",
        &[&format!("coalloc journal {holder}")],
    )?;
    Ok(())
}

/// Take the lease, if `force` or if it is free (expired, never held, or this owner's):
/// its new fencing number; else who holds it. `terms` `None`: taken by a journal that is
/// not renewed (its expiry is now, so that any server may take it).
pub(super) fn take(
    tx: &mut postgres::Transaction<'_>,
    terms: Option<&LeaseTerms>,
    force: bool,
) -> Result<Result<i64, Leader>, postgres::Error> {
    let (holder, owner, url, ttl) = match terms {
        Some(t) => (
            t.holder.as_str(),
            t.owner.as_str(),
            t.url.as_str(),
            t.ttl_ms(),
        ),
        None => ("", "", "", 0),
    };
    if !force {
        // Behind a frozen leader's transaction, give up after a term and try again.
        tx.batch_execute(&format!("SET LOCAL lock_timeout = {}", ttl.max(1)))?;
    }
    // Wait for the writes fenced by the number in force (they lock the row `FOR KEY SHARE`,
    // which an `UPDATE` of no key column would not wait for: see the journal's module).
    tx.execute("SELECT 1 FROM lease WHERE id = 1 FOR UPDATE", &[])?;
    let taken = tx.query_opt(
        "UPDATE lease SET epoch = epoch + 1, holder = $1, owner = $2, url = $3,
                since = now(), beat = now(), expires = now() + $4::int8 * interval '1 millisecond'
         WHERE id = 1 AND ($5 OR expires <= now() OR owner = '' OR owner = $2)
         RETURNING epoch",
        &[&holder, &owner, &url, &ttl, &force],
    )?;
    if let Some(row) = taken {
        return Ok(Ok(row.get(0)));
    }
    let row = tx.query_one("SELECT epoch, holder, url FROM lease WHERE id = 1", &[])?;
    Ok(Err(Leader {
        epoch: row.get(0),
        holder: row.get(1),
        url: row.get(2),
    }))
}

/// The tag of the servers of this database: the first one's `mine`.
pub(super) fn shared_tag(c: &mut postgres::Client, mine: &str) -> Result<String, postgres::Error> {
    c.execute(
        "INSERT INTO tag (id, name_tag) VALUES (1, $1) ON CONFLICT (id) DO NOTHING",
        &[&mine],
    )?;
    Ok(c.query_one("SELECT name_tag FROM tag WHERE id = 1", &[])?
        .get(0))
}

/// A lock wait given up (`lock_timeout`): the lease is busy, try again.
pub(super) fn busy(e: &postgres::Error) -> bool {
    e.code() == Some(&postgres::error::SqlState::LOCK_NOT_AVAILABLE)
}

/// What a renewal found.
enum Renewal {
    Renewed,
    /// The epoch moved: who holds the lease now.
    Deposed(i64, String),
}

fn renew(c: &mut postgres::Client, epoch: i64, ttl: i64) -> Result<Renewal, postgres::Error> {
    let n = c.execute(
        "UPDATE lease SET beat = now(), expires = now() + $2::int8 * interval '1 millisecond'
         WHERE id = 1 AND epoch = $1",
        &[&epoch, &ttl],
    )?;
    if n == 1 {
        return Ok(Renewal::Renewed);
    }
    let row = c.query_one("SELECT epoch, holder FROM lease WHERE id = 1", &[])?;
    Ok(Renewal::Deposed(row.get(0), row.get(1)))
}

/// The leader's renewals, on a thread and a connection of their own; dropped (a clean
/// stop), it releases the lease.
pub(super) struct Renewer {
    stop: Option<mpsc::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Renewer {
    /// Renew lease `epoch` of the database at `url` every quarter of `ttl`; `on_lost` when
    /// a renewal finds it taken, or none succeeded for `ttl`.
    pub(super) fn start(
        url: &str,
        shown: String,
        epoch: i64,
        ttl: Duration,
        on_lost: OnLost,
    ) -> Result<Renewer, postgres::Error> {
        let conn = Conn::open(url)?;
        conn.call(move |c| leader_session(c, ttl))
            .unwrap_or_else(|_| panic!("the renewals' connection thread died"))?;
        let (stop, stopped) = mpsc::channel::<()>();
        let ttl_ms = ttl.as_millis().max(1) as i64;
        let every = ttl / 4;
        let thread = std::thread::Builder::new()
            .name("lease".into())
            .spawn(move || {
                let mut last = Instant::now();
                let lost = loop {
                    match stopped.recv_timeout(every) {
                        Err(mpsc::RecvTimeoutError::Timeout) => {}
                        _ => {
                            let _ = conn.call(move |c| {
                                c.execute(
                                    "UPDATE lease SET expires = now() WHERE id = 1 AND epoch = $1",
                                    &[&epoch],
                                )
                            });
                            tracing::info!(journal = %shown, epoch, "lease released");
                            return;
                        }
                    }
                    let sent = Instant::now();
                    let (done, result) = mpsc::channel();
                    if conn
                        .spawn(move |c| {
                            let _ = done.send(renew(c, epoch, ttl_ms));
                        })
                        .is_err()
                    {
                        break "the renewals' connection is gone".to_string();
                    }
                    // Until the term runs out; and even past it (this process was frozen,
                    // or starved), a moment for the database to say whether another server
                    // took the lease meanwhile (if none did, it is still this one's).
                    let wait = (last + ttl)
                        .saturating_duration_since(sent)
                        .max(every.min(Duration::from_secs(1)));
                    match result.recv_timeout(wait) {
                        Ok(Ok(Renewal::Renewed)) => last = sent,
                        Ok(Ok(Renewal::Deposed(now, holder))) => {
                            break format!("deposed: {holder} took the journal's lease at epoch {now}; this server's was epoch {epoch}")
                        }
                        Ok(Err(e)) if Instant::now() < last + ttl => {
                            tracing::warn!(journal = %shown, "lease renewal: {e}")
                        }
                        Ok(Err(e)) => {
                            break format!("lease lost: no renewal for {ttl:?} (the last: {e})")
                        }
                        Err(_) => break format!("lease lost: no renewal for {ttl:?}"),
                    }
                };
                on_lost(format!("journal {shown}: {lost}; this server stops"));
            })
            .expect("a thread for the lease's renewals");
        Ok(Renewer {
            stop: Some(stop),
            thread: Some(thread),
        })
    }
}

impl Drop for Renewer {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unspecified_address_is_advertised_by_the_hosts_name_and_a_standby_polls_a_tenth_of_a_term(
    ) {
        assert_eq!(advertised("https://0.0.0.0:8443", "a"), "https://a:8443");
        assert_eq!(advertised("https://[::]:8443", "a"), "https://a:8443");
        assert_eq!(
            advertised("http://127.0.0.1:4417", "a"),
            "http://127.0.0.1:4417"
        );
        assert_eq!(
            advertised("https://0.0.0.0:8443", ""),
            "https://0.0.0.0:8443"
        );
        assert_eq!(poll(Duration::from_secs(3)), Duration::from_millis(250));
        assert_eq!(poll(Duration::from_secs(1)), Duration::from_millis(100));
        assert_eq!(poll(Duration::from_millis(200)), Duration::from_millis(50));
    }
}
