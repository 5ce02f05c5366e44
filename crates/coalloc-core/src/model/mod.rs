//! The job and site model: what a job asks for and where it may run.
//!
//! These are validated values: a [`Job`] obeys every rule of [`crate::spec::validate`], a
//! [`Site`] every rule of [`crate::spec::sites`]. Text formats (RSL, TOML, JSON) are read into
//! and written from these types by [`crate::rsl`] and [`crate::spec`].
//!
//! Time is integer milliseconds on the driver's clock ([`Time`]); durations are integer
//! milliseconds too ([`Millis`]).

mod job;
mod site;

pub use job::*;
pub use site::*;

/// A point in time: milliseconds on the driver's clock (the wall clock's Unix epoch in the
/// server, 0 at the start of a simulation).
pub type Time = i64;

/// A duration in milliseconds.
pub type Millis = i64;

/// Milliseconds per second.
pub const SECOND: Millis = 1_000;
/// Milliseconds per minute.
pub const MINUTE: Millis = 60 * SECOND;
/// Milliseconds per hour.
pub const HOUR: Millis = 60 * MINUTE;

/// Changes with `f` a value kept boxed only while it differs from its default (the rarely
/// set fields of a job and of its scheduler state): the box is made only when `f` leaves
/// something set, and dropped when `f` empties it.
pub(crate) fn set_boxed<T: Default + PartialEq>(slot: &mut Option<Box<T>>, f: impl FnOnce(&mut T)) {
    match slot {
        Some(b) => {
            f(b);
            if **b == T::default() {
                *slot = None;
            }
        }
        None => {
            let mut v = T::default();
            f(&mut v);
            if v != T::default() {
                *slot = Some(Box::new(v));
            }
        }
    }
}
