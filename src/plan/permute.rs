//! The permute path: tiles over the destination's and the source's fastest axes.

use super::{Normalized, PAxis};
use devspan_kernels::abi::{
    PERMUTE_AXES, PERMUTE_PACKED_TILE, PERMUTE_SMALL_TILE, PERMUTE_TILE, PERMUTE_VEC_TILE,
    PermuteArgs, PermuteAxis, wide_tile,
};

/// Which packed kernels a copy may take (casts take none).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Packing {
    /// None: element-wise kernels only.
    None,
    /// The 64-slot packed kernels only.
    Small,
    /// Either word-packed kernel, not the vector kernel.
    Words,
    /// Any packed kernel, the vector kernel first.
    Any,
}

/// Shortest contiguous run (slots, bytes for these 1-byte elements) on either side for the
/// 128-slot packed tiles: with shorter runs the 64-slot tiles are faster, with runs of 32 bytes
/// and longer the 128-slot ones.
const PACKED128_MIN_RUN: u64 = 32;

/// Fewest slots on each side of a tile for the permute path to pay off.
pub(crate) const PERMUTE_MIN_SIDE: u64 = 8;

fn tile_axis(a: &PAxis, chunk: u64) -> PermuteAxis {
    PermuteAxis {
        len: a.len as u64,
        chunk,
        dst: a.dst as i64,
        src: a.src as i64,
    }
}

const UNUSED: PermuteAxis = PermuteAxis {
    len: 1,
    chunk: 1,
    dst: 0,
    src: 0,
};

/// Picks the next axis of a tile side: the unused axis with the smallest `|key|` (non-zero).
pub(super) fn fastest(
    axes: &[PAxis],
    used: &[usize],
    key: impl Fn(&PAxis) -> isize,
) -> Option<usize> {
    (0..axes.len())
        .filter(|k| !used.contains(k) && key(&axes[*k]) != 0)
        .min_by_key(|&k| (key(&axes[k]).unsigned_abs(), k))
}

/// The permute kernels' arguments for normalised axes (innermost in the destination first)
/// whose fastest source axis is not the destination's fastest axis, or `None` when the tiles
/// would be too small on either side, more than four batch axes remain, or the arguments do
/// not fit.
///
/// Side A takes the destination's fastest axis (in pieces of at most `T` elements) and, when
/// that axis has at most `T / 2` elements, the next fastest destination axis in pieces that
/// fill the side; side B does the same with the source's fastest axes among the rest. Every other
/// axis is a batch axis, in destination order.
///
/// When only these two axes remain and one of them is at most `T / 2` long, the other one
/// (a multiple of `T`, at least `2 T` long) is split into an inner axis of `T` elements, which
/// stays the first axis of its side, and an outer one, which fills the short side, so that
/// tiles are full. With more axes, a side left without a second axis takes the outer part of
/// the other side's second axis ([`share_second_axis`]) where the arguments still fit.
///
/// Copies (`packing`) of 1-byte elements whose 16-byte vectors line up take the vector
/// kernel ([`PermuteArgs::vectorized`], tiles of [`PERMUTE_VEC_TILE`] slots) when its tiles
/// are full or filled at least as well as the 64-slot packed kernel's. Otherwise copies of 1- and
/// 2-byte elements whose words line up take a packed kernel ([`PermuteArgs::packed`]): for
/// 1-byte elements, tiles of
/// [`PERMUTE_PACKED_TILE`] slots when they are full or filled better than tiles of
/// [`PERMUTE_TILE`], and their rows hold contiguous runs of at least 32 bytes on both sides;
/// else those.
///
/// Otherwise `T` is [`PERMUTE_TILE`]; when those tiles cannot be filled (a side's axes hold
/// fewer slots) and tiles of [`PERMUTE_SMALL_TILE`] are filled better, the small kernels take
/// the copy: half-empty large tiles leave half of their threads idle.
pub(crate) fn permute_args(
    norm: &Normalized,
    dst: u64,
    src: u64,
    src_size: usize,
    dst_size: usize,
    packing: Packing,
) -> Option<PermuteArgs> {
    // Share of the tile's slots that the plan's sides use.
    let fill = |a: &PermuteArgs| {
        let used = a.chunk[0] * a.chunk[1] * a.chunk[2] * a.chunk[3];
        used as f64 / (u64::from(a.tile) * u64::from(a.tile)) as f64
    };
    let large = tiled_args(norm, dst, src, src_size, dst_size, PERMUTE_TILE)
        .map(|a| a.with_word_stores(dst_size));
    if packing != Packing::None && src_size == dst_size && src_size <= 2 {
        let packed = large.and_then(|a| a.packed(src_size));
        let vec = (packing == Packing::Any && src_size == 1)
            .then(|| tiled_args(norm, dst, src, 1, 1, PERMUTE_VEC_TILE))
            .flatten()
            .and_then(|a| a.vectorized(1));
        if let Some(v) = vec
            && (fill(&v) >= 1.0 || packed.is_none_or(|s| fill(&v) >= fill(&s)))
        {
            return Some(v);
        }
        let packed128 = (matches!(packing, Packing::Words | Packing::Any) && src_size == 1)
            .then(|| tiled_args(norm, dst, src, src_size, dst_size, PERMUTE_PACKED_TILE))
            .flatten()
            .and_then(|a| a.packed(src_size));
        // Slots in a row of one contiguous run: along A in the destination, along B in the
        // source (packed plans have stride 1 on axes 0 and 2).
        let run = |a: &PermuteArgs| {
            let side = |lo: usize, strides: &[i64]| {
                let whole = a.chunk[lo] == a.len[lo] && strides[lo + 1] == a.len[lo] as i64;
                a.chunk[lo] * if whole { a.chunk[lo + 1] } else { 1 }
            };
            side(0, &a.dst_strides).min(side(2, &a.src_strides))
        };
        let best = match (packed128, packed) {
            (Some(l), Some(s)) => Some(
                if run(&l) >= PACKED128_MIN_RUN && (fill(&l) >= 1.0 || fill(&l) > fill(&s)) {
                    l
                } else {
                    s
                },
            ),
            // Only one size applies (as a rule the 64-slot one: a layout that packs in 128-slot
            // tiles packs in 64-slot ones too).
            (l, s) => l.or(s),
        };
        if best.is_some() {
            return best;
        }
    }
    if let Some(a) = large
        && fill(&a) >= 1.0
    {
        return Some(a);
    }
    let small = tiled_args(norm, dst, src, src_size, dst_size, PERMUTE_SMALL_TILE);
    match (large, small) {
        (Some(l), Some(s)) => Some(if fill(&s) > fill(&l) { s } else { l }),
        (l, s) => l.or(s),
    }
}

/// The wide kernels' arguments for a copy of `size`-byte elements whose normalised axis 0 has
/// stride 1 on both sides (a run of `len` elements that every other index moves as a whole),
/// or `None`: the run must be 16, 32 or 64 bytes long and 16-byte aligned everywhere (both
/// bases and every other stride on both sides multiples of 16 bytes), and the other axes must
/// be a permutation that the tiled path takes (see [`permute_args`]), with slots of one run,
/// filling at least [`WIDE_MIN_FILL`] of the tile.
/// A warp then moves whole runs of 16-byte vectors on both sides, where the row kernels would
/// give each short run a team of lanes and issue per-run index math.
pub(crate) fn wide_args(norm: &Normalized, dst: u64, src: u64, size: usize) -> Option<PermuteArgs> {
    let run = norm.axes.first()?;
    if run.dst != 1 || run.src != 1 || dst % 16 != 0 || src % 16 != 0 {
        return None;
    }
    let bytes = run.len.checked_mul(size)?;
    let v = (bytes % 16 == 0).then_some(bytes as u64 / 16)?;
    let t = wide_tile(v)?;
    let units = |stride: isize| {
        let b = stride.checked_mul(size as isize)?;
        (b % 16 == 0).then_some(b / 16)
    };
    let axes = norm.axes[1..]
        .iter()
        .map(|a| {
            Some(PAxis {
                len: a.len,
                dst: units(a.dst)?,
                src: units(a.src)?,
            })
        })
        .collect::<Option<Vec<PAxis>>>()?;
    let outer = Normalized {
        axes,
        dst_off: 0,
        src_off: 0,
        n: norm.n / run.len,
    };
    let args = tiled_args(&outer, dst, src, 16, 16, t)?.widened(v)?;
    let used = args.chunk[..4].iter().product::<u64>();
    (used as f64 >= WIDE_MIN_FILL * (t * t) as f64).then_some(args)
}

/// Smallest share of a wide tile's slots that the tile axes must fill for the wide kernels to
/// take a copy (else the row kernels do): the wide kernels are faster than the row kernels
/// through well-filled tiles, slower through tiles filled to a quarter.
const WIDE_MIN_FILL: f64 = 0.5;

/// Fills a short side from the other side's second axis: when `short` has no second axis and
/// room for one (its first piece is at most `t / 2` slots; no axis with a non-zero stride of
/// its operand was left for it), and
/// `full`'s second axis is longer than its piece and a multiple of it, that axis is split into
/// an inner axis of one piece, which stays with `full`, and an outer one (strides times the
/// piece), which becomes `short`'s second axis. A tile then covers whole pieces of the split
/// axis on both sides instead of leaving half of its slots idle: in a batch of 16 x 32
/// transposes, 4 matrices on one side times 2 on the other make a full 64 x 64 tile. Returns
/// whether it split.
fn share_second_axis(full: &mut [PermuteAxis; 2], short: &mut [PermuteAxis; 2], t: u64) -> bool {
    let k = full[1];
    if short[1] != UNUSED
        || short[0].chunk > t / 2
        || k == UNUSED
        || k.len <= k.chunk
        || k.len % k.chunk != 0
    {
        return false;
    }
    let c = k.chunk as i64;
    let (Some(dst), Some(src)) = (k.dst.checked_mul(c), k.src.checked_mul(c)) else {
        return false;
    };
    let outer = k.len / k.chunk;
    full[1].len = k.chunk;
    short[1] = PermuteAxis {
        len: outer,
        chunk: outer.min(t / short[0].chunk),
        dst,
        src,
    };
    true
}

/// [`permute_args`] with tiles of `t` x `t` slots, not packed.
fn tiled_args(
    norm: &Normalized,
    dst: u64,
    src: u64,
    src_size: usize,
    dst_size: usize,
    t: u64,
) -> Option<PermuteArgs> {
    let mut axes = norm.axes.clone();
    let r = axes.len();
    if r < 2 {
        return None;
    }
    let a0 = fastest(&axes, &[], |a| a.dst)?;
    let b0 = fastest(&axes, &[a0], |a| a.src)?;
    let (sa, sb) = (axes[a0].src.unsigned_abs(), axes[b0].src.unsigned_abs());
    if sa != 0 && sb >= sa {
        return None;
    }
    if r == 2 {
        let tu = t as usize;
        let split = |short: usize, long: usize| {
            axes[short].len <= tu / 2 && axes[long].len % tu == 0 && axes[long].len >= 2 * tu
        };
        let long = if split(a0, b0) {
            Some(b0)
        } else if split(b0, a0) {
            Some(a0)
        } else {
            None
        };
        if let Some(k) = long {
            let a = axes[k];
            let ti = tu as isize;
            axes[k].len = tu;
            axes.push(PAxis {
                len: a.len / tu,
                dst: a.dst.checked_mul(ti)?,
                src: a.src.checked_mul(ti)?,
            });
        }
    }
    let axes = &axes;
    let r = axes.len();
    let mut used = vec![a0, b0];
    let side = |first: usize, used: &mut Vec<usize>, key: fn(&PAxis) -> isize| {
        let c0 = (axes[first].len as u64).min(t);
        let mut pair = [tile_axis(&axes[first], c0), UNUSED];
        if c0 <= t / 2
            && let Some(k) = fastest(axes, used, key)
        {
            used.push(k);
            let c1 = (axes[k].len as u64).min(t / c0);
            pair[1] = tile_axis(&axes[k], c1);
        }
        pair
    };
    let a = side(a0, &mut used, |a| a.dst);
    let b = side(b0, &mut used, |a| a.src);
    let batch: Vec<PermuteAxis> = (0..r)
        .filter(|k| !used.contains(k))
        .map(|k| tile_axis(&axes[k], 1))
        .collect();
    if batch.len() > PERMUTE_AXES - 4 {
        return None;
    }
    let args = |a: [PermuteAxis; 2], b: [PermuteAxis; 2]| {
        if a[0].chunk * a[1].chunk < PERMUTE_MIN_SIDE || b[0].chunk * b[1].chunk < PERMUTE_MIN_SIDE
        {
            return None;
        }
        PermuteArgs::new(
            dst,
            src,
            [a[0], a[1], b[0], b[1]],
            &batch,
            t,
            src_size,
            dst_size,
        )
    };
    // The split sides where they fit (their outer axis has larger strides, so a tile may reach
    // past the kernels' 32-bit offsets where the unsplit sides do not), else the sides as built.
    let (mut sa, mut sb) = (a, b);
    let split = share_second_axis(&mut sa, &mut sb, t) || share_second_axis(&mut sb, &mut sa, t);
    split.then(|| args(sa, sb)).flatten().or_else(|| args(a, b))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Batches of 16 x 32 f32 transposes whose source batch stride is `s` elements.
    fn batch_of_transposes(s: isize) -> Normalized {
        Normalized {
            axes: vec![
                PAxis {
                    len: 16,
                    dst: 1,
                    src: 32,
                },
                PAxis {
                    len: 32,
                    dst: 16,
                    src: 1,
                },
                PAxis {
                    len: 8,
                    dst: 512,
                    src: s,
                },
            ],
            dst_off: 0,
            src_off: 0,
            n: 16 * 32 * 8,
        }
    }

    #[test]
    fn a_split_that_does_not_fit_falls_back_to_the_sides_as_built() {
        // The batch axis is shared: 4 matrices on side A, 2 on side B, full 64 x 64 tiles.
        let a = tiled_args(&batch_of_transposes(1 << 20), 0, 0, 4, 4, 64).unwrap();
        assert_eq!((a.len[1], a.chunk[1]), (4, 4));
        assert_eq!((a.len[3], a.chunk[3], a.src_strides[3]), (2, 2, 4 << 20));
        // With a source batch stride of 1.5e8 elements, side B's outer axis would reach
        // 6e8 elements (2.4e9 bytes) past the tile origin, beyond the kernels' 32-bit offsets;
        // the unsplit sides reach 4.5e8 elements (1.8e9 bytes) and fit.
        let a = tiled_args(&batch_of_transposes(150_000_000), 0, 0, 4, 4, 64).unwrap();
        assert_eq!((a.len[1], a.chunk[1]), (8, 4));
        assert_eq!((a.len[3], a.chunk[3]), (1, 1));
        // Too far for either: no tiled plan.
        assert!(tiled_args(&batch_of_transposes(200_000_000), 0, 0, 4, 4, 64).is_none());
    }
}
