//! Table-driven test of bad input: each case is a file `coalloc job check` must reject with
//! exit code 2 and exactly the message given (file, line and column, field and rule).

use std::path::PathBuf;
use std::process::Command;

/// (file name, content, expected standard error without the `error: ` prefix).
/// Files are written into one folder (`{dir}` in a message); a case may refer to files of
/// other cases.
const CASES: &[(&str, &str, &str)] = &[
    // --- native TOML: syntax and shape ---
    ("syntax.toml", "[[component]]\ncount = \n", "syntax.toml:2:9: string values must be quoted, expected literal string"),
    ("typo.toml", "[[component]]\ncont = 4\n", "typo.toml:2:1: unknown field `cont`, expected one of `count`, `site`, `start_type`, `executable`, `arguments`, `environment`, `directory`, `label`, `job_type`, `max_wall_time`, `attribute`"),
    ("count-type.toml", "[[component]]\ncount = \"eight\"\n", "count-type.toml:2:9: invalid type: string \"eight\", expected i64"),
    ("top-typo.toml", "prio = \"high\"\n[[component]]\ncount = 1\n", "top-typo.toml:1:1: unknown field `prio`, expected one of `id`, `name`, `user`, `priority`, `kind`, `total`, `min_component`, `submit`, `deadline`, `runtime_estimate`, `max_wall_time`, `barrier_timeout`, `hold_at_barrier`, `reserve`, `start`, `input_file`, `component`"),
    // --- native TOML: values and rules ---
    ("count-zero.toml", "[[component]]\ncount = 0\n", "count-zero.toml: component[0].count: must be at least 1 (got 0)"),
    ("count-negative.toml", "[[component]]\ncount = -3\n", "count-negative.toml: component[0].count: must be at least 1 (got -3)"),
    ("count-missing.toml", "[[component]]\nexecutable = \"x\"\n", "count-missing.toml: component[0].count: is required: the number of processors of this component"),
    ("no-components.toml", "name = \"empty\"\n", "no-components.toml: component: a job needs at least one component"),
    ("ordered-no-site.toml", "kind = \"ordered\"\n[[component]]\ncount = 1\nsite = \"a\"\n[[component]]\ncount = 2\n", "ordered-no-site.toml: component[1].site: an ordered job needs a site for every component"),
    ("mixed-sites.toml", "[[component]]\ncount = 1\nsite = \"a\"\n[[component]]\ncount = 2\n", "mixed-sites.toml: component[1].site: component 1 names no site while others do: name a site for every component (ordered) or for none (unordered)"),
    ("unordered-site.toml", "kind = \"unordered\"\n[[component]]\ncount = 1\nsite = \"a\"\n", "unordered-site.toml: component[0].site: an unordered job leaves the site to the scheduler: remove `site` or make the job ordered"),
    ("start-type.toml", "[[component]]\ncount = 1\nstart_type = \"strict\"\n", "start-type.toml: component[0].start_type: unknown start type `strict` (expected one of: required, interactive, optional, strict-barrier, loose-barrier, no-barrier)"),
    ("job-type.toml", "[[component]]\ncount = 1\njob_type = \"condor\"\n", "job-type.toml: component[0].job_type: unknown job type `condor` (expected one of: single, multiple, mpi)"),
    ("kind.toml", "kind = \"gang\"\n[[component]]\ncount = 1\n", "kind.toml: kind: unknown job kind `gang` (expected one of: ordered, unordered, flexible, total)"),
    ("priority.toml", "priority = \"urgent\"\n[[component]]\ncount = 1\n", "priority.toml: priority: unknown priority `urgent` (expected one of: high, low)"),
    ("flexible-no-total.toml", "kind = \"flexible\"\n[[component]]\nexecutable = \"x\"\n", "flexible-no-total.toml: total: a flexible job needs `total`, the number of processors to split over sites"),
    ("flexible-count.toml", "total = 64\n[[component]]\ncount = 8\n", "flexible-count.toml: component[0].count: a flexible job's pieces get their sizes from the split: leave `count` out"),
    ("flexible-two.toml", "total = 64\n[[component]]\n[[component]]\n", "flexible-two.toml: component: a flexible job has exactly one component, the template of every piece (got 2)"),
    ("flexible-min.toml", "total = 64\nmin_component = 65\n[[component]]\n", "flexible-min.toml: min_component: is larger than the total (65 > 64)"),
    ("min-without-total.toml", "min_component = 4\n[[component]]\ncount = 8\n", "min-without-total.toml: min_component: only flexible jobs (with `total`) have a minimum component size"),
    ("total-on-unordered.toml", "kind = \"unordered\"\ntotal = 8\n[[component]]\ncount = 8\n", "total-on-unordered.toml: total: only flexible jobs have a total; this job is unordered"),
    ("total-two.toml", "kind = \"total\"\n[[component]]\ncount = 1\n[[component]]\ncount = 1\n", "total-two.toml: component: a total job has exactly one component (got 2)"),
    ("deadline.toml", "submit = 100\ndeadline = 50\n[[component]]\ncount = 1\n", "deadline.toml: deadline: the deadline (50) is before the submit time (100)"),
    ("size-negative.toml", "[input_file]\nname = \"f\"\nsize = -5\n[[component]]\ncount = 1\n", "size-negative.toml: input_file.size: must not be negative (got -5)"),
    ("size-unit.toml", "[input_file]\nname = \"f\"\nsize = \"4 furlongs\"\n[[component]]\ncount = 1\n", "size-unit.toml: input_file.size: `4 furlongs` is not a size (expected bytes or a size such as \"4GB\" or \"512MiB\")"),
    ("distribution.toml", "[input_file]\nname = \"f\"\nsize = 1\ndistribution = \"striped\"\n[[component]]\ncount = 1\n", "distribution.toml: input_file.distribution: unknown file distribution `striped` (expected one of: whole, chunks)"),
    ("duration.toml", "max_wall_time = \"10 minutes\"\n[[component]]\ncount = 1\n", "duration.toml: max_wall_time: `10 minutes` is not a duration (expected seconds or a duration such as \"90s\", \"10m\", \"1h30m\")"),
    ("wall-zero.toml", "[[component]]\ncount = 1\nmax_wall_time = 0\n", "wall-zero.toml: component[0].max_wall_time: must be longer than zero"),
    ("labels.toml", "[[component]]\ncount = 1\nlabel = \"a\"\n[[component]]\ncount = 1\nlabel = \"a\"\n", "labels.toml: component[1].label: duplicate label `a` (component 0 has it too)"),
    ("executable.toml", "[[component]]\ncount = 1\nexecutable = \" \"\n", "executable.toml: component[0].executable: must not be empty"),
    ("attr-interpreted.toml", "[[component]]\ncount = 1\n[[component.attribute]]\nname = \"Count\"\nvalue = \"4\"\n", "attr-interpreted.toml: component[0].attribute[0]: `Count` is not a pass-through attribute: coalloc interprets it, so set the component's own field"),
    ("attr-op.toml", "[[component]]\ncount = 1\n[[component.attribute]]\nname = \"memory\"\nop = \"=~\"\nvalue = \"4\"\n", "attr-op.toml: component[0].attribute[0]: unknown operator `=~` (expected one of: =, !=, <, <=, >, >=)"),
    // --- native JSON ---
    ("comma.json", "{\"component\": [{\"count\": 1},]}", "comma.json:1:29: trailing comma"),
    ("shape.json", "{\"component\": {\"count\": 1}}", "shape.json:1:14: invalid type: map, expected a sequence"),
    ("env-twice.json", "{\"component\": [{\"count\": 1, \"environment\": {\"A\": \"1\", \"A\": \"2\"}}]}", "env-twice.json: component[0].environment: variable `A` is set twice"),
    // --- RSL ---
    ("rsl-count0.uno", "+(&(count=0))\n", "rsl-count0.uno:1:5: component[0].count: must be at least 1 (got 0)"),
    ("rsl-countop.uno", "+(&(count>=4))\n", "rsl-countop.uno:1:5: component[0].count: takes `=` (found `>=`): coalloc needs the exact number of processors"),
    ("rsl-emptymulti.uno", "+\n", "rsl-emptymulti.uno:2:1: expected `(` to start the first request after `+` (found end of input)"),
    ("rsl-jobtype.uno", "+(&(count=1)(jobtype=condor))\n", "rsl-jobtype.uno:1:14: component[0].jobtype: unknown job type `condor` (expected one of: single, multiple, mpi)"),
    ("rsl-labels.uno", "+(&(count=1)(label=a))(&(count=1)(label=a))\n", "rsl-labels.uno:1:26: component[1].label: duplicate label `a` (component 0 has it too)"),
    ("rsl-mixed.rsl", "+(&(resourceManagerContact=fs0)(count=1))\n (&(count=2))\n", "rsl-mixed.rsl:2:5: component[1].resourceManagerContact: a .rsl file holds an ordered job: component 1 names no resourceManagerContact (use .uno for unordered jobs)"),
    ("rsl-myprog.uno", "&(executable = myprog)\n  ( | (& (count = 5)(memory>=64))\n    (& (count =10)(memory>=32))\n  )\n", "rsl-myprog.uno:2:11: component[0]: component 0 holds a disjunction `|`, which offers alternatives, but coalloc needs one count per component: pick one alternative and write its relations into the component"),
    ("rsl-ordered.uno", "+(&(resourceManagerContact=fs0)(count=1))\n", "rsl-ordered.uno:1:5: component[0].resourceManagerContact: a .uno file holds an unordered job: component 0 names resourceManagerContact `fs0` (use .rsl for ordered jobs)"),
    ("rsl-starttype.uno", "+(&(count=1)(subjobStartType=strict))\n", "rsl-starttype.uno:1:14: component[0].subjobStartType: unknown start type `strict` (expected one of: required, interactive, optional, strict-barrier, loose-barrier, no-barrier)"),
    ("rsl-twice.uno", "+(&(count=1)(count=2))\n", "rsl-twice.uno:1:14: component[0].count: is given twice in component 0 (first at 1:5)"),
    ("rsl-undefined.uno", "&(executable=$(PROG))(count=1)\n", "rsl-undefined.uno:1:3: rslSubstitution: variable `PROG` is not defined (used in `executable`): define it before its use with (rslSubstitution=(PROG value))"),
    ("rsl-unordered.rsl", "+(&(count=1))\n", "rsl-unordered.rsl:1:5: component[0].resourceManagerContact: a .rsl file holds an ordered job: component 0 names no resourceManagerContact (use .uno for unordered jobs)"),
    ("rsl-unterminated.uno", "+(&(count=4)(executable=\"a)\n", "rsl-unterminated.uno:1:25: unterminated string: this `\"` has no closing `\"`"),
    ("rsl-wall.uno", "+(&(count=1)(maxWallTime=ten))\n", "rsl-wall.uno:1:14: component[0].maxWallTime: must be a whole number of minutes (found `ten`)"),
    // --- files and batch files ---
    ("notes.yaml", "count: 1\n", "notes.yaml: unknown job file type (expected .rsl, .uno, .bat, .toml, .json)"),
    ("unknown-entry.bat", "count-zero.toml\nnotes.txt\n", "unknown-entry.bat:2:1: entry: `notes.txt` is not a job file (expected .rsl, .uno, .toml or .json)"),
    ("missing-entry.bat", "\n  gone.rsl\n", "missing-entry.bat:2:3: `gone.rsl` does not exist (resolved to {dir}/gone.rsl)"),
    ("nested.bat", "unknown-entry.bat\n", "nested.bat:1:1: entry: `unknown-entry.bat` is a batch file; a batch file lists job files, not other batch files"),
    ("empty.bat", "# nothing\n", "empty.bat:1:1: entry: the batch file lists no job files"),
    ("listed.bat", "count-zero.toml\n", "{dir}/count-zero.toml: component[0].count: must be at least 1 (got 0) (listed in listed.bat:1)"),
];

fn workdir() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("bad_inputs");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    for (name, content, _) in CASES {
        std::fs::write(dir.join(name), content).unwrap();
    }
    dir
}

#[test]
fn every_bad_input_is_rejected_with_its_message() {
    assert!(
        CASES.len() >= 30,
        "the issue asks for at least 30 bad inputs"
    );
    let dir = workdir();
    let mut failures = Vec::new();
    for (name, _, expected) in CASES {
        let out = Command::new(env!("CARGO_BIN_EXE_coalloc"))
            .args(["job", "check", name])
            .current_dir(&dir)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        let want = format!("error: {expected}\n").replace("{dir}", dir.to_str().unwrap());
        if out.status.code() != Some(2) || stderr != want {
            failures.push(format!(
                "{name}: exit {:?}\n  want: {want}  got:  {stderr}",
                out.status.code()
            ));
        }
        assert!(out.stdout.is_empty(), "{name}: nothing valid to print");
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn a_missing_file_is_bad_input() {
    let out = Command::new(env!("CARGO_BIN_EXE_coalloc"))
        .args(["job", "check", "/nonexistent/job.toml"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.starts_with("error: /nonexistent/job.toml: cannot read: No such file"),
        "{stderr}"
    );
}
