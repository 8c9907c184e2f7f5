//! Assembles every embedded PTX module with NVIDIA's `ptxas` and fails on any
//! error; for sm_80 and sm_90 also on any register spill or stack frame
//! (sm_52, the modules' `.target`, is assembled for compatibility only, and only by a `ptxas`
//! that still knows it: CUDA 13's dropped it).
//!
//! `ptxas` is taken from `DEVSPAN_PTXAS` (a path), else from `PATH`; without
//! it the test is skipped, unless `DEVSPAN_REQUIRE_PTXAS` is set.

use std::env;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;

const ARCHS: [&str; 3] = ["sm_52", "sm_80", "sm_90"];

/// Architectures on which spills and stack frames are errors.
const STRICT_ARCHS: [&str; 2] = ["sm_80", "sm_90"];

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
        .ok_or_else(|| "ptxas is neither in DEVSPAN_PTXAS nor on PATH".to_string())
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
        if k.stack != 0 || k.spill_stores != 0 || k.spill_loads != 0 {
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

#[test]
fn ptxas_accepts_every_module() {
    let ptxas = match find_ptxas() {
        Ok(p) => p,
        Err(why) => {
            if env::var_os("DEVSPAN_REQUIRE_PTXAS").is_some() {
                panic!("DEVSPAN_REQUIRE_PTXAS is set but {why}");
            }
            eprintln!("skipping the ptxas check: {why}");
            return;
        }
    };
    let modules: &[(&str, &str)] = devspan::internals::ptx_modules();
    assert!(!modules.is_empty());

    let dir = env::temp_dir().join(format!("devspan-ptxas-{}", std::process::id()));
    fs::create_dir_all(&dir).unwrap();
    for (name, text) in modules {
        fs::write(dir.join(format!("{name}.ptx")), text).unwrap();
    }

    let archs: Vec<&str> = ARCHS
        .iter()
        .copied()
        .filter(|a| {
            let known = knows_arch(&ptxas, &dir, a);
            if !known {
                assert!(!STRICT_ARCHS.contains(a), "this ptxas does not know {a}");
                println!("this ptxas does not know {a}: skipping that compatibility check");
            }
            known
        })
        .collect();
    let jobs: Vec<(&str, &str)> = modules
        .iter()
        .flat_map(|(n, _)| archs.iter().map(move |a| (*n, *a)))
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
                    println!(
                        "{arch} {name} {}: {} registers, {} bytes smem, {} bytes stack, {}+{} bytes spilled",
                        k.name, k.registers, k.smem, k.stack, k.spill_stores, k.spill_loads
                    );
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
            println!("{arch}: {} kernels, {lo}..={hi} registers", regs.len());
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} ptxas runs failed:\n{}",
        failures.len(),
        jobs.len(),
        failures.join("\n")
    );
}
