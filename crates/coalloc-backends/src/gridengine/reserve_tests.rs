//! Tests of the reservation parsers, on output captured from the rig's Son of Grid Engine
//! 8.1.9 (scripts/gridengine/, run with `TZ=UTC0`).

use super::*;

const QRSTAT: &str = r#"<?xml version='1.0'?>
<qrstat xmlns:xsd="http://arc.liv.ac.uk/repos/darcs/sge/source/dist/util/resources/schemas/qrstat/qrstat.xsd">
   <ar_summary>
      <id>1</id>
      <name>coalloc-Jtest-c0-0</name>
      <owner>root</owner>
      <state>w</state>
      <start_time>2026-11-28T09:31:15</start_time>
      <end_time>2026-11-28T09:32:15</end_time>
      <duration>00:01:00</duration>
   </ar_summary>
   <ar_summary>
      <id>12</id>
      <name>maint</name>
      <owner>root</owner>
      <state>r</state>
      <start_time>2026-11-28T10:00:00</start_time>
      <end_time>2026-11-28T10:01:00</end_time>
      <duration>00:01:00</duration>
   </ar_summary>
</qrstat>
"#;

const EMPTY: &str = r#"<?xml version='1.0'?>
<qrstat xmlns:xsd="http://arc.liv.ac.uk/repos/darcs/sge/source/dist/util/resources/schemas/qrstat/qrstat.xsd">
</qrstat>
"#;

/// `qstat -r -s rs -u '*' -xml`: one job with `h_rt` (given as `0:2:30`), one without.
const QSTAT_R: &str = r#"<?xml version='1.0'?>
<job_info  xmlns:xsd="http://arc.liv.ac.uk/repos/darcs/sge/source/dist/util/resources/schemas/qstat/qstat.xsd">
  <queue_info>
    <job_list state="running">
      <JB_job_number>5</JB_job_number>
      <JAT_prio>0.50000</JAT_prio>
      <JB_name>STDIN</JB_name>
      <JB_owner>root</JB_owner>
      <state>r</state>
      <JAT_start_time>2026-11-28T09:36:31</JAT_start_time>
      <queue_name>main.q@vm</queue_name>
      <slots>2</slots>
      <full_job_name>STDIN</full_job_name>
      <requested_pe name="coalloc">2</requested_pe>
      <granted_pe name="coalloc">2</granted_pe>
      <hard_request name="h_rt" resource_contribution="0.000000">150</hard_request>
      <binding>NONE</binding>
    </job_list>
    <job_list state="running">
      <JB_job_number>4</JB_job_number>
      <JAT_prio>0.25000</JAT_prio>
      <JB_name>STDIN</JB_name>
      <JB_owner>root</JB_owner>
      <state>r</state>
      <JAT_start_time>2026-11-28T09:31:40</JAT_start_time>
      <queue_name>main.q@vm</queue_name>
      <slots>10</slots>
      <full_job_name>STDIN</full_job_name>
      <requested_pe name="coalloc">10</requested_pe>
      <granted_pe name="coalloc">10</granted_pe>
      <binding>NONE</binding>
    </job_list>
  </queue_info>
  <job_info>
  </job_info>
</job_info>
"#;

#[test]
fn reservations_are_read_with_ids_and_times() {
    let ars = qrstat(QRSTAT).unwrap();
    assert_eq!(ars.len(), 2);
    assert_eq!(
        ars[0],
        Ar {
            id: "1".into(),
            name: "coalloc-Jtest-c0-0".into(),
            state: "w".into(),
            start: advance::parse_iso("2026-11-28T09:31:15"),
            end: advance::parse_iso("2026-11-28T09:32:15"),
        }
    );
    assert_eq!((ars[1].id.as_str(), ars[1].name.as_str()), ("12", "maint"));
    assert_eq!(qrstat(EMPTY).unwrap(), []);
    assert!(qrstat("<qrstat><ar_summary><name>x</name></ar_summary></qrstat>").is_err());
    assert!(qrstat("error: commlib error").is_err());
}

#[test]
fn running_jobs_end_at_their_h_rt_and_the_offset() {
    let start = advance::parse_iso("2026-11-28T09:36:31").unwrap();
    assert_eq!(job_ends(QSTAT_R).unwrap(), [start + 150, start + 210]);
    assert_eq!(seconds("0:2:30"), Some(150));
    assert_eq!(seconds("150"), Some(150));
    assert_eq!(seconds("INFINITY"), None);
}

#[test]
fn qrsub_times_are_utc_wall_clock() {
    let t = advance::parse_iso("2026-11-28T09:05:07").unwrap();
    assert_eq!(qrsub_time(t), "202611280905.07");
    assert!(busy("advance_reservation: no suitable queues"));
    assert!(!busy("start time is in the past"));
    assert!(no_such_ar(
        r#"denied: advance_reservation "coalloc-Jnope" does not exist"#
    ));
}
