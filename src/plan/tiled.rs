//! The tiled path: tiles whose sides span several axes, for layouts of any rank and for
//! permutations that move a narrow axis.
//!
//! The tile grows from both ends at once: the destination's fastest axes (its *write side*,
//! along which the kernels store) and the source's fastest axes (its *read side*, along
//! which they load), one axis at a time on the side whose run of elements is shorter, each
//! axis whole while the tile has room and the last one of a side cut into pieces (a side
//! whose next axis has no useful piece stops there, and the other goes on; a side keeps
//! room for the other side's next axis, except while its own run is shorter than a line
//! ([`LINE_BYTES`]) and the other's is not). Sides that end
//! with a whole axis then take their next axes whole while the tile has room for them (up to
//! the kernels' limit, every element within 2^31 elements of the tile's first), except a tile of
//! a narrow axis and a run of pixels, which the narrow kernels take; pieces then grow until
//! the tile holds [`TILE_FILL`] elements,
//! [`TILE_FILL_B1`] for vector tiles of 1-byte destination elements (or more where the runs
//! need them); last, a tile of fewer than [`SMALL_TILE_BYTES`] takes the next axes in write
//! order that fit whole, then a piece of the next one where no tile could hold it whole (up
//! to [`TILE_FILL`] elements). Where one side's run ends at a line ([`LINE_BYTES`]) or less and the
//! other's at [`RUN_BYTES`] or more (or, for element-wise tiles, a write run below a sector,
//! [`SECTOR_BYTES`], and a read run above a line), the tile is sought again with the long
//! side's target lowered to a line, and taken where the short side's run grows.
//! An axis cut into pieces becomes a tile axis of one piece and a batch axis of the
//! pieces; the other axes are batch axes. Pieces divide their axis where a divisor is close
//! to the room left; otherwise the end of the axis that no whole piece covers is copied by
//! a plan of its own ([`Tiled::rest`]).
//!
//! An axis whose step is 2^31 elements or more on either side never enters a tile (it stays a
//! batch axis); where the tiles cannot grow without it, the copy is tiled one index of it at a
//! time ([`peeled`]).
//!
//! The tile index runs over the batch axes in write order, so that the tiles running at once
//! continue each other in the destination, except for tiles whose source runs are shorter
//! than a cache line: their index runs first over the axes that continue the destination,
//! then over those that continue the source ([`window_order`]).

use super::permute::fastest;
use super::{Normalized, PAxis};
use devspan_kernels::abi::{
    NARROW_MAX_CHANNELS, NARROW_MIN_CHANNELS, NARROW_SHIFTED_SIZES, TiledArgs, TiledAxis,
    narrow_shifted_exists, tiled_ew_max_volume, tiled_max_volume, tiled_narrow, tiled_vectors,
    tiled_wide_elements,
};

/// A part of a copy that a tiled plan leaves to another plan: a box of the normalised
/// operands, with its own shape, strides (elements) and element-zero offsets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Rest {
    pub shape: Vec<usize>,
    pub dst_strides: Vec<isize>,
    pub src_strides: Vec<isize>,
    /// Offset of the box's first element from the plan's destination base, in elements.
    pub dst_off: isize,
    /// Offset of the box's first element from the plan's source base, in elements.
    pub src_off: isize,
}

/// A tiled plan: the kernel's arguments (boxed: the planner weighs several plans, and moves
/// them, before it takes one) and the boxes it leaves to other plans.
#[derive(Clone, Debug)]
pub(crate) struct Tiled {
    pub args: Box<TiledArgs>,
    pub rest: Vec<Rest>,
}

/// The tiled plan of normalised operands (destination element zero at byte `dst`, source at
/// `src`), with 16-byte vectors on both sides where they line up, else element-wise, and
/// tiles of at most `cap` elements (0: the kernels' limit); `None` when no axis remains, a
/// tile would hold a single element, or the arguments do not fit ([`TiledArgs::new`]).
///
/// The vector plan is first sought with pieces sized to complete only the runs they extend;
/// where its runs do not line up (a side reached a cut axis later than the piece was sized
/// for), again with every piece a multiple of the wider vector.
///
/// `copy` says that both operands hold one element type: only copies take the narrow
/// kernels, so only they are planned for the shifted ones ([`shifted_narrow`]).
pub(crate) fn tiled_plan_of(
    norm: &Normalized,
    dst: u64,
    src: u64,
    src_size: usize,
    dst_size: usize,
    cap: u32,
    copy: bool,
) -> Option<Tiled> {
    if norm.axes.is_empty() {
        return None;
    }
    let orders = AxisOrders::of(&norm.axes);
    // `sector`: a tile whose write run is shorter than a sector is planned again too
    // ([`SECTOR_BYTES`]). Each plan comes with the runs ([`side_runs`]) of the plan that its
    // pieces make before whole axes may replace them.
    let attempt = |vector, whole_vectors, cap, sector: bool| {
        let plan = |targets| {
            let with = |whole_axes| {
                tile_with(
                    norm,
                    &orders,
                    dst,
                    src,
                    (src_size, dst_size),
                    vector,
                    whole_vectors,
                    cap,
                    targets,
                    None,
                    whole_axes,
                )
            };
            let t = with(false)?;
            let runs = side_runs(&t.args, src_size, dst_size);
            // An element-wise plan that leaves a rest is sought again with whole axes in place
            // of pieces that leave one ([`tile_with`]), where [`fewer_rests_pay`] may take it.
            if vector || src_size == 1 || t.rest.is_empty() {
                return Some((t, runs));
            }
            match with(true) {
                Some(w) if fewer_rests_pay(&w, &t, (src_size, dst_size)) => Some((w, runs)),
                _ => Some((t, runs)),
            }
        };
        let t = plan([RUN_BYTES; 2])?;
        // Runs of one line or less on one side and of RUN_BYTES or more on the other, or
        // writes of less than a sector beside reads of more than a line: the long side's
        // target lowered to a line leaves the short side room, and that plan is taken where
        // its short side's run grows. Runs in bytes, `[write, read]`: the sector rule counts
        // them either direction ([`sector_runs`], as the gate that sends a plan here does),
        // the line rule forwards ([`tile_runs`]).
        let runs = |a: &TiledArgs, sided: bool| {
            if sided {
                sector_runs(a, src_size, dst_size)
            } else {
                let (w, r) = tile_runs(a);
                [w as usize * dst_size, r as usize * src_size]
            }
        };
        let sector = sector && short_of_a_sector(runs(&t.0.args, true));
        let bytes = runs(&t.0.args, sector);
        // The sector rule's short side is the write side.
        let short = if sector {
            0
        } else {
            usize::from(bytes[1] < bytes[0])
        };
        let long = 1 - short;
        if bytes[short] >= LINE_BYTES as usize || (bytes[long] < RUN_BYTES && !sector) {
            return Some(t);
        }
        let mut targets = [RUN_BYTES; 2];
        targets[long] = LINE_BYTES as usize;
        match plan(targets) {
            Some(b) => {
                let balanced = runs(&b.0.args, sector);
                Some(if balanced[short] > bytes[short] { b } else { t })
            }
            None => Some(t),
        }
    };
    let sizes = (src_size, dst_size);
    // Element-wise tiles of at most the volume of `TILED_MAX_THREADS` threads, then, for copies
    // of `TILED_EW_SIZES`, larger ones where they lengthen short runs ([`wide_tile_wins`]).
    let narrow_cap = tiled_max_volume(false, src_size, dst_size) as u32;
    let narrow_cap = if cap == 0 {
        narrow_cap
    } else {
        cap.min(narrow_cap)
    };
    let element_wise = |sector: bool| {
        let (t, pieces) = attempt(false, false, narrow_cap, sector)?;
        let wide_cap = if cap == 0 {
            tiled_ew_max_volume(src_size) as u32
        } else {
            cap
        };
        // The larger tile is sought only where the smaller one's runs leave it a chance: the
        // runs of its pieces, before an axis taken whole may have lengthened one side past
        // [`WIDE_MAX_RUN`] while the other stays short. It is taken where it doubles a short
        // run of the smaller tile taken ([`wide_tile_wins`]).
        if !(copy && tiled_wide_elements(false, src_size, dst_size))
            || wide_cap <= narrow_cap
            || !runs_short(pieces, src_size)
        {
            return Some(t);
        }
        Some(match attempt(false, false, wide_cap, sector) {
            Some((w, _))
                if wide_tile_wins(&t.args, pieces, &w.args, sizes)
                    || fewer_rests_pay(&w, &t, sizes) =>
            {
                w
            }
            _ => t,
        })
    };
    // An element-wise plan whose write run is shorter than a sector is planned again with
    // the sector rule in every attempt ([`SECTOR_BYTES`]), its runs counted either direction
    // here and in the attempts ([`sector_runs`]), so that a tile read backwards is planned
    // again as one read forwards.
    let element_wise = || {
        let t = element_wise(false)?;
        if short_of_a_sector(sector_runs(&t.args, src_size, dst_size)) {
            return element_wise(true).or(Some(t));
        }
        Some(t)
    };
    let vector = || attempt(true, false, cap, false).or_else(|| attempt(true, true, cap, false));
    vectors_may_line_up(&norm.axes, src_size, dst_size)
        .then(vector)
        .flatten()
        .map(|(t, _)| t)
        .or_else(|| copy.then(|| shifted_narrow(norm, &orders, dst, src, sizes, cap, true))?)
        .or_else(|| copy.then(|| shifted_narrow(norm, &orders, dst, src, sizes, cap, false))?)
        .or_else(element_wise)
        .or_else(|| peeled(norm, dst, src, sizes, cap, copy))
}

/// Whether a vector tile of these axes could line up on both sides
/// ([`TiledArgs::vectors_line_up`]); `false` where none can, so that the vector attempts of
/// [`tiled_plan_of`] need not be made (each a [`tile_with`], which costs microseconds on
/// many axes). On a side of vectors of `v` elements, an axis whose stride is not a multiple
/// of `v` can neither be a batch axis nor follow the tile's leading contiguous axes, so it
/// is one of them, and the tile's volume is at least the product of the tile's extents
/// before it in that side's order, which is its stride: the largest such stride must fit in
/// the largest vector tile.
fn vectors_may_line_up(axes: &[PAxis], src_size: usize, dst_size: usize) -> bool {
    let (vs, vd) = tiled_vectors(true, src_size, dst_size);
    let max = tiled_max_volume(true, src_size, dst_size);
    let side = |v: u32, stride: fn(&PAxis) -> isize| {
        let v = v as usize;
        v <= 1
            || axes
                .iter()
                .map(|a| stride(a).unsigned_abs())
                .filter(|s| s % v != 0)
                .all(|s| s as u64 <= max)
    };
    side(vs, |a| a.src) && side(vd, |a| a.dst)
}

/// Runs (bytes) shorter than this on both sides of an element-wise tile's pieces, and one of
/// them shorter than [`WIDE_SHORT_RUN`] ([`WIDE_SHORT_RUN_B1`] for 1-byte elements), let a
/// larger tile ([`TILED_WIDE_THREADS`](devspan_kernels::abi::TILED_WIDE_THREADS)) be taken
/// where it lengthens a short run ([`wide_tile_wins`]).
const WIDE_MAX_RUN: u64 = 1024;

/// Runs (bytes) that a larger element-wise tile must at least double to be taken
/// ([`wide_tile_wins`]).
const WIDE_SHORT_RUN: u64 = 2 * LINE_BYTES;

/// For 1-byte elements, the shorter run (bytes) of the smaller tile must be shorter than this
/// for a larger tile to be weighed ([`runs_short`]). On the H100, the tiled launches of u8
/// copies of 14 layouts (`[2, 3^17]` and unlisted ones of ranks 7 to 27, also read backwards)
/// in tiles of up to 8192 elements ran at 1.02-2.14 times their speed in tiles of 4096 where
/// that shorter run was 6 to 30 bytes, and at 0.90-0.97 where it was 81 or 128 bytes; the
/// bench's u8 `[2, 3^17]` reversed row, 0.285 -> 0.305 of a device copy.
const WIDE_SHORT_RUN_B1: u64 = LINE_BYTES / 2;

/// Whether the element-wise tile `wide` (of more than [`TILED_MAX_THREADS`](devspan_kernels::abi::TILED_MAX_THREADS)
/// threads' elements)
/// beats `narrow`, both of the same copy of `sizes`: where both runs of `narrow`'s pieces
/// (`pieces`: the read side's contiguous source bytes and the write side's destination bytes,
/// [`side_runs`], of `narrow`'s plan before whole axes replaced pieces that left a rest) are
/// shorter than [`WIDE_MAX_RUN`], one of them shorter than [`WIDE_SHORT_RUN`] (for 1-byte
/// elements [`WIDE_SHORT_RUN_B1`]), and `wide` at least doubles a run of `narrow`'s shorter
/// than [`WIDE_SHORT_RUN`]. Larger tiles run in
/// one block of up to 1024 threads per multiprocessor (the registers), so that barriers
/// stall it alone; they pay only where they lengthen short runs. On the H100, element-wise
/// f16 and f32 copies of 33 layouts (`[2, 3^17]` and unlisted ones of ranks 7 to 24, also read
/// backwards) ran at 0.49-0.97 of a device copy in the larger tiles this takes, against
/// 0.33-0.89 in tiles of 4096 elements, and 0.46-0.67 against 0.60-0.80 in those it leaves
/// (runs already long, or growing less). The pieces' runs decide whether a larger tile is
/// weighed, so that an axis that the smaller tile took whole, lengthening one run past
/// [`WIDE_MAX_RUN`], leaves the other, short run its chance: of 8834 layouts drawn for
/// `tools/tiled-variants`, 6 launches are planned so that the taken tile's runs alone would
/// not have been weighed, and ran on the H100 at 0.57 and 0.60 of a device copy against 0.30
/// and 0.33 (f16, write runs of 40 and 56 bytes doubled beside reads of 1570 and 3836), 0.48
/// against 0.46 twice and 0.63 against 0.56 (f16), 0.781 against 0.795 (f32).
pub(super) fn wide_tile_wins(
    narrow: &TiledArgs,
    pieces: [u64; 2],
    wide: &TiledArgs,
    (ss, ds): (usize, usize),
) -> bool {
    let n = side_runs(narrow, ss, ds);
    let w = side_runs(wide, ss, ds);
    runs_short(pieces, ss) && (0..2).any(|k| n[k] < WIDE_SHORT_RUN && w[k] >= 2 * n[k])
}

/// Whether runs `[read, write]` (bytes, [`side_runs`]) of elements of `size` bytes are short
/// enough for a larger element-wise tile to pay ([`wide_tile_wins`]): both under
/// [`WIDE_MAX_RUN`], one under [`WIDE_SHORT_RUN`] ([`WIDE_SHORT_RUN_B1`] for 1-byte elements).
fn runs_short(n: [u64; 2], size: usize) -> bool {
    let short = if size == 1 {
        WIDE_SHORT_RUN_B1
    } else {
        WIDE_SHORT_RUN
    };
    n[0].max(n[1]) < WIDE_MAX_RUN && n[0].min(n[1]) < short
}

/// The runs of a tile in bytes: `[read, write]`, the product of the leading tile axes in read
/// order whose source strides continue each other (either direction), times the source's
/// element size, and likewise in write order for the destination.
pub(super) fn side_runs(a: &TiledArgs, ss: usize, ds: usize) -> [u64; 2] {
    let r = a.tile_rank as usize;
    let read = a.read[..r].iter().map(|x| (x.len, i64::from(x.src).abs()));
    let write = a.write[..r].iter().map(|x| (x.len, i64::from(x.dst).abs()));
    [run_of(read) * ss as u64, run_of(write) * ds as u64]
}

/// Elements of a plan's rests.
fn rest_elements(t: &Tiled) -> usize {
    t.rest
        .iter()
        .map(|r| r.shape.iter().product::<usize>())
        .sum()
}

/// Whether the element-wise plan `fewer` of a copy of `sizes` (source, destination element
/// bytes), which leaves fewer elements to rests than `plan`, is the better one: for source
/// elements of 2 bytes or more (1-byte copies keep their rests: their whole-axis tile ran
/// slower on `[2, 3^17]`), where its tile's shorter run ([`side_runs`]) is no shorter than
/// `plan`'s, or where it is at least a line ([`LINE_BYTES`]) and a rest of `plan` has a run
/// shorter than a line on either side (its extents' contiguous elements, [`box_run`]), whose
/// lines its tiles would read or write in parts.
///
/// On the H100, the 94 tiled launches (rests included) of element-wise f16, f32 and f64 copies
/// of layouts of ranks 5 to 24 whose plans this changes (among 2399 layouts drawn for
/// `tools/tiled-variants`) ran at 0.26-0.77 of a device copy with their rests and at 0.35-0.91
/// with the whole axes: 1.22 times as fast (geometric mean), 5 of them 2-10% slower
/// (`[2, 3^17]` under the `rank` bench's second random permutation: f16 0.41 -> 0.50, f32 0.54
/// -> 0.66). Where the whole axes shortened the shorter run to under a line, or the rests' runs
/// were a line or longer, the plans with rests ran 1.1-1.3 times as fast, so those keep them.
fn fewer_rests_pay(fewer: &Tiled, plan: &Tiled, (ss, ds): (usize, usize)) -> bool {
    let shorter = |t: &Tiled| {
        let [r, w] = side_runs(&t.args, ss, ds);
        r.min(w)
    };
    let short_rest = plan.rest.iter().any(|r| box_run(r, ss, ds) < LINE_BYTES);
    ss > 1
        && rest_elements(fewer) < rest_elements(plan)
        && (shorter(fewer) >= shorter(plan) || (shorter(fewer) >= LINE_BYTES && short_rest))
}

/// The shorter of a rest's runs in bytes: the contiguous source elements of its leading axes
/// in read order (by |source stride|) times `ss`, and likewise in write order for the
/// destination; axes of one element left out.
fn box_run(r: &Rest, ss: usize, ds: usize) -> u64 {
    let side = |strides: &[isize], size: usize| {
        let mut axes: Vec<(u32, i64)> = r
            .shape
            .iter()
            .zip(strides)
            .filter(|&(&len, _)| len > 1)
            .map(|(&len, &s)| (len.min(u32::MAX as usize) as u32, s.unsigned_abs() as i64))
            .collect();
        axes.sort_by_key(|&(_, s)| s);
        run_of(axes.into_iter()) * size as u64
    };
    side(&r.src_strides, ss).min(side(&r.dst_strides, ds))
}

/// The product of the leading extents of `axes` (extent, stride in elements) whose strides
/// continue each other: the first 1, each next the product so far.
fn run_of(axes: impl Iterator<Item = (u32, i64)>) -> u64 {
    let mut e = 1u64;
    for (len, stride) in axes {
        if stride != e as i64 {
            break;
        }
        e *= u64::from(len);
    }
    e
}

/// Most launches that [`peeled`] makes of one axis.
const MAX_PEELED: usize = 64;

/// Most launches that [`peeled`] makes in all: the product of the extents of every axis far
/// apart (each rest and the plan within are taken apart again along the next such axis).
/// Operands that fit in a device's memory stay far below it; layouts past it take the
/// strided kernels' one launch.
const MAX_PEELED_LAUNCHES: usize = 4096;

/// Fewest elements per launch of [`peeled`]: smaller copies take the general gather's one
/// launch.
const MIN_PEELED_ELEMENTS: usize = 1 << 20;

/// The tiled plan of the operands without their shortest axis whose step on one side is
/// 2^31 elements or more (no tile can hold two of its elements, and where it is a side's
/// fastest axis, that side's run cannot grow), at index 0 of that axis, with one rest per
/// other index: a launch each, each planned on its own. `None` without such an axis of at most
/// [`MAX_PEELED`] elements, for launches of fewer than [`MIN_PEELED_ELEMENTS`] elements, where
/// the axes far apart would take more than [`MAX_PEELED_LAUNCHES`] launches in all, or when
/// the rest of the operands has no tiled plan either.
fn peeled(
    norm: &Normalized,
    dst: u64,
    src: u64,
    (src_size, dst_size): (usize, usize),
    cap: u32,
    copy: bool,
) -> Option<Tiled> {
    let far = |a: &PAxis| {
        a.dst.unsigned_abs() > i32::MAX as usize || a.src.unsigned_abs() > i32::MAX as usize
    };
    let (k, axis) = norm
        .axes
        .iter()
        .enumerate()
        .filter(|(_, a)| far(a) && a.len <= MAX_PEELED)
        .min_by_key(|(_, a)| a.len)?;
    if norm.n / axis.len < MIN_PEELED_ELEMENTS {
        return None;
    }
    let mut launches = 1usize;
    for a in norm.axes.iter().filter(|a| far(a)) {
        launches = launches.saturating_mul(a.len);
    }
    if launches > MAX_PEELED_LAUNCHES {
        return None;
    }
    let mut inner = norm.clone();
    inner.axes.remove(k);
    let mut t = tiled_plan_of(&inner, dst, src, src_size, dst_size, cap, copy)?;
    let index = Rest {
        shape: norm
            .axes
            .iter()
            .enumerate()
            .map(|(j, a)| if j == k { 1 } else { a.len })
            .collect(),
        dst_strides: norm.axes.iter().map(|a| a.dst).collect(),
        src_strides: norm.axes.iter().map(|a| a.src).collect(),
        dst_off: 0,
        src_off: 0,
    };
    for i in 1..axis.len as isize {
        t.rest.push(Rest {
            dst_off: i * axis.dst,
            src_off: i * axis.src,
            ..index.clone()
        });
    }
    Some(t)
}

/// The plan of a copy between planes of pixels and interleaved channels on the narrow kernels
/// whose planes may start anywhere ([`TiledArgs::new_shifted`]), where the vector plans found
/// no aligned tiling: elements of a narrow kernel's size, an axis of stride 1 on the planes'
/// side (the pixels; the source's for a `join`, the destination's for a split) of at least
/// one vector (two for a join), an axis of stride 1 on the other side of 2 to 16 elements
/// (the channels), and a plan of [`devspan_kernels::abi::tiled_narrow`]'s shape. Its tiles
/// cover whole vectors of pixels, the end of the pixel axis going to a rest; a join's tiles
/// also leave out at least the last vector of pixels, so that each source vector has 16
/// bytes of the source above it and the aligned blocks that the kernel reads around it stay
/// in the source's allocation. `None` too where the shifted kernels do not pay for the
/// tile's run of pixels ([`shifted_pays`]).
fn shifted_narrow(
    norm: &Normalized,
    orders: &AxisOrders,
    dst: u64,
    src: u64,
    (src_size, dst_size): (usize, usize),
    cap: u32,
    join: bool,
) -> Option<Tiled> {
    if src_size != dst_size || !NARROW_SHIFTED_SIZES.contains(&src_size) {
        return None;
    }
    let v = 16 / src_size;
    // A join's pixels run forwards in the source (the margin above each vector needs it);
    // a split's channels may run either way (the tiles flip them).
    let unit = |a: &PAxis| if join { a.src == 1 } else { a.dst == 1 };
    let interleaved = |a: &PAxis| {
        if join {
            a.dst == 1
        } else {
            a.src.unsigned_abs() == 1
        }
    };
    let k = norm.axes.iter().position(unit)?;
    let (j, _) = norm
        .axes
        .iter()
        .enumerate()
        .find(|&(j, a)| j != k && interleaved(a))?;
    let channels = norm.axes[j].len;
    let len = norm.axes[k].len;
    let least = if join { 2 * v } else { v };
    let narrow = NARROW_MIN_CHANNELS as usize..=NARROW_MAX_CHANNELS as usize;
    // The pixels step over the channels on the interleaved side, as `tiled_narrow` asks:
    // other layouts are left before any tile is sought.
    let step = if join {
        norm.axes[k].dst
    } else {
        norm.axes[k].src
    };
    // Copies on which no run of pixels makes the shifted kernels pay are left before any
    // tile is sought ([`shifted_pays`]).
    if len < least
        || !narrow.contains(&channels)
        || step != channels as isize
        || !shifted_pays(src_size, channels as u32, u64::MAX)
    {
        return None;
    }
    // The tiles take whole vectors of pixels up to `end` (a join's at least one vector
    // below the end).
    let end = (len - (least - v)) / v * v;
    let mut short = norm.clone();
    short.axes[k].len = end;
    let limit = tiled_max_volume(false, src_size, dst_size) as u32;
    let cap = if cap == 0 { limit } else { cap.min(limit) };
    // Runs no longer than the pixels and the channels give, so that the tile keeps the
    // narrow kernels' two axes.
    let pixels = RUN_BYTES.min(end.saturating_mul(src_size));
    let both = RUN_BYTES.min(channels.saturating_mul(end).saturating_mul(src_size));
    let targets = if join { [both, pixels] } else { [pixels, both] };
    let sizes = (src_size, dst_size);
    // Pieces of whole chunks of the narrow kernels (32 vectors, a warp's work) where one fits
    // the tile, so that no warp takes a part of one; else of whole vectors.
    let chunk = 32 * v;
    let pieces = if chunk * channels <= cap as usize {
        chunk
    } else {
        v
    };
    let shifted = Some((join, pieces));
    // `short` has `norm`'s strides, so `norm`'s axis orders.
    let mut t = tile_with(
        &short, orders, dst, src, sizes, true, true, cap, targets, shifted, false,
    )?;
    let n = tiled_narrow(&t.args, src_size)?;
    let [read, write] = side_runs(&t.args, src_size, dst_size);
    let pixels = if join { read } else { write };
    if !(n.join == join && n.shifted && shifted_pays(src_size, n.channels, pixels)) {
        return None;
    }
    if end < len {
        let box_ = Rest {
            shape: norm
                .axes
                .iter()
                .enumerate()
                .map(|(j, a)| if j == k { len - end } else { a.len })
                .collect(),
            dst_strides: norm.axes.iter().map(|a| a.dst).collect(),
            src_strides: norm.axes.iter().map(|a| a.src).collect(),
            dst_off: end as isize * norm.axes[k].dst,
            src_off: end as isize * norm.axes[k].src,
        };
        // The end of the pixels that no piece covers, where the tiles leave one, ends at
        // `end`: one box then takes both, one launch fewer.
        let before = t.rest.iter_mut().find(|r| {
            let n = r.shape[k] as isize;
            r.dst_strides == box_.dst_strides
                && r.src_strides == box_.src_strides
                && (0..r.shape.len()).all(|j| j == k || r.shape[j] == box_.shape[j])
                && r.dst_off + n * norm.axes[k].dst == box_.dst_off
                && r.src_off + n * norm.axes[k].src == box_.src_off
        });
        match before {
            Some(r) => r.shape[k] += len - end,
            None => t.rest.push(box_),
        }
    }
    Some(t)
}

/// Whether the shifted narrow kernels ([`shifted_narrow`]) pay for tiles whose run of pixels
/// (the planes' side) is `pixels` bytes, on `channels` channels of `size`-byte units, over the
/// element-wise tiles that the copy takes otherwise: always for 1-byte units, from runs of 512
/// bytes for 2-byte ones, and for 4- and 8-byte ones only on 5 channels or more and runs of
/// 1 KiB or more. On the H100, 169 launches of the shifted kernels among 8834 layouts drawn
/// for `tools/tiled-variants`, each against the element-wise plan of the same copy (ratios to
/// a device copy): 1-byte, 0.47-1.01 against 0.49-0.68, the shifted kernels ahead on 35 of
/// 36; 2-byte, runs of 1 KiB or more 0.89-1.03 against 0.79-0.86 (22 of 22 ahead), 512 to
/// 1023 bytes 6 of 9 ahead, under 512 bytes 0.30-0.68 against 0.73-0.77; 4- and 8-byte, 2 to 4
/// channels 0.07-1.07 against 0.37-1.07, behind on 70 of 85 (CHW -> HWC f32 with odd planes
/// 0.86 against 0.94), 5 to 8 channels with runs of 1 KiB or more 0.91-0.99 against
/// 0.89-0.97 (9 of 9 ahead), other runs 0.12-0.83 against 0.67-0.92.
/// (The kernels of 4- and 8-byte units of fewer channels do not exist:
/// [`narrow_shifted_exists`].)
pub(super) fn shifted_pays(size: usize, channels: u32, pixels: u64) -> bool {
    narrow_shifted_exists(size, channels)
        && match size {
            1 => true,
            2 => pixels >= 512,
            _ => pixels >= 1024,
        }
}

/// [`tiled_plan_of`] of a copy where the element sizes are equal.
#[cfg(test)]
pub(crate) fn tiled_plan(
    norm: &Normalized,
    dst: u64,
    src: u64,
    src_size: usize,
    dst_size: usize,
    cap: u32,
) -> Option<Tiled> {
    tiled_plan_of(
        norm,
        dst,
        src,
        src_size,
        dst_size,
        cap,
        src_size == dst_size,
    )
}

/// The contiguous run of each side of a tile, in elements: (write, read).
fn tile_runs(a: &TiledArgs) -> (u64, u64) {
    let r = a.tile_rank as usize;
    let w = a.write[..r].iter().map(|x| (x.len, i64::from(x.dst)));
    let rd = a.read[..r].iter().map(|x| (x.len, i64::from(x.src)));
    (run_of(w), run_of(rd))
}

/// Pieces of `len` elements of an axis cut to fit `room` slots in multiples of `g`: the whole
/// axis if it fits; else the largest multiple of `g` not above `room` that divides `len` and
/// is at least half of the largest such multiple, else that largest multiple (its axis then
/// leaves a rest). `None` when no multiple of `g` fits.
fn piece(len: usize, room: usize, g: usize) -> Option<usize> {
    if len <= room {
        return Some(len);
    }
    let max = room / g * g;
    if max == 0 {
        return None;
    }
    let exact = (max / 2..=max)
        .rev()
        .step_by(g)
        .find(|&c| c > 0 && len % c == 0);
    Some(exact.unwrap_or(max))
}

/// Bytes of a DRAM sector, the unit in which memory is read and written. An element-wise
/// plan whose tile writes runs shorter than a sector and reads runs longer than a line
/// ([`LINE_BYTES`]) is planned again with the read side's target lowered to a line in every
/// attempt ([`tiled_plan_of`]). On the H100, the tiled launches that this changes (u8 copies
/// writing runs of 9 to 30 bytes beside reads of 135 to 654) ran 1.1 to 2.8 times as fast: 13
/// among 2399 layouts drawn for `tools/tiled-variants`, and 21 of 23 among 6193 others (the
/// other two within 2%; geometric mean 1.75, 0.12-0.44 -> 0.27-0.48 of a device copy). This
/// rule leaves short reads beside long writes (the line rule above still plans a read run of a
/// line or less again where the write run reaches [`RUN_BYTES`]): planned again the same way,
/// 29 such launches among the 6193 ran at 0.94 of their speed (geometric mean; 15 slower by
/// more than 2%, down to 0.69). Runs are counted either direction ([`side_runs`]): tiles read
/// backwards take the rule as those read forwards; among the 8834 layouts of three draws (the
/// default, 1024,777 and 3000,4242), that changes 32 u8 launches, which ran 1.35 times as fast
/// (geometric mean; 22 faster, 6 slower by more than 2%, down to 0.79; 0.13-0.53 -> 0.21-0.55
/// of a device copy).
/// Lowering the target wherever one run was under a line and the other between a line and
/// [`RUN_BYTES`] slowed about as many plans as it sped up.
const SECTOR_BYTES: usize = 32;

/// The runs `[write, read]` (bytes) of a tile of `ss`- to `ds`-byte elements that the sector
/// rule weighs: [`side_runs`], counted either direction.
fn sector_runs(a: &TiledArgs, ss: usize, ds: usize) -> [usize; 2] {
    let [read, write] = side_runs(a, ss, ds);
    [write as usize, read as usize]
}

/// Whether runs of `[write, read]` bytes are shorter than a sector ([`SECTOR_BYTES`]) on the
/// write side and longer than a line ([`LINE_BYTES`]) on the read side (not the reverse:
/// lowering the write side's target to lengthen a short read run slowed most such plans).
fn short_of_a_sector([write, read]: [usize; 2]) -> bool {
    write < SECTOR_BYTES && read > LINE_BYTES as usize
}

/// Bytes that each side's run reaches before the tile grows otherwise (when the tile has
/// room): two 128-byte lines.
const RUN_BYTES: usize = 256;

/// Elements up to which pieces grow once both runs are long enough (tiles that the runs
/// make larger stay larger).
const TILE_FILL: usize = 2048;

/// Elements up to which the pieces of vector tiles of 1-byte destination elements grow on,
/// past [`TILE_FILL`], by pieces that leave no rest where their axis had none: 512 threads of
/// one 16-byte vector each (runs that need them make larger tiles, up to the kernels' limit
/// of 1024 threads). Such
/// tiles hold few bytes per thread at [`TILE_FILL`] elements, and move them with fewer bytes
/// in flight.
const TILE_FILL_B1: usize = 8192;

/// Bytes of destination elements below which a tile whose runs can grow no further takes
/// further whole axes in write order, then a piece of the next axis where no tile could hold
/// it whole: smaller tiles make blocks of a few warps that move little per barrier (tiles of
/// one u8 row of 100 bytes or one f64 row of 33 elements, copied into a column slice beside
/// millions of rows, ran at 0.24-0.28 of a device copy on the H100, where tiles of 14 u8 rows
/// of 132 bytes ran at 0.49).
const SMALL_TILE_BYTES: usize = 4096;

/// The axes of a copy in write order (by |destination stride|) and in read order (by |source
/// stride|, broadcast axes last), ties by index. They depend on the strides' magnitudes only,
/// which [`tile_with`]'s flips and [`shifted_narrow`]'s shortened axis leave as they are, so a
/// plan sorts them once for all the tiles it weighs.
#[derive(Debug, PartialEq, Eq)]
struct AxisOrders {
    write: Vec<usize>,
    read: Vec<usize>,
}

impl AxisOrders {
    fn of(axes: &[PAxis]) -> Self {
        let write = Self::order(axes, |a| (false, a.dst.unsigned_abs()));
        let read = Self::order(axes, |a| (a.src == 0, a.src.unsigned_abs()));
        Self { write, read }
    }

    /// The indices of `axes` by `(key, index)`. Normalised axes come in write order, and a
    /// reversed permutation reads them backwards: both are taken as they are, without a sort.
    fn order(axes: &[PAxis], key: impl Fn(&PAxis) -> (bool, usize)) -> Vec<usize> {
        let n = axes.len();
        if axes.windows(2).all(|w| key(&w[0]) <= key(&w[1])) {
            return (0..n).collect();
        }
        if axes.windows(2).all(|w| key(&w[0]) > key(&w[1])) {
            return (0..n).rev().collect();
        }
        // The keys are unique (ties go by index): an unstable sort orders them as a stable one.
        let mut order: Vec<usize> = (0..n).collect();
        order.sort_unstable_by_key(|&k| (key(&axes[k]), k));
        order
    }
}

/// [`tile_with`] with runs of [`RUN_BYTES`] sought on both sides.
#[cfg(test)]
#[allow(clippy::too_many_arguments)]
fn tile_for(
    norm: &Normalized,
    dst: u64,
    src: u64,
    src_size: usize,
    dst_size: usize,
    vector: bool,
    whole_vectors: bool,
    cap: u32,
) -> Option<Tiled> {
    let sizes = (src_size, dst_size);
    tile_with(
        norm,
        &AxisOrders::of(&norm.axes),
        dst,
        src,
        sizes,
        vector,
        whole_vectors,
        cap,
        [RUN_BYTES; 2],
        None,
        false,
    )
}

/// What a piece of `c` elements of axis `a` adds to a tile's reach on each operand (the
/// largest offset from its first element, in elements): `(c - 1) x |stride|`, `[destination,
/// source]`.
fn reach_of(a: &PAxis, c: usize) -> [u128; 2] {
    let n = c.saturating_sub(1) as u128;
    [
        n * a.dst.unsigned_abs() as u128,
        n * a.src.unsigned_abs() as u128,
    ]
}

/// Sets the piece of axis `k` in `chunk` to `c` elements, keeping `reach` (the sum of
/// [`reach_of`] every axis's piece) with it.
fn set_piece(chunk: &mut [usize], reach: &mut [u128; 2], axes: &[PAxis], k: usize, c: usize) {
    let (old, new) = (reach_of(&axes[k], chunk[k]), reach_of(&axes[k], c));
    for i in 0..2 {
        reach[i] = reach[i] - old[i] + new[i];
    }
    chunk[k] = c;
}

/// The tiled plan with (`vector`) or without 16-byte vectors, or `None`; with
/// `whole_vectors`, every piece is a multiple of the wider side's vector. The runs grow to
/// `targets` = (write, read) bytes before the tile grows otherwise. `shifted` =
/// `Some((source, pieces))` builds the arguments with [`TiledArgs::new_shifted`] (the source
/// side, or else the destination side, at any alignment), with pieces in multiples of
/// `pieces` elements. With `whole_axes`, an element-wise tile whose runs grow by a piece that
/// would leave a rest takes the whole axis instead where it is less than twice the piece and
/// fits in the tile.
#[allow(clippy::too_many_arguments)]
fn tile_with(
    norm: &Normalized,
    orders: &AxisOrders,
    dst: u64,
    src: u64,
    (src_size, dst_size): (usize, usize),
    vector: bool,
    whole_vectors: bool,
    cap: u32,
    targets: [usize; 2],
    shifted: Option<(bool, usize)>,
    whole_axes: bool,
) -> Option<Tiled> {
    let r = norm.axes.len();
    let (mut dst_off, mut src_off) = (0isize, 0isize);
    // Axes read backwards are flipped (both operands), so that the runs of vectors a tile
    // reads along them go forwards: the source's fastest axis unless it is the destination's
    // fastest, and every axis that runs faster in the source than in the destination. Their
    // destination strides turn negative, which leaves the write side's runs (along the
    // destination's fastest axes) as they were. (The source's fastest axis is the first in
    // read order, unless that one is broadcast, as then every axis is.)
    let src_fastest = orders.read.first().filter(|&&k| norm.axes[k].src != 0);
    let flipped = |k: usize, a: &PAxis| {
        vector
            && a.src < 0
            && ((src_fastest == Some(&k) && k != 0) || a.src.unsigned_abs() < a.dst.unsigned_abs())
    };
    let axes: std::borrow::Cow<'_, [PAxis]> =
        if norm.axes.iter().enumerate().any(|(k, a)| flipped(k, a)) {
            let mut axes = norm.axes.clone();
            for (k, a) in axes.iter_mut().enumerate() {
                if flipped(k, a) {
                    let last = a.len as isize - 1;
                    dst_off += last * a.dst;
                    src_off += last * a.src;
                    a.dst = -a.dst;
                    a.src = -a.src;
                }
            }
            axes.into()
        } else {
            norm.axes[..].into()
        };
    // Write order: by |destination stride|; read order: by |source stride|, broadcast axes
    // last (the flips above leave them as they were).
    debug_assert!(
        *orders == AxisOrders::of(&axes),
        "axis orders of other strides"
    );
    let (worder, rorder) = (&orders.write[..], &orders.read[..]);

    // Element-wise copies of `TILED_EW_SIZES` may be asked for larger tiles (a cap above
    // the volume of `TILED_MAX_THREADS` threads).
    let limit = if tiled_wide_elements(vector, src_size, dst_size)
        && u64::from(cap) > tiled_max_volume(vector, src_size, dst_size)
    {
        tiled_ew_max_volume(src_size)
    } else {
        tiled_max_volume(vector, src_size, dst_size)
    } as usize;
    let max = if cap == 0 {
        limit
    } else {
        limit.min(cap as usize)
    };
    let (vs, vd) = tiled_vectors(vector, src_size, dst_size);
    // Pieces of shifted narrow tiles in the multiples that their plan asks for.
    let g = match shifted {
        Some((_, pieces)) => pieces,
        None => (vs.max(vd)) as usize,
    };
    // The vector width of each side (0: write, 1: read).
    let widths = [vd as usize, vs as usize];
    // chunk[k]: 0 outside the tile, else the extent of its piece; `reach`: the tile's reach on
    // each operand, the sum of [`reach_of`] its axes (kept by [`set_piece`]).
    let mut chunk = vec![0usize; r];
    let mut reach = [0u128; 2];
    let mut volume = 1usize;
    // The run of a side: the product of its order's leading axes that are in the tile, up to
    // the first one that is not whole (pieces end a side).
    let run = |order: &[usize], chunk: &[usize]| -> (usize, Option<usize>) {
        let mut e = 1;
        for &k in order {
            if chunk[k] == 0 {
                return (e, Some(k));
            }
            e *= chunk[k];
            if chunk[k] < axes[k].len {
                return (e, None);
            }
        }
        (e, None)
    };
    // The largest extent that axis `k` may take in the tile (at most its length) while every
    // element stays within 2^31 elements of the tile's first on both operands
    // ([`TiledArgs::new`] refuses the tile otherwise); at least 1.
    let reach_room = |chunk: &[usize], reach: [u128; 2], k: usize| -> usize {
        let own = reach_of(&axes[k], chunk[k]);
        let (d, s) = (reach[0] - own[0], reach[1] - own[1]);
        // What is left of the reach is below 2^31: divided as a `usize`.
        let limit = i32::MAX as u128;
        let fit = |used: u128, stride: usize| match (limit.checked_sub(used), stride) {
            (None, _) => 1,
            (Some(_), 0) => usize::MAX,
            (Some(left), st) => 1 + left as usize / st,
        };
        let a = &axes[k];
        fit(d, a.dst.unsigned_abs())
            .min(fit(s, a.src.unsigned_abs()))
            .min(a.len)
    };
    // Whether the tile, with axis `k` at `c` elements (at most its length), stays within
    // reach: every stage leaves axes out of reach out of the tile, or takes pieces of them.
    let within_reach =
        |chunk: &[usize], reach: [u128; 2], k: usize, c: usize| c <= reach_room(chunk, reach, k);
    // First both runs up to their targets, the shorter one (in bytes) first: whole axes while
    // they stay within reach of the target, else a piece that reaches it; an axis that would
    // take an element out of reach of the tile's first takes a piece that stays in reach
    // (with a rest), and a side whose next axis has no such piece of 2 or more stops.
    let sizes = [dst_size, src_size];
    // Sides that found no piece for their next axis.
    let mut stuck = [false; 2];
    loop {
        let sides = [run(worder, &chunk), run(rorder, &chunk)];
        let want =
            |i: usize| !stuck[i] && sides[i].0 * sizes[i] < targets[i] && sides[i].1.is_some();
        let side = match (want(0), want(1)) {
            (false, false) => break,
            (true, false) => 0,
            (false, true) => 1,
            (true, true) => usize::from(sides[1].0 * sizes[1] < sides[0].0 * sizes[0]),
        };
        let (e, Some(k)) = sides[side] else { break };
        // Room for this side, keeping some for the other side's next axis while that side
        // still wants to grow (unless it is this axis), and while this side's run is at least
        // a line long or the other's shorter than one: a run shorter than a line reads or
        // writes every line in parts.
        let other = 1 - side;
        let line = LINE_BYTES as usize;
        let short = e * sizes[side] < line && sides[other].0 * sizes[other] >= line;
        let reserve = match sides[other] {
            (eo, Some(ko)) if want(other) && ko != k && !short => axes[ko]
                .len
                .min(targets[other].div_ceil(eo * sizes[other]))
                .min((max / volume).isqrt())
                .max(1),
            _ => 1,
        };
        let room = (max / volume / reserve)
            .max(1)
            .min(reach_room(&chunk, reach, k));
        if room < 2 {
            stuck[side] = true;
            continue;
        }
        let need = targets[side].div_ceil(e * sizes[side]);
        let len = axes[k].len;
        if len <= need.min(room) {
            set_piece(&mut chunk, &mut reach, &axes, k, len);
            volume *= len;
            continue;
        }
        // A piece need only complete the vectors of the runs it extends: this side's, and the
        // other side's where this axis is its next too (a run of 4 one-byte elements takes
        // pieces of any multiple of 4 towards its 16-byte vectors, one of 16 any piece).
        let part = |i: usize, e: usize| widths[i] / gcd(e, widths[i]);
        let gk = match sides[other] {
            _ if whole_vectors => g,
            (eo, Some(ko)) if ko == k => lcm(part(side, e), part(other, eo)),
            _ => part(side, e),
        };
        // No useful piece (one of 1) of an axis that fits whole: the whole axis; of one that
        // does not, the smallest divisor from `need` up to the room (a multiple of `gk`).
        // Without any, this side stops growing and the other goes on.
        let cut = piece(len, need.min(room).max(gk), gk)
            .filter(|&c| c >= 2 && c <= room)
            .or((len <= room).then_some(len))
            .or_else(|| {
                (need.max(2)..=room)
                    .filter(|c| c % gk == 0)
                    .find(|&c| len % c == 0)
            });
        // With `whole_axes`, a piece that would leave a rest gives way to the whole axis
        // where it is less than twice the piece, fits in the tile (the other side's reserve
        // aside) and stays within reach: a rest runs in tiles of short runs, at a fraction of
        // the tile's speed.
        let cut = match cut {
            Some(c)
                if whole_axes
                    && !vector
                    && len % c != 0
                    && len < 2 * c
                    && len.saturating_mul(volume) <= max
                    && within_reach(&chunk, reach, k, len) =>
            {
                Some(len)
            }
            c => c,
        };
        match cut {
            Some(c) => {
                set_piece(&mut chunk, &mut reach, &axes, k, c);
                volume *= c;
            }
            None => stuck[side] = true,
        }
    }
    // Then whole axes on: each side's next axis, the shorter run's first, while the tile has
    // room for it whole. A tile of a narrow axis and a run of pixels (two axes, one of at
    // most 16 elements) stays as it is, for the narrow kernels.
    let narrow_shape = |chunk: &[usize]| {
        let mut tile = chunk.iter().filter(|&&c| c > 0);
        match (tile.next(), tile.next(), tile.next()) {
            (Some(&a), Some(&b), None) => a.min(b) <= NARROW_MAX_CHANNELS as usize,
            _ => false,
        }
    };
    while !narrow_shape(&chunk) {
        let sides = [run(worder, &chunk), run(rorder, &chunk)];
        let mut next: Option<(usize, usize)> = None;
        for (i, side) in sides.iter().enumerate() {
            if let &(e, Some(k)) = side
                && axes[k].len.saturating_mul(volume) <= max
                && within_reach(&chunk, reach, k, axes[k].len)
                && next.is_none_or(|(bytes, _)| e * sizes[i] < bytes)
            {
                next = Some((e * sizes[i], k));
            }
        }
        let Some((_, k)) = next else { break };
        set_piece(&mut chunk, &mut reach, &axes, k, axes[k].len);
        volume *= axes[k].len;
    }
    // Then pieces grow, the shorter side's first, up to TILE_FILL elements: smaller tiles
    // make smaller blocks, more of them resident, whose barriers stall less of the device.
    // Vector tiles of 1-byte destination elements grow on to TILE_FILL_B1 by pieces that
    // leave no rest where their axis had none.
    let mut cut: Vec<usize> = (0..r)
        .filter(|&k| chunk[k] > 0 && chunk[k] < axes[k].len)
        .collect();
    let bytes_of = |k: usize, chunk: &[usize]| {
        let w = worder.iter().position(|&x| x == k).unwrap();
        let rr = rorder.iter().position(|&x| x == k).unwrap();
        let ext = |order: &[usize], upto: usize| -> usize {
            order[..=upto].iter().map(|&x| chunk[x].max(1)).product()
        };
        (ext(worder, w) * dst_size).min(ext(rorder, rr) * src_size)
    };
    cut.sort_by_key(|&k| bytes_of(k, &chunk));
    let stages: &[(usize, bool)] = if vector && dst_size == 1 {
        &[(TILE_FILL, false), (TILE_FILL_B1, true)]
    } else {
        &[(TILE_FILL, false)]
    };
    for &(fill, no_new_rest) in stages {
        let fill = max.min(volume.max(fill));
        for &k in &cut {
            let room = fill / volume;
            if room < 2 {
                break;
            }
            let (len, c0) = (axes[k].len, chunk[k]);
            let keeps_rest = |c: usize| !no_new_rest || len % c0 != 0 || len % c == 0;
            if let Some(c) = piece(len, c0 * room, g)
                .filter(|&c| c > c0 && keeps_rest(c) && within_reach(&chunk, reach, k, c))
            {
                volume = volume / c0 * c;
                set_piece(&mut chunk, &mut reach, &axes, k, c);
            }
        }
    }
    // Last, a tile of fewer than SMALL_TILE_BYTES of destination elements takes the next
    // axes in write order that fit whole.
    while volume * dst_size < SMALL_TILE_BYTES && !narrow_shape(&chunk) {
        let Some(k) = worder.iter().copied().find(|&k| {
            chunk[k] == 0
                && axes[k].len.saturating_mul(volume) <= max
                && within_reach(&chunk, reach, k, axes[k].len)
        }) else {
            break;
        };
        set_piece(&mut chunk, &mut reach, &axes, k, axes[k].len);
        volume *= axes[k].len;
    }
    // A tile still that small whose next axis in write order no tile could hold whole takes
    // a piece of it, up to TILE_FILL elements: a run that met both sides' targets alone, or
    // whose next axis has no divisor near the room, beside an axis of millions would otherwise
    // make every tile that one run, in blocks of a few threads. (No piece is taken of an axis
    // that a tile could hold whole but not beside this run: that would change the tiles of
    // small arrays, which no measurement covers.)
    if volume * dst_size < SMALL_TILE_BYTES
        && !narrow_shape(&chunk)
        && let Some(k) = worder.iter().copied().find(|&k| chunk[k] == 0)
        && axes[k].len > max
        && let Some(c) = piece(axes[k].len, max.min(TILE_FILL) / volume, g)
            .filter(|&c| c >= 2 && within_reach(&chunk, reach, k, c))
    {
        set_piece(&mut chunk, &mut reach, &axes, k, c);
        volume *= c;
    }
    if volume < 2 {
        return None;
    }
    // Read order of the tile axes; the write order as positions in it.
    let mut tile_read: Vec<usize> = Vec::with_capacity(r);
    tile_read.extend(rorder.iter().copied().filter(|&k| chunk[k] > 0));
    let mut write_order: Vec<usize> = Vec::with_capacity(tile_read.len());
    write_order.extend(
        worder
            .iter()
            .filter(|&&k| chunk[k] > 0)
            .map(|k| tile_read.iter().position(|x| x == k).unwrap()),
    );
    let read: Vec<TiledAxis> = tile_read
        .iter()
        .map(|&k| TiledAxis {
            len: chunk[k] as u64,
            dst: axes[k].dst as i64,
            src: axes[k].src as i64,
        })
        .collect();
    // Batch axes in write order: axes outside the tile, and the pieces of cut axes.
    let mut batch = Vec::with_capacity(r);
    let mut rest = Vec::new();
    // The extents of the main part, made at the first rest.
    let mut main: Vec<usize> = Vec::new();
    for &k in worder {
        let (len, c) = (axes[k].len, chunk[k]);
        if c == 0 {
            batch.push(TiledAxis {
                len: len as u64,
                dst: axes[k].dst as i64,
                src: axes[k].src as i64,
            });
        } else if c < len {
            let whole = len / c * c;
            batch.push(TiledAxis {
                len: (len / c) as u64,
                dst: axes[k].dst.checked_mul(c as isize)? as i64,
                src: axes[k].src.checked_mul(c as isize)? as i64,
            });
            if whole < len {
                // The end of this axis, over the main part of the axes cut before it.
                if main.is_empty() {
                    main.extend(axes.iter().map(|a| a.len));
                }
                let mut shape = main.clone();
                shape[k] = len - whole;
                rest.push(Rest {
                    shape,
                    dst_strides: axes.iter().map(|a| a.dst).collect(),
                    src_strides: axes.iter().map(|a| a.src).collect(),
                    dst_off: dst_off + whole as isize * axes[k].dst,
                    src_off: src_off + whole as isize * axes[k].src,
                });
                main[k] = whole;
            }
        }
    }
    // The tile's runs: its leading axes in each order while they are contiguous.
    let contiguous = |axes: &mut dyn Iterator<Item = (u64, u64)>| {
        let mut e = 1;
        for (len, stride) in axes {
            if stride != e {
                break;
            }
            e *= len;
        }
        e
    };
    let read_run = contiguous(&mut read.iter().map(|a| (a.len, a.src.unsigned_abs())));
    let write_run = contiguous(
        &mut write_order
            .iter()
            .map(|&i| (read[i].len, read[i].dst.unsigned_abs())),
    );
    let batch = window_order(batch, write_run, read_run, dst_size, src_size);
    let at = |base: u64, off: isize, size: usize| super::addr(base, off, size);
    let (d0, s0) = (at(dst, dst_off, dst_size), at(src, src_off, src_size));
    let args = if let Some((source, _)) = shifted {
        TiledArgs::new_shifted(
            d0,
            s0,
            &read,
            &write_order,
            &batch,
            src_size,
            dst_size,
            source,
        )?
    } else {
        TiledArgs::new(
            d0,
            s0,
            &read,
            &write_order,
            &batch,
            vector,
            src_size,
            dst_size,
        )?
    };
    Some(Tiled {
        args: Box::new(args),
        rest,
    })
}

/// Source runs shorter than this many bytes (a cache line) leave lines partly read by each
/// tile: [`window_order`] lets the tiles that run at once complete them.
const LINE_BYTES: u64 = 128;

/// Contiguous bytes of the destination, then of the source, that the tiles running at once
/// cover first where [`window_order`] reorders the batch axes.
const WINDOW_BYTES: u64 = 1024;

/// The order in which the tile index runs over the batch axes (given in write order), for a
/// tile whose runs (the contiguous elements it covers, in write and in read order) are
/// `write_run` and `read_run` elements of `dst_size` and `src_size` bytes.
///
/// The blocks run consecutive tiles at once, so the leading batch axes decide which stretches
/// of memory are in flight together. In write order, consecutive tiles continue each other in
/// the destination, and the tiles that continue a tile's source runs may run thousands of
/// tiles later (a high-rank permutation of small extents puts them last). Where those runs
/// are shorter than [`LINE_BYTES`], every line of the source is then read in parts, far apart
/// in time. So for such tiles the index first runs over the axes that continue the
/// destination until the tiles cover [`WINDOW_BYTES`] of it contiguously, then over those
/// that continue the source until they cover as much of it, then over the rest in write
/// order. Tiles with longer source runs keep the write order: taking axes from it for the
/// source costs more than it gains there.
fn window_order(
    batch: Vec<TiledAxis>,
    write_run: u64,
    read_run: u64,
    dst_size: usize,
    src_size: usize,
) -> Vec<TiledAxis> {
    let (ds, ss) = (dst_size as u64, src_size as u64);
    if read_run * ss >= LINE_BYTES {
        return batch;
    }
    let n = batch.len();
    let mut taken = vec![false; n];
    let mut order = Vec::with_capacity(n);
    // Destination first, then source: each side takes the axes that continue its contiguous
    // stretch (in bytes, from its run) while the stretch is shorter than WINDOW_BYTES.
    let mut by_src: Vec<usize> = (0..n).collect();
    by_src.sort_unstable_by_key(|&k| (batch[k].src == 0, batch[k].src.unsigned_abs(), k));
    let sides = [
        ((0..n).collect::<Vec<_>>(), write_run * ds, true),
        (by_src, read_run * ss, false),
    ];
    for (list, mut covered, dst) in sides {
        for k in list {
            if covered >= WINDOW_BYTES {
                break;
            }
            if taken[k] {
                continue;
            }
            let a = &batch[k];
            // Saturating: a stride too large for the product continues no stretch.
            let stride = if dst {
                a.dst.unsigned_abs().saturating_mul(ds)
            } else {
                a.src.unsigned_abs().saturating_mul(ss)
            };
            if stride != covered {
                break;
            }
            taken[k] = true;
            order.push(k);
            covered = covered.saturating_mul(a.len);
        }
    }
    order.extend((0..n).filter(|&k| !taken[k]));
    order.into_iter().map(|k| batch[k]).collect()
}

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 { a } else { gcd(b, a % b) }
}

fn lcm(a: usize, b: usize) -> usize {
    a / gcd(a, b) * b
}

/// Whether `axes` (normalised) are permuted (the source's fastest axis is not the
/// destination's, axis 0) with a narrow axis, shorter than `narrow` elements, first on either
/// side: the layouts where the tiled kernels' tiles, which span several axes, beat tiles of
/// one or two axes per side.
pub(crate) fn has_narrow_side(axes: &[PAxis], narrow: usize) -> bool {
    fastest(axes, &[], |a| a.src)
        .is_some_and(|k| k != 0 && (axes[0].len < narrow || axes[k].len < narrow))
}

/// Whether `axes` (normalised) of `size`-byte elements start with a run of less than one
/// 16-byte vector that is the fastest axis of both sides (stride 1 in the destination, 1 or -1
/// in the source: the channels of pixels that move together, in order or reversed), with the
/// other axes permuted (the source's fastest of them is not the destination's next): moved
/// pixels of 3 channels, say, which the permute kernels do not take and whose tiles, the run
/// and axes of either side, the tiled kernels move whole. (Runs of 16 bytes or more are the
/// wide and row kernels'.)
pub(crate) fn has_shared_short_run(axes: &[PAxis], size: usize) -> bool {
    let [first, rest @ ..] = axes else {
        return false;
    };
    first.dst == 1
        && first.src.abs() == 1
        && first.len.saturating_mul(size) < 16
        && rest.len() >= 2
        && fastest(rest, &[], |a| a.src).is_some_and(|k| k != 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use devspan_kernels::abi::{TILED_SHIFTED_DEST, TILED_SHIFTED_SOURCE};

    #[test]
    fn a_rests_run_is_its_shorter_sides_contiguous_bytes() {
        let rest = |shape: &[usize], dst: &[isize], src: &[isize]| Rest {
            shape: shape.to_vec(),
            dst_strides: dst.to_vec(),
            src_strides: src.to_vec(),
            dst_off: 0,
            src_off: 0,
        };
        // The end of an axis of 71 cut to 64: 7 elements of it, written contiguously, then a
        // step of 71 (f32: 28 bytes); its source runs 252 elements.
        let r = rest(&[7, 252], &[1, 71], &[1_890_000, 1]);
        assert_eq!(box_run(&r, 4, 4), 28);
        assert_eq!(box_run(&r, 1, 4), 28);
        assert_eq!(box_run(&r, 4, 64), 7 * 64);
        assert_eq!(
            box_run(&rest(&[7, 252], &[1, 7], &[1_890_000, 1]), 4, 4),
            1008
        );
        // Axes of one element are left out whatever their strides; runs go either direction.
        let r = rest(&[3, 1, 3, 5], &[1, 7, 3, 9], &[-15, 1000, -5, 1]);
        assert_eq!(box_run(&r, 2, 2), 2 * 45);
        let r = rest(&[3, 1, 3, 5], &[1, 7, 3, 10], &[-15, 1000, -5, 1]);
        assert_eq!(box_run(&r, 2, 2), 2 * 9);
    }

    fn norm(axes: &[(usize, isize, isize)]) -> Normalized {
        Normalized {
            axes: axes
                .iter()
                .map(|&(len, dst, src)| PAxis { len, dst, src })
                .collect(),
            dst_off: 0,
            src_off: 0,
            n: axes.iter().map(|a| a.0).product(),
        }
    }

    #[test]
    fn four_axes_with_a_misfit_extent_keep_every_tile_axis_whole() {
        // u8, 36 x 8 x 5 x 32, read along the 8-axis, written along the 36-axis.
        let n = norm(&[(36, 1, 1280), (8, 36, 1), (5, 288, 256), (32, 1440, 8)]);
        let t = tile_for(&n, 0, 0, 1, 1, true, false, 0).unwrap();
        let a = &t.args;
        eprintln!("{a:?}");
        assert_eq!((a.vector, a.volume, a.tile_rank, a.tiles), (1, 9216, 3, 5));
        assert!(t.rest.is_empty());
    }

    #[test]
    fn pieces() {
        assert_eq!(piece(1 << 26, 2730, 16), Some(2048));
        assert_eq!(piece(3000, 2730, 16), Some(2720));
        assert_eq!(piece(100, 8, 16), None);
        assert_eq!(piece(96, 50, 16), Some(48));
        assert_eq!(piece(7, 5, 1), Some(5));
    }

    #[test]
    fn chw_to_hwc_takes_the_planes_and_a_run_of_pixels() {
        // u8 3 x 2^20 planes -> interleaved: axes [C: dst 1, src 2^20], [HW: dst 3, src 1].
        let n = norm(&[(3, 1, 1 << 20), (1 << 20, 3, 1)]);
        let t = tiled_plan(&n, 0, 0, 1, 1, 0).unwrap();
        let a = &t.args;
        assert_eq!(a.vector, 1);
        assert_eq!((a.tile_rank, a.batch_rank), (2, 1));
        // Read order: the pixels' run, then the planes; write order: planes first.
        // Pieces of 2048 pixels: the largest divisor that keeps the tile within TILE_FILL_B1
        // (1-byte elements).
        assert_eq!((a.read[0].len, a.read[0].src, a.read[1].len), (2048, 1, 3));
        assert_eq!((a.write[0].len, a.write[0].read), (3, 2048));
        assert_eq!(a.volume, 3 * 2048);
        assert_eq!(a.tiles, (1 << 20) / 2048);
        assert!(t.rest.is_empty());
        // The reverse direction, f32: pieces of 512 pixels, within TILE_FILL.
        let n = norm(&[(1 << 20, 1, 3), (3, 1 << 20, 1)]);
        let t = tiled_plan(&n, 0, 0, 4, 4, 0).unwrap();
        assert_eq!(t.args.vector, 1);
        assert_eq!(t.args.volume, 3 * 512);
        // Planes 1_000_003 bytes apart, not aligned: the shifted join, whose tiles leave out
        // the last vector of pixels (the last rest) besides the end that no piece covers.
        let p = 1_000_003;
        let n = norm(&[(3, 1, p), (p as usize, 3, 1)]);
        let t = tiled_plan(&n, 0, 0, 1, 1, 0).unwrap();
        assert_eq!(t.args.vector, TILED_SHIFTED_SOURCE);
        let k = tiled_narrow(&t.args, 1).unwrap();
        assert!(k.join && k.shifted && k.channels == 3, "{k:?}");
        // The tiles take whole vectors of pixels up to 999_984 at most, a vector short of the
        // end; one rest takes the end from where the pieces stop.
        assert_eq!(t.rest.len(), 1);
        let last = &t.rest[0];
        let tail = last.shape[1] as isize;
        assert!(last.shape[0] == 3 && tail >= 19, "{:?}", last.shape);
        assert_eq!((last.src_off, last.dst_off), (p - tail, 3 * (p - tail)));
        assert_eq!(elements(&t), 3 * p as usize);
        // Casts (of one size too, `copy` false) stay element-wise; 2-byte copies take the
        // shifted join too.
        assert_eq!(tiled_plan(&n, 0, 0, 1, 4, 0).unwrap().args.vector, 0);
        let t = tiled_plan(&n, 0, 0, 2, 2, 0).unwrap();
        assert_eq!(t.args.vector, TILED_SHIFTED_SOURCE);
        assert!(tiled_narrow(&t.args, 2).is_some_and(|k| k.join && k.shifted));
        assert_eq!(
            tiled_plan_of(&n, 0, 0, 1, 1, 0, false).unwrap().args.vector,
            0
        );
        // The split direction: the shifted split, whose stores never pass the planes' ends;
        // its pieces are whole chunks of the narrow kernels (512 pixels) and one rest takes
        // the pixels that they do not cover.
        let n = norm(&[(p as usize, 1, 3), (3, p, 1)]);
        let t = tiled_plan(&n, 0, 0, 1, 1, 0).unwrap();
        assert_eq!(t.args.vector, TILED_SHIFTED_DEST);
        let k = tiled_narrow(&t.args, 1).unwrap();
        assert!(!k.join && k.shifted && k.channels == 3, "{k:?}");
        assert_eq!(t.rest.len(), 1);
        assert_eq!(t.rest[0].shape[1], 3);
        assert_eq!(t.args.read[1].len % 512, 0);
        assert_eq!(elements(&t), 3 * p as usize);
    }

    /// Elements that a plan's tiles and rests cover together.
    fn elements(t: &Tiled) -> usize {
        let rest: usize = t
            .rest
            .iter()
            .map(|r| r.shape.iter().product::<usize>())
            .sum();
        t.args.tiles as usize * t.args.volume as usize + rest
    }

    #[test]
    fn one_byte_tiles_grow_past_tile_fill_only_by_pieces_that_leave_no_new_rest() {
        // u8 3 planes of 512 x 1009 pixels -> interleaved: pieces of 512 pixels divide the
        // axis and fill the tile to 1536 elements (TILE_FILL); on to TILE_FILL_B1 the pieces
        // would be 2560 pixels, which no divisor near that size replaces: they would leave a
        // rest, so the tile stays at 512 pixels.
        let p = 512 * 1009;
        let t = tiled_plan(&norm(&[(3, 1, p as isize), (p, 3, 1)]), 0, 0, 1, 1, 0).unwrap();
        assert_eq!(t.args.vector, 1);
        assert_eq!(t.args.volume, 3 * 512);
        assert!(t.rest.is_empty());
        // 2-byte elements stop at TILE_FILL: pieces of 512 pixels (the f16 vector is 8).
        let p = 1 << 20;
        let t = tiled_plan(&norm(&[(3, 1, p as isize), (p, 3, 1)]), 0, 0, 2, 2, 0).unwrap();
        assert_eq!(t.args.volume, 3 * 512);
        // A cast to 1-byte elements grows like a 1-byte copy.
        let t = tiled_plan(&norm(&[(3, 1, p as isize), (p, 3, 1)]), 0, 0, 4, 1, 0).unwrap();
        assert_eq!(t.args.vector, 1);
        assert_eq!(t.args.volume, 3 * 2048);
    }

    /// The normalised axes of a contiguous `shape` copied into the standard layout of its
    /// permutation `perm` (the destination's axis `i` is the source's `perm[i]`).
    fn permuted(shape: &[usize], perm: &[usize]) -> Normalized {
        let (shape, dst, src) = super::super::tests::permuted_layout(shape, perm);
        super::super::normalize(&shape, &dst, &src)
    }

    #[test]
    fn vector_tiles_exist_only_where_vectors_may_line_up() {
        // Drawn layouts (extents 1 to 256, or 1 to 5 on 9 to 18 axes; permuted, source steps
        // of -3 to 3 and broadcast axes, misaligned bases): wherever `vectors_may_line_up`
        // rules vector tiles out, neither vector attempt of `tiled_plan_of` finds one.
        use rand::rngs::StdRng;
        use rand::seq::SliceRandom;
        use rand::{Rng, SeedableRng};
        const EXTENTS: &[usize] = &[1, 2, 3, 4, 5, 6, 8, 12, 16, 17, 32, 48, 64, 100, 256];
        const SIZES: &[(usize, usize)] = &[
            (1, 1),
            (2, 2),
            (4, 4),
            (8, 8),
            (1, 4),
            (2, 4),
            (4, 2),
            (4, 8),
            (8, 4),
        ];
        let mut rng = StdRng::seed_from_u64(20_261_207);
        let (mut ruled_out, mut found) = (0, 0);
        // Fewer under Miri (the planner has no unsafe code).
        let cases = if cfg!(miri) { 200 } else { 20_000 };
        for case in 0..cases {
            // Every other layout of many axes of 1 to 5 elements.
            let (r, extents) = if case % 2 == 0 {
                (rng.random_range(1..=8), EXTENTS)
            } else {
                (rng.random_range(9..=18), &EXTENTS[..5])
            };
            let shape: Vec<usize> = (0..r)
                .map(|_| extents[rng.random_range(0..extents.len())])
                .collect();
            if shape.iter().product::<usize>() > 1 << 24 {
                continue;
            }
            let mut perm: Vec<usize> = (0..r).collect();
            perm.shuffle(&mut rng);
            let (shape, dst, mut src) = super::super::tests::permuted_layout(&shape, &perm);
            for s in &mut src {
                if rng.random_bool(0.2) {
                    *s *= [-3, -2, -1, 0, 2, 3][rng.random_range(0..6)];
                }
            }
            let (ss, ds) = SIZES[rng.random_range(0..SIZES.len())];
            let n = super::super::normalize(&shape, &dst, &src);
            let base = |size: usize, rng: &mut StdRng| {
                0x1000_0000 + (rng.random_range(0..4) * size) as u64
            };
            let (d0, s0) = (base(ds, &mut rng), base(ss, &mut rng));
            let cap = [0, 1024, 4096][rng.random_range(0..3)];
            let may = vectors_may_line_up(&n.axes, ss, ds);
            ruled_out += usize::from(!may);
            for whole in [false, true] {
                if let Some(t) = tile_for(&n, d0, s0, ss, ds, true, whole, cap) {
                    found += 1;
                    assert!(
                        may,
                        "case {case}: shape {shape:?} dst {dst:?} src {src:?} sizes {ss}->{ds} \
                         whole vectors {whole}: a vector tile of {} elements on {} axes",
                        t.args.volume, t.args.tile_rank
                    );
                }
            }
        }
        assert!(
            cfg!(miri) || (ruled_out > 300 && found > 1000),
            "{ruled_out} ruled out, {found} found"
        );
    }

    #[test]
    fn a_side_whose_vectors_are_complete_takes_pieces_of_any_size() {
        // u8 [128, 3, 4, 2, 4, 3, 4, 2, 512] under one permutation: the destination's fastest
        // axes make runs of 4 and 16 bytes, the next (128 long) then needs no multiple of 16:
        // writes run 32 bytes, not 16.
        let n = permuted(
            &[128, 3, 4, 2, 4, 3, 4, 2, 512],
            &[5, 1, 7, 3, 8, 6, 0, 2, 4],
        );
        let t = tiled_plan(&n, 0, 0, 1, 1, 0).unwrap();
        assert_eq!(t.args.vector, 1);
        let (w, r) = tile_runs(&t.args);
        assert!(w >= 32 && r >= 128, "runs: write {w}, read {r}");
        // f16 [4; 14] reversed, tiles of at most 4096 elements: the read run, shorter than a
        // line while the write run is a line, keeps no room for the write side's next axis:
        // both run 64 elements (128 bytes), where the write run would take 128 and leave the
        // read run at 32.
        let rev: Vec<usize> = (0..14).rev().collect();
        let t = tile_for(&permuted(&[4; 14], &rev), 0, 0, 2, 2, true, false, 4096).unwrap();
        assert_eq!(tile_runs(&t.args), (64, 64));
    }

    #[test]
    fn byte_tiles_of_16_kib_read_and_write_whole_lines() {
        // u8 [128, 3, 4, 2, 4, 3, 4, 2, 512] reversed: the destination's fastest axis (128)
        // makes a write run of a line; the read run then takes a line of the source's fastest
        // (512) rather than half of one beside room for the write side's next axis (3).
        let rev: Vec<usize> = (0..9).rev().collect();
        let n = permuted(&[128, 3, 4, 2, 4, 3, 4, 2, 512], &rev);
        let t = tiled_plan(&n, 0, 0, 1, 1, 0).unwrap();
        assert_eq!((t.args.vector, t.args.volume), (1, 16384));
        assert_eq!(tile_runs(&t.args), (128, 128));
        assert_eq!(devspan_kernels::abi::tiled_threads(16384, true, 1, 1), 1024);
        // At most 8192 elements, the write run takes half a line instead.
        let t = tiled_plan(&n, 0, 0, 1, 1, 8192).unwrap();
        assert_eq!(tile_runs(&t.args), (64, 128));
    }

    #[test]
    fn a_run_of_a_line_or_less_beside_a_long_one_takes_room_from_it() {
        // f16 [4; 14] reversed, tiles of at most 4096 elements: runs of 256 bytes written and
        // 64 read; with the write side's target lowered to a line, both run 128 bytes, and
        // that plan is taken.
        let rev: Vec<usize> = (0..14).rev().collect();
        let n = permuted(&[4; 14], &rev);
        let t = tiled_plan(&n, 0, 0, 2, 2, 4096).unwrap();
        assert_eq!((t.args.vector, t.args.volume), (1, 4096));
        assert_eq!(tile_runs(&t.args), (64, 64));
        // u8 [128, 3, 4, 2, 4, 3, 4, 2, 512] under a random permutation, tiles of at most 8192
        // elements: 32 bytes written and 256 read; with the read side's target lowered to a
        // line, the write run grows.
        let n = permuted(
            &[128, 3, 4, 2, 4, 3, 4, 2, 512],
            &[5, 1, 7, 3, 8, 6, 0, 2, 4],
        );
        let plain = tile_for(&n, 0, 0, 1, 1, true, false, 8192).unwrap();
        assert_eq!(tile_runs(&plain.args), (32, 256));
        let (w, r) = tile_runs(&tiled_plan(&n, 0, 0, 1, 1, 8192).unwrap().args);
        assert!(w > 32 && r >= 128, "runs: write {w}, read {r}");
        // Balanced runs of 256 bytes (f32 [2; 20] reversed) keep their plan.
        let axes: Vec<(usize, isize, isize)> =
            (0..20).map(|k| (2, 1 << k, 1 << (19 - k))).collect();
        let n = norm(&axes);
        let plain = tile_for(&n, 0, 0, 4, 4, true, false, 0).unwrap();
        let t = tiled_plan(&n, 0, 0, 4, 4, 0).unwrap();
        assert_eq!(t.args, plain.args);
    }

    #[test]
    fn a_run_shorter_than_a_sector_beside_a_long_one_takes_room_from_it() {
        // u8, 13 axes of extents 1 to 5 and two of about 300, under a random permutation:
        // the element-wise tile writes runs of 15 bytes and reads 166 (the plan without the
        // sector rule); planned again with the read side's target lowered to a line, the
        // write run grows past a sector, and the read run stays over half a line.
        let n = permuted(
            &[5, 2, 3, 1, 3, 299, 4, 1, 5, 3, 332, 1, 1],
            &[3, 12, 5, 11, 7, 6, 2, 10, 9, 1, 0, 8, 4],
        );
        let plain = tile_for(&n, 0, 0, 1, 1, false, false, 0).unwrap();
        assert_eq!(tile_runs(&plain.args), (15, 166));
        let t = tiled_plan(&n, 0, 0, 1, 1, 0).unwrap();
        let (w, r) = tile_runs(&t.args);
        assert!(w >= 32 && r >= 64, "runs: write {w}, read {r}");
        assert!(short_of_a_sector([15, 166]) && short_of_a_sector([31, 200]));
        assert!(!short_of_a_sector([32, 166]) && !short_of_a_sector([15, 128]));
    }

    #[test]
    fn a_tile_read_backwards_is_weighed_as_one_read_forwards() {
        // The layout of the test above with the source read backwards along its fastest axis
        // (332 long): the tile, its runs counted either direction, writes 15 bytes and reads
        // 166 and takes the sector rule as it does read forwards, with the same runs.
        let shape = [5, 2, 3, 1, 3, 299, 4, 1, 5, 3, 332, 1, 1];
        let perm = [3, 12, 5, 11, 7, 6, 2, 10, 9, 1, 0, 8, 4];
        let forwards = tiled_plan(&permuted(&shape, &perm), 0, 0, 1, 1, 0).unwrap();
        let (dshape, dst, mut src) = super::super::tests::permuted_layout(&shape, &perm);
        let k = perm.iter().position(|&a| a == 10).unwrap();
        let src0 = (dshape[k] - 1) as u64 * src[k] as u64;
        src[k] = -src[k];
        let n = super::super::normalize(&dshape, &dst, &src);
        let plain = tile_for(&n, 0, src0, 1, 1, false, false, 0).unwrap();
        assert_eq!(side_runs(&plain.args, 1, 1), [166, 15]);
        let t = tiled_plan(&n, 0, src0, 1, 1, 0).unwrap();
        let [r, w] = side_runs(&t.args, 1, 1);
        assert!(w >= 32 && r >= 64, "runs: write {w}, read {r}");
        assert_eq!(side_runs(&t.args, 1, 1), side_runs(&forwards.args, 1, 1));
    }

    #[test]
    fn an_axis_taken_whole_leaves_the_larger_tile_its_chance() {
        // f16, 21 axes (extents 1 to 5, and 506 and 157), randomly permuted and read backwards
        // along 8 source axes. In tiles of 4096 elements the pieces read runs of 256 bytes and
        // write 40 with a rest; the 157-long axis taken whole reads 1570 bytes and leaves no
        // rest, past the 1 KiB under which a larger tile is weighed. The larger tile is weighed
        // on the runs of the pieces: it takes the axis whole too and doubles the write run.
        let shape = [
            5, 2, 4, 2, 2, 506, 3, 1, 1, 1, 5, 1, 157, 1, 1, 1, 1, 1, 1, 1, 1,
        ];
        let perm = [
            17, 6, 18, 2, 16, 4, 13, 0, 14, 15, 12, 5, 7, 1, 3, 10, 19, 11, 20, 9, 8,
        ];
        let (dshape, dst, mut src) = super::super::tests::permuted_layout(&shape, &perm);
        let mut src0 = 0;
        for (k, &a) in perm.iter().enumerate() {
            if [0, 2, 6, 8, 12, 14, 17, 20].contains(&a) {
                src0 += (dshape[k] - 1) as u64 * src[k] as u64 * 2;
                src[k] = -src[k];
            }
        }
        let n = super::super::normalize(&dshape, &dst, &src);
        let t = tiled_plan(&n, 0, src0, 2, 2, 0).unwrap();
        assert!(t.rest.is_empty());
        assert_eq!(side_runs(&t.args, 2, 2), [1570, 80]);
    }

    #[test]
    fn the_shifted_narrow_kernels_take_what_they_pay_for() {
        assert!(shifted_pays(1, 2, 16) && shifted_pays(1, 16, 256));
        assert!(shifted_pays(2, 3, 512) && !shifted_pays(2, 3, 511));
        assert!(!shifted_pays(4, 4, 1 << 20) && !shifted_pays(8, 2, 1 << 20));
        assert!(shifted_pays(4, 5, 1024) && !shifted_pays(4, 5, 1023));
        assert!(shifted_pays(8, 8, 4096) && !shifted_pays(8, 12, 512));
    }

    #[test]
    fn a_read_run_shorter_than_a_sector_keeps_its_long_write_run() {
        // u8, 17 axes of which four are 43 to 496 long, under a random permutation: the
        // element-wise tile reads runs of 16 bytes and writes 172. The sector rule leaves it:
        // lowering the write side's target would halve the write run to lengthen the read
        // run.
        let n = permuted(
            &[4, 4, 467, 43, 2, 1, 496, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1],
            &[12, 1, 10, 6, 9, 4, 11, 16, 14, 15, 2, 0, 8, 13, 3, 7, 5],
        );
        let t = tiled_plan(&n, 0, 0, 1, 1, 0).unwrap();
        assert_eq!(side_runs(&t.args, 1, 1), [16, 172]);
        assert!(!short_of_a_sector([172, 16]));
    }

    #[test]
    fn a_vector_plan_whose_runs_do_not_line_up_is_sought_again_with_whole_vectors() {
        // u8 [12, 7, 6, 12] under (3, 1, 2, 0): pieces sized for one side's run leave the
        // other side's run, which reaches the cut axis later, short of whole vectors; the plan
        // with every piece a multiple of 16 lines up and is the one taken.
        let n = permuted(&[12, 7, 6, 12], &[3, 1, 2, 0]);
        assert!(tile_for(&n, 0, 0, 1, 1, true, false, 0).is_none());
        let t = tiled_plan(&n, 0, 0, 1, 1, 0).unwrap();
        assert_eq!(t.args.vector, 1);
        assert_eq!(
            Some(t.args),
            tile_for(&n, 0, 0, 1, 1, true, true, 0).map(|t| t.args)
        );
    }

    #[test]
    fn an_axis_too_short_for_a_useful_piece_is_taken_whole() {
        // f32: the write side (a run of 32) wants 2 more elements where its next axis holds 3:
        // the whole axis, where a piece would be 1 and stop the tile's growth at 96 elements.
        // Runs of 96 and 144 elements (864 in all); then the write side's next axis (3) fits
        // whole too, and the next ones no longer do (2592 elements).
        let n = permuted(
            &[3, 348, 2, 3, 3, 4, 5, 2, 3, 4, 3, 1, 4, 1, 1, 1, 1],
            &[10, 6, 8, 16, 1, 7, 5, 14, 13, 15, 4, 3, 0, 2, 12, 9, 11],
        );
        let t = tiled_plan(&n, 0, 0, 4, 4, 0).unwrap();
        assert_eq!(t.args.vector, 1);
        assert_eq!(tile_runs(&t.args), (288, 144));
        assert_eq!(t.args.volume, 2592);
    }

    #[test]
    fn reversed_high_rank_fills_both_sides() {
        // [2; 20] f32, reversed.
        let axes: Vec<(usize, isize, isize)> =
            (0..20).map(|k| (2, 1 << k, 1 << (19 - k))).collect();
        let t = tiled_plan(&norm(&axes), 0, 0, 4, 4, 0).unwrap();
        let a = &t.args;
        assert_eq!(a.vector, 1);
        assert_eq!(a.volume, 4096);
        assert_eq!(a.tile_rank, 12);
        assert_eq!(a.batch_rank, 8);
        assert_eq!(a.tiles, 256);
        assert!(t.rest.is_empty());
    }

    /// How many first tiles continue each other on each side, from the tile origins: the
    /// tiles 0, 1, ... continue the destination while tile `t` starts `t` write runs in; then
    /// the tiles `0, k, 2k, ...` (k of the former) continue the source likewise. Returns
    /// `(k, j)`: k tiles, then j groups of k tiles.
    fn window(a: &TiledArgs) -> (u64, u64) {
        let (w, r) = tile_runs(a);
        let tiles = u64::from(a.tiles);
        let k = (1..=tiles)
            .find(|&t| t == tiles || a.tile_origin(t as u32).0.unsigned_abs() != t * w)
            .unwrap();
        let j = (1..=tiles / k)
            .find(|&g| g == tiles / k || a.tile_origin((g * k) as u32).1.unsigned_abs() != g * r)
            .unwrap();
        (k, j)
    }

    #[test]
    fn tiles_with_short_source_runs_run_along_both_sides_first() {
        // [2; 20] reversed: u8 tiles of at most 8192 elements read runs of 64 bytes, shorter
        // than a line, so the first tiles cover 1 KiB of the destination, then groups of them
        // 1 KiB of the source.
        let axes: Vec<(usize, isize, isize)> =
            (0..20).map(|k| (2, 1 << k, 1 << (19 - k))).collect();
        let t = tiled_plan(&norm(&axes), 0, 0, 1, 1, 8192).unwrap();
        let a = &t.args;
        let (w, r) = tile_runs(a);
        assert!(r < 128, "read run {r}");
        let (k, j) = window(a);
        assert_eq!(
            (k * w, j * r),
            (1024, 1024),
            "runs {w}, {r}; window {k} x {j}"
        );
        // f32: read runs of 256 bytes; the tiles keep the write order, and the first tiles
        // continue the destination along every batch axis.
        let t = tiled_plan(&norm(&axes), 0, 0, 4, 4, 0).unwrap();
        let a = &t.args;
        let (w, r) = tile_runs(a);
        assert!(r * 4 >= 128, "read run {r}");
        let strides: Vec<i64> = a.batch[..a.batch_rank as usize]
            .iter()
            .map(|b| b.dst)
            .collect();
        assert!(
            strides.windows(2).all(|p| p[0].abs() < p[1].abs()),
            "{strides:?}"
        );
        assert_eq!(window(a).0, u64::from(a.tiles), "run {w}");
    }

    #[test]
    fn misaligned_short_runs_take_the_window_order_too() {
        // u8 [2, 3^13] reversed, element-wise tiles (runs of 27 and 54 elements do not line
        // up with vectors): a destination window of at least 1 KiB, then a source one.
        let mut shape = vec![2usize];
        shape.extend([3; 13]);
        let perm: Vec<usize> = (0..shape.len()).rev().collect();
        let t = tiled_plan(&permuted(&shape, &perm), 0, 0, 1, 1, 0).unwrap();
        let a = &t.args;
        assert_eq!(a.vector, 0);
        let (w, r) = tile_runs(a);
        assert!(r < 128, "read run {r}");
        let (k, j) = window(a);
        assert!(
            k * w >= 1024 && k * w < 3 * 1024,
            "runs {w}, {r}; window {k} x {j}"
        );
        assert!(
            j * r >= 1024 && j * r < 3 * 1024,
            "runs {w}, {r}; window {k} x {j}"
        );
    }

    #[test]
    fn a_side_without_a_useful_piece_lets_the_other_side_grow() {
        // f64, 23 axes: after runs of 15 elements on both sides, the destination's next axis
        // (55) has no divisor from 2 to the room left (3) and its piece of 1 is useless. The
        // tile took no further axis (45 elements, one warp); now the destination's axis takes
        // the divisor 5 and the source side grows on.
        let n = permuted(
            &[
                2, 2, 170, 55, 3, 1, 3, 2, 5, 5, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
            ],
            &[
                1, 8, 17, 21, 22, 13, 7, 20, 10, 0, 19, 18, 2, 16, 4, 3, 5, 11, 6, 15, 9, 12, 14,
            ],
        );
        let t = tiled_plan(&n, 0, 0, 8, 8, 0).unwrap();
        let a = &t.args;
        assert_eq!(a.vector, 0);
        let (w, r) = tile_runs(a);
        assert!(a.volume >= 512, "volume {}, runs {w}, {r}", a.volume);
        assert!(w * 8 >= 256 && r * 8 >= 256, "runs {w}, {r}");
    }

    #[test]
    fn tiles_with_long_runs_take_whole_axes_up_to_the_limit() {
        // f32 [2; 28] under a random permutation: both runs reach 256 bytes at 1024 elements;
        // the sides' next axes (2 each) then fit whole up to the kernels' 4096 elements, the
        // shorter run's side first.
        let perm = [
            20, 16, 3, 1, 18, 11, 13, 5, 17, 9, 6, 25, 26, 7, 22, 14, 12, 27, 0, 21, 2, 19, 10, 24,
            4, 8, 23, 15,
        ];
        let t = tiled_plan(&permuted(&[2; 28], &perm), 0, 0, 4, 4, 0).unwrap();
        let a = &t.args;
        assert_eq!(a.vector, 1);
        assert_eq!(a.volume, 4096);
        let (w, r) = tile_runs(a);
        assert!(w * 4 >= 256 && r * 4 >= 256, "runs {w}, {r}");
        assert!(t.rest.is_empty());
    }

    #[test]
    fn small_tiles_take_the_next_axes_in_write_order() {
        // f16 [2, 3, 4] x 6 under a random permutation, tiles of at most 4096 elements: the
        // runs stop at 32 and 48 elements (each side's next axis no longer fits whole), at
        // 1536 elements, 3 KiB. Such a tile takes the next axis in write order that fits (2):
        // 3072 elements, the same runs.
        let perm = [12, 15, 17, 10, 16, 3, 14, 5, 4, 0, 13, 7, 6, 11, 1, 9, 2, 8];
        let shape = [2, 3, 4, 2, 3, 4, 2, 3, 4, 2, 3, 4, 2, 3, 4, 2, 3, 4];
        let t = tiled_plan(&permuted(&shape, &perm), 0, 0, 2, 2, 4096).unwrap();
        let a = &t.args;
        assert_eq!(a.vector, 1);
        assert_eq!(tile_runs(a), (32, 48));
        assert_eq!(a.volume, 3072);
        assert!(t.rest.is_empty());
    }

    #[test]
    fn small_tiles_take_a_piece_of_the_next_axis() {
        // Rows copied into a column slice `x[.., ..c]`: f64 rows of 33 elements (264 bytes:
        // both runs past their targets with the row alone) beside millions of rows, and u8
        // rows of 100 elements whose count of rows is prime (no piece divides it) and more
        // than a tile holds, of two and of three axes. The tile takes a piece of the rows up
        // to TILE_FILL elements, a divisor of the count where one is close to the room, else
        // leaving a rest, where a tile of a single row would make blocks of a few threads.
        let n = norm(&[(33, 1, 1), (3_947_580, 34, 33)]);
        let t = tiled_plan(&n, 0, 0, 8, 8, 0).unwrap();
        assert_eq!((t.args.tile_rank, t.args.volume), (2, 33 * 60));
        assert!(t.rest.is_empty());
        let n = norm(&[(100, 1, 1), (10_631_107, 101, 100)]);
        let t = tiled_plan(&n, 0, 0, 1, 1, 0).unwrap();
        assert_eq!((t.args.tile_rank, t.args.volume), (2, 100 * 20));
        assert_eq!(t.rest.len(), 1);
        assert_eq!(t.rest[0].shape, [100, 10_631_107 % 20]);
        let n = norm(&[(100, 1, 1), (8209, 101, 100), (300, 8210 * 101, 8209 * 100)]);
        let t = tiled_plan(&n, 0, 0, 1, 1, 0).unwrap();
        assert_eq!((t.args.tile_rank, t.args.volume), (2, 100 * 20));
        assert_eq!(t.rest.len(), 1);
    }

    #[test]
    fn narrow_tiles_take_no_further_axis() {
        // u8 NCHW -> NHWC with N = 8, C = 3, H x W = 128: the tile of 3 channels x 128 pixels
        // (runs of 384 bytes) has room for N whole, but it stays a tile of two axes, which the
        // narrow kernels take.
        let n = norm(&[(3, 1, 128), (128, 3, 1), (8, 384, 384)]);
        let t = tiled_plan(&n, 0, 0, 1, 1, 0).unwrap();
        let a = &t.args;
        assert_eq!((a.vector, a.tile_rank, a.volume), (1, 2, 384));
        assert!(devspan_kernels::abi::tiled_narrow(a, 1).is_some());
    }

    #[test]
    fn axes_out_of_reach_stay_out_of_the_tile() {
        // u8 32 x 32 transposes (runs of 1 KiB each side) whose next axis on one side lies
        // 2^31 bytes apart on the other: the tile that took it would be refused; it stays out
        // (as a batch axis) and the 32 x 32 tile takes the rest of the room where it can.
        let far = 1isize << 31;
        for axes in [
            [
                (32, 1, 32),
                (32, 32, 1),
                (2, 1024, far),
                (1 << 20, 2048, 1024),
            ],
            [
                (32, 1, 32),
                (32, 32, 1),
                (1 << 20, 1024, 2048),
                (2, 1 << 30, far),
            ],
        ] {
            let t = tiled_plan(&norm(&axes), 0, 0, 1, 1, 0).unwrap();
            let a = &t.args;
            assert_eq!(a.vector, 1);
            assert!(a.volume >= 1024, "volume {}", a.volume);
            let tile = &a.read[..a.tile_rank as usize];
            assert!(
                tile.iter()
                    .all(|x| i64::from(x.src).unsigned_abs() < 1 << 31)
            );
            // Every element of the copy is in a tile.
            assert_eq!(
                u64::from(a.tiles) * u64::from(a.volume),
                2 * 1024 * (1 << 20)
            );
        }
        // Source strides of 2^20 bytes: a tile of two such planes is in reach.
        let axes = [
            (32, 1, 32),
            (32, 32, 1),
            (4, 1024, 1 << 20),
            (1 << 10, 4096, 1024),
        ];
        let t = tiled_plan(&norm(&axes), 0, 0, 1, 1, 0).unwrap();
        assert!(t.args.volume >= 4096, "volume {}", t.args.volume);
    }

    #[test]
    fn every_axis_read_backwards_faster_than_written_is_flipped_for_vectors() {
        // u8: the destination's fastest axis (16) lies 256 apart in the source; the source's
        // run is the next three axes (4 x 4 x 16 = 256 bytes), the first two read backwards
        // (element zero at byte 15, the lowest source byte at 0). Flipping only the fastest of
        // them left the run at 4 bytes and the tile element-wise; flipping both makes it 256
        // bytes of vectors.
        let axes = [(16, 1, 256), (4, 16, -1), (4, 64, -4), (16, 256, 16)];
        let t = tiled_plan(&norm(&axes), 0, 15, 1, 1, 0).unwrap();
        assert_eq!(t.args.vector, 1);
        let (w, r) = tile_runs(&t.args);
        assert!(w >= 16 && r >= 256, "runs: write {w}, read {r}");
        // An axis read backwards that runs faster in the destination is not flipped: the
        // destination's fastest axis keeps its stride of 1.
        let axes = [(16, 1, -256), (16, 16, 1), (16, 256, 16)];
        let t = tiled_plan(&norm(&axes), 0, 15 * 256, 1, 1, 0).unwrap();
        assert_eq!(t.args.write[0].dst, 1);
    }

    /// A piece grows to the whole axis where the axis alone stays within reach: its own piece
    /// does not count against it. (2-byte elements: the destination's fastest axis lies 2^31
    /// elements apart in the source and stays out of the tile; the source's, 142 elements
    /// 11,934,090 apart in the destination, 1.7e9 in all, is first a piece of 71, then whole.)
    #[test]
    fn pieces_grow_within_the_reach_of_the_other_axes() {
        let axes = [(18, 1, 2_824_401_300), (142, 11_934_090, 1), (665, 18, 142)];
        let t = tiled_plan(&norm(&axes), 0, 0, 2, 2, 0).unwrap();
        let a = &t.args;
        assert_eq!(a.read[0].len, 142, "{:?}", &a.read[..a.tile_rank as usize]);
        assert!(t.rest.is_empty());
    }

    /// The axis orders, taken as they are where the axes come sorted or reversed, equal a
    /// stable sort by `|stride|` (broadcast source axes last) on axes of equal strides, zero
    /// strides and either sign, in every order.
    #[test]
    fn axis_orders_are_stable_sorts_by_stride() {
        let mut seed = 0x0dd_5eed_u64;
        let mut rnd = move |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        let rounds = if cfg!(miri) { 40 } else { 4000 };
        for round in 0..rounds {
            let r = 1 + rnd(12) as usize;
            let stride = |x: u64| -> isize {
                let s = [0isize, 1, 2, 3, 4, 8, 9, 64][x as usize];
                if x % 2 == 0 { s } else { -s }
            };
            let mut axes: Vec<PAxis> = (0..r)
                .map(|_| PAxis {
                    len: 2,
                    dst: stride(rnd(8)),
                    src: stride(rnd(8)),
                })
                .collect();
            // Sorted and reversed inputs (the orders taken without a sort), and any order.
            match round % 3 {
                0 => axes.sort_by_key(|a| a.dst.unsigned_abs()),
                1 => axes.sort_by_key(|a| std::cmp::Reverse((a.src == 0, a.src.unsigned_abs()))),
                _ => {}
            }
            let mut write: Vec<usize> = (0..r).collect();
            write.sort_by_key(|&k| axes[k].dst.unsigned_abs());
            let mut read: Vec<usize> = (0..r).collect();
            read.sort_by_key(|&k| (axes[k].src == 0, axes[k].src.unsigned_abs()));
            assert_eq!(
                AxisOrders::of(&axes),
                AxisOrders { write, read },
                "{axes:?}"
            );
        }
    }
}
