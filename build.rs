//! Embeds the PTX modules that `devspan_kernels::emit` generates: stores them
//! deflate-compressed in groups, with machine code for the first-used kernels when `ptxas` is
//! available, and writes an index of them to `$OUT_DIR/ptx_modules.rs`.

use std::collections::BTreeMap;
use std::env;
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("OUT_DIR"));
    let ptx_dir = out.join("ptx");
    fs::create_dir_all(&ptx_dir).expect("create OUT_DIR/ptx");
    let mods = devspan_kernels::emit::modules();
    let cubins = aot::compile(&out, &mods);
    write_index(&out, &ptx_dir, &mods, &cubins);
}

/// Machine code for the kernels a process meets first, compiled when `ptxas` is available at
/// build time; the PTX stays the fallback for other devices and kernels.
mod aot {
    use std::env;
    use std::fs;
    use std::path::{Path, PathBuf};
    use std::process::Command;

    /// Module families compiled ahead of time: fills, contiguous copies and casts (the kernels
    /// of a process's first operations; the others are JIT-compiled on first use).
    const FAMILIES: &[&str] = &["fill_", "copy_contig_", "cast_contig_"];
    /// Architectures compiled for unless `DEVSPAN_CUBIN_ARCHS` names others (a cubin for
    /// `sm_80` also serves `sm_86` and `sm_89`).
    const DEFAULT_ARCHS: &str = "sm_80,sm_90";

    /// `ptxas`: `DEVSPAN_PTXAS` (a path; `off` disables machine code), else `ptxas` in the
    /// CUDA toolkit of `CUDA_PATH` or `/usr/local/cuda`, else on `PATH`.
    fn find_ptxas() -> Option<PathBuf> {
        println!("cargo:rerun-if-env-changed=DEVSPAN_PTXAS");
        println!("cargo:rerun-if-env-changed=CUDA_PATH");
        if let Some(p) = env::var_os("DEVSPAN_PTXAS") {
            if p == "off" || p.is_empty() {
                return None;
            }
            return Some(PathBuf::from(p));
        }
        let mut dirs: Vec<PathBuf> = env::var_os("CUDA_PATH")
            .map(|c| PathBuf::from(c).join("bin"))
            .into_iter()
            .collect();
        dirs.push(PathBuf::from("/usr/local/cuda/bin"));
        if let Some(path) = env::var_os("PATH") {
            dirs.extend(env::split_paths(&path));
        }
        dirs.into_iter()
            .map(|d| d.join("ptxas"))
            .find(|p| p.is_file())
    }

    /// A module's machine code: `(module, architecture, cubin)`.
    pub type Cubin = (String, String, Vec<u8>);

    /// `(module, arch, cubin)` for every module of [`FAMILIES`] and every architecture, or
    /// nothing when `ptxas` is missing or fails (with a build warning naming why).
    pub fn compile(out: &Path, mods: &[(String, String)]) -> Vec<Cubin> {
        println!("cargo:rerun-if-env-changed=DEVSPAN_CUBIN_ARCHS");
        let Some(ptxas) = find_ptxas() else {
            return Vec::new();
        };
        let archs = env::var("DEVSPAN_CUBIN_ARCHS").unwrap_or_else(|_| DEFAULT_ARCHS.into());
        let archs: Vec<&str> = archs
            .split(',')
            .map(str::trim)
            .filter(|a| !a.is_empty())
            .collect();
        let jobs: Vec<(&String, &String, &str)> = mods
            .iter()
            .filter(|(n, _)| FAMILIES.iter().any(|f| n.starts_with(f)))
            .flat_map(|(n, t)| archs.iter().map(move |&a| (n, t, a)))
            .collect();
        let dir = out.join("aot");
        let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
        let chunk = jobs.len().div_ceil(threads).max(1);
        let results: Vec<Result<Cubin, String>> = std::thread::scope(|s| {
            let handles: Vec<_> = jobs
                .chunks(chunk)
                .map(|part| {
                    let (dir, ptxas) = (&dir, &ptxas);
                    s.spawn(move || {
                        part.iter()
                            .map(|&(n, t, a)| one(ptxas, dir, n, t, a))
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            handles
                .into_iter()
                .flat_map(|h| h.join().unwrap_or_default())
                .collect()
        });
        let mut cubins = Vec::with_capacity(results.len());
        for r in results {
            match r {
                Ok(c) => cubins.push(c),
                Err(e) => {
                    println!(
                        "cargo:warning=devspan: no machine code embedded, the PTX is JIT-compiled on first use ({e})"
                    );
                    return Vec::new();
                }
            }
        }
        cubins
    }

    /// The cubin of module `name` for `arch`, reusing the one of an earlier build when its PTX
    /// is unchanged.
    fn one(ptxas: &Path, dir: &Path, name: &str, text: &str, arch: &str) -> Result<Cubin, String> {
        let d = dir.join(arch);
        fs::create_dir_all(&d).map_err(|e| format!("{}: {e}", d.display()))?;
        let (ptx, cubin) = (
            d.join(format!("{name}.ptx")),
            d.join(format!("{name}.cubin")),
        );
        let fresh = fs::read_to_string(&ptx).is_ok_and(|old| old == text);
        if !fresh || !cubin.is_file() {
            fs::write(&ptx, text).map_err(|e| format!("{}: {e}", ptx.display()))?;
            let _ = fs::remove_file(&cubin);
            let run = Command::new(ptxas)
                .arg(format!("-arch={arch}"))
                .arg("-O3")
                .arg(&ptx)
                .arg("-o")
                .arg(&cubin)
                .output()
                .map_err(|e| format!("cannot run {}: {e}", ptxas.display()))?;
            if !run.status.success() {
                return Err(format!(
                    "{} -arch={arch} {name}: {}",
                    ptxas.display(),
                    String::from_utf8_lossy(&run.stderr).trim()
                ));
            }
        }
        let bytes = fs::read(&cubin).map_err(|e| format!("{}: {e}", cubin.display()))?;
        Ok((name.to_string(), arch.to_string(), bytes))
    }
}

/// The group a module is stored in: its name less the last `_` part (the element size or the
/// destination type), so that a group holds the variants of one kernel for one source type.
fn group_of(name: &str) -> &str {
    name.rsplit_once('_').map_or(name, |(g, _)| g)
}

/// Writes each group of modules, deflate-compressed, to `$OUT_DIR/ptx/GROUP.deflate` (the
/// PTX texts, or the cubins of one architecture, concatenated in name order) and an index of
/// groups, modules and cubins to `$OUT_DIR/ptx_modules.rs`. The library inflates a group on the
/// first use of one of its modules.
fn write_index(out: &Path, ptx_dir: &Path, mods: &[(String, String)], cubins: &[aot::Cubin]) {
    // Groups of PTX texts by kernel and source type, then groups of cubins by architecture and
    // the same key.
    let mut groups: BTreeMap<String, Vec<(&str, &[u8])>> = BTreeMap::new();
    for (name, text) in mods {
        groups
            .entry(group_of(name).to_string())
            .or_default()
            .push((name, text.as_bytes()));
    }
    for (name, arch, bin) in cubins {
        groups
            .entry(format!("{arch}.{}", group_of(name)))
            .or_default()
            .push((name, bin));
    }
    let mut index = String::new();
    index.push_str("/// Every group: `(name, deflate-compressed contents, inflated length)`.\n");
    index.push_str("pub static GROUPS: &[(&str, &[u8], usize)] = &[\n");
    let mut entries = Vec::new();
    let mut aot = Vec::new();
    for (g, (name, members)) in groups.iter().enumerate() {
        let mut blob = Vec::new();
        for &(m, bytes) in members {
            match name.split_once('.') {
                Some((arch, _)) => {
                    aot.push((m.to_string(), arch.to_string(), g, blob.len(), bytes.len()))
                }
                None => entries.push((m.to_string(), g, blob.len(), bytes.len())),
            }
            blob.extend_from_slice(bytes);
        }
        let file = ptx_dir.join(format!("{name}.deflate"));
        let packed = miniz_oxide::deflate::compress_to_vec(&blob, 9);
        write_bytes_if_changed(&file, &packed);
        writeln!(
            index,
            "    ({name:?}, include_bytes!({:?}), {}),",
            file.display().to_string(),
            blob.len()
        )
        .unwrap();
    }
    index.push_str("];\n");
    entries.sort();
    index.push_str(
        "/// Every module, sorted by name: `(name, group, offset, length)` of its PTX text in\n\
         /// the inflated group.\n",
    );
    index.push_str("pub static MODULES: &[(&str, usize, usize, usize)] = &[\n");
    for (name, g, off, len) in &entries {
        writeln!(index, "    ({name:?}, {g}, {off}, {len}),").unwrap();
    }
    index.push_str("];\n");
    aot.sort();
    index.push_str(
        "/// Machine code compiled at build time, sorted: `(module, architecture, group, offset,\n\
         /// length)` of its cubin in the inflated group.\n",
    );
    index.push_str("pub static CUBINS: &[(&str, &str, usize, usize, usize)] = &[\n");
    for (name, arch, g, off, len) in &aot {
        writeln!(index, "    ({name:?}, {arch:?}, {g}, {off}, {len}),").unwrap();
    }
    index.push_str("];\n");
    write_if_changed(&out.join("ptx_modules.rs"), &index);
}

fn write_bytes_if_changed(path: &Path, bytes: &[u8]) {
    if fs::read(path).is_ok_and(|old| old == bytes) {
        return;
    }
    fs::write(path, bytes).unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
}

fn write_if_changed(path: &Path, text: &str) {
    if fs::read_to_string(path).is_ok_and(|old| old == text) {
        return;
    }
    fs::write(path, text).unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
}
