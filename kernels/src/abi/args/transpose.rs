//! The transpose kernels: tile sizes, block shape, grid, and their argument block
//! ([`TransposeArgs`]).

use super::fast_div::FastDiv64;
use crate::abi::param_block;

/// Largest number of batch axes of the transpose kernels.
pub const MAX_BATCH_RANK: usize = 6;

/// Elements per side of a transpose tile (the general path; see
/// [`transpose_tile`]).
pub const TRANSPOSE_TILE: u32 = 32;
/// Block shape of the transpose kernels (required exactly).
pub const TRANSPOSE_BLOCK: (u32, u32, u32) = (32, 8, 1);
/// Largest grid of a transpose kernel in x, y and z.
pub const TRANSPOSE_MAX_GRID: (u32, u32, u32) = (i32::MAX as u32, 65535, 65535);

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
