//! Assembles the embedded PTX modules with NVIDIA's `ptxas` and fails on any error; for sm_80
//! and sm_90 also on any register spill or stack frame (sm_52, the `.target` of all modules
//! but the `cp.async` ones, which target sm_80, is assembled for compatibility only, and only
//! by a `ptxas` that still knows it: CUDA 13's dropped it). Each module is assembled for the
//! architectures from its `.target` on.
//!
//! The sample assembles one module of every copy and fill kernel family, the element sizes
//! rotating through the families so that each size is present, and one cast pair per element
//! type, spread over the cast families so that every type is once a source and once a
//! destination and every cast family is present (see `sample`); the full check assembles every
//! module.
//!
//! `ptxas` is taken from `DEVSPAN_PTXAS` (a path), else from `PATH`; without it the checks are
//! reported as ignored, and fail when `DEVSPAN_REQUIRE_PTXAS` is set.

use std::collections::{BTreeMap, BTreeSet};
use std::env;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;

use crate::{Availability, Check, Out};

pub fn checks() -> Vec<Check> {
    vec![
        Check {
            name: "ptxas::sample_of_modules_assembles",
            full: false,
            available,
            require_var: "DEVSPAN_REQUIRE_PTXAS",
            run: |out| run(out, true),
        },
        Check {
            name: "ptxas::every_module_assembles",
            full: true,
            available,
            require_var: "DEVSPAN_REQUIRE_PTXAS",
            run: |out| run(out, false),
        },
    ]
}

fn available() -> Availability {
    find_ptxas().map(|_| ())
}

const ARCHS: [&str; 3] = ["sm_52", "sm_80", "sm_90"];

/// Architectures on which spills and stack frames are errors.
const STRICT_ARCHS: [&str; 2] = ["sm_80", "sm_90"];

/// Kernels (name prefixes) whose register limit is set below what the compiler would take, so
/// that more blocks stay resident, and the most bytes each may spill (stores, loads, stack
/// frame) on the strict architectures: the reversed row kernels of groups of three vectors
/// (`.maxnreg` 80, `ROW_STAGED_MAX_REGISTERS`; about 200 bytes with CUDA 12.9's `ptxas`), and
/// the element-wise copies of 1-byte elements, wide and not (`.maxnreg` 56,
/// `tiled_ew_max_registers` and `tiled_max_registers`: an 8-byte stack frame and 4 bytes
/// spilled on sm_80 with the `ptxas` of CUDA 12.9 and 13.0, none on sm_90).
const SPILL_BUDGETS: [(&str, u32); 4] = [
    ("copy_rows_rev3_", 256),
    ("copy_runs_rev3_", 256),
    ("copy_tiled_ew_b1", 16),
    ("copy_tiled_e_b1", 16),
];

fn find_ptxas() -> Result<PathBuf, String> {
    if let Some(p) = env::var_os("DEVSPAN_PTXAS") {
        let p = PathBuf::from(p);
        return if p.is_file() {
            Ok(p)
        } else {
            Err(format!("DEVSPAN_PTXAS={} is not a file", p.display()))
        };
    }
    let path = env::var_os("PATH").ok_or("PATH is not set")?;
    let exe = if cfg!(windows) { "ptxas.exe" } else { "ptxas" };
    env::split_paths(&path)
        .map(|d| d.join(exe))
        .find(|p| p.is_file())
        .ok_or_else(|| {
            "ptxas not found: set DEVSPAN_PTXAS to its path or put it on PATH".to_string()
        })
}

/// Per-kernel resource usage parsed from `ptxas -v`.
#[derive(Debug, Default)]
struct KernelReport {
    name: String,
    registers: u32,
    stack: u32,
    spill_stores: u32,
    spill_loads: u32,
    smem: u32,
}

/// Outcome of one `ptxas` run: module name, architecture, kernel reports
/// or the reason it failed.
type RunResult = (String, String, Result<Vec<KernelReport>, String>);

fn number_before(line: &str, unit: &str) -> Option<u32> {
    let idx = line.find(unit)?;
    line[..idx].split_whitespace().last()?.parse().ok()
}

fn parse_report(text: &str) -> Vec<KernelReport> {
    let mut out: Vec<KernelReport> = Vec::new();
    for line in text.lines() {
        if let Some(rest) = line.split("Function properties for ").nth(1) {
            out.push(KernelReport {
                name: rest.trim().to_string(),
                ..Default::default()
            });
        } else if let Some(k) = out.last_mut() {
            if line.contains("bytes stack frame") {
                k.stack = number_before(line, "bytes stack frame").unwrap_or(u32::MAX);
                k.spill_stores = number_before(line, "bytes spill stores").unwrap_or(u32::MAX);
                k.spill_loads = number_before(line, "bytes spill loads").unwrap_or(u32::MAX);
            } else if line.contains("Used") && line.contains("registers") {
                k.registers = number_before(line, "registers").unwrap_or(0);
                k.smem = number_before(line, "bytes smem").unwrap_or(0);
            }
        }
    }
    out
}

/// The number of an architecture name (`sm_80`: 80).
fn arch_number(arch: &str) -> u32 {
    arch.trim_start_matches("sm_").parse().unwrap_or(0)
}

/// The number of a module's `.target` architecture.
fn module_target(text: &str) -> u32 {
    text.lines()
        .find_map(|l| l.trim().strip_prefix(".target "))
        .map_or(0, |t| arch_number(t.trim()))
}

/// Whether this `ptxas` knows `arch` at all.
fn knows_arch(ptxas: &Path, dir: &Path, arch: &str) -> bool {
    let src = dir.join("probe.ptx");
    fs::write(&src, ".version 7.0\n.target sm_52\n.address_size 64\n").unwrap();
    let out = Command::new(ptxas)
        .arg(format!("-arch={arch}"))
        .arg(&src)
        .arg("-o")
        .arg(dir.join("probe.cubin"))
        .output();
    match out {
        Ok(o) => !String::from_utf8_lossy(&o.stderr).contains("is not defined for option"),
        Err(_) => true,
    }
}

fn assemble(ptxas: &Path, dir: &Path, name: &str, arch: &str) -> Result<Vec<KernelReport>, String> {
    let src = dir.join(format!("{name}.ptx"));
    let obj = dir.join(format!("{name}.{arch}.cubin"));
    let output = Command::new(ptxas)
        .arg(format!("-arch={arch}"))
        .arg("-v")
        .arg(&src)
        .arg("-o")
        .arg(&obj)
        .output()
        .map_err(|e| format!("{name} {arch}: cannot run ptxas: {e}"))?;
    let _ = fs::remove_file(&obj);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    if !output.status.success() || text.contains("error") {
        return Err(format!(
            "{name} {arch}: ptxas failed ({}):\n{text}",
            output.status
        ));
    }
    let reports = parse_report(&text);
    if reports.is_empty() {
        return Err(format!("{name} {arch}: no kernels reported:\n{text}"));
    }
    let mut problems = String::new();
    for k in reports.iter().filter(|_| STRICT_ARCHS.contains(&arch)) {
        let budget = SPILL_BUDGETS
            .iter()
            .find(|(prefix, _)| k.name.starts_with(prefix))
            .map_or(0, |&(_, b)| b);
        if k.stack > budget || k.spill_stores > budget || k.spill_loads > budget {
            problems.push_str(&format!(
                "{name} {arch} {}: {} bytes stack frame, {} bytes spill stores, {} bytes spill loads\n",
                k.name, k.stack, k.spill_stores, k.spill_loads
            ));
        }
    }
    if problems.is_empty() {
        Ok(reports)
    } else {
        Err(problems)
    }
}

/// The sample's modules. Modules that are not casts fall into families by their name without
/// the size's digits (`copy_rows_b4` is `copy_rows_b` at 4 bytes, `copy_permute_w32` is
/// `copy_permute_w` at 32); the `j`-th family in name order takes its `j mod len`-th size, so
/// that every family is present and the sizes rotate through them. Casts take one pair per
/// element type: pair `k` goes from type `k` to type `(5k + 3) mod n` (for the 12 types a
/// bijection without a fixed point; a fixed point takes the next type), on cast family
/// `k mod families`.
fn sample<'a>(modules: &[(&'a str, &'a str)]) -> Vec<(&'a str, &'a str)> {
    let mut families: BTreeMap<&str, Vec<(u32, &str)>> = BTreeMap::new();
    for (name, _) in modules.iter().filter(|(n, _)| !n.starts_with("cast_")) {
        let family = name.trim_end_matches(|c: char| c.is_ascii_digit());
        let size = name[family.len()..].parse().unwrap_or(0);
        families.entry(family).or_default().push((size, name));
    }
    let mut wanted: BTreeSet<String> = families
        .values_mut()
        .enumerate()
        .map(|(j, sizes)| {
            sizes.sort_unstable();
            sizes[j % sizes.len()].1.to_string()
        })
        .collect();

    let casts: Vec<(&str, &str, &str)> = modules
        .iter()
        .filter_map(|(name, _)| {
            let rest = name.strip_prefix("cast_")?;
            let mut parts = rest.rsplitn(3, '_');
            let to = parts.next()?;
            let from = parts.next()?;
            Some((parts.next()?, from, to))
        })
        .collect();
    let cast_families: Vec<&str> = casts
        .iter()
        .map(|c| c.0)
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let types: Vec<&str> = casts
        .iter()
        .map(|c| c.1)
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let n = types.len();
    for k in 0..n {
        let mut d = (5 * k + 3) % n;
        if d == k {
            d = (d + 1) % n;
        }
        let family = cast_families[k % cast_families.len()];
        wanted.insert(format!("cast_{family}_{}_{}", types[k], types[d]));
    }
    modules
        .iter()
        .filter(|(name, _)| wanted.contains(*name))
        .copied()
        .collect()
}

fn run(out: &Out, sampled: bool) -> Result<(), String> {
    let ptxas = find_ptxas()?;
    let all: &[(&str, &str)] = devspan::internals::ptx_modules();
    assert!(!all.is_empty());
    let modules = if sampled { sample(all) } else { all.to_vec() };

    let dir = env::temp_dir().join(format!("devspan-ptxas-{}", std::process::id()));
    fs::create_dir_all(&dir).unwrap();
    for (name, text) in &modules {
        fs::write(dir.join(format!("{name}.ptx")), text).unwrap();
    }

    let archs: Vec<&str> = ARCHS
        .iter()
        .copied()
        .filter(|a| {
            let known = knows_arch(&ptxas, &dir, a);
            if !known {
                assert!(!STRICT_ARCHS.contains(a), "this ptxas does not know {a}");
                out.summary(&format!(
                    "this ptxas does not know {a}: skipping that compatibility check"
                ));
            }
            known
        })
        .collect();
    // Each module on every architecture from its own `.target` on (the `cp.async` modules
    // target sm_80).
    let jobs: Vec<(&str, &str)> = modules
        .iter()
        .flat_map(|(n, text)| {
            let target = module_target(text);
            archs
                .iter()
                .filter(move |a| arch_number(a) >= target)
                .map(move |a| (*n, *a))
        })
        .collect();
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<RunResult>> = Mutex::new(Vec::new());
    let threads = thread::available_parallelism()
        .map_or(2, |n| n.get())
        .clamp(1, 8);
    thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(&(name, arch)) = jobs.get(i) else {
                        break;
                    };
                    let r = assemble(&ptxas, &dir, name, arch);
                    results
                        .lock()
                        .unwrap()
                        .push((name.to_string(), arch.to_string(), r));
                }
            });
        }
    });
    let _ = fs::remove_dir_all(&dir);

    let mut results = results.into_inner().unwrap();
    results.sort_by(|a, b| (&a.1, &a.0).cmp(&(&b.1, &b.0)));
    let mut failures = Vec::new();
    for (name, arch, r) in &results {
        match r {
            Ok(kernels) => {
                for k in kernels {
                    out.detail(&format!(
                        "{arch} {name} {}: {} registers, {} bytes smem, {} bytes stack, {}+{} bytes spilled",
                        k.name, k.registers, k.smem, k.stack, k.spill_stores, k.spill_loads
                    ));
                }
            }
            Err(e) => failures.push(e.clone()),
        }
    }
    for arch in archs {
        let regs: Vec<u32> = results
            .iter()
            .filter(|r| r.1 == arch)
            .filter_map(|r| r.2.as_ref().ok())
            .flatten()
            .map(|k| k.registers)
            .collect();
        if let (Some(lo), Some(hi)) = (regs.iter().min(), regs.iter().max()) {
            out.summary(&format!(
                "{arch}: {} kernels, {lo}..={hi} registers",
                regs.len()
            ));
        }
    }
    if sampled {
        let names: Vec<&str> = modules.iter().map(|m| m.0).collect();
        out.detail(&format!("sample: {}", names.join(", ")));
    }
    out.summary(&format!(
        "ptxas: {} of {} modules, {} runs",
        modules.len(),
        all.len(),
        jobs.len()
    ));
    if failures.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{} of {} ptxas runs failed:\n{}",
            failures.len(),
            jobs.len(),
            failures.join("\n")
        ))
    }
}
