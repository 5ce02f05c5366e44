use super::*;

/// `qstat -f -u '*' -s prsz -xml` as the rig's cell printed it: one running job of another
/// user, one pending and one finished job; trimmed of nothing but other jobs.
const QSTAT_F: &str = r#"<?xml version='1.0'?>
<job_info  xmlns:xsd="http://arc.liv.ac.uk/repos/darcs/sge/source/dist/util/resources/schemas/qstat/qstat.xsd">
  <queue_info>
    <Queue-List>
      <name>main.q@vm</name>
      <qtype>BIP</qtype>
      <slots_used>3</slots_used>
      <slots_resv>0</slots_resv>
      <slots_total>32</slots_total>
      <load_avg>0.83154</load_avg>
      <arch>lx-amd64</arch>
      <job_list state="running">
        <JB_job_number>2</JB_job_number>
        <JAT_prio>0.25000</JAT_prio>
        <JB_name>other1</JB_name>
        <JB_owner>root</JB_owner>
        <state>r</state>
        <JAT_start_time>2026-11-25T13:42:41</JAT_start_time>
        <slots>3</slots>
      </job_list>
    </Queue-List>
  </queue_info>
  <job_info>
    <job_list state="pending">
      <JB_job_number>3</JB_job_number>
      <JAT_prio>0.75000</JAT_prio>
      <JB_name>big</JB_name>
      <JB_owner>root</JB_owner>
      <state>qw</state>
      <JB_submission_time>2026-11-25T13:42:42</JB_submission_time>
      <slots>40</slots>
    </job_list>
    <job_list state="zombie">
      <JB_job_number>1</JB_job_number>
      <JAT_prio>0.00000</JAT_prio>
      <JB_name>x</JB_name>
      <JB_owner>root</JB_owner>
      <state>z</state>
      <JB_submission_time>2026-11-25T13:42:11</JB_submission_time>
      <slots>4</slots>
    </job_list>
  </job_info>
</job_info>"#;

#[test]
fn qstat_f_gives_jobs_with_their_queue_instances() {
    let q = qstat(QSTAT_F).unwrap();
    assert_eq!(
        q.queues,
        vec![QueueInstance {
            name: "main.q@vm".into(),
            used: 3,
            reserved: 0,
            total: 32,
            state: String::new(),
        }]
    );
    let ids: Vec<(&str, &str, u32, Option<&str>)> = q
        .jobs
        .iter()
        .map(|j| (j.id.as_str(), j.state.as_str(), j.slots, j.queue.as_deref()))
        .collect();
    assert_eq!(
        ids,
        vec![
            ("2", "r", 3, Some("main.q@vm")),
            ("3", "qw", 40, None),
            ("1", "z", 4, None)
        ]
    );
    assert_eq!(q.jobs[0].name, "other1");
}

#[test]
fn an_unknown_queue_instance_marks_its_jobs() {
    let xml = QSTAT_F.replace(
        "<arch>lx-amd64</arch>",
        "<arch>lx-amd64</arch>\n      <state>u</state>",
    );
    let q = qstat(&xml).unwrap();
    assert_eq!(q.queues[0].state, "u");
    assert_eq!(q.jobs[0].queue_state, "u");
    assert_eq!(q.jobs[1].queue_state, "");
}

#[test]
fn qstat_without_f_and_empty_answers() {
    let plain = r#"<?xml version='1.0'?>
<job_info>
  <queue_info>
    <job_list state="running">
      <JB_job_number>1</JB_job_number>
      <JB_name>x</JB_name>
      <state>r</state>
      <queue_name>main.q@vm</queue_name>
      <slots>4</slots>
    </job_list>
  </queue_info>
  <job_info>
  </job_info>
</job_info>"#;
    let q = qstat(plain).unwrap();
    assert_eq!(q.jobs[0].queue.as_deref(), Some("main.q@vm"));
    assert!(q.queues.is_empty());
    assert_eq!(qstat("<job_info></job_info>").unwrap(), Qstat::default());
    assert!(qstat("not xml").is_err());
    assert!(qstat("<job_info><job_list><slots>x</slots></job_list></job_info>").is_err());
}

#[test]
fn qsub_terse_and_qacct() {
    assert_eq!(qsub_job_id("17\n").unwrap(), "17");
    assert_eq!(qsub_job_id("17.1-4:1\n").unwrap(), "17");
    assert!(qsub_job_id("Your job 17 (\"x\") has been submitted").is_err());
    assert!(!is_job_id("1;rm"));
    let record = "==============================================================\n\
qname        main.q              \nhostname     vm                  \njobname      coalloc-x-J1-c0-L1  \n\
jobnumber    1                   \nfailed       0    \nexit_status  3                   \n";
    assert_eq!(
        qacct(record).unwrap(),
        Accounting {
            failed: "0".into(),
            exit_status: 3
        }
    );
    let two = format!(
        "{record}{}",
        record
            .replace("exit_status  3", "exit_status  0")
            .replace("failed       0", "failed       100 : assumedly after job")
    );
    assert_eq!(
        qacct(&two).unwrap(),
        Accounting {
            failed: "100 : assumedly after job".into(),
            exit_status: 0
        }
    );
    assert!(qacct("nothing").is_err());
}
