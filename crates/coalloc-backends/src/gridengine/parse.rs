//! Reading Grid Engine's answers: `qsub -terse` (the job id), `qstat -f -u '*' -s prsz -xml`
//! (every job with its state and, for running ones, its queue instance and that instance's
//! state; the queue instances' slot counts), and `qacct -j ID` (a finished job's record).
//! Son of Grid Engine 8.1.9 formats, as seen on the rig (scripts/gridengine/README.md).

/// A job's id as Grid Engine prints it: decimal digits (array tasks are not used).
pub fn is_job_id(id: &str) -> bool {
    !id.is_empty() && id.len() <= 20 && id.bytes().all(|b| b.is_ascii_digit())
}

/// The job id `qsub -terse` printed (its only line).
pub fn qsub_job_id(stdout: &str) -> Result<String, String> {
    let id = stdout.trim();
    let id = id.split('.').next().unwrap_or(id); // `ID.1-4:1` for array jobs
    if is_job_id(id) {
        Ok(id.to_string())
    } else {
        Err(format!("no job id in qsub's answer {stdout:?}"))
    }
}

/// One job of `qstat -xml`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QstatJob {
    pub id: String,
    pub name: String,
    /// `qw`, `hqw`, `r`, `t`, `Rr`, `s`, `S`, `dr`, `Eqw`, `z`...
    pub state: String,
    pub slots: u32,
    /// The queue instance (`main.q@host`) of a running job.
    pub queue: Option<String>,
    /// That queue instance's state letters (`u` unknown, `a` alarm, `d` disabled, `E`
    /// error...); empty when it has none.
    pub queue_state: String,
}

/// One queue instance of `qstat -f -xml`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueInstance {
    pub name: String,
    pub used: u32,
    pub reserved: u32,
    pub total: u32,
    pub state: String,
}

/// What one `qstat -f -u '*' -s prsz -xml` says.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Qstat {
    pub jobs: Vec<QstatJob>,
    pub queues: Vec<QueueInstance>,
}

fn text<'a>(node: roxmltree::Node<'a, '_>, tag: &str) -> Option<&'a str> {
    node.children()
        .find(|c| c.has_tag_name(tag))
        .and_then(|c| c.text())
        .map(str::trim)
}

fn number(node: roxmltree::Node<'_, '_>, tag: &str) -> Result<u32, String> {
    let t = text(node, tag).unwrap_or("0");
    t.parse()
        .map_err(|_| format!("<{tag}> is not a number: {t:?}"))
}

fn job(node: roxmltree::Node<'_, '_>, queue: Option<&QueueInstance>) -> Result<QstatJob, String> {
    let id = text(node, "JB_job_number").ok_or("a job_list without JB_job_number")?;
    if !is_job_id(id) {
        return Err(format!("bad job number {id:?}"));
    }
    Ok(QstatJob {
        id: id.to_string(),
        name: text(node, "JB_name").unwrap_or("").to_string(),
        state: text(node, "state").unwrap_or("").to_string(),
        slots: number(node, "slots")?,
        queue: queue.map(|q| q.name.clone()).or_else(|| {
            text(node, "queue_name")
                .filter(|q| !q.is_empty())
                .map(String::from)
        }),
        queue_state: queue.map(|q| q.state.clone()).unwrap_or_default(),
    })
}

/// Parses `qstat [-f] -xml`: with `-f` running jobs sit inside their `Queue-List`, without it
/// they carry a `queue_name`; pending and finished (zombie) jobs are in `job_info`.
pub fn qstat(xml: &str) -> Result<Qstat, String> {
    let doc = roxmltree::Document::parse(xml).map_err(|e| format!("qstat -xml: {e}"))?;
    let mut out = Qstat::default();
    for node in doc.descendants() {
        if node.has_tag_name("Queue-List") {
            let q = QueueInstance {
                name: text(node, "name").unwrap_or("").to_string(),
                used: number(node, "slots_used")?,
                reserved: number(node, "slots_resv")?,
                total: number(node, "slots_total")?,
                state: text(node, "state").unwrap_or("").to_string(),
            };
            for j in node.children().filter(|c| c.has_tag_name("job_list")) {
                out.jobs.push(job(j, Some(&q))?);
            }
            out.queues.push(q);
        } else if node.has_tag_name("job_list")
            && !node.parent().is_some_and(|p| p.has_tag_name("Queue-List"))
        {
            out.jobs.push(job(node, None)?);
        }
    }
    Ok(out)
}

/// A finished job's accounting record (the last one for its id).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Accounting {
    /// `failed`: 0, or the code and reason of a job the execd could not run as asked
    /// (`100 : assumedly after job`, `37 : qmaster enforced h_rt...`).
    pub failed: String,
    pub exit_status: i32,
}

/// Parses `qacct -j ID`: records separated by `====` lines, `key value` lines in each.
pub fn qacct(stdout: &str) -> Result<Accounting, String> {
    let mut last = None;
    let (mut failed, mut exit) = (None, None);
    for line in stdout.lines() {
        if line.starts_with("====") {
            failed = None;
            exit = None;
            continue;
        }
        let (key, value) = match line.split_once(char::is_whitespace) {
            Some((k, v)) => (k, v.trim()),
            None => continue,
        };
        match key {
            "failed" => failed = Some(value.to_string()),
            "exit_status" => {
                let code = value.split_whitespace().next().unwrap_or("");
                exit = Some(
                    code.parse::<i32>()
                        .map_err(|_| format!("qacct: exit_status is not a number: {value:?}"))?,
                );
            }
            _ => {}
        }
        if let (Some(f), Some(e)) = (&failed, exit) {
            last = Some(Accounting {
                failed: f.clone(),
                exit_status: e,
            });
        }
    }
    last.ok_or_else(|| format!("qacct: no failed/exit_status in {stdout:?}"))
}

#[cfg(test)]
#[path = "parse_tests.rs"]
mod tests;
