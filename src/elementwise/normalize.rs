//! The layout normaliser shared by every operand of an
//! [`ElementwiseKernel`](super::ElementwiseKernel) call: unit axes dropped, axes ordered and
//! merged across all operands, and the questions the variants ask of the result.

use super::source::{PAIR_TILE, STAGE_BYTES, TILE, body_size};
use crate::element::DType;

/// The operands' common layout after normalisation: every axis of extent 1 dropped, the axes
/// ordered by the first operand's stride (largest first, so the last axis is its fastest) and
/// neighbours merged wherever every operand steps over them as over one axis.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Normalized {
    /// Extents, outermost first; at least one axis (`[1]` for a single element).
    pub(crate) shape: Vec<usize>,
    /// For each operand, its strides in elements, in the order of `shape`.
    pub(crate) strides: Vec<Vec<isize>>,
}

/// Normalises `shape` with one stride vector per operand (all of `shape`'s length, in
/// elements). The first operand should be an output (no zero strides), which decides the order
/// of the axes.
pub(crate) fn normalize<S: AsRef<[isize]>>(shape: &[usize], strides: &[S]) -> Normalized {
    let mut axes: Vec<usize> = (0..shape.len()).filter(|&k| shape[k] != 1).collect();
    if let Some(first) = strides.first() {
        // Stable, so that equal strides (broadcast axes of the first operand) keep their order.
        let first = first.as_ref();
        axes.sort_by_key(|&k| std::cmp::Reverse(first[k].unsigned_abs()));
    }
    let mut out_shape: Vec<usize> = Vec::new();
    let mut out_strides: Vec<Vec<isize>> = vec![Vec::new(); strides.len()];
    for &k in &axes {
        let len = shape[k];
        if let Some(&prev) = out_shape.last() {
            // The previous (outer) axis absorbs this one when, for every operand, stepping the
            // outer axis once is stepping this one `len` times.
            let merge = strides.iter().zip(&out_strides).all(|(s, o)| {
                let outer = *o.last().unwrap();
                s.as_ref()[k].checked_mul(len as isize) == Some(outer)
            });
            if merge {
                let last = out_shape.len() - 1;
                out_shape[last] = prev * len;
                for (o, s) in out_strides.iter_mut().zip(strides) {
                    *o.last_mut().unwrap() = s.as_ref()[k];
                }
                continue;
            }
        }
        out_shape.push(len);
        for (o, s) in out_strides.iter_mut().zip(strides) {
            o.push(s.as_ref()[k]);
        }
    }
    if out_shape.is_empty() {
        out_shape.push(1);
        for o in &mut out_strides {
            o.push(1);
        }
    }
    Normalized {
        shape: out_shape,
        strides: out_strides,
    }
}

impl Normalized {
    /// Number of elements.
    pub(crate) fn len(&self) -> usize {
        self.shape.iter().product()
    }

    /// Whether 32-bit index arithmetic covers every element and every offset: fewer than 2^31
    /// elements, and every operand's offsets within ±2^31 elements of its first element.
    pub(crate) fn fits_32(&self) -> bool {
        if self.len() >= 1 << 31 {
            return false;
        }
        self.strides.iter().all(|s| {
            let reach: u128 = s
                .iter()
                .zip(&self.shape)
                .map(|(&st, &len)| st.unsigned_abs() as u128 * (len as u128 - 1))
                .sum();
            reach < 1 << 31
        })
    }

    /// Whether to walk the last two axes in tiles: both at least [`TILE`] / 2 long, and some
    /// operand steps the second-to-last axis with a smaller stride than the last (its fastest
    /// axis is not the first operand's).
    pub(crate) fn tiled(&self) -> bool {
        let r = self.shape.len();
        r >= 2
            && self.shape[r - 2] >= TILE / 2
            && self.shape[r - 1] >= TILE / 2
            && self.strides.iter().any(|s| runs_across(s))
    }

    /// For each operand from `first` on (the array inputs, of `types`), whether the tiled
    /// variant (with `pairs` or without) stages it through shared memory: its fastest axis is
    /// the second-to-last, and the staged tiles fit in [`STAGE_BYTES`]. Without pairs a staged
    /// tile holds `TILE` x (`TILE` + 1) elements of its body type, with pairs `PAIR_TILE` x
    /// `PAIR_TILE` of its own type.
    pub(crate) fn staged(&self, first: usize, types: &[DType], pairs: bool) -> Vec<bool> {
        let mut bytes = 0;
        self.strides[first..]
            .iter()
            .zip(types)
            .map(|(s, &t)| {
                let across = runs_across(s);
                let tile = if pairs {
                    PAIR_TILE * PAIR_TILE * t.size()
                } else {
                    TILE * (TILE + 1) * body_size(t)
                };
                if across && bytes + tile <= STAGE_BYTES {
                    bytes += tile;
                    true
                } else {
                    false
                }
            })
            .collect()
    }

    /// Indices the kernel iterates over: the elements, or for the tiled variant the slots of
    /// every whole tile of the last two axes (some past the extents): `TILE * TILE` slots of
    /// one element per tile, or with `pairs` `PAIR_TILE * PAIR_TILE / 2` slots of two
    /// neighbours along the last axis.
    pub(crate) fn iterations(&self, tiled: bool, pairs: bool) -> usize {
        if !tiled {
            return self.len();
        }
        let r = self.shape.len();
        let outer: usize = self.shape[..r - 2].iter().product();
        let (side, slots) = if pairs {
            (PAIR_TILE, PAIR_TILE * PAIR_TILE / 2)
        } else {
            (TILE, TILE * TILE)
        };
        outer * self.shape[r - 2].div_ceil(side) * self.shape[r - 1].div_ceil(side) * slots
    }

    /// Whether operand `k` can move pairs of neighbours as one access in the tiled variant
    /// with pairs: along the second-to-last axis when it is `staged`, else along the last.
    /// That axis must have stride 1 and every other stride be even, so that every pair starts
    /// at an even element, and element zero (at `addr`, elements of `size` bytes) must be
    /// aligned to a pair.
    pub(crate) fn pairable(&self, k: usize, staged: bool, addr: u64, size: usize) -> bool {
        let s = &self.strides[k];
        let r = s.len();
        if r < 2 {
            return false;
        }
        let axis = if staged { r - 2 } else { r - 1 };
        s[axis] == 1
            && s.iter()
                .enumerate()
                .all(|(i, &st)| i == axis || st % 2 == 0)
            && addr % (2 * size as u64) == 0
    }

    /// Whether every operand in `arrays` is one contiguous run (one axis, stride 1).
    pub(crate) fn contiguous(&self) -> bool {
        self.shape.len() == 1 && self.strides.iter().all(|s| s[0] == 1)
    }
}

/// Whether an operand with these strides (of at least two axes) runs along the second-to-last
/// axis rather than the last: it steps the second-to-last, and by less than the last (or the
/// last is broadcast).
fn runs_across(s: &[isize]) -> bool {
    let r = s.len();
    s[r - 2] != 0 && (s[r - 1] == 0 || s[r - 2].unsigned_abs() < s[r - 1].unsigned_abs())
}
