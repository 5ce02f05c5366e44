//! Tests of the reservation parsers, on output captured from the rig's Slurm 22.05.8
//! (scripts/slurm/, run with `TZ=UTC0`).

use super::*;

/// `scontrol show reservation -o` with three reservations, one over two nodes.
const SHOW: &str = "ReservationName=coalloc-Jmulti StartTime=2026-11-28T09:35:07 EndTime=2026-11-28T09:36:07 Duration=00:01:00 Nodes=gamma-[1-2] NodeCnt=2 CoreCnt=20 Features=(null) PartitionName=main Flags=   NodeName=gamma-1 CoreIDs=0-15   NodeName=gamma-2 CoreIDs=0-3 TRES=cpu=20 Users=root Groups=(null) Accounts=(null) Licenses=(null) State=INACTIVE BurstBuffer=(null) Watts=n/a MaxStartDelay=(null)
ReservationName=coalloc-Jnow StartTime=2026-11-28T09:34:07 EndTime=2026-11-28T09:35:07 Duration=00:01:00 Nodes=gamma-1 NodeCnt=1 CoreCnt=2 Features=(null) PartitionName=main Flags= TRES=cpu=2 Users=root Groups=(null) Accounts=(null) Licenses=(null) State=ACTIVE BurstBuffer=(null) Watts=n/a MaxStartDelay=(null)
ReservationName=maint StartTime=2026-11-28T09:35:49 EndTime=2026-11-29T09:36:49 Duration=1-00:01:00 Nodes=gamma-2 NodeCnt=1 CoreCnt=2 Features=(null) PartitionName=main Flags= TRES=cpu=2 Users=root Groups=(null) Accounts=(null) Licenses=(null) State=INACTIVE BurstBuffer=(null) Watts=n/a MaxStartDelay=(null)
";

#[test]
fn reservations_are_read_with_their_times() {
    let r = show_reservations(SHOW).unwrap();
    let names: Vec<&str> = r.iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, ["coalloc-Jmulti", "coalloc-Jnow", "maint"]);
    assert_eq!(r[0].start, advance::parse_iso("2026-11-28T09:35:07"));
    assert_eq!(r[0].end, Some(r[0].start.unwrap() + 60));
    assert_eq!(r[2].end, Some(r[2].start.unwrap() + 86_460));
    assert_eq!(
        show_reservations("No reservations in the system\n").unwrap(),
        []
    );
    assert!(show_reservations("Nodes=gamma-1 NodeCnt=1\n").is_err());
}

#[test]
fn job_ends_skip_what_is_no_time() {
    // squeue -h -t R,S -o %e: a job with a limit, one without (the partition's INFINITE
    // shows a year ahead), and one whose end is not known.
    let ends = squeue_ends("2026-11-28T09:34:05\n2027-11-28T09:32:05\nUnknown\nN/A\n");
    assert_eq!(
        ends,
        [
            advance::parse_iso("2026-11-28T09:34:05").unwrap(),
            advance::parse_iso("2027-11-28T09:32:05").unwrap()
        ]
    );
}

#[test]
fn busy_cores_are_told_from_other_refusals() {
    // As scontrol printed them (the two "Note" lines follow a refusal).
    assert!(busy("Error creating the reservation: Requested nodes are busy\nNote, unless nodes are directly requested a reservation must exist in a single partition.\nIf no partition is requested the default partition is assumed."));
    assert!(!busy(
        "Error creating the reservation: Invalid time specified"
    ));
    assert!(!busy(
        "Error creating the reservation: Duplicate reservation name"
    ));
}
