//! Runs the wide permute kernels (`copy_permute_w16`, `_w32`, `_w64`) and the vector kernel
//! (`copy_permute_vec_b1`) through a PTX interpreter on the CPU (`tools/ptxsim_wide.py`): every
//! thread of a block, with shared memory and barriers, on copies with partial tiles, negative
//! and zero strides, batch axes and both tile-origin forms (for the vector kernel also sides
//! whose pieces do not fill the tile, and runs of whole tiles); the tool checks every
//! destination run (vector kernel: byte), every access's alignment and bounds, and that every
//! destination vector is stored exactly once. The plan interpreter replays the planner's tiles
//! but not the kernels' thread mapping; this covers that mapping without a GPU.
//!
//! The sample runs one copy of each kernel (each of the three wide copies on one kernel, both
//! tile-origin forms); the full check runs all 26 cases. Cases run in parallel processes, one
//! per core.
//!
//! Needs Python 3 (`DEVSPAN_PYTHON`, else `python3` on `PATH`); without it the checks are
//! reported as ignored, and fail when `DEVSPAN_REQUIRE_PTXSIM` is set.

use std::env;
use std::ffi::OsString;
use std::fs;
use std::path::Path;
use std::process::Command;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;

use crate::{Availability, Check, Out};

/// The interpreter, embedded so that the binary runs away from the source tree (the GPU runner
/// stages test binaries alone).
const TOOL: &str = include_str!("../../tools/ptxsim_wide.py");

/// One case of each kernel: every copy of `cases` on some wide kernel, the vector kernel's
/// partial tiles, and both tile-origin forms.
const SAMPLE: [&str; 4] = ["w16/2/o32", "w32/0/o64", "w64/1/o32", "vec/0/o64"];

/// How many cases the tool has (`ptxsim_wide.py --list`).
const ALL_CASES: usize = 26;

const MODULES: [&str; 4] = [
    "copy_permute_w16",
    "copy_permute_w32",
    "copy_permute_w64",
    "copy_permute_vec_b1",
];

pub fn checks() -> Vec<Check> {
    vec![
        Check {
            name: "ptx_sim::wide_kernels_sample_in_a_ptx_interpreter",
            full: false,
            available,
            require_var: "DEVSPAN_REQUIRE_PTXSIM",
            run: |out| run(out, Some(&SAMPLE)),
        },
        Check {
            name: "ptx_sim::wide_kernels_move_every_run_once_in_a_ptx_interpreter",
            full: true,
            available,
            require_var: "DEVSPAN_REQUIRE_PTXSIM",
            run: |out| run(out, None),
        },
    ]
}

pub fn python() -> OsString {
    env::var_os("DEVSPAN_PYTHON").unwrap_or_else(|| "python3".into())
}

pub fn available() -> Availability {
    let python = python();
    let ok = Command::new(&python)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if ok {
        Ok(())
    } else {
        Err(format!(
            "Python 3 not found: {} cannot be run (set DEVSPAN_PYTHON)",
            python.to_string_lossy()
        ))
    }
}

/// Runs `tool` in `dir` with `args`; `Err` holds its output when it fails.
fn run_tool(dir: &Path, args: &[&str]) -> Result<String, String> {
    let out = Command::new(python())
        .arg(dir.join("ptxsim_wide.py"))
        .args(args)
        .output()
        .map_err(|e| format!("cannot run the PTX interpreter: {e}"))?;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    if out.status.success() {
        Ok(stdout)
    } else {
        Err(format!(
            "ptxsim_wide.py {} failed ({}):\n{stdout}\n{}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

fn run(out: &Out, sample: Option<&[&str]>) -> Result<(), String> {
    let dir = env::temp_dir().join(format!("devspan-ptxsim-{}", std::process::id()));
    fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let result = run_in(out, &dir, sample);
    let _ = fs::remove_dir_all(&dir);
    result
}

fn run_in(out: &Out, dir: &Path, sample: Option<&[&str]>) -> Result<(), String> {
    fs::write(dir.join("ptxsim_wide.py"), TOOL).map_err(|e| e.to_string())?;
    let modules: &[(&str, &str)] = devspan::internals::ptx_modules();
    for name in MODULES {
        let text = modules
            .iter()
            .find(|(m, _)| *m == name)
            .ok_or_else(|| format!("no module {name}"))?
            .1;
        fs::write(dir.join(format!("{name}.ptx")), text).map_err(|e| e.to_string())?;
    }
    let listed = run_tool(dir, &["--list"])?;
    let all: Vec<&str> = listed.lines().collect();
    assert_eq!(all.len(), ALL_CASES, "the tool's cases: {all:?}");
    let cases: Vec<&str> = match sample {
        Some(s) => {
            assert!(s.iter().all(|c| all.contains(c)), "{s:?} not in {all:?}");
            s.to_vec()
        }
        None => all,
    };

    // One process per core, each taking the next case.
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Result<String, String>>> = Mutex::new(Vec::new());
    let workers = thread::available_parallelism()
        .map_or(2, |n| n.get())
        .min(cases.len());
    let dir_str = dir.to_str().ok_or("temporary directory is not UTF-8")?;
    thread::scope(|s| {
        for _ in 0..workers {
            s.spawn(|| {
                while let Some(case) = cases.get(next.fetch_add(1, Ordering::Relaxed)) {
                    let r = run_tool(dir, &[dir_str, case]);
                    results.lock().unwrap().push(r);
                }
            });
        }
    });
    let results = results.into_inner().unwrap();
    let mut lines: Vec<&str> = Vec::new();
    let mut failures = Vec::new();
    for r in &results {
        match r {
            Ok(stdout) => lines.extend(stdout.lines()),
            Err(e) => failures.push(e.as_str()),
        }
    }
    if !failures.is_empty() {
        return Err(failures.join("\n"));
    }
    lines.sort_unstable();
    for line in &lines {
        out.detail(line);
    }
    let ok = lines.iter().filter(|l| l.ends_with(", ok")).count();
    if ok != cases.len() {
        return Err(format!(
            "{ok} of {} cases reported ok:\n{}",
            cases.len(),
            lines.join("\n")
        ));
    }
    out.summary(&match sample {
        Some(_) => format!(
            "ptx_sim: {ok} of {ALL_CASES} interpreter cases passed: {}",
            cases.join(", ")
        ),
        None => format!("ptx_sim: all {ok} interpreter cases passed"),
    });
    Ok(())
}
