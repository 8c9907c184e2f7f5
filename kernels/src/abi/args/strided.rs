//! The strided kernels: rank and block limits, grid, and their argument blocks
//! ([`StridedArgs64`], [`StridedArgs32`]).

use super::fast_div::{FastDiv64, fast_div32, fast_div32_apply};
use crate::abi::param_block;

/// Largest rank of the strided kernels.
pub const MAX_RANK: usize = 8;

/// Threads per block of the strided kernels (required exactly).
pub const STRIDED_BLOCK: u32 = 256;
/// Linear indices each thread handles per iteration of a strided kernel.
pub const STRIDED_ELEMS_PER_THREAD: u32 = 4;
/// Linear indices each block handles per iteration of a strided kernel.
pub const STRIDED_ELEMS_PER_BLOCK: u32 = STRIDED_BLOCK * STRIDED_ELEMS_PER_THREAD;
/// Largest grid of a strided kernel (the 32-bit variant relies on it).
pub const STRIDED_MAX_GRID: u32 = 1 << 20;

/// Grid size (x) of a strided kernel for `n` elements:
/// `min(ceil(n / STRIDED_ELEMS_PER_BLOCK), STRIDED_MAX_GRID)`, or 0 if
/// `n == 0`.
pub fn strided_grid(n: u64) -> u32 {
    n.div_ceil(u64::from(STRIDED_ELEMS_PER_BLOCK))
        .min(u64::from(STRIDED_MAX_GRID)) as u32
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
