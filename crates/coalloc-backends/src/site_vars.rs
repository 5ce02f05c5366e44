//! The variables a GRAM job manager defined where a job landed (RSL's `$(HOME)`,
//! `$(LOGNAME)`, `$(SCRATCH_DIRECTORY)`): a job may use them without defining them, and they
//! are expanded here, on the site the component runs on (by the server for sites on its
//! host, by the site's agent for agent sites), in the executable, the arguments, the
//! working directory and the environment's values.

use crate::SubmitRequest;
use std::path::{Path, PathBuf};

/// The environment variable that carries RSL's `scratch_dir` to the site: the folder under
/// which the launch's `$(SCRATCH_DIRECTORY)` is made instead of the site's default.
pub const SCRATCH_BASE: &str = "COALLOC_SCRATCH_DIR";

/// Expand the site variables of `req`. `$(SCRATCH_DIRECTORY)` is a folder of its own for
/// this launch under `scratch` (or under the job's `scratch_dir`, [`SCRATCH_BASE`]), made
/// when used.
pub fn expand(req: &mut SubmitRequest, scratch: &Path) {
    // Most launches use none: then nothing is looked up (the password database was read
    // for every launch, on the driver's thread).
    let uses = |t: &str| t.contains("$(");
    if !uses(&req.executable)
        && !req.arguments.iter().any(|a| uses(a))
        && !req.environment.iter().any(|(_, v)| uses(v))
        && !req
            .directory
            .as_ref()
            .is_some_and(|d| uses(&d.to_string_lossy()))
    {
        return;
    }
    let env = |k: &str| std::env::var(k).unwrap_or_default();
    let logname = [env("LOGNAME"), env("USER")]
        .into_iter()
        .find(|s| !s.is_empty())
        .unwrap_or_else(user_name);
    let base = req
        .environment
        .iter()
        .find(|(k, _)| k == SCRATCH_BASE)
        .map(|(_, v)| {
            PathBuf::from(
                v.replace("$(HOME)", &env("HOME"))
                    .replace("$(LOGNAME)", &logname),
            )
        })
        .unwrap_or_else(|| scratch.to_path_buf());
    let dir: PathBuf = base.join(format!("{}.{}.L{}", req.job, req.component, req.launch));
    let mut made = false;
    let mut sub = |text: &mut String| {
        if !text.contains("$(") {
            return;
        }
        if text.contains("$(SCRATCH_DIRECTORY)") && !made {
            made = true;
            let _ = std::fs::create_dir_all(&dir);
        }
        *text = text
            .replace("$(HOME)", &env("HOME"))
            .replace("$(LOGNAME)", &logname)
            .replace("$(SCRATCH_DIRECTORY)", &dir.to_string_lossy());
    };
    sub(&mut req.executable);
    req.arguments.iter_mut().for_each(&mut sub);
    req.environment.iter_mut().for_each(|(_, v)| sub(v));
    if let Some(d) = req.directory.as_mut() {
        let mut text = d.to_string_lossy().into_owned();
        sub(&mut text);
        *d = PathBuf::from(text);
    }
}

/// The effective user's login name from the password database (no LOGNAME or USER set).
fn user_name() -> String {
    // SAFETY: getpwuid returns a pointer into static storage or null; the name is copied at
    // once, before any other call could overwrite it.
    unsafe {
        let pw = libc::getpwuid(libc::geteuid());
        if pw.is_null() || (*pw).pw_name.is_null() {
            return String::new();
        }
        std::ffi::CStr::from_ptr((*pw).pw_name)
            .to_string_lossy()
            .into_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn site_variables_are_expanded_where_the_component_lands() {
        let scratch = std::env::temp_dir().join(format!("coalloc-vars-{}", std::process::id()));
        let mut req = SubmitRequest {
            job: 3,
            component: 1,
            launch: 9,
            executable: "$(HOME)/bin/app".into(),
            arguments: vec![
                "$(LOGNAME)".into(),
                "$(SCRATCH_DIRECTORY)/x".into(),
                "$(OTHER)".into(),
            ],
            directory: Some("$(SCRATCH_DIRECTORY)".into()),
            ..SubmitRequest::default()
        };
        expand(&mut req, &scratch);
        let home = std::env::var("HOME").unwrap_or_default();
        assert_eq!(req.executable, format!("{home}/bin/app"));
        let dir = scratch.join("3.1.L9");
        assert_eq!(req.arguments[1], format!("{}/x", dir.display()));
        assert_eq!(req.arguments[2], "$(OTHER)", "only the site's variables");
        assert_eq!(req.directory.as_deref(), Some(dir.as_path()));
        assert!(dir.is_dir());
        // RSL's scratch_dir moves the scratch folder.
        let mut req = SubmitRequest {
            job: 3,
            component: 1,
            launch: 10,
            arguments: vec!["$(SCRATCH_DIRECTORY)".into()],
            environment: vec![(
                SCRATCH_BASE.into(),
                scratch.join("mine").to_string_lossy().into(),
            )],
            ..SubmitRequest::default()
        };
        expand(&mut req, &scratch);
        assert_eq!(
            req.arguments[0],
            scratch.join("mine/3.1.L10").to_string_lossy()
        );
    }
}
