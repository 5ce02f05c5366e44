//! The component runtime (seed 002 §3.3, §4.1): what a component of a co-allocated job links
//! or calls. The contract with the server is below and is fixed.
//!
//! # Environment (set by the server for every process of every component)
//!
//! | variable | meaning |
//! | --- | --- |
//! | `COALLOC_URL` | the server's base URL, e.g. `http://127.0.0.1:4417` |
//! | `COALLOC_BARRIER_URL` | `{COALLOC_URL}/v1/jobs/{job}/barrier` |
//! | `COALLOC_SERVER_FINGERPRINT` | when the URLs are `https://` (a server bound beyond loopback): the `sha256:HEX` fingerprint of the server's certificate, the only one trusted |
//! | `COALLOC_SECRET` | the job's own secret: the bearer token of barrier and rendezvous calls |
//! | `COALLOC_JOB_ID` | the job's number |
//! | `COALLOC_LAUNCH` | this start of this component (a number unique in the server's life) |
//! | `COALLOC_COMPONENT` | this component's index, from 0 |
//! | `COALLOC_COMPONENTS` | components in the job |
//! | `COALLOC_SIZES` | every component's size, by index, comma-separated (`8,8,16`) |
//! | `COALLOC_RANK_OFFSET` | the job-wide rank of this component's first process |
//! | `COALLOC_TOTAL` | the job's total size |
//! | `COALLOC_SITE` | the site's name |
//! | `COALLOC_PROCESSES` | processes in this component |
//! | `COALLOC_LOCAL_RANK` | this process's index in its component, from 0 (per process) |
//! | `COALLOC_RANK` | `COALLOC_RANK_OFFSET + COALLOC_LOCAL_RANK` (per process) |
//! | `COALLOC_BARRIER_TIMEOUT_MS` | the job's barrier timeout in milliseconds, if it has one: the barrier gives up after it, even while the server is unreachable |
//!
//! # HTTP protocol (JSON bodies, `Authorization: Bearer {COALLOC_SECRET}`)
//!
//! - Barrier check-in: `POST {COALLOC_BARRIER_URL}` with
//!   `{"launch": L, "local_rank": r, "ok": true|false, "reason": "..."}`. The server holds the
//!   request up to about 25 s and answers `200 {"state": "released"}`, `200 {"state":
//!   "aborted", "reason": "..."}` or `200 {"state": "waiting"}` (post again: check-in is
//!   idempotent). A component is at the barrier when all its processes checked in with ok;
//!   one `ok: false` fails the component. On a connection error (the server restarting) the
//!   client retries with a back-off.
//! - Rendezvous: `PUT {COALLOC_URL}/v1/jobs/{job}/kv/{key}` with the raw value as body (204);
//!   `GET {COALLOC_URL}/v1/jobs/{job}/kv/{key}?wait_ms=N` answers `200` with the raw value, or
//!   `404` when the key is still missing after waiting up to N ms (at most 25 s a call).
//! - Another job's secret gets `403`; a missing or bad one `401`.
//!
//! # What this crate offers
//!
//! - [`Config`]: the variables above, parsed and checked ([`Config::from_env`]).
//! - [`barrier`] / [`barrier_or_exit`]: the start barrier of seed 002 §3.3 — a component
//!   reports whether its start-up succeeded and learns whether the whole job commits
//!   (seed 002 §4.1: the job is released only when every required component checked in).
//! - [`kv_put`] / [`kv_get`]: the job's rendezvous store, how components find each other
//!   (addresses of listening sockets and the like) once the job is released.
//! - [`pmi`]: MPICH's PMI-1 served to an `mpi` component's processes (`coalloc pmi-proxy`),
//!   its barrier the start barrier, its KVS the rendezvous store.
//!
//! Every call is blocking (HTTP through `ureq`, over rustls with the pinned certificate
//! when the server speaks HTTPS; no async runtime); connection failures are retried with
//! a back-off for [`Config::patience`] (5 minutes by default) because the server may be
//! restarting. Nothing here panics on what the environment or the server says.

mod barrier;
mod config;
mod error;
mod http;
mod kv;
pub mod pmi;

pub use barrier::{barrier, barrier_or_exit, BarrierOutcome};
pub use config::Config;
pub use error::RuntimeError;
pub use kv::{kv_get, kv_put};
