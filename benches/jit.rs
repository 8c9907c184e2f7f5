//! What the driver's JIT compiler costs per embedded PTX module: the wall time of
//! `cuModuleLoadDataEx` for each module at each optimisation level (the default, then 4 to 0),
//! the median of 3 loads, with the driver's JIT cache disabled (`CUDA_CACHE_DISABLE=1`, in a
//! child process) so that every load compiles. A process's first operations pay this once per
//! module when no machine code for the device is embedded.
//!
//! `cargo bench --bench jit` (needs a GPU; without one it says so and exits); module names as
//! arguments replace the default list.

use std::ffi::CString;
use std::time::Instant;

use cudarc::driver::sys;

/// Modules timed by default: the first operations' kernels and the permute families.
const DEFAULT: &[&str] = &[
    "fill_contig_b4",
    "fill_strided32_b4",
    "fill_strided1_b4",
    "fill_strided64_b4",
    "fill_stridedn_b4",
    "copy_contig_b4",
    "cast_contig_f32_bf16",
    "cast_contig_u8_f64",
    "copy_strided32_b4",
    "cast_strided32_f32_bf16",
    "copy_rows_b4",
    "copy_permute_b4",
    "copy_permute_vec_b1",
    "copy_tiled_b1",
    "copy_tiled_b4",
    "copy_tiled_e_b4",
    "cast_tiled_f32_f16",
    "copy_stridedn_b4",
];

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

/// Milliseconds of one `cuModuleLoadDataEx` of `text` at optimisation `level` (`None`: the
/// driver's default), with the module unloaded after.
fn load_ms(text: &CString, level: Option<u32>) -> f64 {
    let mut opts = Vec::new();
    let mut vals: Vec<*mut std::ffi::c_void> = Vec::new();
    if let Some(l) = level {
        opts.push(sys::CUjit_option::CU_JIT_OPTIMIZATION_LEVEL);
        vals.push(l as usize as *mut std::ffi::c_void);
    }
    let mut m: sys::CUmodule = std::ptr::null_mut();
    let t = Instant::now();
    // SAFETY: `text` is a NUL-terminated PTX image that outlives the call; the option arrays
    // hold `opts.len()` entries each, values passed by value as the driver API documents for
    // CU_JIT_OPTIMIZATION_LEVEL.
    let r = unsafe {
        sys::cuModuleLoadDataEx(
            &mut m,
            text.as_ptr().cast(),
            opts.len() as u32,
            opts.as_mut_ptr(),
            vals.as_mut_ptr(),
        )
    };
    let ms = t.elapsed().as_secs_f64() * 1e3;
    assert_eq!(r, sys::CUresult::CUDA_SUCCESS, "cuModuleLoadDataEx: {r:?}");
    // SAFETY: `m` was loaded above and nothing uses it.
    unsafe { sys::cuModuleUnload(m) };
    ms
}

fn child(names: &[String]) {
    let stream = devspan::new_stream(0).unwrap();
    stream.context().bind_to_thread().unwrap();
    let modules = devspan::internals::ptx_modules();
    // The process's first JIT compilation, of an empty kernel, then a second one: the
    // difference is what the JIT's start costs once per process.
    let empty = CString::new(
        ".version 7.0\n.target sm_52\n.address_size 64\n.visible .entry e() { ret; }\n",
    )
    .unwrap();
    let first = load_ms(&empty, None);
    let second = load_ms(&empty, None);
    println!("empty kernel: first JIT in the process {first:.2} ms, second {second:.2} ms");
    println!(
        "{:<28} {:>6} {:>8}  ms at opt level: default, 4, 3, 2, 1, 0",
        "module", "lines", "bytes"
    );
    for name in names {
        let Some((_, text)) = modules.iter().find(|(n, _)| n == name) else {
            println!("{name}: no such module");
            continue;
        };
        let c = CString::new(*text).unwrap();
        let times: Vec<String> = [None, Some(4), Some(3), Some(2), Some(1), Some(0)]
            .into_iter()
            .map(|l| format!("{:6.2}", median((0..3).map(|_| load_ms(&c, l)).collect())))
            .collect();
        println!(
            "{name:<28} {:>6} {:>8}  {}",
            text.lines().count(),
            text.len(),
            times.join(" ")
        );
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let names: Vec<String> = args
        .iter()
        .filter(|a| !a.starts_with("--"))
        .cloned()
        .collect();
    let names = if names.is_empty() {
        DEFAULT.iter().map(|s| s.to_string()).collect()
    } else {
        names
    };
    if args.iter().any(|a| a == "--child") {
        child(&names);
        return;
    }
    if let Err(e) = devspan::device_count() {
        println!("jit bench: no GPU ({e}); nothing to measure");
        return;
    }
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .arg("--child")
        .args(&names)
        .env("CUDA_CACHE_DISABLE", "1")
        .output()
        .unwrap();
    print!("{}", String::from_utf8_lossy(&out.stdout));
    eprint!("{}", String::from_utf8_lossy(&out.stderr));
}
