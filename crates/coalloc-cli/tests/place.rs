//! `coalloc place` on the shipped examples: the table, `--json`, Close-to-Files, flexible
//! splits, a job that does not fit (exit 3) and bad sites files (exit 2).

mod common;
use common::coalloc;
use std::path::PathBuf;
use std::process::Output;

fn text(out: &Output, code: i32) -> String {
    assert_eq!(
        out.status.code(),
        Some(code),
        "stdout: {}\nstderr: {}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone()).unwrap()
}

fn stderr(out: &Output) -> String {
    String::from_utf8(out.stderr.clone()).unwrap()
}

/// DAS-2 all idle, four components of 8: the modified worst-fit uses fs0 and then the unmarked
/// 64-processor clusters in list order. The job reads `poisson-grid.dat`, which no site holds.
#[test]
fn poisson_on_das2_table() {
    let out = coalloc(&[
        "place",
        "--sites",
        "examples/sites.toml",
        "examples/jobs/poisson.toml",
    ]);
    assert_eq!(
        text(&out, 0),
        "examples/jobs/poisson.toml: unordered job, 4 components, 32 processors; fit worst\n\
         #  label    count  site  file site  transfer\n\
         0  strip-0  8      fs0   none       -\n\
         1  strip-1  8      fs1   none       -\n\
         2  strip-2  8      fs2   none       -\n\
         3  strip-3  8      fs3   none       -\n\
         \n\
         site  processors  idle before  idle after\n\
         fs0   144         144          136\n\
         fs1   64          64           56\n\
         fs2   64          64           56\n\
         fs3   64          64           56\n\
         fs4   64          64           64\n"
    );
}

#[test]
fn poisson_on_das2_json() {
    let out = coalloc(&[
        "place",
        "--sites",
        "examples/sites.toml",
        "--fit",
        "worst-plain",
        "--json",
        "examples/jobs/poisson.toml",
    ]);
    let v: serde_json::Value = serde_json::from_str(&text(&out, 0)).unwrap();
    assert_eq!(v["fits"], true);
    assert_eq!(v["fit"], "worst-plain");
    assert_eq!(v["kind"], "unordered");
    let comps = v["components"].as_array().unwrap();
    assert_eq!(comps.len(), 4);
    for (i, c) in comps.iter().enumerate() {
        assert_eq!(c["index"], i);
        assert_eq!(c["label"], format!("strip-{i}"));
        assert_eq!(c["count"], 8);
        // Seed 001's Worst Fit stacks them all on the most idle cluster.
        assert_eq!(c["site"], "fs0");
        assert_eq!(c["file_site"], serde_json::Value::Null);
    }
    let sites = v["sites"].as_array().unwrap();
    assert_eq!(sites[0]["name"], "fs0");
    assert_eq!(sites[0]["idle_before"], 144);
    assert_eq!(sites[0]["idle_after"], 112);
    assert_eq!(sites[4]["idle_after"], 64);
}

/// Close-to-Files on the busy DAS-2 with replicas: strip-0 runs where a replica is (fs4, no
/// transfer); fs4 is then full, and the 1 GB chunks of the others come fastest from fs2 to
/// fs0 at 1 GB/s: 1 s each.
#[test]
fn close_to_files_with_replicas() {
    let out = coalloc(&[
        "place",
        "--sites",
        "examples/sites-replicas.toml",
        "--fit",
        "ctf",
        "examples/jobs/poisson.toml",
    ]);
    assert_eq!(
        text(&out, 0),
        "examples/jobs/poisson.toml: unordered job, 4 components, 32 processors; fit ctf\n\
         #  label    count  site  file site  transfer\n\
         0  strip-0  8      fs4   fs4        0s\n\
         1  strip-1  8      fs0   fs2        1s\n\
         2  strip-2  8      fs0   fs2        1s\n\
         3  strip-3  8      fs0   fs2        1s\n\
         file transfer time (longest): 1s\n\
         \n\
         site  processors  idle before  idle after\n\
         fs0   144         100          76\n\
         fs1   64          20           20\n\
         fs2   64          6            6\n\
         fs3   64          64           64\n\
         fs4   64          12           4\n"
    );
    let out = coalloc(&[
        "place",
        "--sites",
        "examples/sites-replicas.toml",
        "--json",
        "examples/jobs/poisson.toml",
    ]);
    let v: serde_json::Value = serde_json::from_str(&text(&out, 0)).unwrap();
    let sites: Vec<_> = v["components"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["site"].as_str().unwrap().to_owned(),
                c["file_site"].as_str().unwrap().to_owned(),
                c["transfer_ms"].as_i64().unwrap(),
            )
        })
        .collect();
    let want = [
        ("fs0", "fs2", 1_000),
        ("fs3", "fs2", 10_000),
        ("fs1", "fs2", 10_000),
        ("fs4", "fs4", 0),
    ];
    let want: Vec<_> = want
        .iter()
        .map(|&(s, f, t)| (s.to_owned(), f.to_owned(), t))
        .collect();
    assert_eq!(sites, want);
    assert_eq!(v["transfer_ms"], 10_000);
    assert_eq!(v["components"][0]["file_bytes"], 1_000_000_000u64);
}

#[test]
fn flexible_job_split_both_ways() {
    let out = coalloc(&[
        "place",
        "--sites",
        "examples/sites.toml",
        "examples/jobs/flexible.toml",
    ]);
    let t = text(&out, 0);
    assert!(
        t.starts_with(
            "examples/jobs/flexible.toml: flexible job, 96 processors in pieces of at least 16; \
         split cluster-filling\n\
         piece  label  count  site  file site  transfer\n\
         0      -      96     fs0   -          -\n"
        ),
        "{t}"
    );
    let out = coalloc(&[
        "place",
        "--sites",
        "examples/sites.toml",
        "--flexible",
        "load-balancing",
        "--json",
        "examples/jobs/flexible.toml",
    ]);
    let v: serde_json::Value = serde_json::from_str(&text(&out, 0)).unwrap();
    let pieces: Vec<_> = v["components"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["piece"].as_u64().unwrap(),
                c["site"].as_str().unwrap().to_owned(),
                c["count"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        pieces,
        [
            (0, "fs0".into(), 20),
            (1, "fs1".into(), 19),
            (2, "fs2".into(), 19),
            (3, "fs3".into(), 19),
            (4, "fs4".into(), 19)
        ]
    );
    assert_eq!(v["flexible"], "load-balancing");
}

/// A job that does not fit is an answer, not an error: the reason on standard output, exit 3.
#[test]
fn no_fit_exits_3_with_the_reason() {
    let out = coalloc(&[
        "place",
        "--sites",
        "examples/sites.toml",
        "--fit",
        "ctf",
        "examples/jobs/poisson.toml",
    ]);
    assert_eq!(
        text(&out, 3),
        "examples/jobs/poisson.toml: unordered job, 4 components, 32 processors; fit ctf\n\
         does not fit: component 0 (label `strip-0`) needs input file `poisson-grid.dat`, and no \
         usable site holds a replica of it\n"
    );
    assert_eq!(stderr(&out), "");

    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("place");
    std::fs::create_dir_all(&dir).unwrap();
    let big = dir.join("big.toml");
    std::fs::write(&big, "[[component]]\nlabel = \"huge\"\ncount = 145\n").unwrap();
    let out = coalloc(&[
        "place",
        "--sites",
        "examples/sites.toml",
        "--json",
        big.to_str().unwrap(),
    ]);
    let v: serde_json::Value = serde_json::from_str(&text(&out, 3)).unwrap();
    assert_eq!(v["fits"], false);
    assert_eq!(
        v["reason"],
        "component 0 (label `huge`) needs 145 processors; the most idle on any usable site is 144"
    );
    let far = dir.join("far.toml");
    std::fs::write(&far, "[[component]]\nsite = \"fs9\"\ncount = 1\n").unwrap();
    let out = coalloc(&[
        "place",
        "--sites",
        "examples/sites.toml",
        far.to_str().unwrap(),
    ]);
    assert!(text(&out, 3)
        .ends_with("does not fit: site `fs9` named by component 0 is not in the site list\n"));
}

#[test]
fn bad_sites_files_exit_2_with_file_line_and_column() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("place-bad");
    std::fs::create_dir_all(&dir).unwrap();
    let cases = [
        (
            "dup.toml",
            "[[site]]\nname = \"a\"\nprocessors = 4\n\n[[site]]\nname = \"a\"\nprocessors = 2\n",
            "dup.toml:5:1: site[1].name: duplicate site name `a` (site[0] has it too)",
        ),
        (
            "typo.toml",
            "[[site]]\nname = \"a\"\nprocesors = 4\n",
            "typo.toml:3:1: unknown field `procesors`, expected one of `name`, `kind`, \
             `processors`, `idle`, `manager`, `bandwidth`, `files`, `cloud`",
        ),
        (
            "idle.toml",
            "[[site]]\nname = \"a\"\nprocessors = 4\n  [[site]]\nname = \"b\"\nprocessors = 4\nidle = 5\n",
            "idle.toml:4:3: site[1].idle: is more than the site's processors (5 > 4)",
        ),
        (
            "empty.toml",
            "",
            "empty.toml: site: the site list is empty: add a [[site]] table",
        ),
    ];
    for (name, content, want) in cases {
        let path = dir.join(name);
        std::fs::write(&path, content).unwrap();
        let out = coalloc(&[
            "place",
            "--sites",
            path.to_str().unwrap(),
            "examples/jobs/poisson.toml",
        ]);
        assert_eq!(out.status.code(), Some(2), "{name}");
        assert_eq!(
            stderr(&out),
            format!("error: {}/{want}\n", dir.display()),
            "{name}"
        );
        assert!(out.stdout.is_empty());
    }
    // A bad job and a bad sites file: both are reported.
    let out = coalloc(&[
        "place",
        "--sites",
        dir.join("empty.toml").to_str().unwrap(),
        "examples/jobs/missing.toml",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 2, "{err}");
    assert!(err.contains("missing.toml: cannot read"), "{err}");
}

#[test]
fn help_documents_the_exit_codes() {
    let help = text(&coalloc(&["place", "--help"]), 0);
    let words = help.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(words.contains("3 when it does not"), "{help}");
    assert!(
        words.contains("worst, best, first, worst-plain, ctf"),
        "{help}"
    );
    let out = coalloc(&[
        "place",
        "--sites",
        "examples/sites.toml",
        "--fit",
        "worst-fit",
        "x.toml",
    ]);
    assert_eq!(out.status.code(), Some(2));
}
