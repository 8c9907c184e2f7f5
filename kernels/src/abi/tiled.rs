//! Argument blocks and geometry of the tiled kernels and of the rank-generic strided kernels.
//!
//! # Tiled kernels
//!
//! `copy_tiled_bN(args: TiledArgs)` and `cast_tiled_S_D(args: TiledArgs)` (16-byte vectors on
//! both sides), `copy_tiled_e_bN` and `cast_tiled_e_S_D` (one element per access) copy between
//! any two layouts through tiles in shared memory whose sides span several axes.
//!
//! A *tile* is a box of `volume` elements spanned by the *tile axes* (at most
//! [`TILED_MAX_TILE_AXES`]); every tile has the same shape, and the *batch axes* (at most
//! [`TILED_MAX_BATCH_AXES`]) place the tiles: tile `t < tiles` is split over
//! [`TiledArgs::batch`] (axis 0 fastest) into the element offsets of its first element. The
//! tile axes are listed twice:
//!
//! - in *read order* ([`TiledArgs::read`], the order of the source's strides): element `r`
//!   of a tile (`r < volume`, axis 0 fastest) lies at source offset
//!   `sum coord[k] * read[k].src`; the kernels read the source in this order, so a warp reads
//!   along the source's fastest axes, and keep element `r` at position `r` of the tile in
//!   shared memory (`r * size(D)` bytes, permuted in units of `max(4, size(D))` bytes
//!   against bank conflicts: [`tiled_smem_offset`]);
//! - in *write order* ([`TiledArgs::write`], the order of the destination's strides): element
//!   `w` lies at destination offset `sum coord[k] * write[k].dst` and at read-order position
//!   `sum coord[k] * write[k].read`; the kernels write the destination in this order.
//!
//! The vector kernels move `Vs` source elements per load and `Vd` destination elements per
//! store ([`tiled_vectors`]): every run of `Vs` consecutive read-order elements starting at a
//! multiple of `Vs` must be `Vs` consecutive source elements starting at a 16-byte aligned
//! address (and likewise `Vd` in write order for the destination), and `volume` a multiple of
//! both. Each thread moves [`tiled_per_thread`] elements per tile and phase; the block is
//! [`tiled_threads`] threads (at most [`tiled_max_threads`]), the smallest multiple of 32
//! that covers a tile; the grid [`tiled_grid`] loops over the tiles. Shared memory: static,
//! [`tiled_smem_bytes`], but for the `cp.async` kernels ([`Kind::TiledA`]), whose launch gives
//! them [`tiled_async_smem_bytes`] of dynamic shared memory for the plan's tile.
//!
//! # Rank-generic strided kernels
//!
//! `fill_stridedn_bN(args: StridedArgsN, value_bits: u64)`, `copy_stridedn_bN(args)` and
//! `cast_stridedn_S_D(args)` do what the strided kernels do for any number of axes up to
//! [`STRIDEDN_MAX_RANK`], with 64-bit index math: block [`STRIDED_BLOCK`](super::STRIDED_BLOCK)
//! threads, grid [`strided_grid`](super::strided_grid).

use super::DType;
use super::args::{FastDiv64, fast_div32, fast_div32_apply};
use super::kernel::Kind;
use super::param_block;

/// Most tile axes of [`TiledArgs`]: a tile holds at most [`TILED_WIDE_THREADS`] x 16 = 2^14
/// elements and every tile axis has at least 2, so 14 would do.
pub const TILED_MAX_TILE_AXES: usize = 16;
/// Most batch axes of [`TiledArgs`]. A destination that does not overlap itself with more
/// than 63 axes of extent 2 or more would hold 2^64 elements, so every layout fits.
pub const TILED_MAX_BATCH_AXES: usize = 64;
/// [`TiledArgs::vector`] of a vector tile whose source side need not be aligned
/// ([`TiledArgs::new_shifted`]).
pub const TILED_SHIFTED_SOURCE: u32 = 2;

/// [`TiledArgs::vector`] of a vector tile whose destination side need not be aligned
/// ([`TiledArgs::new_shifted`]).
pub const TILED_SHIFTED_DEST: u32 = 3;

/// Most threads of a tiled kernel's block (its PTX's `.maxntid`), but for vector tiles between
/// elements of one size of 1 or 2 bytes and for [`Kind::TiledEW`] ([`TILED_WIDE_THREADS`]);
/// [`tiled_max_threads`] gives each kernel's.
pub const TILED_MAX_THREADS: u32 = 512;
/// Most threads of the block of a vector tile between elements of one size of 1 or 2 bytes
/// (copies, and casts such as f16 -> bf16): tiles of up to 16 KiB, whose longer runs keep
/// layouts of many short axes near memcpy speed. Also the block of [`Kind::TiledEW`], the
/// element-wise copies of [`TILED_EW_SIZES`] in tiles of more elements than
/// [`TILED_MAX_THREADS`] threads take.
pub const TILED_WIDE_THREADS: u32 = 1024;

/// Element sizes of the wide element-wise copies ([`Kind::TiledEW`]).
pub const TILED_EW_SIZES: [usize; 3] = [1, 2, 4];

/// Whether element-wise tiles (not `vector`) from `src_size`- to `dst_size`-byte elements may
/// hold up to [`tiled_ew_max_volume`] elements, in blocks of up to [`TILED_WIDE_THREADS`]
/// ([`Kind::TiledEW`]): for copies of [`TILED_EW_SIZES`] (the planner takes such tiles for
/// copies only, where they lengthen short runs).
pub const fn tiled_wide_elements(vector: bool, src_size: usize, dst_size: usize) -> bool {
    !vector && src_size == dst_size && (src_size == 1 || src_size == 2 || src_size == 4)
}

/// Most elements of a tile of [`Kind::TiledEW`] for elements of `size` bytes:
/// [`TILED_WIDE_THREADS`] x [`tiled_per_thread`], at most [`TILED_MAX_TILE_BYTES`] of them.
pub const fn tiled_ew_max_volume(size: usize) -> u64 {
    slots_that_fit(
        TILED_WIDE_THREADS,
        tiled_per_thread(false, size, size),
        size,
    )
}

/// `threads` x `per_thread` elements, or fewer where their destination elements of
/// `dst_size` bytes would take more than [`TILED_MAX_TILE_BYTES`].
const fn slots_that_fit(threads: u32, per_thread: u32, dst_size: usize) -> u64 {
    let slots = threads as u64 * per_thread as u64;
    let fit = TILED_MAX_TILE_BYTES / dst_size as u64;
    if slots < fit { slots } else { fit }
}

/// Most threads of the block of a tiled kernel from elements of `src_size` to `dst_size` bytes,
/// vector or element-wise (its PTX's `.maxntid`): [`TILED_WIDE_THREADS`] for vector tiles
/// between elements of one size of 1 or 2 bytes, else [`TILED_MAX_THREADS`].
pub const fn tiled_max_threads(vector: bool, src_size: usize, dst_size: usize) -> u32 {
    if vector && src_size == dst_size && src_size <= 2 {
        TILED_WIDE_THREADS
    } else {
        TILED_MAX_THREADS
    }
}
/// Most axes of [`StridedArgsN`] (see [`TILED_MAX_BATCH_AXES`] for why this is every layout).
pub const STRIDEDN_MAX_RANK: usize = 64;

/// Elements each thread of a tiled kernel moves per tile and phase: 16 for the vector kernels
/// with 1-byte destination elements (one 16-byte vector of them), 8 for the others (casts from
/// 1-byte elements to wider ones then load 8-byte vectors, which keeps their registers in
/// bounds).
pub const fn tiled_per_thread(vector: bool, src_size: usize, dst_size: usize) -> u32 {
    let _ = src_size;
    if vector && dst_size == 1 { 16 } else { 8 }
}

/// Elements per access `(Vs, Vd)` of a tiled kernel: one 16-byte vector (at most
/// [`tiled_per_thread`] elements) on each side for the vector kernels, `(1, 1)` for the
/// element-wise ones.
pub const fn tiled_vectors(vector: bool, src_size: usize, dst_size: usize) -> (u32, u32) {
    if !vector {
        return (1, 1);
    }
    let k = tiled_per_thread(vector, src_size, dst_size);
    let vs = (16 / src_size) as u32;
    let vd = (16 / dst_size) as u32;
    (if vs < k { vs } else { k }, if vd < k { vd } else { k })
}

/// The register limit (`.maxnreg`) of a tiled kernel, where the compiler would otherwise take
/// more registers than the kernel needs without spilling, so that fewer blocks stay resident:
/// 44 for the vector copy of 1-byte elements (56 without), 40 for the vector casts from
/// elements of at most 4 bytes to 4-byte ones and from 4-byte elements to 2-byte ones (43 to
/// 52 without), 56 for the element-wise copy of 1-byte elements and 80 for that of 8-byte
/// elements (64 and 84 without; the hardware allocates 84 as 88); `None` for the others:
/// their limits spill, but for the element-wise copies of 2- and 4-byte elements, for which
/// 56 does not spill but is left off (below). The wide element-wise copies:
/// [`tiled_ew_max_registers`].
///
/// The element-wise copies at 56, on the H100, each launch against the same launch at 64 in
/// one process (`tools/tiled-variants`: the layouts of the `narrow` and `rank` benches and
/// 3000 drawn ones, each also read backwards, those whose tiles are element-wise): 1-byte
/// elements 1.030 times as fast (geometric mean of 805 launches; 350 faster and 37 slower by
/// more than 2%, down to 0.75), where more blocks fit per multiprocessor 1.00-1.09 and where
/// no more do 1.01. The launches that lose are mostly slow ones: those with more blocks
/// resident that ran under 0.35 of a device copy at 64 ran 0.92 times as fast (13 of 23
/// slower), among them the `rank` bench's u8 `[2, 3^17]` under a random permutation (seed
/// 3001), 0.430 -> 0.394. 2-byte elements 1.012 (714 launches, 58 slower), 4-byte ones 0.988
/// (777 launches, 213 slower): left off. At 56 the copy of 1-byte elements spills nothing on
/// sm_90 and 4 bytes (an 8-byte stack frame) on sm_80, sm_86 and sm_89, where the limit is
/// unmeasured.
pub const fn tiled_max_registers(
    vector: bool,
    copy: bool,
    src_size: usize,
    dst_size: usize,
) -> Option<u32> {
    if !vector {
        match (copy, src_size) {
            (true, 1) => Some(56),
            (true, 8) => Some(80),
            _ => None,
        }
    } else if copy && src_size == 1 {
        Some(44)
    } else if !copy && src_size <= 4 && (dst_size == 4 || (src_size == 4 && dst_size == 2)) {
        Some(40)
    } else {
        None
    }
}

/// The register limit (`.maxnreg`) of the wide element-wise copy [`Kind::TiledEW`] of
/// elements of `size` bytes: 56 for 1-byte elements (64 without), so that two blocks of up to
/// 576 threads (18 warps; registers go to warps in units of 256) stay resident where one did.
/// At 56, `ptxas` spills nothing on sm_90 and 4 bytes (an 8-byte stack frame) on sm_80, sm_86
/// and sm_89, where the limit is unmeasured. On the H100, the 642 launches
/// of `copy_tiled_ew_b1` among the 8834 layouts drawn for `tools/tiled-variants` ran 1.045
/// times as fast (geometric mean; 397 faster and 37 slower by more than 2%, down to 0.78):
/// 1.24-1.33 on blocks of 544 and 576 threads (`[2, 3^17]` reversed 0.31 -> 0.43 of a device
/// copy), 1.02-1.05 on larger ones. `None` for 2- and 4-byte elements, whose copies the limit
/// sped up less and slowed more (1.018 and 0.989 over 662 and 249 launches; an f16 `[2, 3^17]`
/// permutation 0.50 -> 0.42).
pub const fn tiled_ew_max_registers(size: usize) -> Option<u32> {
    if size == 1 { Some(56) } else { None }
}

/// The register limit (`.maxnreg`) of the pipelined kernel [`Kind::TiledA`] for elements of
/// `size` bytes, where the compiler would otherwise take more registers than the kernel needs
/// without spilling: 56 for 1-byte elements (57 without, which the hardware allocates as 64:
/// one block fewer of 288 or 576 threads per multiprocessor); `None` for 2-byte ones.
pub const fn tiled_async_max_registers(size: usize) -> Option<u32> {
    if size == 1 { Some(56) } else { None }
}

/// Tiles that a block of [`Kind::TiledA`] keeps in shared memory: it gathers one while the
/// copies of the others fly.
pub const TILED_ASYNC_BUFFERS: u32 = 4;

/// Fewest threads per block for which the launcher runs a vector copy of 1-byte elements with
/// [`Kind::TiledA`] ([`tiled_launch_kind`]). Smaller blocks of [`Kind::Tiled`] keep enough
/// tiles in flight in registers; [`Kind::TiledA`] costs them resident blocks (its buffers and
/// registers).
pub const TILED_ASYNC_MIN_THREADS: u32 = 256;

/// Fewest threads per block for which the launcher runs a vector copy of 2-byte elements with
/// [`Kind::TiledA`]: smaller blocks of [`Kind::Tiled`] are as fast with fewer registers and
/// no tile buffers, so that more of them stay resident.
pub const TILED_ASYNC_MIN_THREADS_B2: u32 = 288;

/// Least compute capability (major) of [`Kind::TiledA`] (`cp.async`).
pub const TILED_ASYNC_MIN_MAJOR: u32 = 8;

/// Most bytes of one tile of destination elements in shared memory.
pub const TILED_MAX_TILE_BYTES: u64 = 32768;

/// Most elements of one tile: [`tiled_max_threads`] x [`tiled_per_thread`], or fewer where
/// their destination elements would take more than [`TILED_MAX_TILE_BYTES`].
pub const fn tiled_max_volume(vector: bool, src_size: usize, dst_size: usize) -> u64 {
    slots_that_fit(
        tiled_max_threads(vector, src_size, dst_size),
        tiled_per_thread(vector, src_size, dst_size),
        dst_size,
    )
}

/// Static shared memory of a tiled kernel: one tile of destination elements, the largest
/// ([`tiled_max_volume`]). (The `cp.async` kernels take dynamic shared memory instead:
/// [`tiled_async_smem_bytes`].)
pub const fn tiled_smem_bytes(vector: bool, src_size: usize, dst_size: usize) -> u64 {
    tiled_max_volume(vector, src_size, dst_size) * dst_size as u64
}

/// Bytes between the tile buffers of [`Kind::TiledA`] for tiles of `volume` elements of
/// `size` bytes: the tile rounded up to whole lines of 128 bytes.
pub const fn tiled_async_tile_bytes(volume: u64, size: usize) -> u64 {
    (volume * size as u64).div_ceil(128) * 128
}

/// Dynamic shared memory of a launch of [`Kind::TiledA`] for tiles of `volume` elements of
/// `size` bytes: [`TILED_ASYNC_BUFFERS`] tiles ([`tiled_async_tile_bytes`]). The kernels size
/// their buffers from the tile, so that small tiles leave the multiprocessor's L1 its room.
pub const fn tiled_async_smem_bytes(volume: u64, size: usize) -> u64 {
    TILED_ASYNC_BUFFERS as u64 * tiled_async_tile_bytes(volume, size)
}

/// The most dynamic shared memory that a launch of [`Kind::TiledA`] for elements of `size`
/// bytes takes ([`tiled_async_smem_bytes`] of the largest tile); the launcher raises the
/// kernel's limit to it where it exceeds the default 48 KiB.
pub const fn tiled_async_max_smem_bytes(size: usize) -> u64 {
    tiled_async_smem_bytes(tiled_max_volume(true, size, size), size)
}

/// Unit of the shared-memory permutation of the tiled kernels for destination elements of
/// `dst_size` bytes: `max(4, dst_size)` bytes.
pub const fn tiled_smem_unit(dst_size: usize) -> u64 {
    if dst_size > 4 { dst_size as u64 } else { 4 }
}

/// The shifts of the line rotation of a tiled kernel from elements of `src_size` to
/// `dst_size` bytes ([`tiled_smem_offset`]): `rot(L) = (L ^ (L >> s1) ^ (L >> s2) ...) % units
/// per line`.
/// - `[log2(units per line)]` for most kernels: one column of a tile whose rows are 2^k units
///   long lies in distinct banks.
/// - `[1, 4]` for vector tiles between 1-byte elements: their tiles of up to 128 lines,
///   gathered 16 bytes per store along many axes of extent 2 to 4, otherwise meet up to 4
///   words in one bank.
pub const fn tiled_smem_shifts(vector: bool, src_size: usize, dst_size: usize) -> &'static [u32] {
    if vector && src_size == 1 && dst_size == 1 {
        &[1, 4]
    } else if dst_size > 4 {
        &[4]
    } else {
        &[5]
    }
}

/// The shared-memory byte offset at which a tiled kernel from elements of `src_size` to
/// `dst_size` bytes keeps byte `b` of a tile (the tile's elements in read order, `dst_size`
/// bytes each): units of [`tiled_smem_unit`] bytes, lines of 128 bytes, and within line `L`
/// unit `j` stored at unit `j ^ rot(L)`, where `rot` is the rotation of
/// [`tiled_smem_shifts`]. Bytes inside a unit, and units inside a line, stay together.
pub const fn tiled_smem_offset(b: u64, vector: bool, src_size: usize, dst_size: usize) -> u64 {
    let u = tiled_smem_unit(dst_size);
    let per_line = 128 / u;
    let unit = b / u;
    let line = unit / per_line;
    let low = unit % per_line;
    let shifts = tiled_smem_shifts(vector, src_size, dst_size);
    let mut rot = line;
    let mut i = 0;
    while i < shifts.len() {
        rot ^= line >> shifts[i];
        i += 1;
    }
    let rot = rot % per_line;
    (line * per_line + (low ^ rot)) * u + b % u
}

/// The kind of tiled kernel that runs `args`: [`Kind::Tiled`] when its loads and stores are
/// aligned 16-byte vectors, else the element-wise [`Kind::TiledE`] (which also runs the
/// tiles of shifted vectors, [`TILED_SHIFTED_SOURCE`] and [`TILED_SHIFTED_DEST`], that no
/// narrow kernel takes).
pub fn tiled_kind(args: &TiledArgs) -> Kind {
    if args.vector == 1 {
        Kind::Tiled
    } else {
        Kind::TiledE
    }
}

/// The kind of tiled kernel that the launcher runs for `args`, from `from` to `to` elements,
/// in blocks of `threads` ([`tiled_threads`]) on a device of compute capability `major`:
/// [`Kind::TiledA`] for vector copies (of bits: [`DType::same_bits`]; there are no `cp.async`
/// casts) of 1-byte
/// elements in blocks of at least [`TILED_ASYNC_MIN_THREADS`] threads, and of 2-byte elements
/// in blocks of at least [`TILED_ASYNC_MIN_THREADS_B2`], from [`TILED_ASYNC_MIN_MAJOR`] on,
/// else [`tiled_kind`]. Both take the same arguments and blocks.
pub fn tiled_launch_kind(
    args: &TiledArgs,
    from: DType,
    to: DType,
    threads: u32,
    major: u32,
) -> Kind {
    let kind = tiled_kind(args);
    let least = match from.size() {
        _ if !from.same_bits(to) => u32::MAX,
        1 => TILED_ASYNC_MIN_THREADS,
        2 => TILED_ASYNC_MIN_THREADS_B2,
        _ => u32::MAX,
    };
    if kind == Kind::Tiled && threads >= least && major >= TILED_ASYNC_MIN_MAJOR {
        Kind::TiledA
    } else {
        tiled_e_wide(kind, threads, from, to)
    }
}

/// [`Kind::TiledEW`] for an element-wise tile ([`Kind::TiledE`]) of a copy (of bits:
/// [`DType::same_bits`]) of [`TILED_EW_SIZES`] in blocks of more than [`tiled_max_threads`]
/// threads, else `kind`. (The planner gives larger element-wise tiles to such copies only.)
pub fn tiled_e_wide(kind: Kind, threads: u32, from: DType, to: DType) -> Kind {
    let (s, d) = (from.size(), to.size());
    if kind == Kind::TiledE
        && from.same_bits(to)
        && tiled_wide_elements(false, s, d)
        && threads > tiled_max_threads(false, s, d)
    {
        Kind::TiledEW
    } else {
        kind
    }
}

/// Threads of a tiled kernel's block for a tile of `volume` elements: the smallest multiple
/// of 32 that gives every element a slot ([`tiled_per_thread`] per thread), at most
/// [`tiled_max_threads`], or [`TILED_WIDE_THREADS`] where [`tiled_wide_elements`] (more than
/// [`tiled_max_threads`] run [`Kind::TiledEW`]).
pub fn tiled_threads(volume: u64, vector: bool, src_size: usize, dst_size: usize) -> u32 {
    let k = u64::from(tiled_per_thread(vector, src_size, dst_size));
    let t = volume.div_ceil(k).div_ceil(32).max(1) * 32;
    let most = if tiled_wide_elements(vector, src_size, dst_size) {
        TILED_WIDE_THREADS
    } else {
        tiled_max_threads(vector, src_size, dst_size)
    };
    t.min(u64::from(most)) as u32
}

/// Grid (x) of a tiled kernel on a device that keeps `resident` of its blocks resident: one
/// block per tile up to one wave of resident blocks, whose blocks then loop over the tiles, so
/// that the tiles in flight at any time lie close together in tile order; 0 when there is
/// nothing to do.
pub fn tiled_grid(tiles: u64, resident: u64) -> u32 {
    tiles.min(resident.max(1)).min(i32::MAX as u64) as u32
}

/// One tile axis in read order ([`TiledArgs::read`]).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TiledReadAxis {
    /// Extent (at least 1).
    pub len: u32,
    /// 32-bit fast division by `len` ([`fast_div32`]): magic number.
    pub magic: u32,
    /// 32-bit fast division by `len`: shift.
    pub shift: u32,
    /// Source stride in elements.
    pub src: i32,
}

/// One tile axis in write order ([`TiledArgs::write`]).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TiledWriteAxis {
    /// Extent (at least 1).
    pub len: u32,
    /// 32-bit fast division by `len`: magic number.
    pub magic: u32,
    /// 32-bit fast division by `len`: shift.
    pub shift: u32,
    /// Destination stride in elements.
    pub dst: i32,
    /// The axis's stride in the read order: the product of the extents of the axes before it
    /// in [`TiledArgs::read`].
    pub read: u32,
    /// Padding; zero.
    pub _pad: u32,
}

/// One batch axis ([`TiledArgs::batch`]).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TiledBatchAxis {
    /// Extent (at least 1).
    pub len: u32,
    /// 32-bit fast division by `len`: magic number.
    pub magic: u32,
    /// 32-bit fast division by `len`: shift.
    pub shift: u32,
    /// Padding; zero.
    pub _pad: u32,
    /// Destination stride in elements.
    pub dst: i64,
    /// Source stride in elements.
    pub src: i64,
}

/// Argument block of `*_tiled_*` and `*_tiled_e_*` (2728 bytes): see the module docs.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TiledArgs {
    /// Destination byte address of the element at multi-index 0.
    pub dst: u64,
    /// Source byte address of the element at multi-index 0.
    pub src: u64,
    /// Number of tiles: the product of the batch extents, below 2^31.
    pub tiles: u32,
    /// Elements per tile: the product of the tile extents, at most [`tiled_max_volume`]
    /// ([`tiled_ew_max_volume`] where [`tiled_wide_elements`]).
    pub volume: u32,
    /// Number of tile axes, `1..=TILED_MAX_TILE_AXES`.
    pub tile_rank: u32,
    /// Number of batch axes, `0..=TILED_MAX_BATCH_AXES`.
    pub batch_rank: u32,
    /// 1 for the vector kernels, 0 for the element-wise ones, [`TILED_SHIFTED_SOURCE`] or
    /// [`TILED_SHIFTED_DEST`] for a vector tile whose source or destination side need not be
    /// aligned ([`TiledArgs::new_shifted`]). The kernels do not read it.
    pub vector: u32,
    /// Padding; zero.
    pub _pad: u32,
    /// The tile axes in read order.
    pub read: [TiledReadAxis; TILED_MAX_TILE_AXES],
    /// The tile axes in write order.
    pub write: [TiledWriteAxis; TILED_MAX_TILE_AXES],
    /// The batch axes, axis 0 fastest.
    pub batch: [TiledBatchAxis; TILED_MAX_BATCH_AXES],
}

impl Default for TiledArgs {
    fn default() -> Self {
        Self {
            dst: 0,
            src: 0,
            tiles: 0,
            volume: 0,
            tile_rank: 0,
            batch_rank: 0,
            vector: 0,
            _pad: 0,
            read: [TiledReadAxis::default(); TILED_MAX_TILE_AXES],
            write: [TiledWriteAxis::default(); TILED_MAX_TILE_AXES],
            batch: [TiledBatchAxis::default(); TILED_MAX_BATCH_AXES],
        }
    }
}

/// One axis of a tiled copy as the planner describes it: extent and strides in elements.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TiledAxis {
    /// Extent.
    pub len: u64,
    /// Destination stride in elements.
    pub dst: i64,
    /// Source stride in elements.
    pub src: i64,
}

impl TiledArgs {
    /// Builds the block from the tile axes in read order (`read`), the order in which the
    /// same axes are written (`write_order[k]` is the index in `read` of the `k`-th axis in
    /// write order) and the batch axes (axis 0 fastest), for elements of `src_size` and
    /// `dst_size` bytes. `None` when an axis count is out of range, an extent is zero, the
    /// volume exceeds [`tiled_max_volume`] (element-wise tiles of [`tiled_wide_elements`]:
    /// [`tiled_ew_max_volume`]), there are 2^31 tiles or more, `write_order` is not
    /// a permutation, an element of a tile lies 2^31 elements or more from the tile's first
    /// element on either side (the kernels hold a tile element's offset from the tile's first
    /// as a signed 32-bit count of elements, scaled to bytes in 64 bits), or (for `vector`)
    /// the tile does not move in whole vectors ([`TiledArgs::vectors_line_up`]).
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        dst: u64,
        src: u64,
        read: &[TiledAxis],
        write_order: &[usize],
        batch: &[TiledAxis],
        vector: bool,
        src_size: usize,
        dst_size: usize,
    ) -> Option<Self> {
        let r = read.len();
        if r == 0
            || r > TILED_MAX_TILE_AXES
            || batch.len() > TILED_MAX_BATCH_AXES
            || write_order.len() != r
        {
            return None;
        }
        let mut seen = [false; TILED_MAX_TILE_AXES];
        for &k in write_order {
            if k >= r || std::mem::replace(&mut seen[k], true) {
                return None;
            }
        }
        let mut a = Self {
            dst,
            src,
            tile_rank: r as u32,
            batch_rank: batch.len() as u32,
            vector: u32::from(vector),
            ..Self::default()
        };
        let max = if tiled_wide_elements(vector, src_size, dst_size) {
            tiled_ew_max_volume(src_size)
        } else {
            tiled_max_volume(vector, src_size, dst_size)
        };
        let mut volume = 1u64;
        let mut read_stride = [0u64; TILED_MAX_TILE_AXES];
        // The farthest element of a tile from its first, per operand, in elements.
        let (mut reach_d, mut reach_s) = (0u128, 0u128);
        for (k, ax) in read.iter().enumerate() {
            if ax.len == 0 {
                return None;
            }
            read_stride[k] = volume;
            volume = volume.checked_mul(ax.len).filter(|&v| v <= max)?;
            let (magic, shift) = fast_div32(ax.len as u32);
            a.read[k] = TiledReadAxis {
                len: ax.len as u32,
                magic,
                shift,
                src: i32::try_from(ax.src).ok()?,
            };
            reach_d += u128::from(ax.len - 1) * u128::from(ax.dst.unsigned_abs());
            reach_s += u128::from(ax.len - 1) * u128::from(ax.src.unsigned_abs());
        }
        if reach_d > i32::MAX as u128 || reach_s > i32::MAX as u128 {
            return None;
        }
        for (j, &k) in write_order.iter().enumerate() {
            let ax = &read[k];
            // The axis's division, as in read order.
            let TiledReadAxis { magic, shift, .. } = a.read[k];
            a.write[j] = TiledWriteAxis {
                len: ax.len as u32,
                magic,
                shift,
                dst: i32::try_from(ax.dst).ok()?,
                read: read_stride[k] as u32,
                _pad: 0,
            };
        }
        let mut tiles = 1u64;
        for (k, ax) in batch.iter().enumerate() {
            if ax.len == 0 {
                return None;
            }
            tiles = tiles.checked_mul(ax.len).filter(|&t| t < 1 << 31)?;
            let (magic, shift) = fast_div32(ax.len as u32);
            a.batch[k] = TiledBatchAxis {
                len: ax.len as u32,
                magic,
                shift,
                _pad: 0,
                dst: ax.dst,
                src: ax.src,
            };
        }
        a.tiles = tiles as u32;
        a.volume = volume as u32;
        if vector && !a.vectors_line_up(src_size, dst_size) {
            return None;
        }
        Some(a)
    }

    /// [`TiledArgs::new`] for a vector tile one of whose sides lines up
    /// ([`TiledArgs::vectors_line_up`], that side alone) while the other (the source where
    /// `shifted_source`, else the destination) may start anywhere: `vector` is
    /// [`TILED_SHIFTED_SOURCE`] or [`TILED_SHIFTED_DEST`]. Only the narrow kernels of shifted
    /// planes run such tiles ([`super::tiled_narrow`]). A shifted join reads each source
    /// vector through the aligned 16-byte block that holds its first byte and the next block,
    /// so the caller leaves every
    /// source vector at least 16 bytes below the end of the source's allocation; a shifted
    /// split writes only its destination's bytes. Volumes are limited as for element-wise
    /// tiles.
    #[allow(clippy::too_many_arguments)]
    pub fn new_shifted(
        dst: u64,
        src: u64,
        read: &[TiledAxis],
        write_order: &[usize],
        batch: &[TiledAxis],
        src_size: usize,
        dst_size: usize,
        shifted_source: bool,
    ) -> Option<Self> {
        // Built as an element-wise tile (no alignment asked, at most its volume), then
        // checked on the aligned side.
        let mut a = Self::new(
            dst,
            src,
            read,
            write_order,
            batch,
            false,
            src_size,
            dst_size,
        )?;
        // The aligned side: the destination's where the source is shifted.
        let lines_up = a.side_lines_up(!shifted_source, src_size, dst_size);
        a.vector = if shifted_source {
            TILED_SHIFTED_SOURCE
        } else {
            TILED_SHIFTED_DEST
        };
        lines_up.then_some(a)
    }

    /// Whether every vector access of the vector kernels is whole and aligned: with
    /// `(Vs, Vd)` from [`tiled_vectors`], the volume is a multiple of both, every `Vs`
    /// consecutive read-order elements starting at a multiple of `Vs` are consecutive source
    /// elements and every other source offset a tile or batch axis adds is a multiple of `Vs`
    /// (so that with a 16-byte aligned `src` every vector starts 16-byte aligned), and
    /// likewise for the destination in write order.
    pub fn vectors_line_up(&self, src_size: usize, dst_size: usize) -> bool {
        self.side_lines_up(true, src_size, dst_size)
            && self.side_lines_up(false, src_size, dst_size)
    }

    /// [`TiledArgs::vectors_line_up`] of one side: the source's (`source`), in read order, or
    /// the destination's, in write order.
    fn side_lines_up(&self, source: bool, src_size: usize, dst_size: usize) -> bool {
        let (vs, vd) = tiled_vectors(true, src_size, dst_size);
        let r = self.tile_rank as usize;
        let batch = &self.batch[..self.batch_rank as usize];
        let mut axes = [(0u64, 0i64); TILED_MAX_TILE_AXES];
        let (v, base) = if source {
            for (x, a) in axes.iter_mut().zip(&self.read[..r]) {
                *x = (u64::from(a.len), i64::from(a.src));
            }
            (vs, self.src)
        } else {
            for (x, a) in axes.iter_mut().zip(&self.write[..r]) {
                *x = (u64::from(a.len), i64::from(a.dst));
            }
            (vd, self.dst)
        };
        let strides = batch.iter().map(|b| if source { b.src } else { b.dst });
        u64::from(self.volume) % u64::from(v) == 0
            && base % 16 == 0
            && runs_line_up(&axes[..r], strides, u64::from(v))
    }

    /// The element offsets `(dst, src)` of the first element of tile `t`, computed like the
    /// kernels do (32-bit index math, 64-bit offsets).
    pub fn tile_origin(&self, t: u32) -> (i64, i64) {
        let (mut x, mut d, mut s) = (t, 0i64, 0i64);
        for b in &self.batch[..self.batch_rank as usize] {
            let q = fast_div32_apply(x, b.magic, b.shift);
            let c = i64::from(x.wrapping_sub(q.wrapping_mul(b.len)));
            d = d.wrapping_add(c.wrapping_mul(b.dst));
            s = s.wrapping_add(c.wrapping_mul(b.src));
            x = q;
        }
        (d, s)
    }

    /// The source offset (elements, from the tile's first element) of read-order element `r`
    /// of a tile, computed like the kernels do.
    pub fn read_offset(&self, r: u32) -> i32 {
        let (mut x, mut s) = (r, 0i32);
        for a in &self.read[..self.tile_rank as usize] {
            let q = fast_div32_apply(x, a.magic, a.shift);
            let c = x.wrapping_sub(q.wrapping_mul(a.len)) as i32;
            s = s.wrapping_add(c.wrapping_mul(a.src));
            x = q;
        }
        s
    }

    /// The destination offset (elements, from the tile's first element) and the read-order
    /// position of write-order element `w` of a tile, computed like the kernels do.
    pub fn write_offset(&self, w: u32) -> (i32, u32) {
        let (mut x, mut d, mut r) = (w, 0i32, 0u32);
        for a in &self.write[..self.tile_rank as usize] {
            let q = fast_div32_apply(x, a.magic, a.shift);
            let c = x.wrapping_sub(q.wrapping_mul(a.len));
            d = d.wrapping_add((c as i32).wrapping_mul(a.dst));
            r = r.wrapping_add(c.wrapping_mul(a.read));
            x = q;
        }
        (d, r)
    }
}

/// Whether the axes `(len, stride)` of one order (axis 0 fastest) move in runs of `v` whole
/// consecutive elements: the leading axes that are contiguous (stride 1, then each stride the
/// product of the extents before it) span a multiple of `v` elements, and every other stride,
/// of the later tile axes and of the batch axes, is a multiple of `v`.
fn runs_line_up(axes: &[(u64, i64)], batch: impl Iterator<Item = i64>, v: u64) -> bool {
    if v <= 1 {
        return true;
    }
    let vi = v as i64;
    let mut run = 1u64;
    let mut k = 0;
    while k < axes.len() && axes[k].1 == run as i64 {
        run *= axes[k].0;
        k += 1;
    }
    run % v == 0
        && axes[k..].iter().all(|a| a.1 % vi == 0)
        && batch.into_iter().all(|s| s % vi == 0)
}

/// One axis of [`StridedArgsN`].
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StridedAxis {
    /// Extent (1 beyond the rank).
    pub len: u64,
    /// Fast division by `len`.
    pub div: FastDiv64,
    /// Destination stride in elements.
    pub dst: i64,
    /// Source stride in elements.
    pub src: i64,
}

/// Argument block of `*_stridedn_*` (2592 bytes): the walk of
/// [`StridedArgs64`](super::StridedArgs64) over up to [`STRIDEDN_MAX_RANK`] axes.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StridedArgsN {
    /// Byte address of the destination element at multi-index 0.
    pub dst: u64,
    /// Byte address of the source element at multi-index 0 (unused by fill).
    pub src: u64,
    /// Number of elements, below 2^63: the product of the extents.
    pub n: u64,
    /// Number of axes, `1..=STRIDEDN_MAX_RANK`.
    pub rank: u32,
    /// Padding; zero.
    pub _pad: u32,
    /// The axes, axis 0 innermost.
    pub axes: [StridedAxis; STRIDEDN_MAX_RANK],
}

impl Default for StridedArgsN {
    fn default() -> Self {
        Self {
            dst: 0,
            src: 0,
            n: 0,
            rank: 0,
            _pad: 0,
            axes: [StridedAxis::default(); STRIDEDN_MAX_RANK],
        }
    }
}

impl StridedArgsN {
    /// Builds the block for `shape` (axis 0 innermost, `1..=STRIDEDN_MAX_RANK` axes) with the
    /// given strides (same length). `None` if the lengths disagree, the rank is out of range
    /// or the element count reaches 2^63. For fill, pass `src = 0` and zero source strides.
    pub fn new(
        dst: u64,
        src: u64,
        shape: &[u64],
        dst_strides: &[i64],
        src_strides: &[i64],
    ) -> Option<Self> {
        let rank = shape.len();
        if rank == 0
            || rank > STRIDEDN_MAX_RANK
            || dst_strides.len() != rank
            || src_strides.len() != rank
        {
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
            ..Self::default()
        };
        for k in 0..rank {
            a.axes[k] = StridedAxis {
                len: shape[k],
                div: FastDiv64::new(shape[k]),
                dst: dst_strides[k],
                src: src_strides[k],
            };
        }
        Some(a)
    }

    /// Element offsets `(dst, src)` of linear index `i`, computed like the kernels do.
    pub fn offsets(&self, i: u64) -> (i64, i64) {
        let rank = (self.rank as usize).clamp(1, STRIDEDN_MAX_RANK);
        let (mut x, mut d, mut s) = (i, 0i64, 0i64);
        for a in &self.axes[..rank - 1] {
            let q = a.div.div(x);
            let c = x.wrapping_sub(q.wrapping_mul(a.len)) as i64;
            d = d.wrapping_add(c.wrapping_mul(a.dst));
            s = s.wrapping_add(c.wrapping_mul(a.src));
            x = q;
        }
        let last = &self.axes[rank - 1];
        d = d.wrapping_add((x as i64).wrapping_mul(last.dst));
        s = s.wrapping_add((x as i64).wrapping_mul(last.src));
        (d, s)
    }
}

// SAFETY: `#[repr(C)]`, integers only, the padding an explicit field.
param_block!(TiledReadAxis {
    len,
    magic,
    shift,
    src
});
// SAFETY: as above.
param_block!(TiledWriteAxis {
    len,
    magic,
    shift,
    dst,
    read,
    _pad
});
// SAFETY: as above.
param_block!(TiledBatchAxis {
    len,
    magic,
    shift,
    _pad,
    dst,
    src
});
// SAFETY: `#[repr(C)]`, integers and arrays of the blocks above only, the padding an explicit
// field (the fields' coverage is checked in tests).
param_block!(TiledArgs {
    dst,
    src,
    tiles,
    volume,
    tile_rank,
    batch_rank,
    vector,
    _pad,
    read,
    write,
    batch
});
// SAFETY: `#[repr(C)]`, integers and a `FastDiv64` only.
param_block!(StridedAxis { len, div, dst, src });
// SAFETY: `#[repr(C)]`, integers and an array of `StridedAxis` only, the padding an explicit
// field.
param_block!(StridedArgsN {
    dst,
    src,
    n,
    rank,
    _pad,
    axes
});

#[cfg(test)]
mod tests {
    use super::*;
    use core::mem::size_of;

    /// The launcher takes the cp.async kernel for vector copies of 1-byte elements in blocks of
    /// 256 threads or more and of 2-byte elements in blocks of 288 or more, on sm_80 and later,
    /// and the register-pipelined kernels otherwise.
    #[test]
    fn launch_kind() {
        let vector = TiledArgs {
            vector: 1,
            ..TiledArgs::default()
        };
        let element = TiledArgs::default();
        use DType::{BF16, F16, F32, I8, U8, U16};
        assert_eq!(tiled_launch_kind(&vector, U8, U8, 512, 9), Kind::TiledA);
        assert_eq!(tiled_launch_kind(&vector, U8, U8, 1024, 9), Kind::TiledA);
        assert_eq!(tiled_launch_kind(&vector, U8, U8, 256, 8), Kind::TiledA);
        assert_eq!(tiled_launch_kind(&vector, U8, U8, 224, 9), Kind::Tiled);
        assert_eq!(tiled_launch_kind(&vector, U8, U8, 512, 7), Kind::Tiled);
        assert_eq!(tiled_launch_kind(&vector, F16, F16, 512, 9), Kind::TiledA);
        assert_eq!(tiled_launch_kind(&vector, U16, U16, 288, 9), Kind::TiledA);
        assert_eq!(tiled_launch_kind(&vector, F16, F16, 256, 9), Kind::Tiled);
        assert_eq!(tiled_launch_kind(&vector, F16, F16, 512, 7), Kind::Tiled);
        assert_eq!(tiled_launch_kind(&vector, F32, F32, 512, 9), Kind::Tiled);
        assert_eq!(tiled_launch_kind(&vector, F16, U8, 512, 9), Kind::Tiled);
        assert_eq!(tiled_launch_kind(&vector, U8, F32, 512, 9), Kind::Tiled);
        // Casts that change bits between elements of one size: no cp.async kernel; those
        // that keep them are copies.
        assert_eq!(tiled_launch_kind(&vector, F16, BF16, 1024, 9), Kind::Tiled);
        assert_eq!(tiled_launch_kind(&vector, U8, I8, 1024, 9), Kind::TiledA);
        assert_eq!(tiled_launch_kind(&element, U8, U8, 512, 9), Kind::TiledE);
    }

    #[test]
    fn sizes() {
        assert_eq!(size_of::<TiledReadAxis>(), 16);
        assert_eq!(size_of::<TiledWriteAxis>(), 24);
        assert_eq!(size_of::<TiledBatchAxis>(), 32);
        assert_eq!(size_of::<TiledArgs>(), 2728);
        assert_eq!(size_of::<StridedAxis>(), 40);
        assert_eq!(size_of::<StridedArgsN>(), 2592);
        // Both fit the 4 KiB parameter space of every driver.
        assert!(size_of::<TiledArgs>() < 4096 && size_of::<StridedArgsN>() < 4096);
    }

    #[test]
    fn geometry() {
        assert_eq!(tiled_vectors(true, 1, 1), (16, 16));
        assert_eq!(tiled_vectors(true, 4, 2), (4, 8));
        assert_eq!(tiled_vectors(true, 1, 8), (8, 2));
        assert_eq!(tiled_vectors(true, 1, 4), (8, 4));
        assert_eq!(tiled_vectors(true, 4, 1), (4, 16));
        assert_eq!(tiled_vectors(true, 8, 8), (2, 2));
        assert_eq!(tiled_vectors(false, 4, 4), (1, 1));
        assert_eq!(tiled_max_volume(true, 4, 4), 4096);
        assert_eq!(tiled_max_volume(true, 1, 1), 16384);
        assert_eq!(tiled_max_volume(false, 1, 1), 4096);
        assert_eq!(tiled_max_volume(true, 4, 1), 8192);
        assert_eq!(tiled_max_volume(true, 2, 2), 8192);
        assert_eq!(tiled_max_threads(true, 2, 2), 1024);
        assert_eq!(tiled_max_threads(true, 4, 4), 512);
        assert_eq!(tiled_max_threads(true, 1, 1), 1024);
        assert_eq!(tiled_max_threads(false, 1, 1), 512);
        assert_eq!(tiled_max_threads(false, 4, 4), 512);
        assert_eq!(tiled_ew_max_volume(1), 8192);
        assert_eq!(tiled_ew_max_volume(2), 8192);
        assert_eq!(tiled_ew_max_volume(4), 8192);
        assert!(tiled_wide_elements(false, 2, 2) && tiled_wide_elements(false, 4, 4));
        assert!(tiled_wide_elements(false, 1, 1) && !tiled_wide_elements(true, 1, 1));
        assert!(!tiled_wide_elements(true, 4, 4) && !tiled_wide_elements(false, 1, 2));
        assert!(!tiled_wide_elements(false, 8, 8) && !tiled_wide_elements(false, 2, 4));
        assert_eq!(tiled_threads(4374, false, 4, 4), 576);
        assert_eq!(tiled_max_threads(true, 4, 1), 512);
        assert_eq!(tiled_threads(16384, true, 1, 1), 1024);
        assert_eq!(tiled_threads(16384, true, 2, 2), 1024);
        assert_eq!(tiled_threads(16384, true, 4, 4), 512);
        assert_eq!(tiled_async_tile_bytes(4608, 1), 4608);
        assert_eq!(tiled_async_tile_bytes(16 * 33, 1), 640);
        assert_eq!(tiled_async_smem_bytes(16384, 1), 65536);
        assert_eq!(tiled_async_max_smem_bytes(1), 65536);
        assert_eq!(tiled_async_max_smem_bytes(2), 65536);
        assert_eq!(tiled_smem_bytes(true, 1, 8), 32768);
        assert_eq!(tiled_max_volume(true, 1, 8), 4096);
        assert_eq!(tiled_smem_bytes(true, 2, 8), 32768);
        assert_eq!(tiled_threads(3 * 1024, true, 1, 1), 192);
        assert_eq!(tiled_threads(2187, false, 4, 4), 288);
        assert_eq!(tiled_threads(1, true, 4, 4), 32);
        assert_eq!(tiled_grid(0, 528), 0);
        assert_eq!(tiled_grid(100, 528), 100);
        assert_eq!(tiled_grid(1 << 20, 528), 528);
        assert_eq!(tiled_max_registers(true, true, 1, 1), Some(44));
        assert_eq!(tiled_max_registers(true, false, 1, 1), None);
        assert_eq!(tiled_max_registers(true, false, 1, 4), Some(40));
        assert_eq!(tiled_max_registers(true, false, 4, 2), Some(40));
        assert_eq!(tiled_max_registers(true, false, 2, 2), None);
        assert_eq!(tiled_max_registers(true, false, 8, 4), None);
        assert_eq!(tiled_max_registers(false, true, 1, 1), Some(56));
        assert_eq!(tiled_max_registers(false, true, 2, 2), None);
        assert_eq!(tiled_max_registers(false, true, 4, 4), None);
        assert_eq!(tiled_max_registers(false, true, 8, 8), Some(80));
        assert_eq!(tiled_max_registers(false, false, 8, 8), None);
        assert_eq!(tiled_async_max_registers(1), Some(56));
        assert_eq!(tiled_ew_max_registers(1), Some(56));
        assert_eq!(tiled_ew_max_registers(2), None);
        assert_eq!(tiled_ew_max_registers(4), None);
        assert_eq!(tiled_async_max_registers(2), None);
    }

    /// The shared-memory permutation is a bijection on every tile size, keeps units whole and
    /// lines apart, and spreads a column of 32 rows of `2^k` units over 32 banks (the wide
    /// kernels' rotation: of 32 rows of one line, or of 16 or 32 units).
    #[test]
    fn smem_permutation() {
        for (vector, s, d) in [
            (true, 1, 1),
            (false, 1, 1),
            (true, 2, 2),
            (true, 4, 4),
            (true, 8, 8),
        ] {
            let bytes = tiled_smem_bytes(vector, s, d);
            let mut seen = vec![false; bytes as usize];
            for b in 0..bytes {
                let p = tiled_smem_offset(b, vector, s, d);
                assert!(p < bytes && !seen[p as usize], "size {d}, byte {b}");
                seen[p as usize] = true;
                assert_eq!(p / 128, b / 128);
                let u = tiled_smem_unit(d);
                assert_eq!(p % u, b % u);
            }
        }
        let banks = |row: u64, vector: bool, size: usize| {
            (0..32u64)
                .map(|i| tiled_smem_offset(i * row * 4, vector, size, size) / 4 % 32)
                .collect::<std::collections::BTreeSet<u64>>()
                .len()
        };
        for k in 0..8u32 {
            let row = 1u64 << k; // units of 4 bytes
            assert_eq!(banks(row, true, 4), 32, "rows of {row} words");
            assert_eq!(banks(row, false, 1), 32, "rows of {row} words");
        }
        for row in [1, 16, 32] {
            assert_eq!(banks(row, true, 1), 32, "rows of {row} words");
        }
        assert_eq!(tiled_smem_shifts(true, 1, 1), &[1, 4]);
        assert_eq!(tiled_smem_shifts(true, 4, 1), &[5]);
        assert_eq!(tiled_smem_shifts(true, 2, 2), &[5]);
        assert_eq!(tiled_smem_shifts(true, 8, 8), &[4]);
    }

    /// The byte tiles' rotation gathers a tile of `[2]^14` bytes, written in a shuffled order
    /// of its axes, with one word per bank per warp instruction, where the rotation of the
    /// other kernels with 4-byte units meets 4 words in one bank (the model of
    /// `tools/tiled-variants/bank_conflicts.py`).
    #[test]
    fn wide_rotation_spreads_gathers_of_many_short_axes() {
        // Write axis k (extent 2) has read stride `1 << order[k]`; a store slot is 16 write
        // positions (write axes 0 to 3), so lane bit b is write axis 4 + b. `sizes`: the
        // kernel whose layout of read-order bytes (`tiled_smem_offset`) is used.
        let worst = |order: &[u32], (s, d): (usize, usize)| {
            let offset = |r: u64| tiled_smem_offset(r, true, s, d) / 4;
            let mut most = 0;
            for slot0 in (0..1024u64).step_by(32) {
                for j in 0..16u64 {
                    let mut words: std::collections::BTreeMap<
                        u64,
                        std::collections::BTreeSet<u64>,
                    > = Default::default();
                    for lane in 0..32u64 {
                        let w = (slot0 + lane) * 16 + j;
                        let r: u64 = (0..14)
                            .filter(|&k| w >> k & 1 == 1)
                            .map(|k| 1 << order[k])
                            .sum();
                        let word = offset(r);
                        words.entry(word % 32).or_default().insert(word);
                    }
                    most = most.max(words.values().map(|v| v.len()).max().unwrap());
                }
            }
            most
        };
        // A shuffled read order (the first four write axes make the stores' 16-byte vectors,
        // so they are the first four read axes too).
        let order = [0, 1, 2, 3, 6, 5, 11, 10, 8, 7, 4, 13, 12, 9];
        assert_eq!(tiled_smem_shifts(true, 4, 4), &[5]);
        assert_eq!(worst(&order, (1, 1)), 1);
        assert_eq!(worst(&order, (4, 4)), 4);
    }

    fn ax(len: u64, dst: i64, src: i64) -> TiledAxis {
        TiledAxis { len, dst, src }
    }

    #[test]
    fn narrow_interleave() {
        // CHW -> HWC, C = 3, u8: tile axes in read order: the plane's run (1024), the plane
        // (3); in write order the plane first.
        let p = 1 << 20;
        let read = [ax(1024, 3, 1), ax(3, 1, p)];
        let batch = [ax(1024, 3 * 1024, 1024)];
        let a = TiledArgs::new(0, 0, &read, &[1, 0], &batch, true, 1, 1).unwrap();
        assert_eq!(
            (a.volume, a.tiles, a.tile_rank, a.batch_rank),
            (3072, 1024, 2, 1)
        );
        assert!(a.vectors_line_up(1, 1));
        assert_eq!(a.read_offset(1024 + 5), p as i32 + 5);
        // Write-order element 7: channel 1 of pixel 2, read-order position 1024 + 2.
        assert_eq!(a.write_offset(7), (7, 1026));
        assert_eq!(a.tile_origin(3), (3 * 3072, 3 * 1024));
        // A misaligned base, a plane stride that is not a whole vector, or a chunk that
        // splits vectors: no vector kernel.
        assert!(TiledArgs::new(4, 0, &read, &[1, 0], &batch, true, 1, 1).is_none());
        let odd = [ax(1024, 3, 1), ax(3, 1, p + 1)];
        assert!(TiledArgs::new(0, 0, &odd, &[1, 0], &batch, true, 1, 1).is_none());
        assert!(TiledArgs::new(0, 0, &odd, &[1, 0], &batch, false, 1, 1).is_some());
        let short = [ax(1000, 3, 1), ax(3, 1, p)];
        assert!(TiledArgs::new(0, 0, &short, &[1, 0], &batch, true, 1, 1).is_none());
        // Limits: volume, tiles, offsets, permutations.
        let big = [ax(8193, 1, 1)];
        assert!(TiledArgs::new(0, 0, &big, &[0], &[], true, 4, 4).is_none());
        assert!(TiledArgs::new(0, 0, &read, &[0, 0], &batch, true, 1, 1).is_none());
        // Offsets within a tile count elements: every element within 2^31 - 1 elements of
        // the tile's first, whatever their size (here 2^33 bytes for 8-byte elements).
        let far = [ax(16, 1, 1 << 26), ax(16, 16, 1)];
        assert!(TiledArgs::new(0, 0, &far, &[1, 0], &[], false, 1, 1).is_some());
        assert!(TiledArgs::new(0, 0, &far, &[1, 0], &[], false, 8, 8).is_some());
        let edge = |last: i64| [ax(2, 1, 1 << 30), ax(2, 2, last)];
        for size in [1, 2, 4, 8] {
            let within = edge((1 << 30) - 1);
            assert!(TiledArgs::new(0, 0, &within, &[1, 0], &[], false, size, size).is_some());
            let beyond = edge(1 << 30);
            assert!(TiledArgs::new(0, 0, &beyond, &[1, 0], &[], false, size, size).is_none());
            let beyond = [ax(2, 1, 1), ax(2, 1 << 30, 2), ax(3, 1 << 29, 4)];
            let order = [1, 2, 0];
            assert!(TiledArgs::new(0, 0, &beyond, &order, &[], false, size, size).is_none());
        }
        let many = [ax(1 << 16, 0, 0), ax(1 << 15, 0, 0)];
        assert!(TiledArgs::new(0, 0, &read, &[1, 0], &many, true, 1, 1).is_none());
    }

    #[test]
    fn strided_n() {
        let shape: Vec<u64> = vec![2; 40];
        let dst: Vec<i64> = (0..40).map(|k| 1i64 << k).collect();
        let src: Vec<i64> = (0..40).map(|k| 1i64 << (39 - k)).collect();
        let a = StridedArgsN::new(0, 0, &shape, &dst, &src).unwrap();
        assert_eq!(a.n, 1 << 40);
        assert_eq!(
            a.offsets(0b1011),
            (0b1011, (1 << 39) + (1 << 38) + (1 << 36))
        );
        assert!(StridedArgsN::new(0, 0, &[2; 65], &[1; 65], &[1; 65]).is_none());
        assert!(StridedArgsN::new(0, 0, &[1 << 62, 2], &[1, 1], &[1, 1]).is_none());
    }
}
