//! The row kernels: block size, teams, row heads, grid, and their argument block
//! ([`RowArgs`]).

use super::contig::{CONTIG_ALIGN, contig_group_elems};
use super::fast_div::FastDiv64;
use super::strided::MAX_RANK;
use crate::abi::param_block;

/// Threads per block of the row kernels (required exactly).
pub const ROW_BLOCK: u32 = 256;
/// `log2(ROW_BLOCK)`: the largest `team_shift` (larger values act as this).
pub const ROW_MAX_TEAM_SHIFT: u32 = 8;
/// Largest number of outer axes of the row kernels (the row axis is the
/// last of at most [`MAX_RANK`]).
pub const MAX_ROW_OUTER: usize = MAX_RANK - 1;
/// Largest grid of a row kernel in x (pieces of a row) and y (rows).
pub const ROW_MAX_GRID: (u32, u32) = (i32::MAX as u32, 65535);
/// Scalar elements each lane of a row kernel moves per iteration (the head,
/// the tail, and rows that cannot be vectorised).
pub const ROW_SCALAR_UNROLL: u32 = 4;

/// Units (16 bytes of the wider side, `16 / max(size)` elements) each lane
/// of a row kernel moves per iteration: `max(2, size ratio)`, a power of two.
pub const fn row_units_per_lane(src_size: usize, dst_size: usize) -> u64 {
    let (lo, hi) = if src_size < dst_size {
        (src_size, dst_size)
    } else {
        (dst_size, src_size)
    };
    let r = (hi / lo) as u64;
    if r > 2 { r } else { 2 }
}

/// Units of vector work in a row of `row_len` elements when it is aligned
/// from its first element (an upper bound for any head).
fn row_units(row_len: u64, src_size: usize, dst_size: usize) -> u64 {
    let v = contig_group_elems(src_size, dst_size) as u64;
    let r = (src_size.max(dst_size) / src_size.min(dst_size)) as u64;
    row_len / v * r
}

/// Team size of the row kernels for rows of `row_len` elements, as a shift:
/// the smallest power of two of lanes that covers the row's units in one
/// pass ([`row_units_per_lane`] each), between 1 and [`ROW_BLOCK`] lanes.
pub fn row_team_shift(row_len: u64, src_size: usize, dst_size: usize) -> u32 {
    let per_lane = row_units_per_lane(src_size, dst_size);
    let lanes = row_units(row_len, src_size, dst_size)
        .div_ceil(per_lane)
        .max(1);
    lanes
        .next_power_of_two()
        .trailing_zeros()
        .min(ROW_MAX_TEAM_SHIFT)
}

/// Grid `(x, y)` of a row kernel: x covers the units of one row with one
/// pass of a team, y the rows with one row per team, each clamped to
/// [`ROW_MAX_GRID`]; `(0, 0)` when there is nothing to do. The kernels loop
/// in both directions, so any grid of at least one block is correct.
pub fn row_grid(args: &RowArgs, src_size: usize, dst_size: usize) -> (u32, u32) {
    row_blocks(args, src_size, dst_size).map_or((0, 0), |(pieces, rows)| clamped(pieces, rows))
}

/// Grid `(x, y)` of a gathered or scattered row kernel: [`row_grid`]'s, or with
/// [`RowGatherArgs::rows_first`] its two sides swapped, the teams' rows over x (clamped to
/// [`ROW_MAX_GRID`]`.0`) and the pieces of a row over y (clamped to [`ROW_MAX_GRID`]`.1`).
/// `(0, 0)` when there is nothing to do.
pub fn gather_grid(args: &RowGatherArgs, src_size: usize, dst_size: usize) -> (u32, u32) {
    row_blocks(&args.row, src_size, dst_size).map_or((0, 0), |(pieces, rows)| {
        if args.rows_first == 0 {
            clamped(pieces, rows)
        } else {
            clamped(rows, pieces)
        }
    })
}

/// The blocks a row kernel needs for one pass over `args`: pieces of a row (one pass of a
/// team each) and blocks of rows (a row per team), unclamped; `None` when there is nothing to
/// do.
fn row_blocks(args: &RowArgs, src_size: usize, dst_size: usize) -> Option<(u64, u64)> {
    if args.rows == 0 || args.row_len == 0 {
        return None;
    }
    let shift = args.team_shift.min(ROW_MAX_TEAM_SHIFT);
    let per_pass = row_units_per_lane(src_size, dst_size) << shift;
    let teams_per_block = u64::from(ROW_BLOCK) >> shift;
    let units = row_units(args.row_len, src_size, dst_size);
    Some((
        units.div_ceil(per_pass),
        args.rows.div_ceil(teams_per_block),
    ))
}

/// `(x, y)` clamped to `1..=`[`ROW_MAX_GRID`].
fn clamped(x: u64, y: u64) -> (u32, u32) {
    let (mx, my) = ROW_MAX_GRID;
    (
        x.clamp(1, u64::from(mx)) as u32,
        y.clamp(1, u64::from(my)) as u32,
    )
}

/// The register limit (`.maxnreg`) of the reversed row kernels whose groups are three vectors
/// (runs of 3; [`RowRuns::group_bytes`] 48), which move a warp's groups through shared memory:
/// 80, so that three blocks of [`ROW_BLOCK`] threads stay resident on a multiprocessor. The
/// compiler takes about 127 without it (two blocks) and spills a little at 80; on the H200
/// the limit ran u8 and f16 images of 3 channels flipped left-right or with their channels
/// reversed at 0.89-0.94 of a device copy, against 0.86-0.89 without it and 0.83-0.87 with 96
/// or 64.
pub const ROW_STAGED_MAX_REGISTERS: u32 = 80;

/// How a reversed row kernel ([`RowArgs`]) reads a row: as runs of `run` elements, either
/// the runs in reverse order with each run's elements in order (`backwards`: a row read
/// backwards, or images with their channels last flipped left-right), or the runs in order
/// with each run's elements reversed (images with their channels reversed, `x[..., ::-1]`).
/// Each kernel moves groups of runs whose bytes fill whole 16-byte vectors on both sides.
/// Runs of one element each reversed ([`RowRuns::SHIFTED`]) are rows read forwards, element
/// for element: their kernel moves rows whose two sides are off each other's 16-byte
/// alignment, each vector shifted out of the aligned blocks that cover it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RowRuns {
    /// Elements per run: 1 or 3 `backwards`, 1 to 4 otherwise.
    pub run: usize,
    /// The runs in reverse order (each in order), else each run reversed (the runs in order).
    pub backwards: bool,
}

impl RowRuns {
    /// Every reversed row form that has kernels.
    pub const ALL: [RowRuns; 6] = [
        RowRuns::new(1, true),
        RowRuns::new(3, true),
        RowRuns::new(2, false),
        RowRuns::new(3, false),
        RowRuns::new(4, false),
        RowRuns::SHIFTED,
    ];

    /// Rows read forwards (runs of one element, each reversed: as it is), for rows whose
    /// source and destination are off each other's 16-byte alignment.
    pub const SHIFTED: RowRuns = RowRuns::new(1, false);

    /// Runs of `run` elements, in reverse order (`backwards`) or each reversed.
    pub const fn new(run: usize, backwards: bool) -> RowRuns {
        RowRuns { run, backwards }
    }

    /// Whether kernels exist for elements of `size` bytes: runs of at most 16 bytes when the
    /// run is a power of two (a group is one vector); runs of 3 of 1- and 2-byte elements (a
    /// group is three vectors). Runs of 3 of 4- and 8-byte elements have none: on the H200 the
    /// element-wise gather moved 12-byte runs faster (0.91-0.94 of a copy) than groups of
    /// three vectors, each lane's three 48 bytes from its neighbour's (0.77-0.80); for 1- and
    /// 2-byte elements the groups, since moved through shared memory ([`RowArgs`]' kernels'
    /// staged loops, [`ROW_STAGED_MAX_REGISTERS`]), run at 0.89-0.94 against the gather's
    /// 0.29-0.64. Staged groups of 4- and 8-byte elements are not measured.
    pub const fn exists(self, size: usize) -> bool {
        let known = matches!((self.run, self.backwards), (1 | 3, true) | (1..=4, false));
        known
            && matches!(size, 1 | 2 | 4 | 8)
            && if self.run == 3 {
                size <= 2
            } else {
                self.run * size <= CONTIG_ALIGN as usize
            }
    }

    /// Bytes of a run of elements of `size` bytes.
    pub const fn run_bytes(self, size: usize) -> u64 {
        (self.run * size) as u64
    }

    /// Bytes of a group: the least multiple of 16 that holds whole runs (16, or 48 for runs
    /// of 3).
    pub const fn group_bytes(self, size: usize) -> u64 {
        if self.run_bytes(size) % 3 == 0 {
            3 * CONTIG_ALIGN
        } else {
            CONTIG_ALIGN
        }
    }

    /// Runs in a group (a power of two).
    pub const fn runs_per_group(self, size: usize) -> u64 {
        self.group_bytes(size) / self.run_bytes(size)
    }

    /// The element size that [`row_team_shift`] and [`row_grid`] count a row's groups by: the
    /// size whose 16-byte vectors hold as many elements as a group holds runs.
    pub const fn grid_size(self, size: usize) -> usize {
        (CONTIG_ALIGN / self.runs_per_group(size)) as usize
    }
}

/// The `head` a reversed row kernel uses for a row of runs read as `runs` says, of elements of
/// `size` bytes, whose first destination run is at `dst` and whose source run zero is at `src`
/// (its lowest byte), and the misalignment `m` of its groups' source bytes, computed like the
/// kernels do. `head` is the number of runs before the destination reaches a 16-byte boundary
/// (the elements to that boundary divided by the run, or for runs of 3 times 11, 3's inverse
/// modulo 16, modulo the runs of a group; the destination must be aligned to the run's bytes
/// where they divide 16); `m` is how far the source bytes of the first group start past a
/// 16-byte boundary. Where `m` is not 0, each group's source bytes are shifted out of the
/// aligned blocks that cover them (one more), `head` takes one group's runs more, so that the
/// blocks of the first group stay inside the row, and the kernel takes one group fewer at the
/// row's end (its runs go to the tail), so that the blocks of the last do. `head` is never more
/// than `row_len`.
pub fn row_rev_head(dst: u64, src: u64, size: usize, runs: RowRuns, row_len: u64) -> (u64, u64) {
    let per_group = runs.runs_per_group(size);
    let elems = (dst.wrapping_neg() % CONTIG_ALIGN) / size as u64;
    let head = if runs.run == 3 {
        elems * 11 % per_group
    } else {
        elems / runs.run as u64
    };
    let run_bytes = runs.run_bytes(size);
    let first = if runs.backwards {
        // The group's highest run ends where run `head` does.
        src.wrapping_add(run_bytes)
            .wrapping_sub(head.wrapping_mul(run_bytes))
    } else {
        src.wrapping_add(head.wrapping_mul(run_bytes))
    };
    let m = first % CONTIG_ALIGN;
    let head = if m == 0 { head } else { head + per_group };
    (head.min(row_len), m)
}

/// The `head` a row kernel uses for a row whose first destination element
/// is at `dst` and first source element at `src` (each aligned to its
/// element size), computed like the kernels do: the number of elements
/// before the narrower side (the destination when the sizes are equal)
/// reaches a 16-byte boundary, if the other side is 16-byte aligned there
/// too; otherwise `row_len` (the whole row moves one element at a time).
/// Never more than `row_len`.
pub fn row_head(dst: u64, dst_size: usize, src: u64, src_size: usize, row_len: u64) -> u64 {
    let (narrow, narrow_size, other, other_size) = if dst_size <= src_size {
        (dst, dst_size, src, src_size)
    } else {
        (src, src_size, dst, dst_size)
    };
    let head = (narrow.wrapping_neg() % CONTIG_ALIGN) / narrow_size as u64;
    let other_at = other.wrapping_add(head.wrapping_mul(other_size as u64));
    let head = if other_at % CONTIG_ALIGN == 0 {
        head
    } else {
        row_len
    };
    head.min(row_len)
}

/// Argument block of `*_rows_*` (320 bytes).
///
/// Row index `q` in `[0, rows)` is split over the outer axes `0..outer_rank`
/// (axis 0 fastest, like [`StridedArgs64`]) into element offsets `od`, `os`;
/// for `i < row_len`, `dst + (od + i) * size(D)` receives the converted
/// `src + (os + i) * size(S)`. `rows` must equal the product of the outer
/// shape and be below 2^63.
///
/// [`StridedArgs64`]: super::StridedArgs64
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RowArgs {
    /// Byte address of the destination element at multi-index 0.
    pub dst: u64,
    /// Byte address of the source element at multi-index 0.
    pub src: u64,
    /// Elements per row (stride 1 on both sides).
    pub row_len: u64,
    /// Number of rows: the product of `shape[..outer_rank]`.
    pub rows: u64,
    /// Number of outer axes, `1..=MAX_ROW_OUTER`.
    pub outer_rank: u32,
    /// `log2` of the lanes per team, `0..=ROW_MAX_TEAM_SHIFT` (larger values
    /// act as [`ROW_MAX_TEAM_SHIFT`]); see [`row_team_shift`]. Any value is
    /// correct.
    pub team_shift: u32,
    /// Extent of each outer axis; 1 beyond `outer_rank`.
    pub shape: [u64; MAX_ROW_OUTER],
    /// Fast division by `shape[k]`.
    pub div: [FastDiv64; MAX_ROW_OUTER],
    /// Destination strides of the outer axes in elements.
    pub dst_strides: [i64; MAX_ROW_OUTER],
    /// Source strides of the outer axes in elements (may be negative or zero).
    pub src_strides: [i64; MAX_ROW_OUTER],
}

impl RowArgs {
    /// Builds the block for rows of `row_len` elements over the outer axes
    /// `outer_shape` (axis 0 innermost, `1..=MAX_ROW_OUTER` axes) with the
    /// given strides (same length), and the team size of
    /// [`row_team_shift`]. Returns `None` if the lengths disagree, the rank
    /// is out of range or the row count overflows 2^63.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        dst: u64,
        src: u64,
        row_len: u64,
        outer_shape: &[u64],
        dst_strides: &[i64],
        src_strides: &[i64],
        src_size: usize,
        dst_size: usize,
    ) -> Option<Self> {
        let r = outer_shape.len();
        if r == 0 || r > MAX_ROW_OUTER || dst_strides.len() != r || src_strides.len() != r {
            return None;
        }
        let rows = outer_shape
            .iter()
            .try_fold(1u64, |a, &e| a.checked_mul(e))?;
        if rows >= 1 << 63 {
            return None;
        }
        let mut a = Self {
            dst,
            src,
            row_len,
            rows,
            outer_rank: r as u32,
            team_shift: row_team_shift(row_len, src_size, dst_size),
            shape: [1; MAX_ROW_OUTER],
            ..Self::default()
        };
        for k in 0..r {
            a.shape[k] = outer_shape[k];
            a.div[k] = FastDiv64::new(outer_shape[k]);
            a.dst_strides[k] = dst_strides[k];
            a.src_strides[k] = src_strides[k];
        }
        Some(a)
    }

    /// Element offsets `(dst, src)` of the first element of row `q`,
    /// computed like the kernels do.
    pub fn row_offsets(&self, q: u64) -> (i64, i64) {
        let rank = self.outer_rank.clamp(1, MAX_ROW_OUTER as u32) as usize;
        let (mut x, mut d, mut s) = (q, 0i64, 0i64);
        for k in 0..rank - 1 {
            let quot = self.div[k].div(x);
            let c = x.wrapping_sub(quot.wrapping_mul(self.shape[k])) as i64;
            d = d.wrapping_add(c.wrapping_mul(self.dst_strides[k]));
            s = s.wrapping_add(c.wrapping_mul(self.src_strides[k]));
            x = quot;
        }
        d = d.wrapping_add((x as i64).wrapping_mul(self.dst_strides[rank - 1]));
        s = s.wrapping_add((x as i64).wrapping_mul(self.src_strides[rank - 1]));
        (d, s)
    }
}

// SAFETY: `#[repr(C)]`, integers and integer arrays only (the fields' coverage is
// checked in tests).
param_block!(RowArgs {
    dst,
    src,
    row_len,
    rows,
    outer_rank,
    team_shift,
    shape,
    div,
    dst_strides,
    src_strides,
});

/// The most elements of a period of [`RowGatherArgs`] (the kernels count inside a period in 32
/// bits).
pub const ROW_GATHER_MAX_PERIOD: u64 = (1 << 31) - 1;

/// Argument block of `copy_rows_gather_bN` and `cast_rows_gather_S_D` (368 bytes): the rows of
/// a [`RowArgs`] whose elements the source holds in a pattern of two axes. Element `i` of a
/// row is element `k = i % period` of period `p = i / period`, and comes from source element
/// offset `os + k * period_stride + p * period_step` (`os` the row's, from [`RowArgs`]); the
/// destination's row is contiguous. Images read right to left with their channels last are
/// rows of pixels of `period` = C channels (stride 1, step -C), images with their channels
/// reversed rows of C channels of stride -1 (step C), rows read backwards rows of periods of
/// one element (step -1).
///
/// Each lane of a row kernel's team moves units of `16 / max(size)` consecutive destination
/// elements (one aligned store of the destination, whose row starts at a scalar head): it
/// finds the first element's source offset by one division, the others by a step inside the
/// period or to the next, and loads every element with a scalar load, all of its units' loads
/// before their conversions and stores.
///
/// `copy_rows_scatter_bN` reads the same block the other way round: the source's row is
/// contiguous and the period fields give destination offsets (element `i` of a row goes to
/// destination element offset `od + k * period_stride + p * period_step`); each lane loads
/// aligned 16-byte units of the source (whose row starts at a scalar head) and stores their
/// elements one by one.
///
/// The grid is [`gather_grid`]'s: the pieces of a row over grid x and the rows over grid y,
/// or with `rows_first` the other way round, so that blocks launched one after another take
/// the same piece of consecutive rows (rows whose elements interleave on the side in periods,
/// like the planes of an image split out of channels last, then read or write the same lines
/// of memory at about the same time).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RowGatherArgs {
    /// The rows: addresses, row length, outer axes and team.
    pub row: RowArgs,
    /// Elements per period, `1..=`[`ROW_GATHER_MAX_PERIOD`].
    pub period: u64,
    /// Fast division by `period`.
    pub period_div: FastDiv64,
    /// Source stride of consecutive elements of a period, in elements.
    pub period_stride: i64,
    /// Source stride from a period to the next, in elements.
    pub period_step: i64,
    /// 1: the rows over grid x and the pieces of a row over grid y ([`gather_grid`]); 0: the
    /// other way round. Any value other than 0 acts as 1.
    pub rows_first: u64,
}

impl RowGatherArgs {
    /// The block for `row`'s rows read in periods of `period` elements, each of source stride
    /// `stride` inside and `step` from one to the next. `None` if `period` is 0 or more than
    /// [`ROW_GATHER_MAX_PERIOD`].
    pub fn new(row: RowArgs, period: u64, stride: i64, step: i64) -> Option<Self> {
        if period == 0 || period > ROW_GATHER_MAX_PERIOD {
            return None;
        }
        Some(Self {
            row,
            period,
            period_div: FastDiv64::new(period),
            period_stride: stride,
            period_step: step,
            rows_first: 0,
        })
    }

    /// The same block with the rows over grid x ([`RowGatherArgs::rows_first`]).
    pub fn with_rows_first(self, rows_first: bool) -> Self {
        Self {
            rows_first: rows_first.into(),
            ..self
        }
    }

    /// The source element offset of element `i` of a row, from the row's own, as the kernels
    /// compute it.
    pub fn element_offset(&self, i: u64) -> i64 {
        let p = self.period_div.div(i);
        let k = i.wrapping_sub(p.wrapping_mul(self.period)) as i64;
        (p as i64)
            .wrapping_mul(self.period_step)
            .wrapping_add(k.wrapping_mul(self.period_stride))
    }
}

/// One [`Field`](crate::abi::Field) of [`RowGatherArgs`], named like the field of the block
/// it lies in.
macro_rules! gather_field {
    ($($path:ident).+ => $name:ident) => {
        crate::abi::Field {
            name: stringify!($name),
            offset: core::mem::offset_of!(RowGatherArgs, $($path).+),
            size: crate::abi::field_size(|a: &RowGatherArgs| &a.$($path).+),
        }
    };
}

// SAFETY: `#[repr(C)]`, a `RowArgs` (itself a parameter block) followed by integers and a
// `FastDiv64`; the fields below list every byte once, in order: those of `row` under their
// names in `RowArgs` (the kernels read them at the same offsets as there, `row` being at
// offset 0), then the period's (coverage checked in tests).
unsafe impl crate::abi::ParamBlock for RowGatherArgs {
    const FIELDS: &'static [crate::abi::Field] = &[
        gather_field!(row.dst => dst),
        gather_field!(row.src => src),
        gather_field!(row.row_len => row_len),
        gather_field!(row.rows => rows),
        gather_field!(row.outer_rank => outer_rank),
        gather_field!(row.team_shift => team_shift),
        gather_field!(row.shape => shape),
        gather_field!(row.div => div),
        gather_field!(row.dst_strides => dst_strides),
        gather_field!(row.src_strides => src_strides),
        gather_field!(period => period),
        gather_field!(period_div => period_div),
        gather_field!(period_stride => period_stride),
        gather_field!(period_step => period_step),
        gather_field!(rows_first => rows_first),
    ];
}
