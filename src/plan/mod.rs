//! The copy / fill / cast planner: pure host code that normalises the operands' layouts and
//! picks one execution path. [`interp`] executes plans over host memory for the tests.
//!
//! Normalisation, in order:
//! 1. drop axes of length 1 (an empty shape plans to [`Plan::Nothing`]);
//! 2. flip every axis whose destination stride is negative (both operands together: a
//!    relabelling of the index that leaves the element pairs unchanged);
//! 3. order the axes by the destination's `|stride|`, outermost first;
//! 4. merge neighbouring axes that are contiguous in every operand
//!    (`stride_outer == stride_inner * len_inner`);
//! 5. choose 32-bit indexing when the element count and every reachable offset fit in `i32`.
//!
//! Then the path: driver memset / memcpy where they are the fastest, a vectorised
//! contiguous kernel; the tiled kernels ([`tiled`]; the launcher runs the copies of
//! interleaved channels and their planes that it plans on the narrow kernels,
//! [`devspan_kernels::abi::tiled_narrow`]) for every layout of more than `MAX_RANK`
//! axes and for permutations that put a narrow axis (shorter than 16) first on either side;
//! the wide permute kernels when the innermost axis is a contiguous, 16-byte aligned run of
//! 16, 32 or 64 bytes on both sides and the other axes are permuted (whole runs move through
//! tiles as 16-byte vectors), a row kernel when the innermost axis is contiguous on both sides
//! otherwise (rows move with 16-byte accesses, the outer axes are split once per row), a
//! shared-memory tiled transpose when the two operands' fastest axes differ and are unit-stride
//! and long enough for its tiles, the permute kernel for every other case where they differ
//! (any strides, short axes merged into the tiles, up to four batch axes), the tiled kernels
//! for permutations the permute kernels do not take, and otherwise the general strided kernel
//! with fast division (the rank-generic one beyond `MAX_RANK` axes).
#[cfg(test)]
pub(crate) mod interp;
mod memo;
mod permute;
#[cfg(test)]
mod tests;
mod tiled;

use crate::element::DType;
use crate::error::{Error, Result};
use devspan_kernels::abi::{
    CONTIG_ALIGN, FILL_ROWS_MAX_SIZE, FastDiv64, Kind, MAX_BATCH_RANK, MAX_RANK, MAX_ROW_OUTER,
    PermuteArgs, ROW_GATHER_MAX_PERIOD, RowArgs, RowGatherArgs, RowRuns, StridedArgs32,
    StridedArgs64, StridedArgsN, TiledArgs, TransposeArgs, contig_group_elems, contig_head,
    fill_head, permute_kind, row_rev_head, transpose_tile,
};
#[cfg(feature = "internals")]
pub(crate) use memo::plans_found;
pub(crate) use memo::{PlanRef, plan_copy_memo};

/// One axis after normalisation. Strides in elements.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PAxis {
    pub len: usize,
    pub dst: isize,
    pub src: isize,
}

/// Operands after normalisation: axes innermost first, offsets (elements) of the new index
/// zero from the old one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Normalized {
    pub axes: Vec<PAxis>,
    pub dst_off: isize,
    pub src_off: isize,
    pub n: usize,
}

/// Operands in normal form: axes of length 1 dropped, negative destination strides made
/// positive (the offsets move to the last element along them), axes sorted outermost first and
/// merged where both sides are contiguous across them, then listed innermost first.
pub(crate) fn normalize(shape: &[usize], dst: &[isize], src: &[isize]) -> Normalized {
    let n = shape.iter().product();
    if n != 0
        && let Some(dense) = normalize_dense(shape, dst, src, n)
    {
        return dense;
    }
    normalize_general(shape, dst, src, n)
}

/// [`normalize`] of the common case without sorting: a destination with the strides of
/// standard layout and a source with them too or with every stride zero (a broadcast scalar)
/// merge into one axis (none for a single element). `None` for other layouts, which
/// [`normalize_general`] takes.
fn normalize_dense(shape: &[usize], dst: &[isize], src: &[isize], n: usize) -> Option<Normalized> {
    let (mut stride, mut src_standard, mut src_zero) = (1isize, true, true);
    for ((&len, &d), &s) in shape.iter().zip(dst).zip(src).rev() {
        if len == 1 {
            continue;
        }
        if d != stride {
            return None;
        }
        src_standard &= s == stride;
        src_zero &= s == 0;
        stride = stride.checked_mul(isize::try_from(len).ok()?)?;
    }
    let axes = if n == 1 {
        Vec::new()
    } else if src_standard || src_zero {
        vec![PAxis {
            len: n,
            dst: 1,
            src: isize::from(src_standard),
        }]
    } else {
        return None;
    };
    Some(Normalized {
        axes,
        dst_off: 0,
        src_off: 0,
        n,
    })
}

fn normalize_general(shape: &[usize], dst: &[isize], src: &[isize], n: usize) -> Normalized {
    let mut axes: Vec<PAxis> = Vec::with_capacity(shape.len());
    axes.extend(
        shape
            .iter()
            .zip(dst.iter().zip(src))
            .filter(|(len, _)| **len != 1)
            .map(|(&len, (&d, &s))| PAxis {
                len,
                dst: d,
                src: s,
            }),
    );
    let (mut dst_off, mut src_off) = (0isize, 0isize);
    if n == 0 {
        return Normalized {
            axes: Vec::new(),
            dst_off,
            src_off,
            n,
        };
    }
    for a in &mut axes {
        if a.dst < 0 {
            let last = a.len as isize - 1;
            dst_off += last * a.dst;
            src_off += last * a.src;
            a.dst = -a.dst;
            a.src = -a.src;
        }
    }
    // Outermost first: larger destination strides, then larger source strides.
    axes.sort_by(|a, b| {
        b.dst
            .cmp(&a.dst)
            .then(b.src.unsigned_abs().cmp(&a.src.unsigned_abs()))
    });
    let mut merged: Vec<PAxis> = Vec::with_capacity(axes.len());
    for a in axes {
        if let Some(outer) = merged.last_mut() {
            let inner = a;
            // `stride * len` may overflow `isize` (a layout bounds only `stride * (len - 1)`);
            // an axis whose product overflows merges with no other.
            let times_len = |s: isize| s.checked_mul(inner.len as isize);
            if times_len(inner.dst) == Some(outer.dst) && times_len(inner.src) == Some(outer.src) {
                outer.len *= inner.len;
                outer.dst = inner.dst;
                outer.src = inner.src;
                continue;
            }
        }
        merged.push(a);
    }
    merged.reverse();
    Normalized {
        axes: merged,
        dst_off,
        src_off,
        n,
    }
}

/// What runs on the device. (Plans are built, launched and dropped on the stack, so the
/// large argument blocks stay inline rather than behind an allocation.)
#[derive(Clone, Debug)]
#[allow(clippy::large_enum_variant)]
pub(crate) enum Plan {
    /// No element to touch.
    Nothing,
    /// `cuMemsetD8/D16/D32Async` of `n` elements of `size` bytes.
    Memset {
        dst: u64,
        n: usize,
        size: usize,
        bits: u64,
    },
    /// `cuMemsetD2D8/D16/D32Async`: `height` rows of `width` elements of `size` bytes, row `r`
    /// starting `r * pitch` bytes after `dst` (`pitch` at least `width * size`, below 2^31).
    Memset2D {
        dst: u64,
        pitch: usize,
        width: usize,
        height: usize,
        size: usize,
        bits: u64,
    },
    /// `cuMemcpyDtoDAsync`.
    Memcpy { dst: u64, src: u64, bytes: usize },
    /// `fill_contig_bN`.
    FillContig {
        dst: u64,
        n: u64,
        head: u64,
        size: usize,
        bits: u64,
    },
    /// `fill_strided32_bN`.
    FillStrided32 {
        args: StridedArgs32,
        size: usize,
        bits: u64,
    },
    /// `fill_strided64_bN`.
    FillStrided64 {
        args: StridedArgs64,
        size: usize,
        bits: u64,
    },
    /// `fill_rows_bN`: rows contiguous in the destination (the source's fields unused).
    FillRows {
        args: RowArgs,
        size: usize,
        bits: u64,
    },
    /// `copy_contig_bN` / `cast_contig_S_D`.
    Contig {
        dst: u64,
        src: u64,
        n: u64,
        head: u64,
        from: DType,
        to: DType,
    },
    /// `copy_strided32_bN` / `cast_strided32_S_D`.
    Strided32 {
        args: StridedArgs32,
        from: DType,
        to: DType,
    },
    /// `copy_strided64_bN` / `cast_strided64_S_D`.
    Strided64 {
        args: StridedArgs64,
        from: DType,
        to: DType,
    },
    /// `copy_transpose_bN` / `cast_transpose_S_D`.
    Transpose {
        args: TransposeArgs,
        from: DType,
        to: DType,
    },
    /// `copy_rows_bN` / `cast_rows_S_D`.
    Rows {
        args: RowArgs,
        from: DType,
        to: DType,
    },
    /// The reversed row kernels, rows of runs read as `runs` says, of elements of `elem` (a
    /// type of the operands' size, or of a run of their elements that moves as one):
    /// `copy_rows_rev_bN` / `copy_rows_rev3_bN` (runs of 1 or 3 forwards in the destination
    /// and backwards in the source, `args.src` the lowest byte of each row's run zero, the
    /// row's highest run) and `copy_runs_revR_bN` (runs in order, each reversed, `args.src`
    /// each row's lowest byte). `args.row_len` counts runs.
    RowsRev {
        args: RowArgs,
        elem: DType,
        runs: RowRuns,
    },
    /// `copy_rows_gather_bN` / `cast_rows_gather_S_D`: rows contiguous in the destination,
    /// each read from the source in periods of elements (`args.period`).
    RowsGather {
        args: RowGatherArgs,
        from: DType,
        to: DType,
    },
    /// `copy_rows_scatter_bN`: rows contiguous in the source, each written to the destination
    /// in periods of elements (`args.period` and its strides describe the destination).
    RowsScatter {
        args: RowGatherArgs,
        from: DType,
        to: DType,
    },
    /// `copy_permute_bN` / `cast_permute_S_D`.
    Permute {
        args: PermuteArgs,
        from: DType,
        to: DType,
    },
    /// `copy_tiled_bN` / `cast_tiled_S_D` (or their element-wise forms), then `rest`: the
    /// plans of the parts of the copy that no whole tile covers.
    Tiled {
        args: Box<TiledArgs>,
        from: DType,
        to: DType,
        rest: Vec<Plan>,
    },
    /// `copy_stridedn_bN` / `cast_stridedn_S_D`.
    StridedN {
        args: Box<StridedArgsN>,
        from: DType,
        to: DType,
    },
    /// `fill_stridedn_bN`.
    FillStridedN {
        args: Box<StridedArgsN>,
        size: usize,
        bits: u64,
    },
}

impl Plan {
    /// Kernel and driver calls that the plan makes: one, a tiled plan's rests each counted as
    /// plans, none for [`Plan::Nothing`].
    pub(crate) fn launches(&self) -> usize {
        match self {
            Plan::Nothing => 0,
            Plan::Tiled { rest, .. } => 1 + rest.iter().map(Plan::launches).sum::<usize>(),
            _ => 1,
        }
    }
}

#[cfg(any(test, feature = "internals"))]
impl Plan {
    /// [`Plan::path`], with the permute path's packed kernels, small-tile kernels, wide
    /// kernels and word stores told apart (`permute_packed`, `permute_packed128`, `permute_vec`,
    /// `permute32`, `permute_w16`, `permute_w32`, `permute_w64`, `permute_words`), and the
    /// tiled path's kernels (`tiled`, `tiled_e`, `narrow`, each with `+rest` where other plans
    /// take part of the copy, and `narrow_shifted` for planes at any alignment), for diagnostics and benchmarks.
    pub(crate) fn kernel_path(&self) -> &'static str {
        match self {
            Plan::Permute { args, .. } if args.words != 0 => "permute_words",
            Plan::Permute { args, .. } => devspan_kernels::abi::permute_kind(args).name(),
            Plan::Tiled {
                args,
                rest,
                from,
                to,
            } if crate::kernels::narrow_of(args, *from, *to, Default::default()).is_some() => {
                let shifted = args.vector > 1;
                match (shifted, rest.is_empty()) {
                    (false, true) => "narrow",
                    (false, false) => "narrow+rest",
                    (true, true) => "narrow_shifted",
                    (true, false) => "narrow_shifted+rest",
                }
            }
            Plan::Tiled { args, rest, .. } => match (args.vector == 1, rest.is_empty()) {
                (true, true) => "tiled",
                (true, false) => "tiled+rest",
                (false, true) => "tiled_e",
                (false, false) => "tiled_e+rest",
            },
            p => p.path(),
        }
    }

    /// A short name of the path, for tests and benchmarks.
    pub(crate) fn path(&self) -> &'static str {
        match self {
            Plan::Nothing => "nothing",
            Plan::Memset { .. } => "memset",
            Plan::Memset2D { .. } => "memset2d",
            Plan::Memcpy { .. } => "memcpy",
            Plan::FillContig { .. } => "fill_contig",
            Plan::FillStrided32 { .. } => "fill_strided32",
            Plan::FillStrided64 { .. } => "fill_strided64",
            Plan::FillRows { .. } => "fill_rows",
            Plan::Contig { .. } => "contig",
            Plan::Strided32 { .. } => "strided32",
            Plan::Strided64 { .. } => "strided64",
            Plan::Transpose { .. } => "transpose",
            Plan::Rows { .. } => "rows",
            Plan::RowsRev { runs, .. } => match (runs.run, runs.backwards) {
                (1, true) => "rows_rev",
                (1, false) => "rows_shifted",
                (_, true) => "rows_rev3",
                _ => "runs_rev",
            },
            Plan::RowsGather { .. } => "rows_gather",
            Plan::RowsScatter { .. } => "rows_scatter",
            Plan::Permute { .. } => "permute",
            Plan::Tiled { .. } => "tiled",
            Plan::StridedN { .. } => "stridedn",
            Plan::FillStridedN { .. } => "fill_stridedn",
        }
    }
}

/// Options that steer the planner (benchmarks use them to compare paths).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct PlanOptions {
    /// Never use the driver's memset / memcpy paths.
    pub no_driver: bool,
    /// Never use 32-bit indexing.
    pub force_64: bool,
    /// Never use the row kernels.
    pub no_rows: bool,
    /// Never use the transpose kernels (the permute kernels take their cases).
    pub no_transpose: bool,
    /// Use the transpose kernels wherever they apply (by default only 1-byte copies that the
    /// vector permute kernel cannot take go to them, and the permute kernels take the other
    /// cases when they can).
    pub prefer_transpose: bool,
    /// Never use the packed permute kernels.
    pub no_packed: bool,
    /// Never use the packed permute kernels' 128-slot tiles (nor the vector kernel's).
    pub no_packed128: bool,
    /// Never use the vector permute kernel.
    pub no_vec: bool,
    /// Never use the wide permute kernels (the row kernels take their cases).
    pub no_wide: bool,
    /// Use the tiled kernels only where no other kernel takes the copy (more than
    /// `MAX_RANK` axes after merging).
    pub no_tiled: bool,
    /// Use the tiled kernels wherever they apply.
    pub prefer_tiled: bool,
    /// Use the gathered rows for every copy or cast whose destination's fastest axis has stride
    /// 1 and is at least a vector group long, but contiguous ones (by default only the casts of
    /// rows read backwards and of short runs read in reverse order, and copies of 1- and 2-byte
    /// elements of those that the reversed row kernels do not take).
    pub prefer_gather: bool,
    /// Tiles of the tiled kernels of at most this many elements (0: the kernels' limit).
    pub tiled_volume: u32,
    /// Keep copied rows shorter than `SHORT_ROW_BYTES` on the row kernels even where they are
    /// not whole vectors (by default they go to the gathered rows, the tiled kernels or the
    /// strided kernel: [`short_rows_lose`]), rows of casts that the row kernel would move
    /// element by element on it ([`cast_rows_lose`]), and copied rows whose two sides are off
    /// each other's alignment on the row kernel (by default the shifted row kernel takes the
    /// long ones); for checks of the row kernels on small layouts.
    pub short_rows: bool,
    /// With `short_rows`, copied rows whose two sides are off each other's 16-byte alignment
    /// take the shifted row kernel ([`RowRuns::SHIFTED`]) at any length of at least one vector
    /// (without `short_rows` they do by default where [`short_rows_lose`] leaves them on the
    /// row kernels, and this option changes nothing); for checks of the shifted row kernel on
    /// small layouts.
    pub shifted_rows: bool,
    /// Use the scattered rows ([`rows_scatter_args`]) for every copy whose source has stride 1
    /// along the destination's fastest axis, but contiguous ones (by default only copies of
    /// wide elements from a source that joins the rows: [`SCATTER_MIN_SIZE`]).
    pub prefer_scatter: bool,
    /// Fill pitched rows of any length with the driver's 2-D memset (by default only rows of
    /// [`MEMSET_2D_MIN_ROW_BYTES`] or more); for checks and benches of the 2-D memset on
    /// narrow rows.
    pub any_memset_2d: bool,
}

/// The address `off_elems` elements of `size` bytes from `base`, computed modulo 2^64 (the
/// element's address whenever it lies in the address space).
fn addr(base: u64, off_elems: isize, size: usize) -> u64 {
    base.wrapping_add_signed((off_elems as i64).wrapping_mul(size as i64))
}

/// The rank-generic strided kernels' argument block for normalised axes of any number.
fn stridedn_args(norm: &Normalized, dst: u64, src: u64) -> Result<Box<StridedArgsN>> {
    let shape: Vec<u64> = norm.axes.iter().map(|a| a.len as u64).collect();
    let ds: Vec<i64> = norm.axes.iter().map(|a| a.dst as i64).collect();
    let ss: Vec<i64> = norm.axes.iter().map(|a| a.src as i64).collect();
    StridedArgsN::new(dst, src, &shape, &ds, &ss)
        .map(Box::new)
        .ok_or_else(|| {
            Error::overflow(format!(
                "axes {:?} do not fit the strided kernels",
                norm.axes
            ))
        })
}

/// The strided kernels' argument block: the 32-bit form when the element count and every
/// reachable offset fit (and `opt` allows it), else the 64-bit form.
fn strided_args(
    norm: &Normalized,
    dst: u64,
    src: u64,
    opt: PlanOptions,
) -> Result<std::result::Result<StridedArgs32, StridedArgs64>> {
    let axes = if norm.axes.is_empty() {
        vec![PAxis {
            len: 1,
            dst: 0,
            src: 0,
        }]
    } else {
        norm.axes.clone()
    };
    let shape: Vec<u64> = axes.iter().map(|a| a.len as u64).collect();
    let ds: Vec<i64> = axes.iter().map(|a| a.dst as i64).collect();
    let ss: Vec<i64> = axes.iter().map(|a| a.src as i64).collect();
    let a64 = StridedArgs64::new(dst, src, &shape, &ds, &ss)
        .ok_or_else(|| Error::overflow(format!("axes {axes:?} do not fit the strided kernels")))?;
    match (!opt.force_64)
        .then(|| StridedArgs32::from_args64(&a64))
        .flatten()
    {
        Some(a32) => Ok(Ok(a32)),
        None => Ok(Err(a64)),
    }
}

/// Plans `dst[i] = value` for every index of a destination with `shape` and `strides` whose
/// element zero is at `dst`.
pub(crate) fn plan_fill(
    dst: u64,
    shape: &[usize],
    strides: &[isize],
    size: usize,
    bits: u64,
    opt: PlanOptions,
) -> Result<Plan> {
    // The source strides of a fill: all zero (on the stack for up to 8 axes).
    let (stack, heap);
    let zeros: &[isize] = if shape.len() <= 8 {
        stack = [0isize; 8];
        &stack[..shape.len()]
    } else {
        heap = vec![0isize; shape.len()];
        &heap
    };
    let norm = normalize(shape, strides, zeros);
    if norm.n == 0 {
        return Ok(Plan::Nothing);
    }
    let d = addr(dst, norm.dst_off, size);
    if norm.axes.len() > MAX_RANK {
        let args = stridedn_args(&norm, d, 0)?;
        return Ok(Plan::FillStridedN { args, size, bits });
    }
    if norm.axes.len() <= 1 && norm.axes.first().is_none_or(|a| a.dst == 1) {
        if size <= 4 && !opt.no_driver {
            return Ok(Plan::Memset {
                dst: d,
                n: norm.n,
                size,
                bits,
            });
        }
        if let Some(h) = fill_head(d, size) {
            return Ok(Plan::FillContig {
                dst: d,
                n: norm.n as u64,
                head: h.min(norm.n as u64),
                size,
                bits,
            });
        }
    }
    if size <= 4
        && !opt.no_driver
        && let Some(p) = memset_2d(&norm, d, size, bits, opt.any_memset_2d)
    {
        return Ok(p);
    }
    if !opt.no_rows
        && let Some(args) = fill_row_args(&norm, d, size)
    {
        return Ok(Plan::FillRows { args, size, bits });
    }
    Ok(match strided_args(&norm, d, 0, opt)? {
        Ok(args) => Plan::FillStrided32 { args, size, bits },
        Err(args) => Plan::FillStrided64 { args, size, bits },
    })
}

/// Fewest bytes per row of a fill that the row kernel takes ([`fill_row_args`]): shorter rows
/// stay on the strided kernel. On an H100 rows of 64 bytes at a pitch filled at 0.81-0.82 of
/// a memcpy of the bytes written on the row kernel, against 0.33 (u8) and 0.64 (f16) on the
/// strided kernel; from 256 bytes on at 1.07-1.13 against the same 0.33 and 0.64.
pub(crate) const FILL_ROWS_MIN_BYTES: usize = 64;

/// The row kernel's arguments for a fill of elements of up to [`FILL_ROWS_MAX_SIZE`] bytes
/// whose normalised axis 0 is a row of stride 1 at least [`FILL_ROWS_MIN_BYTES`] long, with 1
/// to `MAX_ROW_OUTER` outer axes (the source's fields 0, unused: a fill's normalised source
/// strides are 0): `None` for other layouts. The kernel stores each row's elements from its
/// first 16-byte boundary to its last as aligned 16-byte vectors, the others one by one.
fn fill_row_args(norm: &Normalized, dst: u64, size: usize) -> Option<RowArgs> {
    let row = norm.axes.first()?;
    if size > FILL_ROWS_MAX_SIZE || row.dst != 1 || row.len.checked_mul(size)? < FILL_ROWS_MIN_BYTES
    {
        return None;
    }
    row_args(norm, dst, 0, size, size)
}

/// Fewest bytes per row of a fill that the driver's 2-D memset takes ([`memset_2d`]): 8 KiB.
/// On an H100 with driver 580 it moved rows of 8000 to 65532 bytes at memset speed (0.97-1.09
/// of a memcpy of the bytes written, where the strided kernel, writing elements one by one,
/// reached 0.32-0.33 for u8, 0.63-0.64 for f16, 0.88-1.09 for f32, and the row fill kernel
/// the same as the 2-D memset), but costs about 0.6 ns per row besides: rows of 4 KiB at
/// 1.06-1.07 (the row kernel 1.08-1.13 for u8 and f16, the strided kernel 1.09 for f32), of
/// 1 KiB at 0.53-0.54 (the kernels 1.09), of 64 to 256 bytes at 0.03-0.14, rows of a few
/// elements at 0.002-0.006 ([`PlanOptions::any_memset_2d`] lets a bench take them there).
pub(crate) const MEMSET_2D_MIN_ROW_BYTES: usize = 8192;

/// The driver's 2-D memset of a fill whose normalised axes are rows of elements one after
/// another (stride 1) at a constant pitch: `None` for other layouts, for rows shorter than
/// [`MEMSET_2D_MIN_ROW_BYTES`] (unless `any_rows`), rows that would overlap or a pitch of 2^31
/// bytes or more.
fn memset_2d(norm: &Normalized, dst: u64, size: usize, bits: u64, any_rows: bool) -> Option<Plan> {
    let [row, rows] = norm.axes.as_slice() else {
        return None;
    };
    let width = row.len;
    let row_bytes = width.checked_mul(size)?;
    let pitch = usize::try_from(rows.dst).ok()?.checked_mul(size)?;
    if row.dst != 1
        || (row_bytes < MEMSET_2D_MIN_ROW_BYTES && !any_rows)
        || pitch < row_bytes
        || pitch > i32::MAX as usize
    {
        return None;
    }
    Some(Plan::Memset2D {
        dst,
        pitch,
        width,
        height: rows.len,
        size,
        bits,
    })
}

/// The row kernels' arguments for normalised axes whose axis 0 is the row (stride 1 on both
/// sides) and whose axes `1..` (at most `MAX_RANK - 1`) are the outer axes; `None` if there
/// are no outer axes, too many, or 2^63 rows or more.
fn row_args(
    norm: &Normalized,
    dst: u64,
    src: u64,
    src_size: usize,
    dst_size: usize,
) -> Option<RowArgs> {
    let outer = &norm.axes[1..];
    let shape: Vec<u64> = outer.iter().map(|a| a.len as u64).collect();
    let ds: Vec<i64> = outer.iter().map(|a| a.dst as i64).collect();
    let ss: Vec<i64> = outer.iter().map(|a| a.src as i64).collect();
    RowArgs::new(
        dst,
        src,
        norm.axes[0].len as u64,
        &shape,
        &ds,
        &ss,
        src_size,
        dst_size,
    )
}

/// Rows of a copy shorter than this many bytes go to the row kernels only where they are
/// whole vectors ([`short_rows_lose`]).
const SHORT_ROW_BYTES: u64 = 256;

/// Whether the row kernels would move the rows of `args` (a copy of `size`-byte elements; the
/// source's rows read backwards with `backwards`, `args.src` then each row's highest element)
/// slower than the gathered rows or the strided kernels: rows shorter than [`SHORT_ROW_BYTES`]
/// that are not whole 16-byte vectors on both sides (a length of whole vectors, each row's
/// first byte aligned to 16 on both sides). A team of one to eight lanes takes such a row, its
/// unaligned head and tail, or all of it where the two sides' alignments differ, an element at
/// a time. On the H200 such rows of 17 to 136 bytes (copies of u8, f16, f32 and f64, sliced
/// columns `x[.., ..c]`, images of c channels flipped left-right or with their channels
/// reversed) ran at 0.05-0.76 of a device copy on the row kernels, against 0.59-0.99 on the
/// gathered rows where the destination is contiguous and 0.33-0.52 on the strided kernels into
/// a sliced destination; rows of whole vectors (48 to 96 bytes) ran at 0.93-0.99.
fn short_rows_lose(args: &RowArgs, size: usize, backwards: bool) -> bool {
    let bytes = args.row_len.saturating_mul(size as u64);
    if bytes >= SHORT_ROW_BYTES {
        return false;
    }
    let align = CONTIG_ALIGN;
    let low = if backwards {
        args.src
            .wrapping_sub(args.row_len.saturating_sub(1).wrapping_mul(size as u64))
    } else {
        args.src
    };
    let outer = args.outer_rank as usize;
    let strides_whole = args.dst_strides[..outer]
        .iter()
        .chain(&args.src_strides[..outer])
        .all(|&x| x.unsigned_abs().wrapping_mul(size as u64) % align == 0);
    !(bytes % align == 0 && args.dst % align == 0 && low % align == 0 && strides_whole)
}

/// The gathered rows' arguments for normalised operands whose destination joins axis 0's
/// rows into longer rows of at least [`SHORT_ROW_BYTES`] (a contiguous destination across axes
/// 0 and 1); `None` otherwise.
fn joined_rows_gather(
    norm: &Normalized,
    d: u64,
    s: u64,
    ss: usize,
    ds: usize,
) -> Option<RowGatherArgs> {
    rows_gather_args(norm, d, s, ss, ds, true).filter(|g| {
        g.row.row_len > norm.axes[0].len as u64
            && g.row.row_len.saturating_mul(ds as u64) >= SHORT_ROW_BYTES
    })
}

/// Whether every row of `args` (a copy or cast from `ss`- to `ds`-byte elements, rows read
/// forwards) reaches a 16-byte boundary of the wider side at the element where the narrower
/// side reaches one, so that the row kernel moves the elements between its head and tail as
/// vectors: element offsets equal modulo the wider side's elements per 16 bytes, at element
/// zero and along every outer axis. Where they differ the row kernel moves the whole row an
/// element at a time.
fn rows_in_phase(args: &RowArgs, ss: usize, ds: usize) -> bool {
    let per = CONTIG_ALIGN / ss.max(ds) as u64;
    let outer = args.outer_rank as usize;
    (args.dst / ds as u64).wrapping_sub(args.src / ss as u64) % per == 0
        && args.dst_strides[..outer]
            .iter()
            .zip(&args.src_strides[..outer])
            .all(|(&d, &s)| d.wrapping_sub(s).rem_euclid(per as i64) == 0)
}

/// Whether the reversed row kernel would shift the groups of some row of `args` (rows of
/// `size`-byte elements read backwards, `args.src` each row's element zero, its highest) out
/// of the aligned blocks that cover them: where the first row's groups start off a 16-byte
/// boundary ([`row_rev_head`]'s `m`), or where an outer axis moves the destination and the
/// source's row ends apart modulo 16 (the sum of their addresses stays put along an axis
/// whose strides add up to whole vectors).
fn reversed_rows_shift(args: &RowArgs, size: usize) -> bool {
    let (_, m) = row_rev_head(
        args.dst,
        args.src,
        size,
        RowRuns::new(1, true),
        args.row_len,
    );
    let outer = args.outer_rank as usize;
    m != 0
        || args.dst_strides[..outer]
            .iter()
            .zip(&args.src_strides[..outer])
            .any(|(&d, &s)| d.wrapping_add(s).wrapping_mul(size as i64) % 16 != 0)
}

/// Elements at least this wide whose copied rows the row kernels would shift (rows off each
/// other's 16-byte alignment, forwards or read backwards) go to the gathered rows where the
/// destination joins the rows: on the H100 f32 rows of 250 and 1023 elements ran at 0.97-0.99
/// of a device copy there, against 0.86-0.94 on the shifted and reversed row kernels; u8 rows of
/// 1000 and 4095 bytes ran faster shifted (0.86-0.91 against 0.82-0.84).
const GATHER_SHIFTED_MIN_SIZE: usize = 4;

/// Elements at least this wide whose copied rows the row kernels would move element by
/// element or shift, and whose source joins the rows (a contiguous array written into a column
/// slice `x[.., ..c]`), go to the scattered rows where the rows are at least
/// [`SCATTER_MIN_ROW_BYTES`] long. On the H100, f64 rows of 3 to 511 elements and f32 rows of
/// 12 to 1023 ran at 0.50-0.96 of a device copy there, against 0.47-0.91 on the strided and
/// shifted row kernels (f32 rows of 6 to 10 elements alike, of 3 and 5 slower); u8 and f16
/// rows ran at 0.09-0.25 there (each lane stores its vector an element at a time, lanes a
/// vector apart, so that every store of a warp touches as many sectors as lanes: the narrower
/// the element, the more stores per byte).
const SCATTER_MIN_SIZE: usize = 4;

/// Shortest rows, in bytes, that the scattered rows take by default ([`SCATTER_MIN_SIZE`]).
const SCATTER_MIN_ROW_BYTES: u64 = 24;

/// The scattered rows' arguments for a copy of `size`-byte elements (normalised operands)
/// whose source joins axis 0's rows into longer rows of at least [`SHORT_ROW_BYTES`] (a
/// contiguous source across axes 0 and 1), for elements of at least [`SCATTER_MIN_SIZE`]
/// bytes and rows of at least [`SCATTER_MIN_ROW_BYTES`]; `None` otherwise.
fn joined_rows_scatter(norm: &Normalized, d: u64, s: u64, size: usize) -> Option<RowGatherArgs> {
    let x = norm.axes.first()?;
    if size < SCATTER_MIN_SIZE || (x.len as u64).saturating_mul(size as u64) < SCATTER_MIN_ROW_BYTES
    {
        return None;
    }
    rows_joined(norm, d, s, size)
}

/// Copied rows of 1- and 2-byte elements at least this many bytes long, shorter than
/// [`SHORT_ROW_BYTES`] and not whole vectors ([`short_rows_lose`]), whose source joins them (a
/// contiguous array written into a column slice `x[.., ..c]`: [`rows_joined`]), go to the
/// tiled kernels in copies of [`SMALL_TILES_TILED_BYTES`] or more (the bound of the small
/// tiles' rule; the rows measured were 1 GiB copies). On the H100 (the `short-rows` group's
/// `into [.., ..c]` rows, steered), u8 rows of 24 to 255 bytes ran at 0.46-0.54 of a device
/// copy there against 0.44-0.45 on the strided kernel, and f16 rows of 12 to 66 elements (the
/// longest measured under 256 bytes) at 0.51-0.57 against 0.48-0.52; shorter rows ran no
/// faster (f16 rows of 9 elements 0.47 against 0.49). The scattered rows store 1- and 2-byte
/// elements an element at a time with lanes a vector apart ([`SCATTER_MIN_SIZE`]).
const TILED_SLICE_ROW_BYTES: u64 = 24;

/// Fewest elements of the tiles that take the rows of [`TILED_SLICE_ROW_BYTES`] (the tiles
/// measured held 1700 to 2016; a tile of a few rows, such as rows beside an axis of 16 or
/// fewer that the tile keeps for the narrow kernels, leaves them to the strided kernel).
const TILED_SLICE_MIN_VOLUME: u32 = 1024;

/// The scattered rows' arguments for a copy of `size`-byte elements (normalised operands)
/// whose source joins axis 0's rows into longer rows of at least [`SHORT_ROW_BYTES`] (a
/// contiguous source across axes 0 and 1); `None` otherwise.
fn rows_joined(norm: &Normalized, d: u64, s: u64, size: usize) -> Option<RowGatherArgs> {
    let len = norm.axes.first()?.len as u64;
    rows_scatter_args(norm, d, s, size).filter(|g| {
        g.row.row_len > len && g.row.row_len.saturating_mul(size as u64) >= SHORT_ROW_BYTES
    })
}

/// Rows of a cast at least this many bytes long on the wider side stay on the row kernel
/// where they are in phase ([`cast_rows_lose`]).
const CAST_ROW_BYTES: u64 = 4 * SHORT_ROW_BYTES;

/// Whether the row kernel would move the rows of a cast `args` from `ss`- to `ds`-byte
/// elements slower than the gathered rows or the strided kernel: rows out of phase
/// ([`rows_in_phase`], moved an element at a time), and, where the destination joins the rows
/// (`joined`, asked last: the gathered rows take them), rows shorter than [`CAST_ROW_BYTES`] on the wider
/// side that are not whole vector groups on both sides (a length of whole groups, every row's
/// first byte aligned to 16 on the narrower side), whose unaligned head and tail, up to two
/// groups of elements, move an element at a time (into a padded destination such rows stay on
/// the row kernel: the strided kernel is not measured against it there). On the H100 casts u8 ->
/// f32 and f16 -> f32 of rows of 9 to 1000 elements out of phase (column slices read or
/// written, rows of an odd length in reverse order) ran at 0.09-0.85 of a device copy on the
/// row kernel against 0.88-0.97 on the gathered rows (a contiguous destination) and 0.43-0.94
/// on the strided kernel; rows of 100 elements in phase at 0.64-0.84 against 0.92-0.97; rows of
/// whole groups (48 elements) and rows of 1000 elements in phase at 0.96-0.99 on the row
/// kernel.
fn cast_rows_lose(args: &RowArgs, ss: usize, ds: usize, joined: impl FnOnce() -> bool) -> bool {
    if !rows_in_phase(args, ss, ds) {
        return true;
    }
    let (narrow, nsize) = if ds <= ss {
        (args.dst, ds)
    } else {
        (args.src, ss)
    };
    let group = contig_group_elems(ss, ds) as u64;
    let outer = args.outer_rank as usize;
    let strides = if ds <= ss {
        &args.dst_strides[..outer]
    } else {
        &args.src_strides[..outer]
    };
    let whole = args.row_len % group == 0
        && narrow % CONTIG_ALIGN == 0
        && strides
            .iter()
            .all(|&x| x.unsigned_abs().wrapping_mul(nsize as u64) % CONTIG_ALIGN == 0);
    args.row_len.saturating_mul(ss.max(ds) as u64) < CAST_ROW_BYTES && !whole && joined()
}

/// The reversed row kernels' arguments, element type and form for a copy of `elem` whose
/// normalised axis 0 is the destination's fastest (stride 1) and either
/// - runs backwards in the source (stride -1), with the other axes (at most `MAX_ROW_OUTER`) as
///   outer axes (runs of 1, read backwards);
/// - is a run of `c` elements forwards on both sides whose axis 1 runs those runs backwards
///   (strides `c` and `-c`), with every other stride a multiple of the elements that move as
///   one, and both operands aligned to them: for `c` x the element size 3 x 1 or 2 bytes as
///   runs of 3 elements of that size (read backwards; runs of 2, 4 or 8 bytes come here as
///   elements of their size, from [`grouped_runs`]);
/// - is a run of 2, 3 or 4 elements read backwards in the source (stride -1) whose axis 1
///   runs those runs forwards (strides `c` and `c`): runs in order, each reversed, of at most
///   16 bytes (runs of 3 of 1- and 2-byte elements); the destination's rows must start aligned
///   to the run's bytes where they divide 16 (for the destination's vectors to line up).
///
/// Which runs have kernels is [`RowRuns::exists`]'s (it says why runs of 3 wider elements have
/// none).
///
/// `None` for other layouts and for rows shorter than one group (16 bytes, or 48 for runs of
/// 3).
fn rows_rev_args(
    norm: &Normalized,
    dst: u64,
    src: u64,
    elem: DType,
) -> Option<(RowArgs, DType, RowRuns)> {
    let a = &norm.axes;
    let size = elem.size();
    // The axes from the row on, the type of the elements that move, how many of the view's
    // elements each holds, the form, and the source address of each row's run zero.
    let (axes, elem, k, runs, src): (&[PAxis], DType, usize, RowRuns, u64) = match a.first()? {
        x if x.dst == 1 && x.src == -1 && a.len() >= 2 && a[1].dst == x.len as isize => {
            // Runs of `c` elements, each read backwards, the runs forwards.
            let c = x.len;
            let runs = RowRuns::new(c, false);
            let y = &a[1];
            if y.src != c as isize || !runs.exists(size) {
                return rows_rev_args_backwards(a, dst, src, elem);
            }
            let run_bytes = runs.run_bytes(size);
            // Every row of the destination starts aligned to a run that divides 16.
            if run_bytes.is_power_of_two() {
                let ci = c as isize;
                let rows_aligned = a[2..].iter().all(|x| x.dst % ci == 0);
                if dst % run_bytes != 0 || !rows_aligned {
                    return rows_rev_args_backwards(a, dst, src, elem);
                }
            }
            // The view's element zero is its run's highest element.
            let low = src.checked_sub(((c - 1) * size) as u64)?;
            (&a[1..], elem, 1, runs, low)
        }
        _ => return rows_rev_args_backwards(a, dst, src, elem),
    };
    rows_rev_finish(axes, dst, src, elem, k, runs)
}

/// [`rows_rev_args`] of rows read backwards: elements, or runs of 3 elements, in reverse
/// order.
fn rows_rev_args_backwards(
    a: &[PAxis],
    dst: u64,
    src: u64,
    elem: DType,
) -> Option<(RowArgs, DType, RowRuns)> {
    let size = elem.size();
    let (axes, elem, k, run): (&[PAxis], DType, usize, usize) = match a.first()? {
        x if x.dst == 1 && x.src == -1 => (a, elem, 1, 1),
        x if x.dst == 1 && x.src == 1 && a.len() >= 2 => {
            // Runs of 2, 4 or 8 bytes are elements of their size by now (`grouped_runs`).
            let c = x.len;
            let wide = c.checked_mul(size)?;
            if wide % 3 != 0 {
                return None;
            }
            let unit = wide / 3;
            if !RowRuns::new(3, true).exists(unit) {
                return None;
            }
            let t = bits_type(unit)?;
            let k = unit / size;
            if k == 0 || unit % size != 0 {
                return None;
            }
            let y = &a[1];
            let ci = c as isize;
            let ki = k as isize;
            let aligned = dst % unit as u64 == 0 && src % unit as u64 == 0;
            let divides = a[2..].iter().all(|x| x.dst % ki == 0 && x.src % ki == 0);
            if !(y.dst == ci && y.src == -ci && aligned && divides) {
                return None;
            }
            (&a[1..], t, k, 3)
        }
        _ => return None,
    };
    rows_rev_finish(axes, dst, src, elem, k, RowRuns::new(run, true))
}

/// The reversed row kernels' arguments for rows along `axes[0]` (its length in runs) and the
/// outer axes after it (strides divided by `k`, the view's elements per moved element).
fn rows_rev_finish(
    axes: &[PAxis],
    dst: u64,
    src: u64,
    elem: DType,
    k: usize,
    runs: RowRuns,
) -> Option<(RowArgs, DType, RowRuns)> {
    let ki = k as isize;
    let s = elem.size();
    let row_len = axes[0].len as u64;
    if row_len.saturating_mul(runs.run_bytes(s)) < runs.group_bytes(s)
        || axes.len() - 1 > MAX_ROW_OUTER
    {
        return None;
    }
    let g = runs.grid_size(s);
    let args = outer_row_args(dst, src, row_len, &axes[1..], ki, (g, g))?;
    Some((args, elem, runs))
}

/// [`RowArgs`] for rows of `row_len` elements over the outer axes `outer` (strides divided by
/// `k`; none: one row), with the team size of elements of `sizes` = (source, destination)
/// bytes.
fn outer_row_args(
    dst: u64,
    src: u64,
    row_len: u64,
    outer: &[PAxis],
    k: isize,
    sizes: (usize, usize),
) -> Option<RowArgs> {
    let (shape, ds, ss): (Vec<u64>, Vec<i64>, Vec<i64>) = if outer.is_empty() {
        (vec![1], vec![0], vec![0])
    } else {
        (
            outer.iter().map(|x| x.len as u64).collect(),
            outer.iter().map(|x| (x.dst / k) as i64).collect(),
            outer.iter().map(|x| (x.src / k) as i64).collect(),
        )
    };
    RowArgs::new(dst, src, row_len, &shape, &ds, &ss, sizes.0, sizes.1)
}

/// The gathered row kernels' arguments for a copy or cast from `ss`- to `ds`-byte elements
/// whose normalised axis 0 is the destination's fastest (stride 1) and either runs backwards
/// in the source (stride -1), or is a run shorter than a row's vector group (stride 1) whose
/// axis 1 is read backwards; with `any`, whatever its source strides. Where the destination is
/// contiguous across axes 0 and 1 the row is both, axis 0 its period (images flipped
/// left-right, with their channels last or reversed); else the row is axis 0 (periods of one
/// element). `None` for other layouts, rows shorter than a vector group, and more than
/// `MAX_ROW_OUTER` other axes.
fn rows_gather_args(
    norm: &Normalized,
    dst: u64,
    src: u64,
    ss: usize,
    ds: usize,
    any: bool,
) -> Option<RowGatherArgs> {
    let a = &norm.axes;
    let x = a.first()?;
    let group = contig_group_elems(ss, ds);
    let backwards = x.src == -1;
    let short_runs = x.src == 1 && x.len < group && a.len() >= 2 && a[1].src < 0;
    if x.dst != 1 || !(any || backwards || short_runs) {
        return None;
    }
    let rows = periodic_rows(a, |x| x.dst, |x| x.src)?;
    if short_runs && rows.period == 1 {
        return None;
    }
    if rows.row_len < group {
        return None;
    }
    rows.args(dst, src, (ss, ds), |x| x.src)
}

/// The rows of a gathered or scattered row kernel over the normalised axes `a`, whose axis 0
/// has stride 1 on the contiguous side (`contig` gives an axis's stride there, `periodic` on
/// the other side): where the contiguous side runs on across axes 0 and 1 the row is both,
/// axis 0 its period; else the row is axis 0 (periods of one element). A period of at least
/// [`GATHER_SPLIT_PERIOD`] elements whose next starts inside it on the other side (the planes
/// of an image split out of channels last; not a broadcast one, which starts where it does)
/// stays a row of its own, so that such rows run together ([`PeriodicRows::args`]), where the
/// outer axes still fit the kernels. `None` where the row's length overflows.
fn periodic_rows(
    a: &[PAxis],
    contig: fn(&PAxis) -> isize,
    periodic: fn(&PAxis) -> isize,
) -> Option<PeriodicRows<'_>> {
    let x = a.first()?;
    let merged = a.len() >= 2
        && contig(&a[1]) == x.len as isize
        && x.len as u64 <= ROW_GATHER_MAX_PERIOD
        && !(x.len >= GATHER_SPLIT_PERIOD
            && periodic(&a[1]) != 0
            && periodic(&a[1]).unsigned_abs() < periodic(x).unsigned_abs()
            && a.len() - 1 <= MAX_ROW_OUTER);
    Some(if merged {
        PeriodicRows {
            period: x.len as u64,
            stride: periodic(x) as i64,
            step: periodic(&a[1]) as i64,
            row_len: x.len.checked_mul(a[1].len)?,
            outer: &a[2..],
        }
    } else {
        PeriodicRows {
            period: 1,
            stride: 0,
            step: periodic(x) as i64,
            row_len: x.len,
            outer: &a[1..],
        }
    })
}

/// The length in elements from which a period whose next one starts inside it on the side in
/// periods stays a row of its own ([`periodic_rows`]): 2^18 (a plane of 512 x 512 pixels).
/// Shorter periods (smaller images, a batch of them) run within the time that the lines they
/// share stay in the L2 cache.
const GATHER_SPLIT_PERIOD: usize = 1 << 18;

/// The rows of [`periodic_rows`]: each `row_len` elements in periods of `period`, of stride
/// `stride` inside a period and `step` from one to the next on the side in periods, over the
/// `outer` axes.
struct PeriodicRows<'a> {
    period: u64,
    stride: i64,
    step: i64,
    row_len: usize,
    outer: &'a [PAxis],
}

impl PeriodicRows<'_> {
    /// The kernels' block for these rows of `sizes` (source, destination) bytes from `dst` and
    /// `src`, `periodic` the side in periods' stride of an axis. `None` for more than
    /// [`MAX_ROW_OUTER`] outer axes.
    ///
    /// Where an outer axis steps less far on the side in periods than any two elements of a row
    /// lie apart (`step` between periods, `stride` inside one of more than one element), but
    /// not 0 (broadcast), the rows interleave there: the planes of an image split out of
    /// channels last (each plane's pixels `C` apart, the planes one apart), the rows of a
    /// transpose read down its columns.
    /// The outer axis of least stride then comes first and the rows run over grid x
    /// ([`RowGatherArgs::rows_first`]), so that the rows that share lines of memory run at
    /// about the same time: with the rows over grid y, each plane of a large image runs after
    /// the one before it, and every line of the interleaved side is read (or written) once per
    /// plane.
    fn args(
        &self,
        dst: u64,
        src: u64,
        sizes: (usize, usize),
        periodic: fn(&PAxis) -> isize,
    ) -> Option<RowGatherArgs> {
        if self.outer.len() > MAX_ROW_OUTER {
            return None;
        }
        let apart = if self.period > 1 {
            self.stride.unsigned_abs().min(self.step.unsigned_abs())
        } else {
            self.step.unsigned_abs()
        };
        let stride = |k: usize| periodic(&self.outer[k]).unsigned_abs() as u64;
        let first = (0..self.outer.len())
            .filter(|&k| stride(k) != 0)
            .min_by_key(|&k| stride(k))
            .filter(|&k| stride(k) < apart);
        let moved;
        let outer = match first {
            Some(k) if k > 0 => {
                let mut v = self.outer.to_vec();
                v[..=k].rotate_right(1);
                moved = v;
                &moved[..]
            }
            _ => self.outer,
        };
        let row = outer_row_args(dst, src, self.row_len as u64, outer, 1, sizes)?;
        Some(
            RowGatherArgs::new(row, self.period, self.stride, self.step)?
                .with_rows_first(first.is_some()),
        )
    }
}

/// The scattered row kernels' arguments for a copy of `size`-byte elements whose normalised
/// axis 0 is the source's fastest (stride 1): where the source is contiguous across axes 0
/// and 1 the row is both, axis 0 its period in the destination (a contiguous array written
/// into a column slice `x[.., ..c]`, into images flipped left-right); else the row is axis 0
/// (periods of one element), as [`periodic_rows`] says. `None` for other layouts, rows shorter
/// than a vector and more than [`MAX_ROW_OUTER`] outer axes.
fn rows_scatter_args(norm: &Normalized, dst: u64, src: u64, size: usize) -> Option<RowGatherArgs> {
    let x = norm.axes.first()?;
    if x.src != 1 {
        return None;
    }
    let rows = periodic_rows(&norm.axes, |x| x.src, |x| x.dst)?;
    if rows.row_len < contig_group_elems(size, size) {
        return None;
    }
    rows.args(dst, src, (size, size), |x| x.dst)
}

/// The unsigned type of `bytes` bytes (1, 2, 4 or 8), whose copies move any element type of
/// that size, or a run of smaller elements that fills it.
fn bits_type(bytes: usize) -> Option<DType> {
    match bytes {
        1 => Some(DType::U8),
        2 => Some(DType::U16),
        4 => Some(DType::U32),
        8 => Some(DType::U64),
        _ => None,
    }
}

/// A copy's layout with runs as elements ([`grouped_runs`]): the runs' type, and the shape,
/// destination strides and source strides of the other axes, in runs.
type Grouped = (DType, Vec<usize>, Vec<isize>, Vec<isize>);

/// The layout of a copy of `size`-byte elements whose normalised axis 0 is a run of `c`
/// elements contiguous on both sides (strides 1 and 1) of 2, 4 or 8 bytes, with the run as
/// one element: its type (`U16`, `U32`, `U64`), and the shape and strides of the other axes in
/// runs. `None` unless both operands (`dst`, `src`: their element zero) are aligned to the run
/// and every other stride is a multiple of `c`. The grouped layout has no such run on axis 0:
/// an axis that would be one would have merged with the run.
fn grouped_runs(norm: &Normalized, dst: u64, src: u64, size: usize) -> Option<Grouped> {
    let (first, rest) = norm.axes.split_first()?;
    if first.dst != 1 || first.src != 1 || rest.is_empty() {
        return None;
    }
    let c = first.len;
    let wide = c.checked_mul(size)?;
    if wide == 1 {
        return None;
    }
    let elem = bits_type(wide)?;
    let ci = c as isize;
    let divides = rest.iter().all(|x| x.dst % ci == 0 && x.src % ci == 0);
    if !divides || dst % wide as u64 != 0 || src % wide as u64 != 0 {
        return None;
    }
    Some((
        elem,
        rest.iter().map(|x| x.len).collect(),
        rest.iter().map(|x| x.dst / ci).collect(),
        rest.iter().map(|x| x.src / ci).collect(),
    ))
}

/// Minimum extent of both tile axes for the transpose path.
const TRANSPOSE_MIN_EXTENT: usize = 8;

/// Plans `dst[i] = src[i] as To` for every index `i` of `shape`; the source's strides may be
/// zero (broadcast). `dst` and `src` are the addresses of element zero. A cast between
/// integer types of one size (`u8 -> i8`, `i32 -> u32`) keeps every bit, as `as` does: it is
/// planned as a copy of the source's type, on the copy paths.
#[allow(clippy::too_many_arguments)]
pub(crate) fn plan_copy(
    dst: u64,
    dst_strides: &[isize],
    to: DType,
    src: u64,
    src_strides: &[isize],
    from: DType,
    shape: &[usize],
    opt: PlanOptions,
) -> Result<Plan> {
    let to = if from.same_bits(to) { from } else { to };
    let mut norm = normalize(shape, dst_strides, src_strides);
    if norm.n == 0 {
        return Ok(Plan::Nothing);
    }
    let (ds, ss) = (to.size(), from.size());
    let same = from == to;
    let d = addr(dst, norm.dst_off, ds);
    let s = addr(src, norm.src_off, ss);
    let r = norm.axes.len();
    let contiguous = r == 0 || (r == 1 && norm.axes[0].dst == 1 && norm.axes[0].src == 1);
    if contiguous {
        if let Some(h) = contig_head(s, ss, d, ds) {
            return Ok(Plan::Contig {
                dst: d,
                src: s,
                n: norm.n as u64,
                head: h.min(norm.n as u64),
                from,
                to,
            });
        }
        if same && !opt.no_driver {
            let bytes = norm.n.checked_mul(ds).ok_or_else(|| {
                Error::overflow(format!("{} elements of {ds} bytes overflow usize", norm.n))
            })?;
            return Ok(Plan::Memcpy {
                dst: d,
                src: s,
                bytes,
            });
        }
    }
    // Runs of 2, 4 or 8 bytes contiguous on both sides (pairs of f32 for complex numbers,
    // pixels of 4 u8 channels) are copied as elements of their size, one axis fewer, so that
    // every path moves them whole (a transposed matrix of such runs is a transpose).
    if same
        && r >= 2
        && let Some((elem, shape, dst_strides, src_strides)) = grouped_runs(&norm, d, s, ss)
    {
        return plan_copy(d, &dst_strides, elem, s, &src_strides, elem, &shape, opt);
    }
    // Tiled: every layout of more than `MAX_RANK` axes, and by default the permutations that
    // put a narrow axis first on either side, whose tiles of one or two axes per side would be
    // thin, and those that move runs of a few elements (pixels of 3 channels) whole; the
    // rank-generic strided kernel takes what the tiled kernels cannot.
    let high_rank = r > MAX_RANK;
    let narrow = |axes: &[PAxis]| {
        tiled::has_narrow_side(axes, NARROW_AXIS) || tiled::has_shared_short_run(axes, ss.max(ds))
    };
    if opt.prefer_gather
        && let Some(args) = rows_gather_args(&norm, d, s, ss, ds, true)
    {
        return Ok(Plan::RowsGather { args, from, to });
    }
    if opt.prefer_scatter
        && same
        && let Some(args) = rows_scatter_args(&norm, d, s, ss)
    {
        return Ok(Plan::RowsScatter { args, from, to });
    }
    // Planes interleaved into channels last (CHW -> HWC, NCHW -> NHWC) and casts of 2- to
    // 4-byte elements out of a few channels last into planes: the gathered rows
    // ([`joins_planes`], [`splits_planes`]).
    let gather_planes = !opt.no_rows && !opt.prefer_tiled;
    if gather_planes
        && (join_channels(ss, ds).is_some_and(|c| joins_planes(&norm.axes, c))
            || ((ss, ds) == (2, 4) && splits_planes(&norm.axes)))
        && let Some(args) = rows_gather_args(&norm, d, s, ss, ds, true)
    {
        return Ok(Plan::RowsGather { args, from, to });
    }
    if (high_rank || (!opt.no_tiled && (opt.prefer_tiled || narrow(&norm.axes))))
        && let Some(p) = tiled_plan(&norm, d, s, from, to, opt)?
    {
        // Casts of 1- to 4-byte elements out of channels last that the tiled kernels would
        // move element by element: the gathered rows ([`splits_planes`]).
        if gather_planes
            && (ss, ds) == (1, 4)
            && element_wise_tiles(&p)
            && splits_planes(&norm.axes)
            && let Some(args) = rows_gather_args(&norm, d, s, ss, ds, true)
        {
            return Ok(Plan::RowsGather { args, from, to });
        }
        return Ok(p);
    }
    if high_rank {
        let args = stridedn_args(&norm, d, s)?;
        return Ok(Plan::StridedN { args, from, to });
    }
    // Wide: axis 0 is a run of 16, 32 or 64 bytes, contiguous on both sides, that the other
    // axes permute; whole runs move through the wide kernels' tiles. (The wide kernels move
    // such runs faster than the row kernels, whose teams of lanes each take one short row.)
    if r >= 2
        && same
        && !opt.no_wide
        && let Some(args) = permute::wide_args(&norm, d, s, ss)
    {
        return Ok(Plan::Permute { args, from, to });
    }
    // Reversed rows: the destination's fastest axis read backwards in the source, runs of it
    // read in reverse order, or runs each read backwards. Disjoint from the rows below: their
    // axis 0 runs backwards in the source, or is a run of at most 6 bytes, shorter than a row's
    // vector group. Short rows read backwards whose vectors do not line up go to the gathered
    // rows or the strided kernels ([`short_rows_lose`]).
    if same
        && !opt.no_rows
        && let Some((args, elem, runs)) = rows_rev_args(&norm, d, s, from)
        && (runs != RowRuns::new(1, true)
            || opt.short_rows
            || !short_rows_lose(&args, elem.size(), true))
    {
        // Wide elements whose rows would be shifted: the gathered rows, where the destination
        // joins the rows ([`GATHER_SHIFTED_MIN_SIZE`]).
        if runs == RowRuns::new(1, true)
            && !opt.short_rows
            && elem.size() == ss
            && ss >= GATHER_SHIFTED_MIN_SIZE
            && reversed_rows_shift(&args, ss)
            && let Some(g) = joined_rows_gather(&norm, d, s, ss, ds)
        {
            return Ok(Plan::RowsGather { args: g, from, to });
        }
        return Ok(Plan::RowsRev { args, elem, runs });
    }
    // Gathered rows: casts of the layouts the reversed row kernels copy (a row read backwards,
    // runs of a few elements in reverse order or each reversed), and copies of 1- and 2-byte
    // elements of those layouts that the reversed row kernels do not take (runs of 5 to 15
    // bytes); each element loaded alone, the destination stored in vectors. Disjoint from the
    // rows below: axis 0 runs backwards in the source, or is shorter than a row's vector group.
    if (!same || ss <= 2)
        && !opt.no_rows
        && let Some(args) = rows_gather_args(&norm, d, s, ss, ds, false)
    {
        return Ok(Plan::RowsGather { args, from, to });
    }
    // Rows: axis 0 has stride 1 on both sides and is at least one vector group long. Disjoint
    // from the transpose condition below, which needs a source stride other than +-1 on axis 0.
    // Short copied rows whose vectors do not line up go to the gathered rows or the strided
    // kernels ([`short_rows_lose`]).
    let rows = (r >= 2
        && !opt.no_rows
        && norm.axes[0].dst == 1
        && norm.axes[0].src == 1
        && norm.axes[0].len >= contig_group_elems(ss, ds))
    .then(|| row_args(&norm, d, s, ss, ds))
    .flatten();
    let rows_lose = rows.as_ref().is_some_and(|args| {
        !opt.short_rows
            && if same {
                short_rows_lose(args, ss, false)
            } else {
                cast_rows_lose(args, ss, ds, || {
                    joined_rows_gather(&norm, d, s, ss, ds).is_some()
                })
            }
    });
    if let Some(args) = rows
        && !rows_lose
    {
        // Copied rows off each other's alignment: the shifted row kernel, whose vectors come
        // out of the source's aligned blocks (the row kernel moves them element by element).
        if same
            && (opt.shifted_rows || !opt.short_rows)
            && !rows_in_phase(&args, ss, ss)
            && RowRuns::SHIFTED.exists(ss)
            && args.row_len.saturating_mul(ss as u64) >= RowRuns::SHIFTED.group_bytes(ss)
        {
            if !opt.short_rows {
                // Wide elements: the gathered rows, where the destination joins the rows
                // ([`GATHER_SHIFTED_MIN_SIZE`]), or the scattered rows, where the source joins
                // them ([`SCATTER_MIN_SIZE`]).
                if ss >= GATHER_SHIFTED_MIN_SIZE
                    && let Some(g) = joined_rows_gather(&norm, d, s, ss, ds)
                {
                    return Ok(Plan::RowsGather { args: g, from, to });
                }
                if let Some(g) = joined_rows_scatter(&norm, d, s, ss) {
                    return Ok(Plan::RowsScatter { args: g, from, to });
                }
            }
            return Ok(Plan::RowsRev {
                args,
                elem: from,
                runs: RowRuns::SHIFTED,
            });
        }
        return Ok(Plan::Rows { args, from, to });
    }
    // Short rows of a copy (axis 0 of source stride 1 or -1), and rows of a cast, that the row
    // kernels would move an element at a time: gathered into long rows of a contiguous
    // destination (a column slice `x[.., ..c]`, images flipped left-right), else as below. A
    // cast's rows gather only where the destination joins them (into a padded destination the
    // strided kernel is faster: 0.43-0.92 of a device copy on the H100 against 0.17-0.79).
    if (same || rows_lose)
        && !opt.no_rows
        && !opt.short_rows
        && norm.axes.first().is_some_and(|a| a.src.unsigned_abs() == 1)
        && let Some(args) = if same {
            rows_gather_args(&norm, d, s, ss, ds, true)
                .filter(|g| g.row.row_len.saturating_mul(ds as u64) >= SHORT_ROW_BYTES)
        } else {
            joined_rows_gather(&norm, d, s, ss, ds)
        }
    {
        return Ok(Plan::RowsGather { args, from, to });
    }
    // Short copied rows of wide elements whose source joins the rows (a contiguous array
    // written into a column slice): the scattered rows ([`SCATTER_MIN_SIZE`]).
    if same
        && rows_lose
        && let Some(args) = joined_rows_scatter(&norm, d, s, ss)
    {
        return Ok(Plan::RowsScatter { args, from, to });
    }
    // Short copied rows of 1- and 2-byte elements whose source joins the rows, in copies of
    // at least `SMALL_TILES_TILED_BYTES`: the tiled kernels, the row a tile axis on both sides
    // ([`TILED_SLICE_ROW_BYTES`]).
    if same
        && rows_lose
        && ss <= 2
        && !opt.no_tiled
        && (norm.axes[0].len as u64).saturating_mul(ss as u64) >= TILED_SLICE_ROW_BYTES
        && norm.n.saturating_mul(ss) >= SMALL_TILES_TILED_BYTES
        && rows_joined(&norm, d, s, ss).is_some()
        && let Some(p) = tiled_plan(&norm, d, s, from, to, opt)?
        && matches!(&p, Plan::Tiled { args, .. } if args.volume >= TILED_SLICE_MIN_VOLUME)
    {
        return Ok(p);
    }
    // Such rows whose outer axes are permuted: the tiled kernels, the row a tile axis on both
    // sides.
    if rows.is_some()
        && !opt.no_tiled
        && !opt.short_rows
        && is_permutation(&norm.axes[1..])
        && let Some(p) = tiled_plan(&norm, d, s, from, to, opt)?
    {
        return Ok(p);
    }
    // Transpose: the destination's fastest axis (0) has stride 1, another axis has source
    // stride +-1, the source's axis 0 is not contiguous, and both axes fill the kernel's
    // tiles (shorter axes go to the permute kernel, which merges them with their neighbours).
    // Only 1-byte copies (whose packed transpose moves 128 x 128 tiles in 4-byte words, one
    // tile per block) take it by default, unless the vector permute kernel takes them: for
    // them the transpose kernel is faster than the packed 128 x 128 permute kernel, and the
    // vector kernel faster still; for wider elements and for casts the permute kernels' 64 x 64
    // tiles are faster than its 32 x 32 tiles, and for 2-byte copies the packed permute kernel
    // is faster than its packed 64 x 64 tiles. The others come here when the permute kernels
    // cannot take them.
    let min_extent = TRANSPOSE_MIN_EXTENT.max(transpose_tile(ss, ds) as usize);
    let transpose_k = if r >= 2
        && !opt.no_transpose
        && norm.axes[0].dst == 1
        && norm.axes[0].src.unsigned_abs() != 1
        && norm.axes[0].len >= min_extent
        && r - 2 <= MAX_BATCH_RANK
    {
        (1..r).find(|&k| norm.axes[k].src.unsigned_abs() == 1 && norm.axes[k].len >= min_extent)
    } else {
        None
    };
    let packing = match (same && !opt.no_packed, opt.no_packed128, opt.no_vec) {
        (false, _, _) => permute::Packing::None,
        (true, true, _) => permute::Packing::Small,
        (true, false, true) => permute::Packing::Words,
        (true, false, false) => permute::Packing::Any,
    };
    // Where the transpose kernel applies, it goes first when preferred, and for 1-byte copies
    // before the word-packed permute kernels (not before the vector kernel).
    let permuted = (transpose_k.is_none() || !opt.prefer_transpose)
        .then(|| permute::permute_args(&norm, d, s, ss, ds, packing))
        .flatten();
    if let Some(args) = permuted
        && (transpose_k.is_none() || !(same && ss == 1) || args.pack == 16)
    {
        // Layouts for the small tiles (32 x 32 slots, where the axes cannot fill 64 x 64: a
        // transpose with a side of 16 to 48, such as images of 16 to 48 channels whose planes
        // are off their 16-byte alignment, or of 48 channels aligned) of elements of at most
        // 4 bytes (the sizes measured), at least `SMALL_TILES_TILED_BYTES` on the wider side,
        // go to the tiled kernels where those take them, whose tiles group several axes per
        // side. On the H100 (the `channels` bench group's 62 such rows: copies of u8, f16 and
        // f32, casts u8 -> f32, f16 -> f32 and f32 -> f16, CHW <-> HWC and NCHW <-> NHWC) the
        // tiled kernels ran at 0.28-0.94 of a device copy against 0.17-0.89 on the small
        // tiles, 1.34 times as fast on average; two rows 0.9-2.6% slower.
        if permute_kind(&args) == Kind::Permute32
            && !opt.no_tiled
            && ss.max(ds) <= 4
            && norm.n.saturating_mul(ss.max(ds)) >= SMALL_TILES_TILED_BYTES
            && let Some(p) = tiled_plan(&norm, d, s, from, to, opt)?
        {
            // Into channels last, element by element on the tiled kernels: the gathered rows
            // ([`JOIN_ELEMENTWISE_CHANNELS`]).
            if gather_planes
                && element_wise_tiles(&p)
                && matches!(
                    (ss, ds),
                    (1, 1) | (2, 2) | (4, 4) | (1, 4) | (2, 4) | (4, 2)
                )
                && joins_planes(&norm.axes, JOIN_ELEMENTWISE_CHANNELS)
                && let Some(args) = rows_gather_args(&norm, d, s, ss, ds, true)
            {
                return Ok(Plan::RowsGather { args, from, to });
            }
            return Ok(p);
        }
        return Ok(Plan::Permute { args, from, to });
    }
    if let Some(k) = transpose_k {
        let (mut d, mut s) = (d, s);
        if norm.axes[k].src < 0 {
            let a = &mut norm.axes[k];
            let last = a.len as isize - 1;
            d = addr(d, last * a.dst, ds);
            s = addr(s, last * a.src, ss);
            a.dst = -a.dst;
            a.src = -a.src;
        }
        let (c, rr) = (norm.axes[0], norm.axes[k]);
        let batch: Vec<PAxis> = norm
            .axes
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != 0 && *i != k)
            .map(|(_, a)| *a)
            .collect();
        let mut args = TransposeArgs {
            dst: d,
            src: s,
            rows: rr.len as u64,
            cols: c.len as u64,
            dst_row_stride: rr.dst as i64,
            src_col_stride: c.src as i64,
            batch: batch.iter().map(|a| a.len as u64).product(),
            batch_rank: batch.len() as u32,
            ..Default::default()
        };
        for i in 0..MAX_BATCH_RANK {
            let (len, bd, bs) = batch.get(i).map_or((1, 0, 0), |a| (a.len, a.dst, a.src));
            args.batch_shape[i] = len as u64;
            args.batch_div[i] = FastDiv64::new(len as u64);
            args.batch_dst_strides[i] = bd as i64;
            args.batch_src_strides[i] = bs as i64;
        }
        return Ok(Plan::Transpose { args, from, to });
    }
    // A permutation that no other tiled kernel took goes through the tiled kernels rather than
    // the strided ones, which read or write one element per lane along a strided axis.
    if !opt.no_tiled
        && is_permutation(&norm.axes)
        && let Some(p) = tiled_plan(&norm, d, s, from, to, opt)?
    {
        return Ok(p);
    }
    Ok(match strided_args(&norm, d, s, opt)? {
        Ok(args) => Plan::Strided32 { args, from, to },
        Err(args) => Plan::Strided64 { args, from, to },
    })
}

/// Whether `p` is a plan of the tiled kernels' element-wise forms (`tiled_e`), which move one
/// element per access: the tiles' vectors do not line up with the operands.
fn element_wise_tiles(p: &Plan) -> bool {
    matches!(p, Plan::Tiled { args, .. } if args.vector == 0)
}

/// Runs of at least this many pixels, contiguous in the source, make a layout into channels
/// last take the gathered rows ([`joins_planes`]), and likewise out of channels last
/// ([`splits_planes`]).
const JOIN_MIN_PIXELS: usize = 1024;

/// Whether normalised `axes` interleave planes of a channel count in `channels` into channels
/// last (CHW -> HWC, NCHW -> NHWC): axis 0, the channels, the destination's fastest (stride
/// 1), and axis 1 a run of pixels contiguous in the source (stride 1; the whole plane where
/// planes are contiguous) and the channels' period in the destination, at least
/// [`JOIN_MIN_PIXELS`] long. The gathered rows move such layouts with each lane loading its
/// channels from the planes (coalesced across the warp) and storing the interleaved pixels as
/// 16-byte vectors: by default those of [`join_channels`], and those of 16 to 48 channels
/// ([`JOIN_ELEMENTWISE_CHANNELS`]) that the tiled kernels would move element by element.
fn joins_planes(axes: &[PAxis], channels: std::ops::RangeInclusive<usize>) -> bool {
    let [c, px, ..] = axes else {
        return false;
    };
    channels.contains(&c.len)
        && c.dst == 1
        && px.src == 1
        && px.dst == c.len as isize
        && px.len >= JOIN_MIN_PIXELS
}

/// The channel counts for which the gathered rows take a layout of `ss`- to `ds`-byte elements
/// into channels last ([`joins_planes`]; `None` for the other sizes). Measured on the H100 (the
/// `narrow-cast`, `join-cast` and `channels` bench groups; CHW -> HWC of aligned and
/// odd-sized planes and NCHW -> NHWC, 2 to 64 channels), as ratios to a device copy, gathered
/// rows against the best of the tiled and permute kernels:
///
/// - 2 to 4 bytes (f16, bf16, u16 -> f32) and 8 to 4 bytes (f64 -> f32), 2 to 16 channels:
///   0.91-0.97 against 0.83-0.92; from 24 channels the tiled kernels win where the planes are
///   aligned (0.92 against 0.87).
/// - 4 to 2 bytes (f32 -> f16, bf16), 2 to 32 channels: 0.95-1.02 against 0.88-0.96; at 48
///   the tiled kernels win on two of three layouts.
/// - 4-byte copies (f32), 16 to 48 channels: 0.91-1.00 against 0.87-0.96 (on aligned planes
///   of 24 channels, 0.948 against the permute kernel's 0.958); at 64 the permute kernels win
///   (0.92-0.97 against 0.88-0.92). Fewer than 16 channels go to the tiled kernels' narrow
///   paths (0.93-0.95).
///
/// Not taken by default: f32 -> f64 (the gathered rows gained at most 2% and lost 1.5-2% on
/// one layout); casts from u8 and copies of 1- and 2-byte elements, which the tiled and packed
/// kernels move faster where their vectors line up (u8 -> f32 of 2 to 12 channels: 10 of 11
/// layouts; of 16 to 64 channels, every aligned one, 0.82-0.90 against 0.62-0.79; planes off
/// their alignment: [`JOIN_ELEMENTWISE_CHANNELS`]). Other element sizes were not measured and
/// keep the tiled and permute kernels.
fn join_channels(ss: usize, ds: usize) -> Option<std::ops::RangeInclusive<usize>> {
    match (ss, ds) {
        (2, 4) | (8, 4) => Some(2..=16),
        (4, 2) => Some(2..=32),
        (4, 4) => Some(16..=48),
        _ => None,
    }
}

/// The channel counts for which the gathered rows take a layout into channels last
/// ([`joins_planes`]) that the tiled kernels would move element by element (planes off their
/// vectors' alignment), where the permute kernels' tiles would be the small ones: copies of
/// 1-, 2- and 4-byte elements and casts 1 -> 4, 2 -> 4 and 4 -> 2 bytes, the sizes measured. On the H100 (`channels`, odd-sized planes of 16 to 48 channels): u8 copies
/// 0.59-0.76 of a device copy against the tiled kernels' 0.50-0.56, f16 copies 0.80-0.84
/// against 0.70-0.75, u8 -> f32 0.80-0.84 against 0.73-0.80, f16 -> f32 0.80-0.88 against
/// 0.76-0.81, f32 -> f16 (48 channels) 0.91 against 0.84; the small tiles 0.25-0.81. At 64
/// channels the permute kernels' large tiles were faster than both.
const JOIN_ELEMENTWISE_CHANNELS: std::ops::RangeInclusive<usize> = 16..=48;

/// Whether normalised `axes` of a cast split 2 to [`SPLIT_MAX_CHANNELS`] interleaved channels
/// into planes (HWC -> CHW, NHWC -> NCHW): axis 0 a run of at least [`JOIN_MIN_PIXELS`]
/// pixels, the destination's fastest (stride 1) and `C` apart in the source, axis 1 the `C`
/// channels, adjacent in the source (stride 1). The gathered rows take such casts from 2- to
/// 4-byte elements, and from 1- to 4-byte elements where the tiled kernels would move them
/// element by element (planes off their vectors' alignment). A contiguous image under 2^18
/// pixels a plane is one row whose periods are the planes (a batch, a row per image); larger
/// planes, and planes whose rows lie apart, are a row per plane (per run of a plane), and the
/// rows of the same pixels run over grid x together, so that each line of the source is read
/// once for all of them ([`PeriodicRows::args`]). On the H100 (`narrow-cast`, 3 and 4 channels), f16 -> f32 ran at
/// 0.94-0.95 of a device copy against the tiled kernels' 0.85-0.92, u8 -> f32 of odd-sized
/// planes at 0.85 against 0.80 (of aligned planes 0.87 against the tiled kernels' 0.89-0.91).
/// With more channels each lane's loads use less of each line: at 16 channels the gathered
/// rows ran at 0.25-0.71 against the tiled kernels' 0.62-0.90. Casts from 4 to 2 bytes ran
/// slower gathered (0.79-0.90 against 0.92-0.95).
fn splits_planes(axes: &[PAxis]) -> bool {
    let [px, c, ..] = axes else {
        return false;
    };
    (2..=SPLIT_MAX_CHANNELS).contains(&c.len)
        && px.dst == 1
        && c.src == 1
        && px.src == c.len as isize
        && px.len >= JOIN_MIN_PIXELS
}

/// Most channels that [`splits_planes`] splits into planes.
const SPLIT_MAX_CHANNELS: usize = 4;

/// Bytes of the wider side from which a layout that the permute kernels would move through
/// their small tiles goes to the tiled kernels (see `plan_copy`): 1 MiB. Below it the launch
/// and the host's planning (longer for the tiled kernels) weigh more than the kernel; the
/// layouts measured were of 512 MiB.
const SMALL_TILES_TILED_BYTES: usize = 1 << 20;

/// Axes shorter than this, first on the destination's or the source's side, make the tiled
/// kernels take a permuted copy by default ([`tiled::has_narrow_side`]).
const NARROW_AXIS: usize = 16;

/// Whether the source's fastest axis (smallest non-zero `|stride|`) is not the destination's
/// fastest axis (axis 0 of normalised axes).
fn is_permutation(axes: &[PAxis]) -> bool {
    permute::fastest(axes, &[], |a| a.src).is_some_and(|k| k != 0)
}

/// Elements of a box that a tiled plan leaves ([`tiled::Rest`]) up to which it is planned
/// as with [`PlanOptions::no_tiled`]: the tiled kernels' own rests would take further
/// launches for a few elements, and the kernels that take it instead copy that few in one.
const SMALL_REST: usize = 1 << 16;

/// Most launches of a tiled plan with its rests; layouts that would take more (operands far
/// larger than any device's memory, whose axes 2^31 elements apart cut the tiles into
/// thousands of parts) take the other paths.
const MAX_TILED_LAUNCHES: usize = 4096;

/// The tiled plan of normalised operands whose element zero is at `d` (destination) and `s`
/// (source), with the plans of the parts its tiles leave, if the tiled kernels take them in
/// at most [`MAX_TILED_LAUNCHES`] launches.
fn tiled_plan(
    norm: &Normalized,
    d: u64,
    s: u64,
    from: DType,
    to: DType,
    opt: PlanOptions,
) -> Result<Option<Plan>> {
    let (ss, ds) = (from.size(), to.size());
    let copy = from.same_bits(to);
    let Some(t) = tiled::tiled_plan_of(norm, d, s, ss, ds, opt.tiled_volume, copy) else {
        return Ok(None);
    };
    // The rests are planned one by one while the launches stay within `MAX_TILED_LAUNCHES`.
    let mut launches = 1usize;
    let rest = t
        .rest
        .iter()
        .map_while(|b| {
            if launches > MAX_TILED_LAUNCHES {
                return None;
            }
            // A small box goes to the other kernels where they take it (up to `MAX_RANK`
            // axes): one launch, where a tiled plan's own rests would take more.
            let small = b.shape.iter().product::<usize>() <= SMALL_REST;
            let opt = PlanOptions {
                no_tiled: opt.no_tiled || small,
                ..opt
            };
            let p = plan_copy(
                addr(d, b.dst_off, to.size()),
                &b.dst_strides,
                to,
                addr(s, b.src_off, from.size()),
                &b.src_strides,
                from,
                &b.shape,
                opt,
            );
            launches += p.as_ref().map_or(0, Plan::launches);
            Some(p)
        })
        .collect::<Result<Vec<Plan>>>()?;
    if launches > MAX_TILED_LAUNCHES {
        return Ok(None);
    }
    Ok(Some(Plan::Tiled {
        args: t.args,
        from,
        to,
        rest,
    }))
}
