//! Checks of the embedded PTX that need an outside tool: NVIDIA's `ptxas` assembles the modules
//! (`ptxas.rs`) and a PTX interpreter in Python runs the wide permute kernels (`ptx_sim.rs`), the
//! tiled copy kernels (`tiled_sim.rs`), the reversed row kernels (`rows_sim.rs`), the gathered
//! row kernels (`gather_sim.rs`), the row fill and one-axis strided fill kernels (`fill_sim.rs`)
//! and the one-axis strided copy kernels (`strided_sim.rs`).
//!
//! Each check has a sample that plain `cargo test` runs and a full form. The full forms run when
//! `DEVSPAN_FULL_PTX_CHECKS=1` is set (the samples are then skipped: the full forms cover them)
//! or with `--include-ignored` / `--ignored`; otherwise they are reported as ignored, with that
//! reason.
//!
//! This binary has its own small harness (`harness = false` in Cargo.toml) because whether a
//! check can run at all is only known at run time: without `ptxas`, or without Python, a check is
//! reported as `ignored` with the reason, never as passed, and fails instead when
//! `DEVSPAN_REQUIRE_PTXAS` or `DEVSPAN_REQUIRE_PTXSIM` is set. The harness takes the arguments
//! that `cargo test`, the GPU runner and nextest pass: name filters, `--exact`, `--skip`,
//! `--ignored`, `--include-ignored`, `--list` (`--format terse`), `--nocapture`; `--quiet`,
//! `--test-threads` and `--color` are accepted and have no effect (checks run one after another,
//! each spread over the machine's cores). Per-module details print with `--nocapture`; a
//! check's summary lines always print.

mod fill_sim;
mod gather_sim;
mod ptx_sim;
mod ptxas;
mod rows_sim;
mod scatter_sim;
mod strided_sim;
mod tiled_sim;

use std::env;
use std::panic::{self, AssertUnwindSafe};
use std::process::ExitCode;
use std::time::Instant;

/// Set to `1` to run every module and every interpreter case instead of the samples.
const FULL_VAR: &str = "DEVSPAN_FULL_PTX_CHECKS";

/// What a check may print: `detail` only with `--nocapture`, `summary` always.
pub struct Out {
    verbose: bool,
}

impl Out {
    pub fn detail(&self, line: &str) {
        if self.verbose {
            println!("{line}");
        }
    }

    pub fn summary(&self, line: &str) {
        println!("{line}");
    }
}

/// Whether a check can run here: `Err(reason)` when a tool it needs is missing.
pub type Availability = Result<(), String>;

/// One check: its name, whether it is a full form, and its body (`Err` fails it).
pub struct Check {
    pub name: &'static str,
    pub full: bool,
    pub available: fn() -> Availability,
    /// The variable that turns "tool missing" into a failure.
    pub require_var: &'static str,
    pub run: fn(&Out) -> Result<(), String>,
}

fn checks() -> Vec<Check> {
    let mut all = ptx_sim::checks();
    all.extend(tiled_sim::checks());
    all.extend(rows_sim::checks());
    all.extend(gather_sim::checks());
    all.extend(scatter_sim::checks());
    all.extend(fill_sim::checks());
    all.extend(strided_sim::checks());
    all.extend(ptxas::checks());
    all
}

/// The libtest arguments this harness understands.
#[derive(Default)]
struct Args {
    filters: Vec<String>,
    skip: Vec<String>,
    exact: bool,
    ignored: bool,
    include_ignored: bool,
    list: bool,
    terse: bool,
    nocapture: bool,
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args::default();
    let mut it = env::args().skip(1);
    while let Some(arg) = it.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f.to_string(), Some(v.to_string())),
            _ => (arg.clone(), None),
        };
        let mut value = |name: &str| {
            inline
                .clone()
                .or_else(|| it.next())
                .ok_or_else(|| format!("{name} takes a value"))
        };
        match flag.as_str() {
            "--exact" => a.exact = true,
            "--ignored" => a.ignored = true,
            "--include-ignored" => a.include_ignored = true,
            "--list" => a.list = true,
            "--nocapture" | "--no-capture" | "--show-output" => a.nocapture = true,
            "-q" | "--quiet" => {}
            "--skip" => a.skip.push(value("--skip")?),
            "--format" => match value("--format")?.as_str() {
                "terse" => a.terse = true,
                "pretty" => {}
                other => return Err(format!("--format {other} is not supported here")),
            },
            "--test-threads" | "--color" => {
                value(&flag)?;
            }
            f if f.starts_with('-') => return Err(format!("unsupported option {f}")),
            _ => a.filters.push(arg),
        }
    }
    Ok(a)
}

fn selected(a: &Args, name: &str) -> bool {
    let hit = |f: &String| {
        if a.exact {
            name == f
        } else {
            name.contains(f.as_str())
        }
    };
    (a.filters.is_empty() || a.filters.iter().any(hit)) && !a.skip.iter().any(hit)
}

enum Outcome {
    Passed,
    Failed(String),
    Ignored(String),
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(101);
        }
    };
    let full = env::var(FULL_VAR).is_ok_and(|v| v == "1");
    let all = checks();
    let total = all.len();
    // The full checks are ignored unless FULL_VAR is set: what --ignored selects and
    // --include-ignored runs.
    let ignored_by_default = |c: &Check| c.full && !full;
    let chosen: Vec<&Check> = all
        .iter()
        .filter(|c| selected(&args, c.name))
        .filter(|c| !args.ignored || ignored_by_default(c))
        .collect();
    let asked_for_ignored = args.ignored || args.include_ignored;
    // A sample is skipped when its full check (the same name up to `::`) runs in this
    // invocation.
    let topic = |c: &Check| c.name.split("::").next().unwrap_or(c.name);
    let covering = |c: &Check| -> Option<&'static str> {
        chosen
            .iter()
            .find(|f| f.full && !c.full && topic(f) == topic(c))
            .filter(|f| !ignored_by_default(f) || asked_for_ignored)
            .map(|f| f.name)
    };
    let filtered_out = total - chosen.len();

    if args.list {
        for c in &chosen {
            println!("{}: test", c.name);
        }
        if !args.terse {
            println!("\n{} tests, 0 benchmarks", chosen.len());
        }
        return ExitCode::SUCCESS;
    }

    let start = Instant::now();
    let out = Out {
        verbose: args.nocapture,
    };
    println!(
        "\nrunning {} test{}",
        chosen.len(),
        if chosen.len() == 1 { "" } else { "s" }
    );
    let (mut passed, mut ignored) = (0, 0);
    let mut failures: Vec<(&str, String)> = Vec::new();
    for c in &chosen {
        let outcome = if ignored_by_default(c) && !asked_for_ignored {
            Outcome::Ignored(format!(
                "full PTX check: set {FULL_VAR}=1 or run with --include-ignored"
            ))
        } else {
            match (c.available)() {
                Err(why) if env::var_os(c.require_var).is_some() => {
                    Outcome::Failed(format!("{} is set: {why}", c.require_var))
                }
                Err(why) => Outcome::Ignored(why),
                Ok(()) if covering(c).is_some() => Outcome::Ignored(format!(
                    "a sample of {}, which runs instead",
                    covering(c).unwrap_or_default()
                )),
                Ok(()) => match panic::catch_unwind(AssertUnwindSafe(|| (c.run)(&out))) {
                    Ok(Ok(())) => Outcome::Passed,
                    Ok(Err(e)) => Outcome::Failed(e),
                    Err(p) => Outcome::Failed(
                        p.downcast_ref::<String>()
                            .cloned()
                            .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                            .unwrap_or_else(|| "panicked".to_string()),
                    ),
                },
            }
        };
        let word = match &outcome {
            Outcome::Passed => {
                passed += 1;
                "ok".to_string()
            }
            Outcome::Ignored(why) => {
                ignored += 1;
                format!("ignored, {why}")
            }
            Outcome::Failed(e) => {
                failures.push((c.name, e.clone()));
                "FAILED".to_string()
            }
        };
        println!("test {} ... {word}", c.name);
    }
    if !failures.is_empty() {
        println!("\nfailures:\n");
        for (name, e) in &failures {
            println!("---- {name} ----\n{e}\n");
        }
        println!("failures:");
        for (name, _) in &failures {
            println!("    {name}");
        }
    }
    println!(
        "\ntest result: {}. {passed} passed; {} failed; {ignored} ignored; 0 measured; \
         {filtered_out} filtered out; finished in {:.2}s\n",
        if failures.is_empty() { "ok" } else { "FAILED" },
        failures.len(),
        start.elapsed().as_secs_f64()
    );
    if failures.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(101)
    }
}
