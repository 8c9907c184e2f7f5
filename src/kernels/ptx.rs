//! The embedded PTX modules and the names of their kernels.
//!
//! Every module is a separate PTX text (`.version 7.0`, `.target sm_52`),
//! meant to be loaded lazily, on first use, by the driver's JIT compiler:
//!
//! | module | kernels |
//! | --- | --- |
//! | `fill_bN` (N = 1, 2, 4, 8) | `fill_contig_bN`, `fill_strided32_bN`, `fill_strided64_bN` |
//! | `copy_bN` | `copy_contig_bN`, `copy_strided32_bN`, `copy_strided64_bN`, `copy_transpose_bN` |
//! | `cast_S_D` (S != D) | `cast_contig_S_D`, `cast_strided32_S_D`, `cast_strided64_S_D`, `cast_transpose_S_D` |
//!
//! `S` and `D` are element tags (see [`ELEMENT_TAGS`]); `N` is an element
//! size in bytes. The argument lists are described in [`super::args`].

// The complete host-side API of the kernels; the crate need not use every item.
#![allow(dead_code)]

mod generated {
    include!(concat!(env!("OUT_DIR"), "/ptx_modules.rs"));
}

/// The element type tags with their sizes in bytes, in a fixed order.
pub const ELEMENT_TAGS: [(&str, usize); 12] = [
    ("u8", 1),
    ("i8", 1),
    ("u16", 2),
    ("i16", 2),
    ("u32", 4),
    ("i32", 4),
    ("u64", 8),
    ("i64", 8),
    ("f16", 2),
    ("bf16", 2),
    ("f32", 4),
    ("f64", 8),
];

/// Size in bytes of the element type `tag`, if it is one of [`ELEMENT_TAGS`].
pub fn element_size(tag: &str) -> Option<usize> {
    ELEMENT_TAGS
        .iter()
        .find(|(t, _)| *t == tag)
        .map(|&(_, s)| s)
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

/// The shape of data a kernel walks over; part of every kernel name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum KernelKind {
    /// Both sides contiguous: `(dst, src, n, head)` or, for fill,
    /// `(dst, n, head, value_bits)`.
    Contig,
    /// Any strides, 32-bit index math: [`super::args::StridedArgs32`].
    Strided32,
    /// Any strides, 64-bit index math: [`super::args::StridedArgs64`].
    Strided64,
    /// Batched 2-D transpose: [`super::args::TransposeArgs`]. Not available
    /// for fill.
    Transpose,
}

impl KernelKind {
    fn infix(self) -> &'static str {
        match self {
            KernelKind::Contig => "contig",
            KernelKind::Strided32 => "strided32",
            KernelKind::Strided64 => "strided64",
            KernelKind::Transpose => "transpose",
        }
    }
}

fn size_suffix(size: usize) -> Option<&'static str> {
    match size {
        1 => Some("b1"),
        2 => Some("b2"),
        4 => Some("b4"),
        8 => Some("b8"),
        _ => None,
    }
}

/// Module and kernel names for filling elements of `size` bytes, or `None`
/// if no such kernel exists (size not 1, 2, 4 or 8, or `kind` is
/// [`KernelKind::Transpose`]).
pub fn fill_kernel(size: usize, kind: KernelKind) -> Option<(String, String)> {
    let n = size_suffix(size)?;
    if kind == KernelKind::Transpose {
        return None;
    }
    Some((format!("fill_{n}"), format!("fill_{}_{n}", kind.infix())))
}

/// Module and kernel names for copying elements of `size` bytes unchanged,
/// or `None` if the size is not 1, 2, 4 or 8.
pub fn copy_kernel(size: usize, kind: KernelKind) -> Option<(String, String)> {
    let n = size_suffix(size)?;
    Some((format!("copy_{n}"), format!("copy_{}_{n}", kind.infix())))
}

/// Module and kernel names for converting `src` elements to `dst` elements
/// (tags from [`ELEMENT_TAGS`]), or `None` if a tag is unknown or
/// `src == dst` (use [`copy_kernel`] then).
pub fn cast_kernel(src: &str, dst: &str, kind: KernelKind) -> Option<(String, String)> {
    element_size(src)?;
    element_size(dst)?;
    if src == dst {
        return None;
    }
    Some((
        format!("cast_{src}_{dst}"),
        format!("cast_{}_{src}_{dst}", kind.infix()),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_module_is_present_and_names_its_kernels() {
        let names: Vec<&str> = module_names().collect();
        assert_eq!(names.len(), 4 + 4 + 12 * 11);
        assert!(names.windows(2).all(|w| w[0] < w[1]));
        let kinds = [
            KernelKind::Contig,
            KernelKind::Strided32,
            KernelKind::Strided64,
            KernelKind::Transpose,
        ];
        for size in [1, 2, 4, 8] {
            for kind in kinds {
                let (m, k) = copy_kernel(size, kind).unwrap();
                assert!(
                    module_ptx(&m).unwrap().contains(&format!(".entry {k}(")),
                    "{k}"
                );
                match fill_kernel(size, kind) {
                    Some((m, k)) => assert!(
                        module_ptx(&m).unwrap().contains(&format!(".entry {k}(")),
                        "{k}"
                    ),
                    None => assert_eq!(kind, KernelKind::Transpose),
                }
            }
        }
        for (s, _) in ELEMENT_TAGS {
            for (d, _) in ELEMENT_TAGS {
                for kind in kinds {
                    match cast_kernel(s, d, kind) {
                        Some((m, k)) => {
                            let ptx = module_ptx(&m).unwrap();
                            assert!(ptx.contains(&format!(".entry {k}(")), "{k}");
                            assert!(ptx.starts_with(".version 7.0\n.target sm_52\n"));
                        }
                        None => assert_eq!(s, d),
                    }
                }
            }
        }
        assert!(module_ptx("cast_f32_f32").is_none());
        assert!(fill_kernel(3, KernelKind::Contig).is_none());
        assert!(cast_kernel("f8", "f32", KernelKind::Contig).is_none());
    }
}
