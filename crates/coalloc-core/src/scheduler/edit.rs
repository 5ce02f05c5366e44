//! Edits of a job before commit: add, delete and substitute components (seed 002 §3.2,
//! interactive transactions). An edit is checked in full before anything changes; a refused
//! edit leaves the job as it was.

use super::api::*;
use super::jobs::{CompPhase, CompState, Phase};
use super::Core;
use crate::model::JobKind;
use crate::placement::Fit;

impl Core {
    /// Add, delete or substitute a component before commit (seed 002 §3.2). `fit` and
    /// `entries` are the queue policy's, as for `Core::submit`.
    pub(super) fn edit(
        &mut self,
        id: JobId,
        edit: Edit,
        fit: Option<Fit>,
        entries: &[&[SiteId]],
    ) -> Result<(), Rejected> {
        let j = self.jobs.get(&id).ok_or(Rejected::UnknownJob(id))?;
        match j.phase {
            Phase::Ended => return Err(Rejected::Ended(id)),
            Phase::Running => return Err(Rejected::Committed(id)),
            _ => {}
        }
        if j.job.kind == JobKind::Flexible {
            return Err(Rejected::Invalid(
                "a flexible job's pieces come from the split; edit the job's total instead"
                    .to_owned(),
            ));
        }
        let n = j.job.components.len();
        let index_ok = |i: usize| {
            if i < n && !j.is_deleted(i) {
                Ok(())
            } else {
                Err(Rejected::Invalid(format!("the job has no component {i}")))
            }
        };
        // Check the edited job against every rule before changing anything.
        let mut edited = j.job.clone();
        match &edit {
            Edit::Add(c) => edited.components.push(c.clone()),
            Edit::Delete(i) => {
                index_ok(*i)?;
                if (0..n).filter(|&k| k != *i && !j.is_deleted(k)).count() == 0 {
                    return Err(Rejected::Invalid(
                        "a job keeps at least one component; cancel the job instead".to_owned(),
                    ));
                }
            }
            Edit::Substitute(i, c) => {
                index_ok(*i)?;
                edited.components[*i] = c.clone();
            }
        }
        if !matches!(edit, Edit::Delete(_)) {
            if edited.kind == JobKind::Total && edited.components.len() > 1 {
                edited.kind = JobKind::Unordered;
            }
            // Every check a submission passes: an edited job that could never start would
            // wait for good, and hold up the jobs behind it under a policy that does not
            // look past its head. The simulation harness found a reserving job given a
            // component more than the sites that may reserve can ever hold, queued to the
            // end (seed 13588; `--policies` seed 8052, the whole FF queue behind it).
            let reserves = self.reserve.requests.contains_key(&id);
            self.check_startable(&edited, fit, entries, reserves)?;
        }
        let starting = j.phase != Phase::Queued;
        // A held job is told again when the edited run is ready to commit (as it was, if
        // the edit is refused below: the simulation harness found a refused edit that left
        // it cleared, which no journal entry recorded, seed 356).
        let told = j.told_ready;
        if let Some(j) = self.jobs.get_mut(&id) {
            j.told_ready = false;
        }
        match edit {
            Edit::Delete(i) => {
                if starting {
                    self.cancel_component(id, i);
                    self.jobs.get_mut(&id).expect("known").comps[i].phase = CompPhase::Deleted;
                    self.check_commit(id);
                } else {
                    let j = self.jobs.get_mut(&id).expect("known");
                    j.job.components.remove(i);
                    self.edited.push(id);
                    self.sites.epoch += 1;
                    self.dirty = true;
                }
            }
            Edit::Add(_) | Edit::Substitute(..) => {
                let i = match edit {
                    Edit::Substitute(i, _) => i,
                    _ => n,
                };
                if starting {
                    // The new request must find room now, or nothing changes; like a fresh
                    // placement, where it gets the job's input file, which is sent there
                    // before its barrier opens (seed 000 §2.5). The simulation harness
                    // found a substitute of a job with an input file started on a site
                    // without the file, and released (`--files`, seeds 18, 86 and 126;
                    // an added component, seed 245).
                    let placed =
                        self.place_alone(&edited, edited.components[i].clone(), None, None);
                    let Some(placed) = placed else {
                        self.jobs.get_mut(&id).expect("known").told_ready = told;
                        let file = match edited.input_file() {
                            Some(f) => format!(" that its input file `{}` can reach", f.name),
                            None => String::new(),
                        };
                        return Err(Rejected::Invalid(format!(
                            "no usable site{file} has room for the component now"
                        )));
                    };
                    if i < n {
                        self.cancel_component(id, i);
                    }
                    let j = self.jobs.get_mut(&id).expect("known");
                    j.job = edited;
                    if i == n {
                        let mut comps = std::mem::take(&mut j.comps).into_vec();
                        comps.push(CompState::idle());
                        j.comps = comps.into_boxed_slice();
                    }
                    self.launch_with_file(id, i, placed);
                } else {
                    let j = self.jobs.get_mut(&id).expect("known");
                    j.job = edited;
                    j.comps = Box::default();
                    self.edited.push(id);
                    self.dirty = true;
                    self.sites.epoch += 1;
                }
            }
        }
        // A queued job's demand or a starting job's holdings changed.
        self.active_changed(id);
        Ok(())
    }
}
