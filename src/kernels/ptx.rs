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

/// The inflated text of each group, made on the first use of one of its modules.
static INFLATED: [OnceLock<Box<str>>; generated::GROUPS.len()] =
    [const { OnceLock::new() }; generated::GROUPS.len()];

/// The PTX texts of group `g`, concatenated, inflated on first use. The build script wrote
/// them compressed from valid UTF-8 text; a group that fails to inflate (a corrupted binary)
/// reads as empty, and its modules then fail to load with the driver's error.
fn group_text(g: usize) -> &'static str {
    INFLATED[g].get_or_init(|| {
        let (_, packed, len) = generated::GROUPS[g];
        miniz_oxide::inflate::decompress_to_vec_with_limit(packed, len)
            .ok()
            .filter(|t| t.len() == len)
            .and_then(|t| String::from_utf8(t).ok())
            .unwrap_or_default()
            .into_boxed_str()
    })
}

fn text_of(&(_, g, off, len): &(&'static str, usize, usize, usize)) -> &'static str {
    group_text(g).get(off..off + len).unwrap_or("")
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_module_is_present_sorted_and_versioned() {
        let names: Vec<&str> = modules().iter().map(|(n, _)| *n).collect();
        assert_eq!(names.len(), 4 * 3 + 4 * 7 + 3 + 3 + 1 + 12 * 11 * 7);
        assert!(names.windows(2).all(|w| w[0] < w[1]));
        for (name, text) in modules() {
            assert!(text.starts_with(".version 7.0\n.target sm_52\n"), "{name}");
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
}
