//! Kernel argument blocks, fast division and launch geometry.
//!
//! Every structure here is `#[repr(C)]` and is passed to a kernel by value
//! as one `.param` block; field offsets are part of the kernel ABI and are
//! checked by the tests below. Extents and strides count elements; addresses
//! are byte addresses; axis 0 is the innermost axis (fastest varying in the
//! destination's iteration order). Every address must be aligned to its
//! element size.
//!
//! # Contiguous kernels
//!
//! `fill_contig_bN(dst: u64, n: u64, head: u64, value_bits: u64)`,
//! `copy_contig_bN(dst: u64, src: u64, n: u64, head: u64)` and
//! `cast_contig_S_D(dst: u64, src: u64, n: u64, head: u64)` move elements in
//! groups of `V =` [`contig_group_elems`] (fill: [`fill_group_elems`])
//! elements with 16-byte vector accesses. Elements `[0, head)` are moved one
//! at a time, then whole groups starting at element `head`, then one at a
//! time the `(n - head) % V` remaining elements. `head` must make
//! `src + head * size(S)` **and** `dst + head * size(D)` multiples of 16
//! ([`CONTIG_ALIGN`]); use [`contig_head`] / [`fill_head`], and fall back to a
//! strided kernel of rank 1 when they return `None`. A `head` larger than `n`
//! is treated as `n` (pass `head < V`). The block must be [`CONTIG_BLOCK`]
//! threads; the grid is [`contig_grid`] / [`fill_grid`] (any grid of at least
//! one block is correct; `n == 0` does nothing). `value_bits` holds the fill
//! value's bit pattern in its low `8 * N` bits. Casts to a wider type use up
//! to 32 KiB of static shared memory; no kernel needs dynamic shared memory.
//!
//! # Strided kernels
//!
//! `fill_strided32_bN(args: StridedArgs32, value_bits: u64)`,
//! `fill_strided64_bN(args: StridedArgs64, value_bits: u64)`,
//! `copy_strided{32,64}_bN(args)` and `cast_strided{32,64}_S_D(args)`: block
//! [`STRIDED_BLOCK`] threads, grid [`strided_grid`] (at most
//! [`STRIDED_MAX_GRID`] blocks, which the 32-bit kernels rely on).
//!
//! # Transpose kernels
//!
//! `copy_transpose_bN(args: TransposeArgs)` and
//! `cast_transpose_S_D(args: TransposeArgs)`: block [`TRANSPOSE_BLOCK`], grid
//! [`transpose_grid_sized`] (tiles of [`transpose_tile`] elements; any grid is
//! correct). Up to 16 KiB of static shared memory.
//!
//! # Permute kernels
//!
//! `copy_permute_bN(args: PermuteArgs)` and `cast_permute_S_D(args: PermuteArgs)`: see
//! [`super::permute`].
//!
//! # Row kernels
//!
//! `copy_rows_bN(args: RowArgs)` and `cast_rows_S_D(args: RowArgs)` copy
//! `rows` rows of `row_len` elements that are contiguous on both sides: block
//! [`ROW_BLOCK`] threads, split into teams of `2^team_shift` lanes (one row
//! per team at a time); grid [`row_grid`] (any grid is correct). In each row
//! the kernel computes the row's `head` with [`row_head`] from the row's two
//! start addresses, so every row whose two sides share their misalignment
//! moves whole groups of [`contig_group_elems`] elements with 16-byte vector
//! accesses on the wider side; the other rows move one element at a time.
//! Each lane moves [`row_units_per_lane`] vector units per iteration (all
//! loads before the stores) and [`ROW_SCALAR_UNROLL`] scalar elements per
//! iteration. Rows must hold at least one group for the kernels to pay off
//! (the planner's rule), but any `row_len`, including 0, is correct.

use super::param_block;

/// Largest rank of the strided kernels.
pub const MAX_RANK: usize = 8;
/// Largest number of batch axes of the transpose kernels.
pub const MAX_BATCH_RANK: usize = 6;

/// Threads per block of the contiguous kernels (fill, copy and cast). The
/// kernels require exactly this block size.
pub const CONTIG_BLOCK: u32 = 256;
/// Alignment in bytes that `head` must establish on both sides.
pub const CONTIG_ALIGN: u64 = 16;
/// Largest grid of a contiguous kernel. [`contig_grid`] covers every group
/// once (one iteration per block); the kernels loop over the groups, so any
/// grid size is correct.
pub const CONTIG_MAX_GRID: u32 = i32::MAX as u32;
/// Groups each thread of `fill_contig_*` stores per iteration.
pub const FILL_GROUPS_PER_THREAD: u32 = 4;

/// Threads per block of the strided kernels (required exactly).
pub const STRIDED_BLOCK: u32 = 256;
/// Linear indices each thread handles per iteration of a strided kernel.
pub const STRIDED_ELEMS_PER_THREAD: u32 = 4;
/// Linear indices each block handles per iteration of a strided kernel.
pub const STRIDED_ELEMS_PER_BLOCK: u32 = STRIDED_BLOCK * STRIDED_ELEMS_PER_THREAD;
/// Largest grid of a strided kernel (the 32-bit variant relies on it).
pub const STRIDED_MAX_GRID: u32 = 1 << 20;

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

/// Elements per side of a transpose tile (the general path; see
/// [`transpose_tile`]).
pub const TRANSPOSE_TILE: u32 = 32;
/// Block shape of the transpose kernels (required exactly).
pub const TRANSPOSE_BLOCK: (u32, u32, u32) = (32, 8, 1);
/// Largest grid of a transpose kernel in x, y and z.
pub const TRANSPOSE_MAX_GRID: (u32, u32, u32) = (i32::MAX as u32, 65535, 65535);

/// Elements per group of a contiguous copy or cast kernel:
/// `16 / min(src_size, dst_size)`, so that both sides of a group are whole
/// 16-byte vectors.
pub const fn contig_group_elems(src_size: usize, dst_size: usize) -> usize {
    let m = if src_size < dst_size {
        src_size
    } else {
        dst_size
    };
    16 / m
}

/// Elements per group of `fill_contig_*`: `16 / size`.
pub const fn fill_group_elems(size: usize) -> usize {
    16 / size
}

/// Groups each thread of a contiguous copy or cast kernel moves per
/// iteration (1 for every pair of sizes).
pub const fn contig_groups_per_thread(src_size: usize, dst_size: usize) -> u32 {
    let _ = (src_size, dst_size);
    1
}

/// Elements per side of the tiles a transpose kernel works on, for the grid:
/// 128 for 1-byte to 1-byte, 64 for 2-byte to 2-byte, else 32.
///
/// The 1- and 2-byte kernels move whole tiles of that size as 32-bit words
/// when `src`, `dst` and every stride (`dst_row_stride`, `src_col_stride`,
/// all six batch strides of each side) are multiples of `4 / size`
/// elements (addresses multiples of 4 bytes); the rest of the matrix, or all
/// of it otherwise, goes through 32 x 32 tiles. Any grid is correct.
pub const fn transpose_tile(src_size: usize, dst_size: usize) -> u32 {
    if src_size == dst_size && src_size <= 2 {
        TRANSPOSE_TILE * 4 / src_size as u32
    } else {
        TRANSPOSE_TILE
    }
}

/// The smallest `head < group_elems(src_size, dst_size)` that makes
/// `src + head * src_size` and `dst + head * dst_size` both multiples of
/// [`CONTIG_ALIGN`], or `None` if there is none (then use a strided kernel).
pub fn contig_head(src: u64, src_size: usize, dst: u64, dst_size: usize) -> Option<u64> {
    let v = contig_group_elems(src_size, dst_size) as u64;
    (0..v).find(|h| {
        (src.wrapping_add(h * src_size as u64)) % CONTIG_ALIGN == 0
            && (dst.wrapping_add(h * dst_size as u64)) % CONTIG_ALIGN == 0
    })
}

/// The smallest `head < fill_group_elems(size)` that makes
/// `dst + head * size` a multiple of [`CONTIG_ALIGN`], or `None` if `dst` is
/// not aligned to `size`.
pub fn fill_head(dst: u64, size: usize) -> Option<u64> {
    let v = fill_group_elems(size) as u64;
    (0..v).find(|h| (dst.wrapping_add(h * size as u64)) % CONTIG_ALIGN == 0)
}

fn contig_blocks(n: u64, head: u64, group_elems: u64, groups_per_thread: u32) -> u32 {
    if n == 0 {
        return 0;
    }
    let head = head.min(n);
    let groups = (n - head) / group_elems;
    let per_block = u64::from(CONTIG_BLOCK) * u64::from(groups_per_thread);
    groups
        .div_ceil(per_block)
        .clamp(1, u64::from(CONTIG_MAX_GRID)) as u32
}

/// Grid size (x) of `copy_contig_*` / `cast_contig_*` for `n` elements:
/// `ceil(groups / (CONTIG_BLOCK * groups_per_thread))` clamped to
/// `[1, CONTIG_MAX_GRID]`, or 0 (launch nothing) if `n == 0`.
pub fn contig_grid(n: u64, head: u64, src_size: usize, dst_size: usize) -> u32 {
    contig_blocks(
        n,
        head,
        contig_group_elems(src_size, dst_size) as u64,
        contig_groups_per_thread(src_size, dst_size),
    )
}

/// Grid size (x) of `fill_contig_*` for `n` elements of `size` bytes, or 0
/// if `n == 0`.
pub fn fill_grid(n: u64, head: u64, size: usize) -> u32 {
    contig_blocks(
        n,
        head,
        fill_group_elems(size) as u64,
        FILL_GROUPS_PER_THREAD,
    )
}

/// Grid size (x) of a strided kernel for `n` elements:
/// `min(ceil(n / STRIDED_ELEMS_PER_BLOCK), STRIDED_MAX_GRID)`, or 0 if
/// `n == 0`.
pub fn strided_grid(n: u64) -> u32 {
    n.div_ceil(u64::from(STRIDED_ELEMS_PER_BLOCK))
        .min(u64::from(STRIDED_MAX_GRID)) as u32
}

/// Grid of a transpose kernel with 32 x 32 tiles: `(column tiles, row
/// tiles, batch)`, each clamped to [`TRANSPOSE_MAX_GRID`]; all zero if there
/// is nothing to do. Correct for every transpose kernel; for 1- and 2-byte
/// element pairs [`transpose_grid_sized`] launches fewer idle blocks.
pub fn transpose_grid(rows: u64, cols: u64, batch: u64) -> (u32, u32, u32) {
    grid_for_tile(rows, cols, batch, u64::from(TRANSPOSE_TILE))
}

/// Grid of the transpose kernel for the given element sizes, with tiles of
/// [`transpose_tile`] elements.
pub fn transpose_grid_sized(
    rows: u64,
    cols: u64,
    batch: u64,
    src_size: usize,
    dst_size: usize,
) -> (u32, u32, u32) {
    grid_for_tile(
        rows,
        cols,
        batch,
        u64::from(transpose_tile(src_size, dst_size)),
    )
}

fn grid_for_tile(rows: u64, cols: u64, batch: u64, t: u64) -> (u32, u32, u32) {
    if rows == 0 || cols == 0 || batch == 0 {
        return (0, 0, 0);
    }
    let (mx, my, mz) = TRANSPOSE_MAX_GRID;
    (
        cols.div_ceil(t).min(u64::from(mx)) as u32,
        rows.div_ceil(t).min(u64::from(my)) as u32,
        batch.min(u64::from(mz)) as u32,
    )
}

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
    if args.rows == 0 || args.row_len == 0 {
        return (0, 0);
    }
    let shift = args.team_shift.min(ROW_MAX_TEAM_SHIFT);
    let per_pass = row_units_per_lane(src_size, dst_size) << shift;
    let teams_per_block = u64::from(ROW_BLOCK) >> shift;
    let units = row_units(args.row_len, src_size, dst_size);
    let (mx, my) = ROW_MAX_GRID;
    (
        units.div_ceil(per_pass).clamp(1, u64::from(mx)) as u32,
        args.rows.div_ceil(teams_per_block).clamp(1, u64::from(my)) as u32,
    )
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

/// Division by a fixed divisor `d` as a multiply and a shift, exactly as the
/// kernels compute it: `q = (mulhi64(n, magic) + n) >> shift`, valid for
/// `n < 2^63`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FastDiv64 {
    /// Low 64 bits of `ceil(2^(64 + shift) / d)` (0 for `d == 1`).
    pub magic: u64,
    /// `ceil(log2(d))`.
    pub shift: u32,
    /// Padding; zero.
    pub _pad: u32,
}

impl FastDiv64 {
    /// Parameters for divisor `d`; `d == 0` is treated as 1.
    pub fn new(d: u64) -> Self {
        if d <= 1 {
            return Self::default();
        }
        let shift = 64 - (d - 1).leading_zeros();
        let magic = ((1u128 << 64) * ((1u128 << shift) - u128::from(d)) / u128::from(d) + 1) as u64;
        Self {
            magic,
            shift,
            _pad: 0,
        }
    }

    /// `n / d` computed like the kernels do (a shift of 64 or more gives 0,
    /// like PTX `shr`).
    pub fn div(&self, n: u64) -> u64 {
        let hi = ((u128::from(n) * u128::from(self.magic)) >> 64) as u64;
        hi.wrapping_add(n).checked_shr(self.shift).unwrap_or(0)
    }
}

/// 32-bit fast division parameters `(magic, shift)` for divisor `d`:
/// `q = (mulhi32(n, magic) + n) >> shift`, valid for `n < 2^31`; `d <= 1`
/// gives `(0, 0)`.
pub fn fast_div32(d: u32) -> (u32, u32) {
    if d <= 1 {
        return (0, 0);
    }
    let shift = 32 - (d - 1).leading_zeros();
    let magic = ((1u64 << 32) * ((1u64 << shift) - u64::from(d)) / u64::from(d) + 1) as u32;
    (magic, shift)
}

/// `n / d` from [`fast_div32`] parameters, computed like the kernels do.
pub fn fast_div32_apply(n: u32, magic: u32, shift: u32) -> u32 {
    let hi = ((u64::from(n) * u64::from(magic)) >> 32) as u32;
    hi.wrapping_add(n).checked_shr(shift).unwrap_or(0)
}

/// Argument block of `*_strided64_*` (352 bytes).
///
/// Linear index `i` in `[0, n)` is split over axes `0..rank` (`i % shape[0]`
/// is the axis-0 coordinate, and so on); the destination element is at
/// `dst + (sum coord[k] * dst_strides[k]) * size(D)` and the source element
/// likewise. `n` must be below 2^63 and equal the product of the shape.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StridedArgs64 {
    /// Byte address of the destination element at multi-index 0.
    pub dst: u64,
    /// Byte address of the source element at multi-index 0 (unused by fill).
    pub src: u64,
    /// Number of elements.
    pub n: u64,
    /// Number of axes, `1..=MAX_RANK`.
    pub rank: u32,
    /// Padding; zero.
    pub _pad: u32,
    /// Extent of each axis; 1 beyond `rank`.
    pub shape: [u64; MAX_RANK],
    /// Fast division by `shape[k]`.
    pub div: [FastDiv64; MAX_RANK],
    /// Destination strides in elements (may be negative).
    pub dst_strides: [i64; MAX_RANK],
    /// Source strides in elements (may be negative or zero).
    pub src_strides: [i64; MAX_RANK],
}

impl StridedArgs64 {
    /// Builds the block for `shape` (axis 0 innermost, `1..=MAX_RANK` axes)
    /// with the given strides (same length as `shape`). Returns `None` if
    /// the lengths disagree, the rank is out of range or the element count
    /// overflows 2^63. For fill, pass `src = 0` and zero source strides.
    pub fn new(
        dst: u64,
        src: u64,
        shape: &[u64],
        dst_strides: &[i64],
        src_strides: &[i64],
    ) -> Option<Self> {
        let rank = shape.len();
        if rank == 0 || rank > MAX_RANK || dst_strides.len() != rank || src_strides.len() != rank {
            return None;
        }
        let n = shape.iter().try_fold(1u64, |a, &e| a.checked_mul(e))?;
        if n >= 1 << 63 {
            return None;
        }
        let mut a = Self {
            dst,
            src,
            n,
            rank: rank as u32,
            shape: [1; MAX_RANK],
            ..Self::default()
        };
        for k in 0..rank {
            a.shape[k] = shape[k];
            a.div[k] = FastDiv64::new(shape[k]);
            a.dst_strides[k] = dst_strides[k];
            a.src_strides[k] = src_strides[k];
        }
        Some(a)
    }

    /// Element offsets `(dst, src)` of linear index `i`, computed like the
    /// kernels do.
    pub fn offsets(&self, i: u64) -> (i64, i64) {
        let rank = self.rank.clamp(1, MAX_RANK as u32) as usize;
        let (mut x, mut d, mut s) = (i, 0i64, 0i64);
        for k in 0..rank - 1 {
            let q = self.div[k].div(x);
            let c = x.wrapping_sub(q.wrapping_mul(self.shape[k])) as i64;
            d = d.wrapping_add(c.wrapping_mul(self.dst_strides[k]));
            s = s.wrapping_add(c.wrapping_mul(self.src_strides[k]));
            x = q;
        }
        d = d.wrapping_add((x as i64).wrapping_mul(self.dst_strides[rank - 1]));
        s = s.wrapping_add((x as i64).wrapping_mul(self.src_strides[rank - 1]));
        (d, s)
    }
}

/// Argument block of `*_strided32_*` (184 bytes): the same walk as
/// [`StridedArgs64`] with 32-bit index math, usable when `n < 2^31` and
/// every partial sum of offsets fits in `i32` (see [`Self::from_args64`]).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StridedArgs32 {
    /// Byte address of the destination element at multi-index 0.
    pub dst: u64,
    /// Byte address of the source element at multi-index 0 (unused by fill).
    pub src: u64,
    /// Number of elements, below 2^31.
    pub n: u32,
    /// Number of axes, `1..=MAX_RANK`.
    pub rank: u32,
    /// Extent of each axis; 1 beyond `rank`.
    pub shape: [u32; MAX_RANK],
    /// Fast division magic for `shape[k]` ([`fast_div32`]).
    pub magic: [u32; MAX_RANK],
    /// Fast division shift for `shape[k]` ([`fast_div32`]).
    pub shift: [u32; MAX_RANK],
    /// Destination strides in elements.
    pub dst_strides: [i32; MAX_RANK],
    /// Source strides in elements.
    pub src_strides: [i32; MAX_RANK],
}

impl StridedArgs32 {
    /// The 32-bit form of `a`, or `None` if `a.n >= 2^31` or some reachable
    /// offset sum does not fit in `i32` (then use the 64-bit kernel).
    pub fn from_args64(a: &StridedArgs64) -> Option<Self> {
        if a.n >= 1 << 31 || a.rank == 0 || a.rank as usize > MAX_RANK {
            return None;
        }
        let rank = a.rank as usize;
        let mut out = Self {
            dst: a.dst,
            src: a.src,
            n: a.n as u32,
            rank: a.rank,
            shape: [1; MAX_RANK],
            ..Self::default()
        };
        for strides in [&a.dst_strides, &a.src_strides] {
            let (mut lo, mut hi) = (0i128, 0i128);
            for (&len, &stride) in a.shape.iter().zip(strides.iter()).take(rank) {
                let ext = i128::from(len.saturating_sub(1)) * i128::from(stride);
                if ext < 0 {
                    lo += ext;
                } else {
                    hi += ext;
                }
            }
            if lo < i128::from(i32::MIN) || hi > i128::from(i32::MAX) {
                return None;
            }
        }
        for k in 0..rank {
            out.shape[k] = u32::try_from(a.shape[k]).ok()?;
            (out.magic[k], out.shift[k]) = fast_div32(out.shape[k]);
            out.dst_strides[k] = i32::try_from(a.dst_strides[k]).ok()?;
            out.src_strides[k] = i32::try_from(a.src_strides[k]).ok()?;
        }
        Some(out)
    }

    /// Element offsets `(dst, src)` of linear index `i`, computed like the
    /// kernels do.
    pub fn offsets(&self, i: u32) -> (i32, i32) {
        let rank = self.rank.clamp(1, MAX_RANK as u32) as usize;
        let (mut x, mut d, mut s) = (i, 0i32, 0i32);
        for k in 0..rank - 1 {
            let q = fast_div32_apply(x, self.magic[k], self.shift[k]);
            let c = x.wrapping_sub(q.wrapping_mul(self.shape[k])) as i32;
            d = d.wrapping_add(c.wrapping_mul(self.dst_strides[k]));
            s = s.wrapping_add(c.wrapping_mul(self.src_strides[k]));
            x = q;
        }
        d = d.wrapping_add((x as i32).wrapping_mul(self.dst_strides[rank - 1]));
        s = s.wrapping_add((x as i32).wrapping_mul(self.src_strides[rank - 1]));
        (d, s)
    }
}

/// Argument block of `*_transpose_*` (304 bytes).
///
/// For every batch index `b` (split over `batch_shape`, axis 0 fastest, into
/// element offsets `boff_d`, `boff_s`), `r < rows` and `c < cols`:
/// `dst + (boff_d + r * dst_row_stride + c) * size(D)` receives the
/// converted `src + (boff_s + r + c * src_col_stride) * size(S)`. Axis R has
/// stride 1 in the source, axis C has stride 1 in the destination.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TransposeArgs {
    /// Destination byte address of element (batch 0, r 0, c 0).
    pub dst: u64,
    /// Source byte address of element (batch 0, r 0, c 0).
    pub src: u64,
    /// Extent of axis R (stride 1 in the source).
    pub rows: u64,
    /// Extent of axis C (stride 1 in the destination).
    pub cols: u64,
    /// Destination stride of axis R in elements.
    pub dst_row_stride: i64,
    /// Source stride of axis C in elements.
    pub src_col_stride: i64,
    /// Product of `batch_shape[..batch_rank]` (1 when `batch_rank == 0`).
    pub batch: u64,
    /// Number of batch axes, `0..=MAX_BATCH_RANK`.
    pub batch_rank: u32,
    /// Padding; zero.
    pub _pad: u32,
    /// Extent of each batch axis; 1 beyond `batch_rank`.
    pub batch_shape: [u64; MAX_BATCH_RANK],
    /// Fast division by `batch_shape[k]`.
    pub batch_div: [FastDiv64; MAX_BATCH_RANK],
    /// Destination strides of the batch axes in elements.
    pub batch_dst_strides: [i64; MAX_BATCH_RANK],
    /// Source strides of the batch axes in elements.
    pub batch_src_strides: [i64; MAX_BATCH_RANK],
}

/// Argument block of `*_rows_*` (320 bytes).
///
/// Row index `q` in `[0, rows)` is split over the outer axes `0..outer_rank`
/// (axis 0 fastest, like [`StridedArgs64`]) into element offsets `od`, `os`;
/// for `i < row_len`, `dst + (od + i) * size(D)` receives the converted
/// `src + (os + i) * size(S)`. `rows` must equal the product of the outer
/// shape and be below 2^63.
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

// SAFETY: `#[repr(C)]`, integers only, the padding an explicit field.
param_block!(FastDiv64 { magic, shift, _pad });
// SAFETY: `#[repr(C)]`, integers and integer arrays only, the padding an explicit
// field (the fields' coverage is checked in tests).
param_block!(StridedArgs64 {
    dst,
    src,
    n,
    rank,
    _pad,
    shape,
    div,
    dst_strides,
    src_strides
});
// SAFETY: `#[repr(C)]`, integers and integer arrays only (the fields' coverage is
// checked in tests).
param_block!(StridedArgs32 {
    dst,
    src,
    n,
    rank,
    shape,
    magic,
    shift,
    dst_strides,
    src_strides
});
// SAFETY: `#[repr(C)]`, integers and integer arrays only, the padding an explicit
// field (the fields' coverage is checked in tests).
param_block!(TransposeArgs {
    dst,
    src,
    rows,
    cols,
    dst_row_stride,
    src_col_stride,
    batch,
    batch_rank,
    _pad,
    batch_shape,
    batch_div,
    batch_dst_strides,
    batch_src_strides,
});
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

#[cfg(test)]
mod tests {
    use super::*;
    use core::mem::{align_of, offset_of, size_of};

    #[test]
    fn layouts_match_the_kernels() {
        assert_eq!(size_of::<FastDiv64>(), 16);
        assert_eq!(size_of::<StridedArgs64>(), 352);
        assert_eq!(align_of::<StridedArgs64>(), 8);
        assert_eq!(offset_of!(StridedArgs64, n), 16);
        assert_eq!(offset_of!(StridedArgs64, rank), 24);
        assert_eq!(offset_of!(StridedArgs64, shape), 32);
        assert_eq!(offset_of!(StridedArgs64, div), 96);
        assert_eq!(offset_of!(StridedArgs64, dst_strides), 224);
        assert_eq!(offset_of!(StridedArgs64, src_strides), 288);

        assert_eq!(size_of::<StridedArgs32>(), 184);
        assert_eq!(align_of::<StridedArgs32>(), 8);
        assert_eq!(offset_of!(StridedArgs32, n), 16);
        assert_eq!(offset_of!(StridedArgs32, rank), 20);
        assert_eq!(offset_of!(StridedArgs32, shape), 24);
        assert_eq!(offset_of!(StridedArgs32, magic), 56);
        assert_eq!(offset_of!(StridedArgs32, shift), 88);
        assert_eq!(offset_of!(StridedArgs32, dst_strides), 120);
        assert_eq!(offset_of!(StridedArgs32, src_strides), 152);

        assert_eq!(size_of::<TransposeArgs>(), 304);
        assert_eq!(align_of::<TransposeArgs>(), 8);
        assert_eq!(offset_of!(TransposeArgs, rows), 16);
        assert_eq!(offset_of!(TransposeArgs, cols), 24);
        assert_eq!(offset_of!(TransposeArgs, dst_row_stride), 32);
        assert_eq!(offset_of!(TransposeArgs, src_col_stride), 40);
        assert_eq!(offset_of!(TransposeArgs, batch), 48);
        assert_eq!(offset_of!(TransposeArgs, batch_rank), 56);
        assert_eq!(offset_of!(TransposeArgs, batch_shape), 64);
        assert_eq!(offset_of!(TransposeArgs, batch_div), 112);
        assert_eq!(offset_of!(TransposeArgs, batch_dst_strides), 208);
        assert_eq!(offset_of!(TransposeArgs, batch_src_strides), 256);

        assert_eq!(size_of::<RowArgs>(), 320);
        assert_eq!(align_of::<RowArgs>(), 8);
        assert_eq!(offset_of!(RowArgs, row_len), 16);
        assert_eq!(offset_of!(RowArgs, rows), 24);
        assert_eq!(offset_of!(RowArgs, outer_rank), 32);
        assert_eq!(offset_of!(RowArgs, team_shift), 36);
        assert_eq!(offset_of!(RowArgs, shape), 40);
        assert_eq!(offset_of!(RowArgs, div), 96);
        assert_eq!(offset_of!(RowArgs, dst_strides), 208);
        assert_eq!(offset_of!(RowArgs, src_strides), 264);
    }

    #[test]
    fn row_heads_align_both_sides() {
        for s in [1usize, 2, 4, 8] {
            for d in [1usize, 2, 4, 8] {
                let v = contig_group_elems(s, d) as u64;
                for sa in (0..64u64).filter(|a| a % s as u64 == 0) {
                    for da in (0..64u64).filter(|a| a % d as u64 == 0) {
                        let (src, dst) = (1 << 20 | sa, 1 << 30 | da);
                        let h = row_head(dst, d, src, s, 1000);
                        // The same head as the contiguous kernels, or the whole row.
                        assert_eq!(h, contig_head(src, s, dst, d).unwrap_or(1000));
                        assert!(h < v || h == 1000);
                        assert_eq!(row_head(dst, d, src, s, 3), h.min(3));
                    }
                }
            }
        }
    }

    #[test]
    fn row_offsets_and_geometry() {
        let a = RowArgs::new(0, 0, 10, &[3, 5, 2], &[10, 30, 150], &[64, -7, 0], 4, 4).unwrap();
        assert_eq!(a.rows, 30);
        let mut q = 0;
        for k in 0..2i64 {
            for j in 0..5i64 {
                for i in 0..3i64 {
                    assert_eq!(
                        a.row_offsets(q),
                        (10 * i + 30 * j + 150 * k, 64 * i - 7 * j)
                    );
                    q += 1;
                }
            }
        }
        assert!(RowArgs::new(0, 0, 1, &[], &[], &[], 4, 4).is_none());
        assert!(RowArgs::new(0, 0, 1, &[2; 8], &[1; 8], &[1; 8], 4, 4).is_none());
        assert!(RowArgs::new(0, 0, 1, &[1 << 62, 4], &[1, 1], &[1, 1], 4, 4).is_none());
        // Units per lane and iteration: 2, or one group of a 4x or 8x cast.
        assert_eq!(row_units_per_lane(4, 4), 2);
        assert_eq!(row_units_per_lane(4, 2), 2);
        assert_eq!(row_units_per_lane(1, 4), 4);
        assert_eq!(row_units_per_lane(1, 8), 8);
        assert_eq!(row_units_per_lane(8, 1), 8);
        // Team sizes: one pass of the team covers a row's units, 1..=256 lanes.
        assert_eq!(row_team_shift(8, 4, 4), 0);
        assert_eq!(row_team_shift(1, 4, 4), 0);
        assert_eq!(row_team_shift(100, 4, 4), 4);
        assert_eq!(row_team_shift(8000, 4, 4), 8);
        assert_eq!(row_team_shift(1 << 40, 1, 8), 8);
        assert_eq!(row_team_shift(32, 1, 8), 1);
        assert_eq!(row_team_shift(64, 4, 2), 3);
        // Grid: the 8000 x 8000 f32 block, 2000 units per row, 256 lanes of 2 units.
        let b = RowArgs::new(0, 0, 8000, &[8000], &[8000], &[16384], 4, 4).unwrap();
        assert_eq!(row_grid(&b, 4, 4), (4, 8000));
        // Short rows: one lane per row, 256 rows per block.
        let c = RowArgs::new(0, 0, 8, &[1000], &[8], &[8], 4, 4).unwrap();
        assert_eq!(c.team_shift, 0);
        assert_eq!(row_grid(&c, 4, 4), (1, 4));
        let e = RowArgs::new(0, 0, 8, &[1 << 40], &[8], &[8], 4, 4).unwrap();
        assert_eq!(row_grid(&e, 4, 4), (1, 65535));
        let z = RowArgs::new(0, 0, 0, &[4], &[8], &[8], 4, 4).unwrap();
        assert_eq!(row_grid(&z, 4, 4), (0, 0));
    }

    fn check64(d: u64, n: u64) {
        let f = FastDiv64::new(d);
        assert_eq!(f.div(n), n / d.max(1), "{n} / {d}");
    }

    #[test]
    fn fast_div64_is_exact() {
        let mut divisors: Vec<u64> = (1..=1100).collect();
        for s in 1..64 {
            let p = 1u64 << s;
            divisors.extend([p - 1, p, p + 1, p / 3 + 1]);
        }
        divisors.extend([
            (1 << 63) - 1,
            1 << 63,
            u64::MAX,
            u64::MAX - 1,
            1_000_000_007,
            6_700_417,
        ]);
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        let mut rnd = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for &d in &divisors {
            for n in [
                0,
                1,
                2,
                d - 1,
                d,
                d.wrapping_add(1),
                d.wrapping_mul(2).wrapping_sub(1),
                d.wrapping_mul(2),
                (1 << 63) - 1,
                (1 << 63) - 2,
            ] {
                if n < 1 << 63 {
                    check64(d, n);
                }
            }
            for _ in 0..200 {
                let n = rnd() >> 1;
                check64(d, n);
                check64(d, n >> (rnd() % 63));
                let m = (n / d).wrapping_mul(d);
                if m < 1 << 63 {
                    check64(d, m);
                    check64(d, m.wrapping_sub(1) & ((1 << 63) - 1));
                }
            }
        }
        assert_eq!(
            FastDiv64::new(1),
            FastDiv64 {
                magic: 0,
                shift: 0,
                _pad: 0
            }
        );
        assert_eq!(FastDiv64::new(0), FastDiv64::new(1));
    }

    #[test]
    fn fast_div32_is_exact() {
        let mut state = 0x2545_F491u32;
        let mut rnd = move || {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            state
        };
        let mut divisors: Vec<u32> = (1..=3000).collect();
        for s in 1..32 {
            let p = 1u32 << s;
            divisors.extend([p - 1, p, p + 1]);
        }
        divisors.extend([u32::MAX, (1 << 31) + 1, 1 << 31]);
        for &d in &divisors {
            let (m, s) = fast_div32(d);
            let mut ns = vec![0, 1, d - 1, d, d.wrapping_add(1), (1 << 31) - 1];
            ns.extend((0..300).map(|_| rnd() >> 1));
            for n in ns {
                if n < 1 << 31 {
                    assert_eq!(fast_div32_apply(n, m, s), n / d, "{n} / {d}");
                }
            }
        }
        // Exhaustive over n for a few awkward divisors.
        for d in [3u32, 7, 641, 6_700_417, 2_147_483_647] {
            let (m, s) = fast_div32(d);
            let mut n = 0u32;
            while n < 1 << 31 {
                assert_eq!(fast_div32_apply(n, m, s), n / d, "{n} / {d}");
                n += 4099;
            }
        }
        assert_eq!(fast_div32(1), (0, 0));
    }

    #[test]
    fn heads_align_both_sides() {
        for s in [1usize, 2, 4, 8] {
            for d in [1usize, 2, 4, 8] {
                let v = contig_group_elems(s, d) as u64;
                assert_eq!(v * s.min(d) as u64, 16);
                for sa in (0..64u64).filter(|a| a % s as u64 == 0) {
                    for da in (0..64u64).filter(|a| a % d as u64 == 0) {
                        match contig_head(1 << 20 | sa, s, 1 << 30 | da, d) {
                            Some(h) => {
                                assert!(h < v);
                                assert_eq!((sa + h * s as u64) % 16, 0);
                                assert_eq!((da + h * d as u64) % 16, 0);
                            }
                            None => {
                                assert!((0..64).all(|h| (sa + h * s as u64) % 16 != 0
                                    || (da + h * d as u64) % 16 != 0));
                            }
                        }
                    }
                }
            }
            for a in (0..64u64).filter(|a| a % s as u64 == 0) {
                let h = fill_head(a, s).unwrap();
                assert_eq!((a + h * s as u64) % 16, 0);
            }
        }
        assert_eq!(fill_head(3, 2), None);
    }

    #[test]
    fn geometry() {
        assert_eq!(contig_groups_per_thread(4, 4), 1);
        assert_eq!(contig_groups_per_thread(1, 8), 1);
        assert_eq!(contig_grid(0, 0, 4, 4), 0);
        assert_eq!(contig_grid(3, 2, 4, 4), 1);
        // 2^40 elements of 4 bytes: 2^38 groups, 256 per block.
        assert_eq!(contig_grid(1 << 40, 0, 4, 4), 1 << 30);
        assert_eq!(contig_grid(4 * 256 + 1, 0, 4, 4), 1);
        assert_eq!(contig_grid(4 * 256 * 4 + 4, 0, 4, 4), 5);
        assert_eq!(contig_grid(1 << 20, 0, 1, 8), 256);
        assert_eq!(fill_grid(1 << 20, 0, 4), 256);
        assert_eq!(fill_grid(17, 1, 1), 1);
        assert_eq!(strided_grid(0), 0);
        assert_eq!(strided_grid(1025), 2);
        assert_eq!(strided_grid(u64::MAX >> 1), STRIDED_MAX_GRID);
        assert_eq!(transpose_grid(33, 65, 3), (3, 2, 3));
        assert_eq!(transpose_grid(0, 65, 3), (0, 0, 0));
        assert_eq!(transpose_grid_sized(300, 129, 1, 1, 1), (2, 3, 1));
        assert_eq!(transpose_grid_sized(300, 129, 1, 2, 2), (3, 5, 1));
        assert_eq!(transpose_grid_sized(300, 129, 1, 1, 2), (5, 10, 1));
        assert_eq!(transpose_tile(4, 4), 32);
    }

    #[test]
    fn strided_offsets_agree() {
        let a = StridedArgs64::new(0, 0, &[3, 5, 7, 2], &[70, 14, 2, 1], &[1, -3, 15, 0]).unwrap();
        let b = StridedArgs32::from_args64(&a).unwrap();
        let mut i = 0u64;
        for l in 0..2i64 {
            for k in 0..7i64 {
                for j in 0..5i64 {
                    for m in 0..3i64 {
                        let want = (m * 70 + j * 14 + k * 2 + l, m - 3 * j + 15 * k);
                        assert_eq!(a.offsets(i), want);
                        assert_eq!(b.offsets(i as u32), (want.0 as i32, want.1 as i32));
                        i += 1;
                    }
                }
            }
        }
        assert_eq!(a.n, i);
        let big =
            StridedArgs64::new(0, 0, &[1 << 20, 1 << 12], &[1, 1 << 20], &[1 << 12, 1]).unwrap();
        assert!(StridedArgs32::from_args64(&big).is_none());
        let neg = StridedArgs64::new(
            0,
            0,
            &[1 << 16, (1 << 15) - 1],
            &[-1, -(1 << 16)],
            &[1, 1 << 16],
        )
        .unwrap();
        assert!(StridedArgs32::from_args64(&neg).is_some());
        assert!(StridedArgs64::new(0, 0, &[], &[], &[]).is_none());
        assert!(StridedArgs64::new(0, 0, &[1 << 62, 4], &[1, 1], &[1, 1]).is_none());
    }
}
