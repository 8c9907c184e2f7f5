//! The embedded PTX modules and the names of their kernels.
//!
//! Every module is a separate PTX text (`.version 7.0`, `.target sm_52`),
//! meant to be loaded lazily, on first use, by the driver's JIT compiler:
//!
//! | module | kernels |
//! | --- | --- |
//! | `fill_bN` (N = 1, 2, 4, 8) | `fill_contig_bN`, `fill_strided32_bN`, `fill_strided64_bN` |
//! | `copy_bN` | `copy_contig_bN`, `copy_strided32_bN`, `copy_strided64_bN`, `copy_rows_bN`, `copy_transpose_bN`, `copy_permute_bN` |
//! | `cast_S_D` (S != D) | `cast_contig_S_D`, `cast_strided32_S_D`, `cast_strided64_S_D`, `cast_rows_S_D`, `cast_transpose_S_D`, `cast_permute_S_D` |
//!
//! `S` and `D` are element type names (`u8` ... `f64`); `N` is an element size in bytes. The
//! launcher in `super` derives these names; the argument lists are described in [`super::args`].

mod generated {
    include!(concat!(env!("OUT_DIR"), "/ptx_modules.rs"));
}

/// Every module as `(name, PTX text)`, sorted by name.
pub fn modules() -> &'static [(&'static str, &'static str)] {
    generated::MODULES
}

/// The PTX text of module `name`, if there is such a module.
pub fn module_ptx(name: &str) -> Option<&'static str> {
    let mods = generated::MODULES;
    mods.binary_search_by(|(n, _)| (*n).cmp(name))
        .ok()
        .map(|i| mods[i].1)
}

/// The names of all modules, sorted.
pub fn module_names() -> impl Iterator<Item = &'static str> {
    generated::MODULES.iter().map(|(n, _)| *n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_module_is_present_sorted_and_versioned() {
        let names: Vec<&str> = module_names().collect();
        assert_eq!(names.len(), 4 + 4 + 12 * 11);
        assert!(names.windows(2).all(|w| w[0] < w[1]));
        for (name, text) in modules() {
            assert!(text.starts_with(".version 7.0\n.target sm_52\n"), "{name}");
        }
        assert!(module_ptx("cast_f32_f32").is_none());
        assert!(module_ptx("fill_b4").is_some());
    }
}
