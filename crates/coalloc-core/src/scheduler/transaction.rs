//! The co-allocation transaction (seed 002 §3.2) and fault handling (seed 000 §3.4,
//! seed 003 §4.3.4–4.3.5): starting a placed job's components, the barrier and the commit,
//! what each start type's failure does, edits before commit, and aborting or re-queueing a
//! job within its failure limits.

use super::api::*;
use super::config::{Claiming, InteractiveDefault};
use super::faults::Fault;
use super::jobs::{CompPhase, CompState, JobState, Phase};
use super::sites::ErrorOutcome;
use super::{Core, Timer};
use crate::model::{Component, Job, JobKind, Site, StartType};
use crate::placement::{self, FileTransfer, Fit, NoFit, PerSite, Placement, SiteView, SitesOf};
use crate::queue::StartOptions;

impl Core {
    /// Refuse a job that could not run even on empty sites: unknown sites, components larger
    /// than any site.
    /// `fit` is the queue policy's own fit, when it has one.
    pub(super) fn check_fits_when_empty(
        &self,
        job: &Job,
        fit: Option<Fit>,
    ) -> Result<(), Rejected> {
        for (i, c) in job.components.iter().enumerate() {
            if let Some(name) = &c.site {
                if !self.sites.sites.iter().any(|s| *s.name == **name) {
                    return Err(Rejected::Invalid(format!(
                        "component {i} names site `{name}`, which is not in the site list"
                    )));
                }
            }
        }
        self.fits_when_empty(job, fit, None)
            .map_err(|e| Rejected::Invalid(format!("the job can never run here: {e}")))
    }

    /// Refuse a job that could not run even on empty sites at one of the places the queue
    /// policy may put it first ([`QueuePolicy::entry_sites`](crate::queue::QueuePolicy::entry_sites):
    /// TAGS's chain heads or first set, seed 004 §IV-B, §IV-C), where it would wait for good
    /// and hold up every job behind it. An entry of every site was checked already
    /// ([`Core::check_fits_when_empty`]).
    pub(super) fn check_fits_entries(
        &self,
        job: &Job,
        fit: Option<Fit>,
        entries: &[&[SiteId]],
    ) -> Result<(), Rejected> {
        let all = self.sites.sites.len();
        for &sites in entries {
            if (0..all).all(|s| sites.contains(&s)) {
                continue;
            }
            if let Err(e) = self.fits_when_empty(job, fit, Some(sites)) {
                let names: Vec<&str> = sites
                    .iter()
                    .filter_map(|&s| self.sites.sites.get(s).map(|s| s.name.as_str()))
                    .collect();
                return Err(Rejected::Invalid(format!(
                    "the job can never start where the queue policy puts new jobs ({}): {e}",
                    names.join(", ")
                )));
            }
        }
        Ok(())
    }

    /// A dry run of `job`'s placement with every site's processors idle, on the sites
    /// `only` names (every site when `None`).
    pub(super) fn fits_when_empty(
        &self,
        job: &Job,
        fit: Option<Fit>,
        only: Option<&[SiteId]>,
    ) -> Result<(), NoFit> {
        // One component without a file, on any site: it fits if a site is large enough
        // (what `place_sites`' own short way finds). Every submission asks this; the dry run
        // below is left for the rest, and for the error that names why.
        if let (None, [c], true, None) = (
            only,
            job.components.as_slice(),
            matches!(job.kind, JobKind::Unordered | JobKind::Total),
            &job.extra().input_file,
        ) {
            if self.sites.sites.iter().any(|s| s.processors >= c.count) {
                return Ok(());
            }
        }
        let idle: PerSite<u32> = self.sites.sites.iter().map(|s| s.processors).collect();
        let usable: PerSite<bool> = (0..idle.len())
            .map(|s| only.is_none_or(|o| o.contains(&s)))
            .collect();
        self.place_sites(job, &idle, &usable, fit).map(|_| ())
    }

    /// Place a job against these idle processors and usable sites.
    pub(super) fn place_against(
        &self,
        job: &Job,
        idle: &[u32],
        usable: &[bool],
        fit: Option<Fit>,
    ) -> Result<Placement, NoFit> {
        let view = SiteView::borrowed(&self.sites.sites, idle, usable);
        placement::place(
            job,
            &view,
            fit.unwrap_or(self.config.fit),
            self.config.flexible_fit,
        )
    }

    /// [`Core::place_against`] as a dry run: `(site, processors)` per component.
    pub(super) fn place_sites(
        &self,
        job: &Job,
        idle: &[u32],
        usable: &[bool],
        fit: Option<Fit>,
    ) -> Result<SitesOf, NoFit> {
        let view = SiteView::borrowed(&self.sites.sites, idle, usable);
        placement::place_sites(
            job,
            &view,
            fit.unwrap_or(self.config.fit),
            self.config.flexible_fit,
        )
    }

    /// Place a job against the sites as they are now (with `kill_local`, as if local jobs
    /// were gone).
    ///
    /// A job with an input file whose every replica is on a site out of the placement
    /// (unusable, or not allowed) is not placed: it waits for one of them (seed 000 §2.5:
    /// the file is sent from a replica before the start; §3.2's claiming waits for it).
    /// The fits other than Close-to-Files, and an ordered job's named sites, would place
    /// it with no file site, and its barrier would be released before the file was there
    /// (the simulation harness, `--files` seeds 108, 110, 168 and 192: ordered and
    /// flexible jobs placed while the replicas' sites were out). With no replica anywhere,
    /// or none that can reach a site, those fits place the job without a file site, as
    /// the placement module documents.
    #[inline(never)]
    pub(super) fn place(
        &self,
        job: &Job,
        allowed: Option<&[bool]>,
        fit: Option<Fit>,
        kill_local: bool,
    ) -> Result<Placement, NoFit> {
        let (idle, usable) = self.view_now(allowed, kill_local);
        let p = self.place_against(job, &idle, &usable, fit)?;
        self.unless_replicas_out(job, p, &usable)
    }

    /// Placement `p` of `job`, against the `usable` sites, unless the job has an input file,
    /// a component without a file site, and every replica on an unusable site: that is
    /// [`NoFit::NoReplica`] (see [`Core::place`]; reserve claiming's placement checks the
    /// same, `--files` seed 3564).
    pub(super) fn unless_replicas_out(
        &self,
        job: &Job,
        p: Placement,
        usable: &[bool],
    ) -> Result<Placement, NoFit> {
        let (Some(file), Some(c)) = (
            job.input_file(),
            p.components.iter().find(|c| c.file.is_none()),
        ) else {
            return Ok(p);
        };
        let held = |s: &(&Site, &bool)| s.0.files.contains(&file.name);
        let replicas = || self.sites.sites.iter().zip(usable);
        if replicas().any(|s| held(&s) && *s.1) || !replicas().any(|s| held(&s)) {
            return Ok(p);
        }
        Err(NoFit::NoReplica {
            component: c.component,
            label: c.label.clone(),
            file: file.name.clone(),
        })
    }

    /// Place component `comp` of `job` alone now, among the `allowed` sites: on the site it
    /// names, else by `fit` (or the configured fit; Close-to-Files goes by the job's input
    /// file, seed 000 §2.6), where it gets the job's input file ([`Core::place`]). Its
    /// site, its processors and the transfer that brings the file there (`None` without a
    /// file or with a replica on the site).
    pub(super) fn place_alone(
        &self,
        job: &Job,
        comp: Component,
        allowed: Option<&[bool]>,
        fit: Option<Fit>,
    ) -> Option<(SiteId, u32, Option<FileTransfer>)> {
        let kind = if comp.site.is_some() {
            JobKind::Ordered
        } else {
            JobKind::Total
        };
        let mut single = Job::new(kind, vec![comp]);
        single.extra_mut().input_file = job.extra().input_file.clone();
        let p = self.place(&single, allowed, fit, false).ok()?;
        let pc = p.components.into_iter().next()?;
        let file = pc.file.filter(|f| f.site != pc.site);
        Some((pc.site, pc.count, file))
    }

    /// Start component `i` of job `id` on `site`, its input file sent there first when
    /// `file` says so (seed 000 §2.5); its barrier waits for the transfer.
    pub(super) fn launch_with_file(
        &mut self,
        id: JobId,
        i: usize,
        (site, count, file): (SiteId, u32, Option<FileTransfer>),
    ) {
        if let Some(f) = file {
            self.transfer(id, i, f.site, site, f.bytes);
        }
        self.launch(id, i, site, count);
    }

    /// [`Core::place`] as a dry run: `(site, processors)` per component.
    pub(super) fn place_sites_now(
        &self,
        job: &Job,
        allowed: Option<&[bool]>,
        fit: Option<Fit>,
        kill_local: bool,
    ) -> Result<SitesOf, NoFit> {
        let (idle, usable) = self.view_now(allowed, kill_local);
        self.place_sites(job, &idle, &usable, fit)
    }

    /// The idle processors and usable flags a placement now sees: only `allowed` sites, and
    /// with `kill_local` the processors of local jobs counted as idle.
    pub(super) fn view_now(
        &self,
        allowed: Option<&[bool]>,
        kill_local: bool,
    ) -> (PerSite<u32>, PerSite<bool>) {
        let mut usable: PerSite<bool> = self.sites.usable();
        if let Some(allowed) = allowed {
            for (u, a) in usable.iter_mut().zip(allowed) {
                *u &= *a;
            }
        }
        let mut idle: PerSite<u32> = self.sites.idle();
        if kill_local {
            for (i, s) in self.sites.state.iter().enumerate() {
                idle[i] = s.processors.saturating_sub(s.ours);
            }
        }
        (idle, usable)
    }

    /// Whether the idle processors of the usable (and `allowed`) sites may hold the job: the
    /// quick reject of [`Demand`](crate::queue::backfill::Demand), a necessary condition of
    /// every placement.
    fn may_fit_now(&self, job: &Job, allowed: Option<&[bool]>) -> bool {
        use crate::queue::backfill::{usable_stats_of, Demand};
        let sites = self.sites.state.iter().enumerate().map(|(i, s)| {
            // The allowed flag first: a TAGS level allows one site of many, and the others'
            // states need not be read.
            let allowed = allowed.is_none_or(|a| a.get(i).copied().unwrap_or(true));
            (s.idle, allowed && s.usable())
        });
        Demand::of(job).may_fit_stats(usable_stats_of(sites))
    }

    /// Place job `id` now and start it; with `known`, the dry-run placement the caller just
    /// made against the same idle processors and sites (see [`crate::queue::PassCtx::start_placed`]),
    /// which a dispatch then uses instead of placing again.
    pub(super) fn try_place_and_start(
        &mut self,
        id: JobId,
        options: &StartOptions,
        known: Option<&[(SiteId, u32)]>,
    ) -> bool {
        let Some(j) = self.jobs.get(&id) else {
            return false;
        };
        if j.phase != Phase::Queued {
            return false;
        }
        // Most tries of a busy queue fail; a job that needs more processors in all, or on one
        // site, than the usable sites have idle fails without a dry run.
        let allowed = options.allowed.as_deref();
        // Claiming (ICP) needs the file transfers of a whole placement; a dispatch only needs
        // the processors per site.
        let reserving = self.reserves(id);
        let claims = (matches!(self.config.claiming, Claiming::Icp(_)) || reserving)
            && options.hold_until.is_none();
        let result = if let (Some(sites), false, false) = (known, claims, options.kill_local) {
            Ok(Placed::Sites(SitesOf::from_slice(sites)))
        } else if !options.kill_local && !reserving && !self.may_fit_now(&j.job, allowed) {
            Err(())
        } else if reserving {
            // Reserve claiming (issue 31): only on sites that may reserve.
            self.place_reserving(&j.job, allowed, options.fit)
                .map(Placed::Whole)
                .map_err(drop)
        } else if claims {
            self.place(&j.job, allowed, options.fit, options.kill_local)
                .map(Placed::Whole)
                .map_err(drop)
        } else {
            self.place_sites_now(&j.job, allowed, options.fit, options.kill_local)
                .map(Placed::Sites)
                .map_err(drop)
        };
        let now = self.now;
        let j = self.jobs.get_mut(&id).expect("checked above");
        j.record.placement_tries += 1;
        if j.record.try_times.len() < self.config.record_try_times {
            j.record.try_times.push(now);
        }
        match result {
            Ok(p) => {
                j.set_hold_until(options.hold_until);
                match p {
                    Placed::Whole(p) => {
                        if options.kill_local {
                            self.kill_local_for(&sites_of(&p));
                        }
                        if reserving {
                            self.begin_reserving(id, p);
                        } else {
                            self.begin_claiming(id, p);
                        }
                    }
                    Placed::Sites(sites) => {
                        if options.kill_local {
                            self.kill_local_for(&sites);
                        }
                        self.dispatch(id, &sites);
                    }
                }
                true
            }
            Err(_) => {
                j.record.placement_failures += 1;
                false
            }
        }
    }

    /// Free, by killing local jobs, what a placement needs beyond the idle processors
    /// (seed 001 §2.2, GP).
    #[cold]
    #[inline(never)]
    fn kill_local_for(&mut self, placed: &[(SiteId, u32)]) {
        let mut need = vec![0u32; self.sites.len()];
        for &(site, count) in placed {
            need[site] += count;
        }
        for (site, n) in need.into_iter().enumerate() {
            let idle = self.sites.state[site].idle;
            if n > idle {
                let processors = n - idle;
                self.commands
                    .push_back(Command::KillLocal { site, processors });
                self.sites.state[site].idle += processors;
            }
        }
    }

    /// Start every component of a placed job, `(site, processors)` per component (the first
    /// phase of the two-phase commit).
    fn dispatch(&mut self, id: JobId, placed: &[(SiteId, u32)]) {
        let now = self.now;
        self.apply_pieces(id, placed);
        let j = self.jobs.get_mut(&id).expect("dispatch of a known job");
        j.phase = Phase::Starting;
        j.record.run_mut().placed = Some(now);
        j.record.run_mut().first_jst.get_or_insert(now);
        j.record.run_mut().last_jst = Some(now);
        self.active_changed(id);
        for (i, &(site, count)) in placed.iter().enumerate() {
            self.launch(id, i, site, count);
        }
        if self.config.notices {
            let sites = placed.iter().map(|&(site, _)| site).collect();
            self.notify(Notice::Placed { job: id, sites });
        }
        self.arm_hold(id);
        self.check_commit(id);
    }

    /// For a flexible job, the pieces of the split become the components of this run (the
    /// template comes back on re-queue); every job starts the run with idle components.
    pub(super) fn apply_pieces(&mut self, id: JobId, placed: &[(SiteId, u32)]) {
        let j = self.jobs.get_mut(&id).expect("a known job");
        if j.job.kind == JobKind::Flexible {
            let template = j.job.components[0].clone();
            j.job.components = placed
                .iter()
                .map(|&(_, count)| Component {
                    count,
                    ..template.clone()
                })
                .collect();
        }
        j.comps = j.job.components.iter().map(|_| CompState::idle()).collect();
    }

    /// The start command of component `i` of job `id` as launch `launch` of `count`
    /// processors at `site` (no reservation: [`Self::launch`]'s caller adds one).
    fn start_of(&self, id: JobId, i: usize, site: SiteId, count: u32, launch: LaunchId) -> Start {
        let j = &self.jobs[&id];
        let sizes: smallvec::SmallVec<[u32; 4]> =
            j.job.components.iter().map(|c| c.count).collect();
        let rank_offset = sizes[..i].iter().map(|&s| u64::from(s)).sum();
        let total = sizes.iter().map(|&s| u64::from(s)).sum();
        Start {
            launch,
            job: id,
            component: i,
            site,
            count,
            wall_time: j.job.wall_time_of(i),
            barrier_timeout: j.job.barrier_timeout_or(self.config.barrier_timeout),
            config: ComponentConfig {
                job: id,
                index: i,
                count: sizes.len(),
                sizes,
                rank_offset,
                total,
            },
            spec: j.job.components[i].clone(),
            reservation: None,
        }
    }

    /// The start command of a launch still waiting for its submission's answer, made again
    /// from the job as it is now, for a driver that must send it again and no longer holds
    /// it (a snapshot covered it, or a replay of the journal met it). The same as the first
    /// unless the job was edited since (seed 002 §3.2): a component added counts in its
    /// sizes, as in the added one's start. A launch started into its reservation (issue 31)
    /// names it again, from the reservation table and the run's common start
    /// ([`Core::reservation_of`]). `None` for a launch that is not current or no longer
    /// `Submitted`.
    pub(super) fn pending_start(&self, launch: LaunchId) -> Option<Start> {
        let (id, i) = self.current(launch)?;
        let c = &self.jobs[&id].comps[i];
        if c.phase != CompPhase::Submitted {
            return None;
        }
        let mut start = self.start_of(id, i, c.site?, c.count, launch);
        start.reservation = self.reservation_of(id, i);
        Some(start)
    }

    /// Submit one component to one site.
    pub(super) fn launch(&mut self, id: JobId, i: usize, site: SiteId, count: u32) {
        let launch = LaunchId(self.next_launch);
        self.next_launch += 1;
        let now = self.now;
        let j = self.jobs.get_mut(&id).expect("launch of a known job");
        j.comps[i] = CompState {
            phase: CompPhase::Submitted,
            launch: Some(launch),
            site: Some(site),
            count,
            launched_at: Some(now),
            transfer: j.comps[i].transfer,
        };
        let start = self.start_of(id, i, site, count, launch);
        self.relaunched(id, i);
        self.sites.claim(site, count);
        if let Some(Some(c)) = self.clouds.get_mut(site) {
            c.allocate(launch, count);
        }
        self.launches.insert(launch, id, i);
        self.commands
            .push_back(Command::StartComponent(Box::new(start)));
        if let Some(t) = self.config.pending_timeout {
            self.timers.insert((
                now + t,
                Timer::Pending {
                    job: id,
                    component: i,
                    launch,
                },
            ));
        }
    }

    pub(super) fn arm_hold(&mut self, id: JobId) {
        let j = &self.jobs[&id];
        if let Some(t) = j.hold_until().filter(|&t| t > self.now) {
            self.timers.insert((
                t,
                Timer::Hold {
                    job: id,
                    generation: j.generation(),
                },
            ));
        }
    }

    /// Commit when every required component is at the barrier (seed 002 §3.2) and no
    /// launch of the job's stopped committed run still drains (`draining.rs`).
    pub(super) fn check_commit(&mut self, id: JobId) {
        let now = self.now;
        let Some(j) = self.jobs.get_mut(&id) else {
            return;
        };
        if j.phase != Phase::Starting
            || !j.required_ready()
            || j.hold_until().is_some_and(|t| t > now)
        {
            return;
        }
        // A job commits with at least one component at the barrier (a job of optional
        // components waits for the first of them).
        let passed = |c: &CompState| matches!(c.phase, CompPhase::Ready | CompPhase::Finished);
        if !j.comps.iter().any(passed) {
            if !j.comps.iter().any(CompState::live) {
                // Nothing is running: every component failed or was deleted.
                return self.abort(id, "no component of the job is left".to_owned(), false);
            }
            return;
        }
        if self.drains(id) {
            // A launch of its stopped committed run may still run past that run's barrier
            // (`draining.rs`): this one's waits until it is gone.
            return;
        }
        let j = self.jobs.get_mut(&id).expect("checked above");
        if j.job.extra().hold_at_barrier && !j.owner_committed {
            // An interactive transaction: the owner commits (seed 002 §3.2).
            if !j.told_ready {
                j.told_ready = true;
                self.notify(Notice::AwaitingCommit { job: id });
            }
            return;
        }
        j.phase = Phase::Running;
        self.committed.push(id);
        j.record.run_mut().barrier_release = Some(now);
        j.record.run_mut().start = Some(now);
        // A component deleted before it had a site is left out (it was `usize::MAX`,
        // which the result log indexed the site list with: the harness, `--files` seed 774).
        j.record.run_mut().sites = j.comps.iter().filter_map(|c| c.site).collect();
        j.record.run_mut().wasted += j
            .comps
            .iter()
            .filter_map(|c| Some(u64::try_from(now - c.launched_at?).ok()? * u64::from(c.count)))
            .sum::<u64>();
        self.active_changed(id);
        self.commands.push_back(Command::ReleaseBarrier { job: id });
        self.notify(Notice::Committed { job: id });
        self.check_done(id);
    }

    /// The owner commits a job held at the barrier (seed 002 §3.2): released now if every
    /// required component is there, else as soon as they are.
    pub(super) fn owner_commit(&mut self, id: JobId) -> Result<(), Rejected> {
        let j = self.jobs.get_mut(&id).ok_or(Rejected::UnknownJob(id))?;
        match j.phase {
            Phase::Ended => return Err(Rejected::Ended(id)),
            Phase::Running => return Err(Rejected::Committed(id)),
            _ if !j.job.extra().hold_at_barrier => {
                return Err(Rejected::Invalid(format!(
                    "job {id} is not held at the barrier (`hold_at_barrier`): it commits by itself"
                )))
            }
            Phase::Queued => {
                return Err(Rejected::Invalid(format!(
                    "job {id} has not started yet: commit it once its components are at the barrier"
                )))
            }
            _ => {}
        }
        j.owner_committed = true;
        self.check_commit(id);
        Ok(())
    }

    /// The current launch a report names, if it is current.
    fn current(&self, launch: LaunchId) -> Option<(JobId, usize)> {
        let (id, i) = self.launches.get(launch)?;
        let j = self.jobs.get(&id)?;
        (j.comps.get(i)?.launch == Some(launch) && !j.ended()).then_some((id, i))
    }

    pub(super) fn started(&mut self, launch: LaunchId) {
        let Some((id, i)) = self.current(launch) else {
            return;
        };
        let j = self.jobs.get_mut(&id).expect("current");
        let timeout = j.job.barrier_timeout_or(self.config.barrier_timeout);
        let c = &mut j.comps[i];
        if c.phase == CompPhase::Submitted {
            c.phase = CompPhase::Started;
            let (site, count) = (c.site.unwrap_or(0), c.count);
            self.sites.started(site, count);
            if let Some(t) = timeout {
                let timer = Timer::Barrier {
                    job: id,
                    component: i,
                    launch,
                };
                self.timers.insert((self.now + t, timer));
            }
        }
    }

    /// A launch's timer fired: if component `i` of job `id` is still on `launch` and in
    /// `phase`, cancel it and fail it with `reason` (the pending timeout of seed 003 §4.3.5,
    /// the barrier timeout of seed 002 §3.2).
    pub(super) fn time_out(
        &mut self,
        (id, i, launch): (JobId, usize, LaunchId),
        phase: CompPhase,
        fault: Fault,
        reason: impl FnOnce(&JobState) -> String,
    ) {
        let Some(j) = self.jobs.get(&id) else {
            return;
        };
        let Some(c) = j
            .comps
            .get(i)
            .filter(|c| c.launch == Some(launch) && c.phase == phase)
        else {
            return;
        };
        let site = c.site.unwrap_or(0);
        let reason = reason(j);
        self.commands.push_back(Command::CancelComponent {
            launch,
            job: id,
            component: i,
            site,
        });
        self.failed(launch, reason, fault);
    }

    pub(super) fn ready(&mut self, launch: LaunchId) {
        let Some((id, i)) = self.current(launch) else {
            return;
        };
        self.started(launch);
        let c = &mut self.jobs.get_mut(&id).expect("current").comps[i];
        if c.phase == CompPhase::Started {
            c.phase = CompPhase::Ready;
        }
        self.check_commit(id);
    }

    pub(super) fn finished(&mut self, launch: LaunchId) {
        let Some((id, i)) = self.current(launch) else {
            return;
        };
        let c = self.jobs[&id].comps[i].clone();
        let site = c.site.unwrap_or(0);
        self.release_launch(site, launch, c.count, c.phase == CompPhase::Submitted);
        self.sites.success(site);
        self.launches.remove(launch);
        let j = self.jobs.get_mut(&id).expect("current");
        j.comps[i].phase = CompPhase::Finished;
        self.dirty = true;
        // A component that ends before commit passed its start: it counts as ready.
        self.check_commit(id);
        self.check_done(id);
    }

    /// End a running job whose components have all ended.
    fn check_done(&mut self, id: JobId) {
        let Some(j) = self.jobs.get(&id) else {
            return;
        };
        if j.phase != Phase::Running || !j.all_done() {
            return;
        }
        if j.comps.iter().any(|c| c.phase == CompPhase::Finished) {
            let runtime = self.now - j.record.run().start.unwrap_or(self.now);
            self.finished.push((id, runtime));
            self.end_job(id, Ok(()));
        } else {
            self.abort(id, "every component failed".to_owned(), true);
        }
    }

    /// A launch failed; it counts against its site only when `fault` says so
    /// ([`super::faults`]), against the job's limits always.
    pub(super) fn failed(&mut self, launch: LaunchId, reason: String, fault: Fault) {
        self.failed_charging(launch, reason, fault, None);
    }

    /// [`Self::failed`], with a site fault counted against `charged` instead of the launch's
    /// site when given (a transfer's file site, seed 000 §2.5).
    pub(super) fn failed_charging(
        &mut self,
        launch: LaunchId,
        reason: String,
        fault: Fault,
        charged: Option<SiteId>,
    ) {
        let Some((id, i)) = self.current(launch) else {
            return;
        };
        let c = self.jobs[&id].comps[i].clone();
        let site = c.site.unwrap_or(0);
        // A component that dies before it reports at the barrier failed to *start* (seed 000
        // §3.4's submission error), even if its processes were already running.
        let was_pending = c.phase == CompPhase::Submitted;
        let start_error = matches!(c.phase, CompPhase::Submitted | CompPhase::Started);
        self.release_launch(site, launch, c.count, was_pending);
        self.launches.remove(launch);
        if fault.counts_against_site() {
            self.site_error(charged.unwrap_or(site), start_error);
        }
        let j = self.jobs.get_mut(&id).expect("current");
        j.comps[i].phase = CompPhase::Failed;
        j.comps[i].launch = None;
        j.comps[i].transfer = None;
        self.dirty = true;
        let start_type = j.job.components[i].start_type;
        let phase = j.phase;
        let name = self.sites.sites[site].name.clone();
        let reason = format!("component {i} on site `{name}`: {reason}");
        match (phase, start_type) {
            (_, StartType::Optional) => {
                self.notify(Notice::OptionalFailed {
                    job: id,
                    component: i,
                    reason,
                });
                self.check_commit(id);
                self.check_done(id);
            }
            (Phase::Starting | Phase::Claiming, StartType::Interactive) => {
                self.notify(Notice::InteractiveFailed {
                    job: id,
                    component: i,
                    reason: reason.clone(),
                });
                let held = self.jobs[&id].job.extra().hold_at_barrier;
                match self.config.interactive_default {
                    // Left out, for its owner to delete, substitute or commit without.
                    _ if held => {
                        self.jobs.get_mut(&id).expect("current").told_ready = false;
                        self.check_commit(id);
                    }
                    InteractiveDefault::Delete => {
                        self.jobs.get_mut(&id).expect("current").comps[i].phase =
                            CompPhase::Deleted;
                        self.check_commit(id);
                    }
                    InteractiveDefault::Substitute => {
                        if !self.replace_component(id, i, Some(site)) {
                            self.abort(
                                id,
                                format!("{reason}; no other site has room for it"),
                                false,
                            );
                        }
                    }
                }
            }
            (Phase::Starting | Phase::Claiming, StartType::Required) => {
                self.abort(id, reason, false)
            }
            (_, _) => self.abort(id, reason, true),
        }
    }

    pub(super) fn site_error(&mut self, site: SiteId, before_start: bool) {
        if matches!(
            self.sites.state[site].link,
            super::link::LinkState::Lost { .. }
        ) {
            // A lost link's failures are its one error, counted once (`link.rs`).
            return;
        }
        let was = self.sites.state[site].usable();
        if let ErrorOutcome::MadeUnusable(why) = self.sites.error(site, before_start) {
            self.usable_changed(site, was, &why);
            self.schedule_probe(site);
        }
    }

    /// Place component `i` alone on some site (never `avoid`) and start it there, sending
    /// its input file there first if the job has one.
    fn replace_component(&mut self, id: JobId, i: usize, avoid: Option<SiteId>) -> bool {
        let j = &self.jobs[&id];
        let comp = j.job.components[i].clone();
        if comp.site.is_some() {
            // An ordered component may only run on its own site, which just failed.
            return false;
        }
        let allowed: Vec<bool> = (0..self.sites.len()).map(|s| Some(s) != avoid).collect();
        let Some(placed) = self.place_alone(&j.job, comp, Some(&allowed), None) else {
            return false;
        };
        self.launch_with_file(id, i, placed);
        true
    }

    /// Cancel every live launch of a job and give its processors back.
    pub(super) fn cancel_launches(&mut self, id: JobId) {
        for i in 0..self.jobs[&id].comps.len() {
            self.cancel_component(id, i);
        }
    }

    /// Stop the current run: before commit an abort, after it a completion failure. The job
    /// goes back to its queue, or fails when past its limit.
    pub(super) fn abort(&mut self, id: JobId, reason: String, after_commit: bool) {
        self.cancel_launches(id);
        if self.jobs[&id]
            .comps
            .iter()
            .all(|c| c.phase == CompPhase::Deleted)
        {
            return self.end_job(id, Err(format!("{reason}; every component was deleted")));
        }
        let limits = (
            self.config.max_submit_failures,
            self.config.max_completion_failures,
        );
        let j = self.jobs.get_mut(&id).expect("abort of a known job");
        let (count, limit, what) = if after_commit {
            j.record.run_mut().completion_failures += 1;
            (
                j.record.completion_failures(),
                limits.1,
                "failures after start",
            )
        } else {
            j.record.run_mut().submit_failures += 1;
            (j.record.submit_failures(), limits.0, "aborted starts")
        };
        if limit.is_some_and(|l| count > l) {
            let why = format!("{reason} (limit of {} {what} reached)", limit.unwrap_or(0));
            return self.end_job(id, Err(why));
        }
        let failures = j.record.submit_failures() + j.record.completion_failures();
        let wait = self.config.backoff_after(failures);
        self.reset_to_queue(id);
        let reason = if wait > 0 {
            self.delay_retry(id, wait);
            format!(
                "{reason}; tried again in {}",
                crate::spec::units::format_duration(wait)
            )
        } else {
            reason
        };
        self.notify(Notice::Requeued { job: id, reason });
    }

    /// Keep a job just sent back to the queue out of it for `wait` (the retry back-off).
    fn delay_retry(&mut self, id: JobId, wait: crate::model::Millis) {
        self.requeued.retain(|&r| r != id);
        let j = self.jobs.get_mut(&id).expect("known job");
        let at = self.now + wait;
        j.set_retry_at(Some(at));
        let generation = j.generation();
        self.timers.insert((
            at,
            Timer::Retry {
                job: id,
                generation,
            },
        ));
    }

    /// The retry back-off of a job is over: into the queue.
    pub(super) fn retry_now(&mut self, id: JobId, generation: u64) {
        let Some(j) = self.jobs.get_mut(&id) else {
            return;
        };
        if j.generation() == generation && j.phase == Phase::Queued && j.retry_at().is_some() {
            j.set_retry_at(None);
            self.requeued.push(id);
            self.dirty = true;
        }
    }

    /// Back to the queue with nothing started; the components as the user wrote them.
    pub(super) fn reset_to_queue(&mut self, id: JobId) {
        self.drop_reservations(id);
        let j = self.jobs.get_mut(&id).expect("known job");
        if let Some(flex) = j.job.flexible() {
            j.job.components.truncate(1);
            j.job.components[0].count = flex.total;
        }
        let keep: Vec<bool> = j
            .comps
            .iter()
            .map(|c| c.phase != CompPhase::Deleted)
            .collect();
        let mut keep = keep.into_iter();
        j.job.components.retain(|_| keep.next().unwrap_or(true));
        j.comps = Box::default();
        j.owner_committed = false;
        j.told_ready = false;
        j.phase = Phase::Queued;
        j.bump_generation();
        j.record.run_mut().start = None;
        j.record.run_mut().barrier_release = None;
        self.active_changed(id);
        self.requeued.push(id);
        self.dirty = true;
    }

    /// The job is over.
    pub(super) fn end_job(&mut self, id: JobId, outcome: Result<(), String>) {
        self.end_reservations(id);
        let now = self.now;
        if outcome.is_err() {
            self.unfinished_ends += 1;
        }
        self.forget_draining(id);
        let j = self.jobs.get_mut(&id).expect("known job");
        j.phase = Phase::Ended;
        j.bump_generation();
        j.record.run_mut().end = Some(now);
        // A job about to be forgotten gives its record away instead of copying it.
        let record = Box::new(if self.config.forget_ended {
            std::mem::take(&mut j.record)
        } else {
            j.record.clone()
        });
        self.active_changed(id);
        if self.config.forget_ended {
            self.ended.push(id);
        }
        self.dirty = true;
        self.commands.push_back(match outcome {
            Ok(()) => Command::JobFinished { job: id, record },
            Err(reason) => Command::JobFailed {
                job: id,
                reason,
                record,
            },
        });
    }

    /// Cancel component `i`'s live launch, if any, and give its processors back; one of a
    /// committed run is kept draining until it is gone from its site (`draining.rs`).
    pub(super) fn cancel_component(&mut self, id: JobId, i: usize) {
        let c = self.jobs[&id].comps[i].clone();
        if let (true, Some(launch), Some(site)) = (c.live(), c.launch, c.site) {
            self.commands.push_back(Command::CancelComponent {
                launch,
                job: id,
                component: i,
                site,
            });
            self.drain_if_committed(id, i, launch, site);
            self.release_launch(site, launch, c.count, c.phase == CompPhase::Submitted);
            self.launches.remove(launch);
            self.dirty = true;
        }
        let c = &mut self.jobs.get_mut(&id).expect("known").comps[i];
        c.launch = None;
        c.transfer = None;
        if c.live() {
            c.phase = CompPhase::Idle;
        }
    }
}

impl JobState {
    /// Components of the current run and where they are.
    pub fn sites(&self) -> Vec<Option<SiteId>> {
        self.comps.iter().map(|c| c.site).collect()
    }
}

/// A placement as a start needs it: whole (claiming routes files) or processors per site.
enum Placed {
    Whole(Placement),
    Sites(SitesOf),
}

/// `(site, processors)` per component of a placement.
pub(super) fn sites_of(p: &Placement) -> Vec<(SiteId, u32)> {
    p.components.iter().map(|c| (c.site, c.count)).collect()
}
