//! The embedded PTX modules.
//!
//! Every module is a separate PTX text (`.version 7.0`, `.target sm_52`) holding one kernel and
//! named after it, meant to be loaded lazily, on first use, by the driver's JIT compiler. One
//! kernel per module keeps the JIT's work to the kernels a process uses: the first fill and cast
//! of a process compile two small modules, not every variant of their element types.
//!
//! The texts are embedded deflate-compressed, in groups of the variants of one kernel for one
//! source type (`cast_contig_f32` holds `cast_contig_f32_u8` ... `cast_contig_f32_f64`;
//! `copy_rows` holds `copy_rows_b1` ... `copy_rows_b8`); a group is inflated once, on the first
//! use of one of its modules, and kept.
//!
//! When `ptxas` is available at build time (`DEVSPAN_PTXAS`, a CUDA toolkit, or `PATH`; set
//! `DEVSPAN_PTXAS=off` to skip it), the fills and the contiguous copies and casts are also
//! embedded as machine code for the architectures of `DEVSPAN_CUBIN_ARCHS` (default
//! `sm_80,sm_90`): a device of those architectures loads them without JIT compilation. Every
//! other case JIT-compiles the PTX.
//!
//! | kernels |
//! | --- |
//! | `fill_contig_bN`, `fill_strided32_bN`, `fill_strided64_bN` (N = 1, 2, 4, 8) |
//! | `copy_contig_bN`, `copy_strided32_bN`, `copy_strided64_bN`, `copy_rows_bN`, `copy_transpose_bN`, `copy_permute_bN`, `copy_permute32_bN`, `copy_permute_packed_bN` (N = 1, 2), `copy_permute_packed128_b1`, `copy_permute_vec_b1` |
//! | `copy_permute_wN` (N = 16, 32, 64: bytes per slot, any element type) |
//! | `cast_contig_S_D`, `cast_strided32_S_D`, `cast_strided64_S_D`, `cast_rows_S_D`, `cast_transpose_S_D`, `cast_permute_S_D`, `cast_permute32_S_D` (S != D) |
//!
//! `S` and `D` are element type names (`u8` ... `f64`); `N` is an element size in bytes (for
//! `copy_permute_wN`, the bytes of a slot's run). Each is the
//! [`module_name`](devspan_kernels::abi::Kernel::module_name) of a
//! [`Kernel`](devspan_kernels::abi::Kernel); the argument lists are described in
//! [`devspan_kernels::abi`].

mod generated {
    include!(concat!(env!("OUT_DIR"), "/ptx_modules.rs"));
}

use std::sync::OnceLock;

/// The inflated contents of each group, made on the first use of one of its modules.
static INFLATED: [OnceLock<Box<[u8]>>; generated::GROUPS.len()] =
    [const { OnceLock::new() }; generated::GROUPS.len()];

/// The contents of group `g` (PTX texts or cubins, concatenated), inflated on first use. A
/// group that fails to inflate (a corrupted binary) reads as empty: its PTX modules then fail
/// to load with the driver's error, and its cubins are not used.
fn group(g: usize) -> &'static [u8] {
    INFLATED[g].get_or_init(|| {
        let (_, packed, len) = generated::GROUPS[g];
        miniz_oxide::inflate::decompress_to_vec_with_limit(packed, len)
            .ok()
            .filter(|t| t.len() == len)
            .unwrap_or_default()
            .into_boxed_slice()
    })
}

fn bytes_of(g: usize, off: usize, len: usize) -> &'static [u8] {
    group(g).get(off..off + len).unwrap_or(&[])
}

fn text_of(&(_, g, off, len): &(&'static str, usize, usize, usize)) -> &'static str {
    std::str::from_utf8(bytes_of(g, off, len)).unwrap_or("")
}

/// Every module as `(name, PTX text)`, sorted by name (every group inflated).
#[cfg(any(test, feature = "internals"))]
pub fn modules() -> &'static [(&'static str, &'static str)] {
    static ALL: OnceLock<Vec<(&'static str, &'static str)>> = OnceLock::new();
    ALL.get_or_init(|| {
        generated::MODULES
            .iter()
            .map(|m| (m.0, text_of(m)))
            .collect()
    })
}

/// The architectures machine code was embedded for, with the number of modules of each.
#[cfg(any(test, feature = "internals"))]
pub fn cubin_archs() -> Vec<(&'static str, usize)> {
    let mut out: Vec<(&'static str, usize)> = Vec::new();
    for &(_, arch, ..) in generated::CUBINS {
        match out.iter_mut().find(|(a, _)| *a == arch) {
            Some((_, n)) => *n += 1,
            None => out.push((arch, 1)),
        }
    }
    out
}

fn find(name: &str) -> Option<&'static (&'static str, usize, usize, usize)> {
    let mods = generated::MODULES;
    mods.binary_search_by(|m| m.0.cmp(name))
        .ok()
        .map(|i| &mods[i])
}

/// The PTX text of module `name`, if there is such a module.
pub fn module_ptx(name: &str) -> Option<&'static str> {
    find(name).map(text_of)
}

/// Machine code of module `name` for a device of compute capability `major.minor`, if it was
/// compiled at build time: the cubin of the same major version and the highest minor version
/// not above `minor` (cubins run on later minor versions of their major version).
pub fn module_cubin(name: &str, major: i32, minor: i32) -> Option<&'static [u8]> {
    let mut best: Option<(i32, &'static [u8])> = None;
    for &(m, arch, g, off, len) in generated::CUBINS {
        if m != name {
            continue;
        }
        let Some(v) = arch.strip_prefix("sm_").and_then(|v| v.parse::<i32>().ok()) else {
            continue;
        };
        let (ma, mi) = (v / 10, v % 10);
        if ma == major && mi <= minor && best.is_none_or(|(b, _)| mi > b) {
            best = Some((mi, bytes_of(g, off, len)));
        }
    }
    best.map(|(_, b)| b).filter(|b| !b.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_module_is_present_sorted_and_versioned() {
        let names: Vec<&str> = modules().iter().map(|(n, _)| *n).collect();
        // Fills (five kinds per size; rows of 1 and 2 bytes), ten copy kinds and the one-axis
        // strided copy, reversed rows and gathered rows per size, reversed rows of runs of 3 for 1
        // and 2 bytes, runs reversed of 2 per size, of 3 for 1 and 2 bytes and of 4 for 1, 2 and 4
        // bytes, shifted and scattered rows per size, packed b1 and b2, packed128 b1, vec b1,
        // tiled_a b1 and b2, tiled_ew b1, b2 and b4, three wide copies, casts that change bits
        // (ten kinds and the gathered rows), narrow splits and joins, aligned and shifted, of 2 to
        // 16 channels (2-byte elements shifted only; no shifted ones of 4- and 8-byte units under
        // 5 channels).
        let reversed = 4 + 2 + 4 + 2 + 3 + 4 + 4;
        let copies = 4 * 11 + 4 + reversed + 2 + 1 + 1 + 2 + 3 + 3;
        let casts = (12 * 11 - 8) * 11;
        let narrow = 3 * 4 * 15 + 2 * 15 - 2 * 2 * 3;
        assert_eq!(names.len(), 5 * 4 + 2 + copies + casts + narrow);
        assert!(names.windows(2).all(|w| w[0] < w[1]));
        for (name, text) in modules() {
            // The cp.async kernels (`*_tiled_a_*`) target sm_80, every other sm_52.
            let target = if name.contains("_tiled_a_") {
                "sm_80"
            } else {
                "sm_52"
            };
            assert!(
                text.starts_with(&format!(".version 7.0\n.target {target}\n")),
                "{name}"
            );
        }
        for (name, text) in modules() {
            assert_eq!(text.matches(".entry ").count(), 1, "{name}");
            assert!(text.contains(&format!(".visible .entry {name}(")), "{name}");
        }
        assert!(module_ptx("cast_contig_f32_f32").is_none());
        assert!(module_ptx("fill_contig_b4").is_some());
        assert!(module_ptx("copy_permute_packed_b1").is_some());
        assert!(module_ptx("copy_permute_packed_b2").is_some());
        assert!(module_ptx("copy_permute_packed_b4").is_none());
        assert!(module_ptx("copy_permute_packed128_b1").is_some());
        assert!(module_ptx("copy_permute_packed128_b2").is_none());
        assert!(module_ptx("copy_permute_vec_b1").is_some());
        assert!(module_ptx("copy_permute_vec_b2").is_none());
        assert!(module_ptx("copy_permute_w32").is_some());
        assert!(module_ptx("copy_permute_w32_b2").is_none());
    }

    /// Embedded machine code, when the build had `ptxas`: every cubin is an ELF image of an
    /// existing module, and the lookup picks the right architecture.
    #[test]
    fn cubins_are_elf_images_of_known_modules() {
        for &(name, arch, g, off, len) in generated::CUBINS {
            assert!(module_ptx(name).is_some(), "{name}");
            assert!(arch.starts_with("sm_"), "{arch}");
            assert!(
                bytes_of(g, off, len).starts_with(b"\x7fELF"),
                "{arch} {name}"
            );
        }
        let archs = cubin_archs();
        if archs.iter().any(|&(a, _)| a == "sm_80") {
            assert!(module_cubin("fill_contig_b4", 8, 9).is_some());
            assert!(module_cubin("fill_contig_b4", 8, 0).is_some());
            assert!(module_cubin("copy_permute_w32", 8, 0).is_none());
        }
        assert!(module_cubin("fill_contig_b4", 7, 5).is_none());
        eprintln!("embedded machine code: {archs:?}");
    }
}
