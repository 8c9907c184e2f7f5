//! The PTX generator: expands the templates in `templates/` into one PTX module per
//! [`Kernel`], for every element size (fill, copy) and ordered pair of element types (cast).
//!
//! Template syntax: `{{KEY}}` is replaced by a value computed here. Every key used by a
//! template must be supplied, and every supplied key must be used. `{{args.FIELD}}` is the
//! byte offset of `FIELD` in the kernel's argument block and `{{args.SIZE}}` the block's size,
//! both taken from the [`ParamBlock`] of [`crate::abi`], as are the offsets the generated code
//! reads parameters at.
//!
//! [`ParamBlock`]: crate::abi::ParamBlock

use crate::abi::{Kernel, Kind};

mod code;
mod contig;
mod convert;
mod layout;
mod load_store;
mod narrow;
mod permute;
mod rows;
mod strided;
mod stridedn;
mod templates;
#[cfg(test)]
mod tests;
mod tiled;
mod transpose;
mod types;

use contig::{contig_kernel, fill_contig_kernel};
use layout::{STRIDED32, STRIDED32_RANK1, STRIDED64};
use rows::row_kernel;
use strided::strided_kernel;
use templates::Templates;
use transpose::transpose_kernel;
use types::{Ty, bits_ty, elem_ty};

const PTX_VERSION: &str = "7.0";
const PTX_TARGET: &str = "sm_52";
/// The target of the modules that use `cp.async` ([`Kind::TiledA`]).
const PTX_TARGET_ASYNC: &str = "sm_80";

/// The element operation of a kernel.
#[derive(Clone, Copy)]
enum Op {
    /// Store a constant of `size` bytes.
    Fill(Ty),
    /// Copy bit patterns (`s == d`) or convert `s` to `d`.
    Cast(Ty, Ty),
}

// ---------------------------------------------------------------------------
// Modules
// ---------------------------------------------------------------------------

fn module(t: &mut Templates, target: &str, kernels: Vec<String>) -> String {
    let header = t.render(
        "header.ptx",
        &[
            ("VERSION", PTX_VERSION.to_string()),
            ("TARGET", target.to_string()),
        ],
    );
    let mut out = header.trim_end().to_string();
    out.push('\n');
    for k in kernels {
        out.push('\n');
        out.push_str(k.trim_end());
        out.push('\n');
    }
    out
}

/// Every module as `(name, PTX text)`, sorted by name: one per [`Kernel`] of
/// [`Kernel::all`], named [`Kernel::module_name`] like the one kernel it holds. A module holds
/// a single kernel so that the driver's JIT compiles only the kernels a process uses:
/// compiling a module costs time in proportion to all the code in it.
pub fn modules() -> Vec<(String, String)> {
    let mut mods: Vec<(String, String)> = Kernel::all()
        .into_iter()
        .map(|k| (k.module_name(), module_ptx(k)))
        .collect();
    mods.sort_by(|a, b| a.0.cmp(&b.0));
    mods
}

/// The PTX module of kernel `k`: the header and the kernel.
pub fn module_ptx(k: Kernel) -> String {
    let mut t = Templates;
    let text = kernel(&mut t, k);
    let target = if k.kind() == Kind::TiledA {
        PTX_TARGET_ASYNC
    } else {
        PTX_TARGET
    };
    module(&mut t, target, vec![text])
}

/// The PTX text of kernel `k`, its entry point named [`Kernel::module_name`].
fn kernel(t: &mut Templates, k: Kernel) -> String {
    let name = k.module_name();
    match k {
        Kernel::Fill { kind, size } => {
            let e = bits_ty(size as u64);
            match kind {
                Kind::Contig => fill_contig_kernel(t, &name, e),
                Kind::Strided32 => strided_kernel(t, &name, Op::Fill(e), &STRIDED32),
                Kind::Strided64 => strided_kernel(t, &name, Op::Fill(e), &STRIDED64),
                Kind::Strided1 => strided_kernel(t, &name, Op::Fill(e), &STRIDED32_RANK1),
                Kind::Rows => rows::fill_row_kernel(t, &name, e),
                Kind::StridedN => stridedn::stridedn_kernel(t, &name, Op::Fill(e)),
                _ => panic!("no fill kernel {name}"),
            }
        }
        Kernel::Copy { kind, size } => match kind.wide() {
            Some(w) => {
                let by = u64::from(w.block.1);
                permute::permute_wide_kernel(t, &name, w.vectors, (w.tile, by))
            }
            None => {
                let e = bits_ty(size as u64);
                elementwise(t, &name, k, e, e)
            }
        },
        Kernel::Cast { from, to, .. } => elementwise(t, &name, k, elem_ty(from), elem_ty(to)),
        Kernel::Narrow { size, narrow } => narrow::narrow_kernel(t, &name, size, narrow),
    }
}

/// The copy or cast kernel `k` (not a wide one) from `s` to `d`.
fn elementwise(t: &mut Templates, name: &str, k: Kernel, s: Ty, d: Ty) -> String {
    let tile = || {
        let tt = k.kind().permute_tile().expect("a permute kind");
        (tt, u64::from(k.block().1))
    };
    match k.kind() {
        Kind::Contig => contig_kernel(t, name, s, d),
        Kind::Strided32 => strided_kernel(t, name, Op::Cast(s, d), &STRIDED32),
        Kind::Strided64 => strided_kernel(t, name, Op::Cast(s, d), &STRIDED64),
        Kind::Strided1 => strided_kernel(t, name, Op::Cast(s, d), &STRIDED32_RANK1),
        Kind::Transpose => transpose_kernel(t, name, s, d),
        Kind::Rows => row_kernel(t, name, s, d),
        Kind::RowsGather => rows::row_gather_kernel(t, name, s, d, false),
        Kind::RowsScatter => rows::row_gather_kernel(t, name, s, d, true),
        Kind::RowsRev
        | Kind::RowsRev3
        | Kind::RunsRev2
        | Kind::RunsRev3
        | Kind::RunsRev4
        | Kind::RowsShifted => {
            let runs = k.kind().row_runs().expect("a reversed row kind");
            rows::row_rev_kernel(t, name, s, runs)
        }
        Kind::Permute | Kind::Permute32 => permute::permute_kernel(t, name, s, d, tile()),
        Kind::PermutePacked | Kind::PermutePacked128 => {
            permute::permute_packed_kernel(t, name, s, tile())
        }
        Kind::PermuteVec => permute::permute_vec_kernel(t, name, tile()),
        Kind::Tiled => tiled::tiled_kernel(t, name, s, d, true, false),
        Kind::TiledE => tiled::tiled_kernel(t, name, s, d, false, false),
        Kind::TiledEW => tiled::tiled_kernel(t, name, s, d, false, true),
        Kind::TiledA => tiled::tiled_async_kernel(t, name, d),
        Kind::StridedN => stridedn::stridedn_kernel(t, name, Op::Cast(s, d)),
        Kind::Narrow => unreachable!("the narrow kernels are Kernel::Narrow"),
        Kind::PermuteW16 | Kind::PermuteW32 | Kind::PermuteW64 => {
            unreachable!("the wide kernels are copies of runs")
        }
    }
}
