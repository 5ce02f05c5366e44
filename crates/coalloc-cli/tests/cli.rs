//! The `coalloc` binary on the shipped examples: check, convert, completions, help.

mod common;
use common::{coalloc, repo, stdout};
use std::path::{Path, PathBuf};

fn example_files() -> Vec<String> {
    let mut files: Vec<String> = std::fs::read_dir(repo().join("examples/jobs"))
        .unwrap()
        .map(|e| format!("examples/jobs/{}", e.unwrap().file_name().to_string_lossy()))
        .collect();
    files.sort();
    files
}

#[test]
fn every_example_is_valid_and_json_names_each_job() {
    let files = example_files();
    assert!(files.len() >= 8, "{files:?}");
    let mut args = vec!["job", "check", "--json"];
    args.extend(files.iter().map(String::as_str));
    let v: serde_json::Value = serde_json::from_str(&stdout(&coalloc(&args))).unwrap();
    let entries = v.as_array().unwrap();
    // mixed.bat expands into its four entries.
    assert_eq!(entries.len(), files.len() - 1 + 4);
    for e in entries {
        assert_eq!(e["valid"], true, "{e}");
    }
    let poisson = entries
        .iter()
        .find(|e| e["file"].as_str().unwrap().ends_with("poisson.toml"))
        .unwrap();
    assert_eq!(poisson["job"]["kind"], "unordered");
    assert_eq!(poisson["job"]["priority"], "high");
    assert_eq!(poisson["job"]["input_file"]["size"], 4_000_000_000u64);
    assert_eq!(poisson["job"]["component"].as_array().unwrap().len(), 4);
    let listed: Vec<_> = entries
        .iter()
        .filter(|e| e.get("listed_in").is_some())
        .collect();
    assert_eq!(listed.len(), 4);
    assert!(listed[0]["listed_in"]
        .as_str()
        .unwrap()
        .ends_with("mixed.bat:2"));
}

#[test]
fn check_prints_a_table_per_job() {
    let out = stdout(&coalloc(&["job", "check", "examples/jobs/ordered.toml"]));
    assert_eq!(
        out,
        "examples/jobs/ordered.toml: ordered job, 3 components, 9 processors, priority low, \
         name master-worker\n\
         \x20 #  label     count  site  start        type      wall  executable    arguments\n\
         \x20 0  master    1      fs0   required     single    -     /usr/bin/env  sh -c 'echo master'\n\
         \x20 1  worker-1  4      fs1   interactive  multiple  5m    /bin/true\n\
         \x20 2  worker-2  4      fs2   optional     multiple  5m    /bin/true\n"
    );
}

#[test]
fn conversions_are_lossless_across_formats() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("convert");
    std::fs::create_dir_all(&dir).unwrap();
    for file in example_files().iter().filter(|f| !f.ends_with(".bat")) {
        let reference = stdout(&coalloc(&["job", "check", "--json", file]));
        let reference: serde_json::Value = serde_json::from_str(&reference).unwrap();
        for to in ["toml", "json", "rsl"] {
            let out = coalloc(&["job", "convert", file, "--to", to]);
            if to == "rsl" && !out.status.success() {
                // Only jobs RSL cannot say are refused, and the reason says what.
                assert_eq!(out.status.code(), Some(2));
                let err = String::from_utf8_lossy(&out.stderr);
                assert!(err.contains("cannot convert to RSL without loss"), "{err}");
                continue;
            }
            let ext = match to {
                "rsl" if reference[0]["job"]["kind"] == "ordered" => "rsl",
                "rsl" => "uno",
                other => other,
            };
            let name = Path::new(file)
                .file_stem()
                .unwrap()
                .to_string_lossy()
                .into_owned();
            let converted = dir.join(format!("{name}.{ext}"));
            std::fs::write(&converted, stdout(&out)).unwrap();
            let again = stdout(&coalloc(&[
                "job",
                "check",
                "--json",
                converted.to_str().unwrap(),
            ]));
            let again: serde_json::Value = serde_json::from_str(&again).unwrap();
            assert_eq!(again[0]["job"], reference[0]["job"], "{file} via {to}");
        }
    }
}

#[test]
fn rich_jobs_refuse_rsl_with_the_reason() {
    let out = coalloc(&[
        "job",
        "convert",
        "examples/jobs/poisson.toml",
        "--to",
        "rsl",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    for field in ["priority high", "input file"] {
        assert!(err.contains(field), "{err}");
    }
}

#[test]
fn completions_and_help_explain_themselves() {
    let bash = stdout(&coalloc(&["completions", "bash"]));
    assert!(
        bash.contains("complete -F") && bash.contains("convert"),
        "{bash}"
    );
    let help = stdout(&coalloc(&["job", "check", "--help"]));
    let words = help.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(words.contains("names the file, line and column"), "{help}");
    let out = coalloc(&["job", "convert", "x.toml", "--to", "yaml"]);
    assert_eq!(out.status.code(), Some(2), "a bad argument is bad input");
}

#[test]
fn config_check_names_every_policy_and_rejects_unknown_ones() {
    let out = stdout(&coalloc(&[
        "config",
        "check",
        "--json",
        "examples/config.toml",
    ]));
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["sites"].as_array().unwrap().len(), 5);
    assert_eq!(v["scheduler"]["policy"], "koala");
    assert_eq!(v["scheduler"]["fit"], "ctf");
    assert_eq!(v["scheduler"]["claiming"], "icp");
    assert_eq!(v["scheduler"]["max_queued"], "100");
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("config");
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("bad.toml");
    std::fs::write(&bad, "[[site]]\nname = \"a\"\nprocessors = 4\n[scheduler]\npolicy = \"sjf\"\nfit = \"bestest\"\n").unwrap();
    let out = coalloc(&["config", "check", bad.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        format!(
            "error: {}: scheduler.fit: unknown fit `bestest` (expected one of: worst, best, \
             first, worst-plain, ctf)\n",
            bad.display()
        )
    );
}

#[test]
fn place_takes_its_default_fit_from_the_scheduler_table() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("config");
    std::fs::create_dir_all(&dir).unwrap();
    let cfg = dir.join("best.toml");
    std::fs::write(
        &cfg,
        "[[site]]\nname = \"a\"\nprocessors = 64\n[[site]]\nname = \"b\"\nprocessors = 64\n\
         idle = 40\n[scheduler]\nfit = \"best\"\n",
    )
    .unwrap();
    let cfg = cfg.to_str().unwrap();
    let placed = |extra: &[&str]| {
        let mut args = vec!["place", "--json", "--sites", cfg];
        args.extend_from_slice(extra);
        args.push("examples/jobs/total.json");
        let v: serde_json::Value = serde_json::from_str(&stdout(&coalloc(&args))).unwrap();
        v["components"][0]["site"].as_str().unwrap().to_owned()
    };
    // 32 processors: best fit takes the site with the fewest idle that holds it (b, 40);
    // worst fit the one with the most (a, 64).
    assert_eq!(placed(&[]), "b");
    assert_eq!(placed(&["--fit", "worst"]), "a");
}
