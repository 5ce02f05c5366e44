//! Checks every backend's unit tests share: what a backend answers when its resource
//! manager's commands are not there.

use crate::{Backend, BackendError, RemoteState};

/// A backend whose resource-manager commands are missing: its site is unavailable (not a
/// panic), an id that could inject into a command line is refused, and ids that cannot be
/// the manager's are unknown without asking it.
pub fn assert_missing_manager_is_unavailable(c: &dyn Backend) {
    assert!(matches!(c.load(), Err(BackendError::Unavailable(_))));
    assert!(matches!(
        c.query(&["1".into()]),
        Err(BackendError::Unavailable(_))
    ));
    assert!(matches!(
        c.cancel(&"x;rm".into()),
        Err(BackendError::Rejected(_))
    ));
    assert_eq!(c.query(&[]).unwrap(), vec![]);
    assert_eq!(
        c.query(&["not-an-id".into()]).unwrap(),
        vec![RemoteState::Unknown]
    );
}
