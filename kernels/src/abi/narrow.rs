//! The narrow-axis tiled kernels: tiled copies whose tile is a narrow axis of `C` channels and
//! a run of pixels, moved as 16-byte vectors on both sides with the channels split or joined
//! in registers.
//!
//! `copy_split_cC_bN(args: TiledArgs)` copies interleaved pixels (`C` consecutive elements of
//! `N` = 1, 4 or 8 bytes each, as in HWC or NHWC) into `C` planes (CHW, NCHW); `copy_join_cC_bN(args)`
//! does the reverse. They take the [`TiledArgs`] of a vector tiled plan whose tile has exactly
//! these two axes ([`tiled_narrow`] says which plans qualify), so that the planner, its
//! remainders and the batch axes are those of the tiled path; only the kernel differs.
//!
//! A *group* is `V = 16 / N` pixels: one 16-byte vector of one plane, `C` vectors of the
//! interleaved side. A *chunk* is up to 32 groups of one tile, moved by one warp: the
//! interleaved side's `C` vectors per group go through the warp's part of shared memory
//! ([`narrow_warp_bytes`]) so that every global load and store of the warp covers consecutive
//! 16-byte vectors, and each lane splits or joins its group's `C` vectors in registers
//! (`prmt` for 1- and 2-byte elements). Block [`NARROW_THREADS`] threads, one chunk per warp
//! at a time (the warps synchronise alone, with `bar.warp.sync`); the grid ([`narrow_grid`]) loops over the chunks of all tiles in tile order.
//!
//! `copy_join_shifted_cC_bN` and `copy_split_shifted_cC_bN` take planes at any alignment
//! beside an aligned interleaved side ([`Narrow::shifted`], plans of
//! [`TiledArgs::new_shifted`]), for 4- and 8-byte units from 5 channels on only
//! ([`narrow_shifted_exists`]). The misalignment is the same for every lane of a warp (its
//! vectors of one plane lie 16 bytes apart), so a join's lane shifts its vector out of the
//! aligned 16-byte block that holds its first byte and the next block, and a split's lane stores the aligned block made of its
//! neighbour's vector (`shfl.sync.up`) and its own, the bytes at the two ends of the warp's
//! part of a plane going out one per lane.

use super::tiled::{TILED_SHIFTED_DEST, TILED_SHIFTED_SOURCE, TiledArgs};

/// Threads per block of the narrow kernels: 4 warps, also the most their PTX allows
/// (`.maxntid`; any multiple of 32 up to it is correct).
pub const NARROW_THREADS: u32 = 128;
/// Element sizes of the narrow kernels whose planes are aligned. Those copies of 2-byte
/// elements stay on the tiled kernels (`copy_tiled_a_b2`, `copy_tiled_b2`): on the H200 they
/// ran those layouts 0.017 to 0.030 of a memcpy faster than a narrow kernel for 2 to 8
/// channels, both directions.
pub const NARROW_SIZES: [usize; 3] = [1, 4, 8];
/// Element sizes of the shifted narrow kernels ([`Narrow::shifted`]): 2-byte elements too,
/// whose planes off their alignment have no vector tiles and would otherwise run on the
/// element-wise ones.
pub const NARROW_SHIFTED_SIZES: [usize; 4] = [1, 2, 4, 8];

// Every size of an aligned narrow kernel has shifted ones too ([`Kernel::all`] lists the
// aligned kernels among the shifted sizes).
const _: () = {
    let mut i = 0;
    while i < NARROW_SIZES.len() {
        let mut found = false;
        let mut j = 0;
        while j < NARROW_SHIFTED_SIZES.len() {
            found |= NARROW_SIZES[i] == NARROW_SHIFTED_SIZES[j];
            j += 1;
        }
        assert!(found, "NARROW_SIZES must be among NARROW_SHIFTED_SIZES");
        i += 1;
    }
};

/// Fewest channels of a shifted narrow kernel of 4- or 8-byte units: with fewer, the
/// element-wise tiles ran those copies faster (the planner's `shifted_pays`), so there are no
/// such kernels.
pub const NARROW_SHIFTED_MIN_CHANNELS_B4: u32 = 5;

/// Whether a shifted narrow kernel ([`Narrow::shifted`]) of `channels` channels of `size`-byte
/// units exists: every size of [`NARROW_SHIFTED_SIZES`] from [`NARROW_MIN_CHANNELS`] to
/// [`NARROW_MAX_CHANNELS`] channels, but 4- and 8-byte units only from
/// [`NARROW_SHIFTED_MIN_CHANNELS_B4`].
pub fn narrow_shifted_exists(size: usize, channels: u32) -> bool {
    let least = if size >= 4 {
        NARROW_SHIFTED_MIN_CHANNELS_B4
    } else {
        NARROW_MIN_CHANNELS
    };
    NARROW_SHIFTED_SIZES.contains(&size) && (least..=NARROW_MAX_CHANNELS).contains(&channels)
}

/// Fewest channels of a narrow kernel.
pub const NARROW_MIN_CHANNELS: u32 = 2;
/// Most channels of a narrow kernel: a lane holds `2 C` vectors in registers, and a block
/// `NARROW_THREADS / 32 * 512 * C` bytes of shared memory.
pub const NARROW_MAX_CHANNELS: u32 = 16;

/// The narrow kernel that runs a tiled plan: its channel count and direction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Narrow {
    /// Channels `C`: the extent of the narrow axis.
    pub channels: u32,
    /// `false`: interleaved source, planar destination (`copy_split_*`); `true`: planar
    /// source, interleaved destination (`copy_join_*`).
    pub join: bool,
    /// Planes at any alignment (`copy_join_shifted_*`, `copy_split_shifted_*`; a plan of
    /// [`TiledArgs::new_shifted`]): a join's lane reads its vector of a plane through the two
    /// aligned 16-byte blocks that cover it and shifts it into place; a split's lane stores
    /// the aligned block that ends inside its vector, made of the previous lane's vector and
    /// its own, and the blocks at the ends of each warp's part of a plane go out byte by
    /// byte.
    pub shifted: bool,
}

/// The 16-byte slot in a warp's shared memory of the chunk's interleaved vector `i`: `i`, and
/// for 2 channels or a multiple of 4 `i + i / 8` (a free slot after every 8), so that the
/// lanes of a quarter warp reading their groups' vectors (`C` apart) hit distinct banks (2, 4
/// and 8 channels) or at most two lanes per bank (the others).
pub const fn narrow_slot(i: u32, channels: u32) -> u32 {
    if narrow_padded(channels) {
        i + i / 8
    } else {
        i
    }
}

/// Whether [`narrow_slot`] leaves free slots for `channels` channels.
pub const fn narrow_padded(channels: u32) -> bool {
    channels == 2 || channels % 4 == 0
}

/// Bytes of shared memory per warp of the narrow kernel with `channels` channels: the slots
/// of a chunk's `32 C` interleaved vectors.
pub const fn narrow_warp_bytes(channels: u32) -> u32 {
    16 * (narrow_slot(32 * channels - 1, channels) + 1)
}

/// Static shared memory of the narrow kernel with `channels` channels.
pub const fn narrow_smem_bytes(channels: u32) -> u32 {
    NARROW_THREADS / 32 * narrow_warp_bytes(channels)
}

/// The narrow kernel for the tiled copy `args` of elements of `size` bytes (a copy, not a
/// cast), if one takes it: elements of 1, 4 or 8 bytes ([`NARROW_SIZES`]; 2 bytes too for the
/// shifted kernels, [`NARROW_SHIFTED_SIZES`]), a tile of exactly
/// two axes, a channel axis of
/// [`NARROW_MIN_CHANNELS`] to [`NARROW_MAX_CHANNELS`] elements (for the shifted kernels of 4-
/// and 8-byte elements, from [`NARROW_SHIFTED_MIN_CHANNELS_B4`]: [`narrow_shifted_exists`])
/// and a pixel axis whose piece is
/// a multiple of the pixels of one 16-byte vector, where
/// - split: the source holds each tile as `piece` pixels of `C` consecutive channels
///   (channel stride 1, pixel stride `C`) and the destination as `C` planes of consecutive
///   pixels (pixel stride 1, any plane stride);
/// - join: the reverse (source planes, interleaved destination);
///
/// and every address the kernel forms is 16-byte aligned: both operands' element zero, the
/// plane stride and every batch stride in bytes; chunks of all tiles fewer than 2^31. A join
/// planned by [`TiledArgs::new_shifted`] with a shifted source ([`TILED_SHIFTED_SOURCE`])
/// needs this of the destination side alone and runs on a shifted join kernel; a split with
/// a shifted destination ([`TILED_SHIFTED_DEST`]), of the source side alone, on a shifted
/// split kernel.
pub fn tiled_narrow(args: &TiledArgs, size: usize) -> Option<Narrow> {
    let shifted = matches!(args.vector, TILED_SHIFTED_SOURCE | TILED_SHIFTED_DEST);
    let sizes: &[usize] = if shifted {
        &NARROW_SHIFTED_SIZES
    } else {
        &NARROW_SIZES
    };
    if !sizes.contains(&size) || args.tile_rank != 2 {
        return None;
    }
    let s = size as i64;
    let v = 16 / size as u32;
    let (r, w) = (&args.read, &args.write);
    let c_ok = |c: u32| (NARROW_MIN_CHANNELS..=NARROW_MAX_CHANNELS).contains(&c);
    let (narrow, piece, plane) = if c_ok(r[0].len)
        && r[0].src == 1
        && r[1].src == r[0].len as i32
        && w[0].len == r[1].len
        && w[0].dst == 1
        && w[0].read == r[0].len
        && w[1].len == r[0].len
        && w[1].read == 1
    {
        let n = Narrow {
            channels: r[0].len,
            join: false,
            shifted: args.vector == TILED_SHIFTED_DEST,
        };
        (n, r[1].len, w[1].dst)
    } else if c_ok(r[1].len)
        && r[0].src == 1
        && w[0].len == r[1].len
        && w[0].dst == 1
        && w[0].read == r[0].len
        && w[1].len == r[0].len
        && w[1].dst == r[1].len as i32
        && w[1].read == 1
    {
        let n = Narrow {
            channels: r[1].len,
            join: true,
            shifted: args.vector == TILED_SHIFTED_SOURCE,
        };
        (n, r[0].len, r[1].src)
    } else {
        return None;
    };
    if narrow.shifted && !narrow_shifted_exists(size, narrow.channels) {
        return None;
    }
    // Wrapping: the residue modulo 16 of the product survives it.
    let aligned = |elems: i64| elems.wrapping_mul(s) % 16 == 0;
    let batch = &args.batch[..args.batch_rank as usize];
    // A shifted join takes tiles of shifted sources, a shifted split of shifted
    // destinations; the planes' side of either may start anywhere.
    let (src_free, dst_free) = match args.vector {
        TILED_SHIFTED_SOURCE if narrow.join => (true, false),
        TILED_SHIFTED_DEST if !narrow.join => (false, true),
        TILED_SHIFTED_SOURCE | TILED_SHIFTED_DEST => return None,
        _ => (false, false),
    };
    let plane_ok = src_free || dst_free || aligned(i64::from(plane));
    let src_ok = src_free || (args.src % 16 == 0 && batch.iter().all(|b| aligned(b.src)));
    let dst_ok = dst_free || (args.dst % 16 == 0 && batch.iter().all(|b| aligned(b.dst)));
    if piece % v != 0
        || !plane_ok
        || !src_ok
        || !dst_ok
        || narrow_items(args, size, narrow) >= 1 << 31
    {
        return None;
    }
    Some(narrow)
}

/// Pixels of one tile of the narrow plan `args` ([`tiled_narrow`]).
pub fn narrow_piece(args: &TiledArgs, n: Narrow) -> u32 {
    if n.join {
        args.read[0].len
    } else {
        args.read[1].len
    }
}

/// Chunks (up to 32 vectors of pixels, one warp's work) of all tiles of the narrow plan
/// `args` of elements of `size` bytes.
pub fn narrow_items(args: &TiledArgs, size: usize, n: Narrow) -> u64 {
    let per_chunk = 32 * 16 / size as u64;
    u64::from(args.tiles) * u64::from(narrow_piece(args, n)).div_ceil(per_chunk)
}

/// Grid (x) of a narrow kernel over `items` chunks ([`narrow_items`]) on a device that keeps
/// `resident` of its blocks resident: one block per [`NARROW_THREADS`] / 32 chunks up to one
/// wave of resident blocks, whose blocks then loop; 0 when there is nothing to do.
pub fn narrow_grid(items: u64, resident: u64) -> u32 {
    items
        .div_ceil(u64::from(NARROW_THREADS / 32))
        .min(resident.max(1))
        .min(i32::MAX as u64) as u32
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::abi::TiledAxis;

    fn ax(len: u64, dst: i64, src: i64) -> TiledAxis {
        TiledAxis { len, dst, src }
    }

    /// HWC -> CHW of `c` channels, `p` pixels per plane, tiles of `piece` pixels.
    fn split(c: u64, p: u64, piece: u64, size: usize) -> Option<TiledArgs> {
        let read = [ax(c, p as i64, 1), ax(piece, 1, c as i64)];
        let batch = [ax(p / piece, piece as i64, (piece * c) as i64)];
        TiledArgs::new(0x1000, 0x8000, &read, &[1, 0], &batch, true, size, size)
    }

    /// CHW -> HWC.
    fn join(c: u64, p: u64, piece: u64, size: usize) -> Option<TiledArgs> {
        let read = [ax(piece, c as i64, 1), ax(c, 1, p as i64)];
        let batch = [ax(p / piece, (piece * c) as i64, piece as i64)];
        TiledArgs::new(0x1000, 0x8000, &read, &[1, 0], &batch, true, size, size)
    }

    #[test]
    fn splits_and_joins_of_narrow_axes_take_the_narrow_kernels() {
        for size in NARROW_SIZES {
            for c in [2u64, 3, 5, 16] {
                let piece = 512 / size as u64;
                let a = split(c, 1 << 16, piece, size).unwrap();
                let n = tiled_narrow(&a, size).unwrap();
                assert_eq!(
                    (n.channels, n.join),
                    (c as u32, false),
                    "split c={c} b{size}"
                );
                assert_eq!(narrow_piece(&a, n), piece as u32);
                // One chunk (32 vectors of pixels) per tile.
                assert_eq!(narrow_items(&a, size, n), (1 << 16) / piece);
                let a = join(c, 1 << 16, piece, size).unwrap();
                let n = tiled_narrow(&a, size).unwrap();
                assert_eq!((n.channels, n.join), (c as u32, true), "join c={c} b{size}");
            }
        }
    }

    #[test]
    fn other_tiles_keep_the_tiled_kernels() {
        // 17 channels, or 1: too many or none to split.
        assert_eq!(tiled_narrow(&split(17, 4096, 64, 4).unwrap(), 4), None);
        // Sizes other than 1, 4, 8.
        assert_eq!(tiled_narrow(&split(3, 4096, 256, 4).unwrap(), 3), None);
        assert_eq!(tiled_narrow(&split(3, 4096, 256, 2).unwrap(), 2), None);
        // A piece that is not whole vectors.
        let mut a = split(3, 4096, 256, 4).unwrap();
        a.read[1].len = 250;
        a.write[0].len = 250;
        assert_eq!(tiled_narrow(&a, 4), None);
        // A plane stride that is not a multiple of 16 bytes.
        let mut a = split(3, 4096, 256, 4).unwrap();
        a.write[1].dst = 4098;
        assert_eq!(tiled_narrow(&a, 4), None);
        // Misaligned operands.
        let mut a = split(3, 4096, 256, 4).unwrap();
        a.src += 4;
        assert_eq!(tiled_narrow(&a, 4), None);
        let mut a = join(3, 4096, 256, 4).unwrap();
        a.dst += 8;
        assert_eq!(tiled_narrow(&a, 4), None);
        // A batch stride that is not a multiple of 16 bytes.
        let mut a = join(3, 4096, 256, 1).unwrap();
        a.batch[0].src = 3;
        assert_eq!(tiled_narrow(&a, 1), None);
        // A source whose channels are not adjacent (stride 2).
        let mut a = split(3, 4096, 256, 4).unwrap();
        a.read[0].src = 2;
        assert_eq!(tiled_narrow(&a, 4), None);
        // Three tile axes.
        let read = [ax(3, 4096, 1), ax(16, 1, 3), ax(4, 16, 48)];
        let a = TiledArgs::new(0, 0, &read, &[1, 2, 0], &[], true, 4, 4).unwrap();
        assert_eq!(tiled_narrow(&a, 4), None);
    }

    #[test]
    fn two_byte_elements_take_only_the_shifted_kernels() {
        // Aligned planes of 2-byte elements keep the tiled kernels.
        assert_eq!(tiled_narrow(&split(3, 4096, 256, 2).unwrap(), 2), None);
        assert_eq!(tiled_narrow(&join(3, 4096, 256, 2).unwrap(), 2), None);
        // Planes off their alignment (one element in, an odd plane stride) beside an aligned
        // interleaved side: the shifted kernels, both directions.
        let (c, p, piece) = (3u64, 4095u64, 256u64);
        let read = [ax(piece, c as i64, 1), ax(c, 1, p as i64)];
        let batch = [ax(p / piece, (piece * c) as i64, piece as i64)];
        let a = TiledArgs::new_shifted(0x1000, 0x8002, &read, &[1, 0], &batch, 2, 2, true).unwrap();
        let shifted_join = Narrow {
            channels: 3,
            join: true,
            shifted: true,
        };
        assert_eq!(tiled_narrow(&a, 2), Some(shifted_join));
        let read = [ax(c, p as i64, 1), ax(piece, 1, c as i64)];
        let batch = [ax(p / piece, piece as i64, (piece * c) as i64)];
        let a =
            TiledArgs::new_shifted(0x8002, 0x1000, &read, &[1, 0], &batch, 2, 2, false).unwrap();
        assert_eq!(
            tiled_narrow(&a, 2),
            Some(Narrow {
                join: false,
                ..shifted_join
            })
        );
        // Pieces must still be whole vectors (8 elements): 4 channels of 252 pixels line up
        // on the interleaved side but cover part of a vector on the planes.
        let read = [ax(252, 4, 1), ax(4, 1, p as i64)];
        let batch = [ax(p / 252, 252 * 4, 252)];
        let a = TiledArgs::new_shifted(0x1000, 0x8002, &read, &[1, 0], &batch, 2, 2, true).unwrap();
        assert_eq!(tiled_narrow(&a, 2), None);
    }

    #[test]
    fn shifted_tiles_of_wide_units_need_five_channels() {
        // Planes one element off their alignment beside an aligned interleaved side, f64:
        // 5 channels take the shifted join kernel, 3 channels none (the element-wise tiles
        // run them).
        let (p, piece) = (4095u64, 256u64);
        let shifted_join = |c: u64| {
            let read = [ax(piece, c as i64, 1), ax(c, 1, p as i64)];
            let batch = [ax(p / piece, (piece * c) as i64, piece as i64)];
            let a =
                TiledArgs::new_shifted(0x1000, 0x8008, &read, &[1, 0], &batch, 8, 8, true).unwrap();
            tiled_narrow(&a, 8)
        };
        let five = Narrow {
            channels: 5,
            join: true,
            shifted: true,
        };
        assert_eq!(shifted_join(5), Some(five));
        assert_eq!(shifted_join(3), None);
    }

    #[test]
    fn chunks_round_up() {
        // 48 vectors of f32 pixels per tile: a whole chunk and half of one.
        let a = split(3, 192 * 16, 192, 4).unwrap();
        let n = tiled_narrow(&a, 4).unwrap();
        assert_eq!(narrow_items(&a, 4, n), 16 * 2);
    }

    #[test]
    fn negative_plane_and_batch_strides_are_taken_when_aligned() {
        let read = [ax(64, 3, 1), ax(3, 1, -4096)];
        let batch = [ax(8, 192, -64)];
        let a = TiledArgs::new(0x10000, 0x90000, &read, &[1, 0], &batch, true, 4, 4).unwrap();
        assert_eq!(
            tiled_narrow(&a, 4),
            Some(Narrow {
                channels: 3,
                join: true,
                shifted: false,
            })
        );
    }

    #[test]
    fn grid_and_shared_memory() {
        assert_eq!(narrow_grid(0, 100), 0);
        assert_eq!(narrow_grid(9, 100), 3);
        assert_eq!(narrow_grid(1 << 20, 100), 100);
        assert_eq!(narrow_smem_bytes(3), 4 * 512 * 3);
        assert_eq!(narrow_smem_bytes(16), 4 * 16 * (512 + 63));
        // The quarter warp's reads of its groups' first vectors: 8 distinct 16-byte units of a
        // 128-byte line for 2, 4 and 8 channels (up to 8-way conflicts without the free
        // slots), at most 2 lanes per unit for the other even counts.
        for c in [2u32, 4, 6, 8, 10, 12, 14, 16] {
            let mut per_unit = [0; 8];
            for l in 0..8 {
                per_unit[(narrow_slot(l * c, c) % 8) as usize] += 1;
            }
            let most = per_unit.into_iter().max().unwrap();
            assert!(
                most <= if [2, 4, 8].contains(&c) { 1 } else { 2 },
                "{c} channels"
            );
        }
    }
}
