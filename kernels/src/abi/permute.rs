//! Argument block and geometry of the permute kernels.
//!
//! `copy_permute_bN(args: PermuteArgs)` and `cast_permute_S_D(args: PermuteArgs)` copy (and
//! convert) between two layouts whose fastest axes differ, through tiles in shared memory.
//! The wide kernels `copy_permute_wN(args: PermuteArgs)` do the same for copies whose
//! innermost axis is a contiguous, 16-byte aligned run of `N` = 16, 32 or 64 bytes on both
//! sides: each slot is a whole run, moved as 16-byte vectors ([`PermuteArgs::wide`]). The
//! packed kernels `copy_permute_packed_bN` and `copy_permute_packed128_b1` move 1- and 2-byte
//! elements in 4-byte words ([`PermuteArgs::packed`]), the vector kernel `copy_permute_vec_b1`
//! moves 1-byte elements in 16-byte vectors ([`PermuteArgs::vectorized`]).
//!
//! The axes of [`PermuteArgs`] are split into *chunks*: axis `k` of extent `len[k]` is cut into
//! `nchunks[k] = ceil(len[k] / chunk[k])` pieces. A *tile* is one choice of a piece on every
//! axis; tiles are numbered with axis 0 fastest. Axes 0 and 1 form the tile's **A** side (the
//! destination's fastest axes: the write phase runs along them), axes 2 and 3 its **B** side
//! (the source's fastest axes: the read phase runs along them); axes `4..rank` are batch axes
//! with `chunk == 1`. `chunk[0] * chunk[1]` and `chunk[2] * chunk[3]` must not exceed
//! [`PermuteArgs::tile`] slots. Slot `j` of a side holds the element at local coordinates
//! `(j % chunk[lo], j / chunk[lo])` of that side's two axes (see [`PermuteArgs::slot`]); slots
//! past `chunk[lo] * chunk[hi]` and coordinates past the axis end are skipped.
//!
//! Block [`PERMUTE_BLOCK`] (the other kernels: [`Kernel::block`](super::Kernel::block)), grid
//! [`permute_grid`] (the kernels loop over tiles, so any grid is correct; the grid fills
//! whole waves of resident blocks, each doing a few tiles). Static shared memory: the
//! element-wise kernels' tile of `T * (T + pad) * size(D)` bytes (at most 33280); the packed
//! kernels' tile of `T` rows of `T / k` words (`T / k + 1` where a side has fewer than 32
//! words) plus tables of 8 bytes per A word group and per B slot (at most 17664 bytes in all);
//! the vector kernel's tile of 128 rows of 128 bytes plus a table of 8 bytes per B slot (17408
//! bytes); the wide kernels' tile of `T` rows of `v (T + 1)` vectors (at most 33792 bytes).

use super::args::{FastDiv64, fast_div32, fast_div32_apply};
use super::kernel::Kind;
use super::param_block;

/// Number of axes of [`PermuteArgs`]: 4 tile axes and up to 4 batch axes.
pub const PERMUTE_AXES: usize = 8;
/// Block shape of the large element-wise permute kernels `copy_permute_bN` and
/// `cast_permute_S_D` (required exactly): each thread moves 8 elements per phase.
pub const PERMUTE_BLOCK: (u32, u32, u32) = (32, 16, 1);
/// Block shape of the small element-wise kernels (`copy_permute32_bN`, `cast_permute32_S_D`)
/// and of the 2-byte packed kernel (`copy_permute_packed_b2`) (required exactly).
pub const PERMUTE_SMALL_BLOCK: (u32, u32, u32) = (32, 8, 1);
/// Largest grid of a permute kernel.
pub const PERMUTE_MAX_GRID: u32 = i32::MAX as u32;

/// Slots per side of the tiles of the 64-slot packed kernels and of the large element-wise kernels
/// (`copy_permute_bN`, `cast_permute_S_D`, block [`PERMUTE_BLOCK`]). The small element-wise
/// kernels (`copy_permute32_bN`, `cast_permute32_S_D`, block [`PERMUTE_SMALL_BLOCK`]) have
/// tiles of [`PERMUTE_SMALL_TILE`] slots, for layouts whose tile axes cannot fill the large
/// tiles. (Where the axes fill them, the large tiles, moved by 512 threads, are faster than the
/// small ones.)
pub const PERMUTE_TILE: u64 = 64;
/// Slots per side of the small element-wise kernels' tiles.
pub const PERMUTE_SMALL_TILE: u64 = 32;
/// Slots per side of the large packed kernel's tiles (`copy_permute_packed128_b1`, 1-byte
/// elements, block [`PERMUTE_PACKED128_BLOCK`]): rows of 128 bytes on both sides. The packed kernels
/// `copy_permute_packed_bN` have tiles of [`PERMUTE_TILE`] slots: for 2-byte elements, and
/// for 1-byte layouts whose tile axes cannot fill the large tiles.
pub const PERMUTE_PACKED_TILE: u64 = 128;
/// Slots per side of the vector kernel's tiles (`copy_permute_vec_b1`, 1-byte elements moved
/// as 16-byte vectors, block [`PERMUTE_VEC_BLOCK`]; [`PermuteArgs::vectorized`]).
pub const PERMUTE_VEC_TILE: u64 = 128;
/// Block shape of the vector kernel (required exactly): each thread moves 4 vectors per phase.
pub const PERMUTE_VEC_BLOCK: (u32, u32, u32) = (32, 8, 1);

/// Block shape of the 64-slot packed kernel for 1-byte elements (`copy_permute_packed_b1`,
/// required exactly); the 2-byte one (`copy_permute_packed_b2`) has
/// [`PERMUTE_SMALL_BLOCK`]. Each thread moves 8 words per phase.
pub const PERMUTE_PACKED_BLOCK: (u32, u32, u32) = (32, 4, 1);
/// Block shape of the 128-slot packed kernel (`copy_permute_packed128_b1`, required exactly).
pub const PERMUTE_PACKED128_BLOCK: (u32, u32, u32) = (32, 16, 1);

/// One wide kernel `copy_permute_wN` ([`PERMUTE_WIDE`]).
#[derive(Clone, Copy, Debug)]
pub struct WideKernel {
    /// 16-byte vectors per slot ([`PermuteArgs::wide`]).
    pub vectors: u64,
    /// The kernel's kind.
    pub kind: Kind,
    /// Slots per tile side.
    pub tile: u64,
    /// Block shape (required exactly).
    pub block: (u32, u32, u32),
}

/// The wide kernels. Runs of 16 or 32 bytes in 32 x 32 tiles, of 64 bytes in 16 x 16 tiles (at
/// most 33792 bytes of shared memory); each thread moves 4 vectors per phase (half as many
/// threads moving 8 vectors each are slower).
pub const PERMUTE_WIDE: [WideKernel; 3] = [
    WideKernel {
        vectors: 1,
        kind: Kind::PermuteW16,
        tile: 32,
        block: (32, 8, 1),
    },
    WideKernel {
        vectors: 2,
        kind: Kind::PermuteW32,
        tile: 32,
        block: (32, 16, 1),
    },
    WideKernel {
        vectors: 4,
        kind: Kind::PermuteW64,
        tile: 16,
        block: (32, 8, 1),
    },
];

/// Slots per side of the wide kernel for slots of `v` 16-byte vectors ([`PERMUTE_WIDE`]), or
/// `None` for other `v`.
pub fn wide_tile(v: u64) -> Option<u64> {
    PERMUTE_WIDE.iter().find(|w| w.vectors == v).map(|w| w.tile)
}

/// The kind of permute kernel that runs `args` ([`Kind::Permute`], [`Kind::Permute32`],
/// [`Kind::PermutePacked`], [`Kind::PermutePacked128`], [`Kind::PermuteVec`] or a wide
/// kind); [`Kernel::block`](super::Kernel::block) gives its block shape. Each thread of a
/// packed kernel moves 8 words per phase: 128 threads (1-byte elements, 64-slot tiles), 256
/// threads (2-byte elements) or 512 threads (1-byte elements, 128-slot tiles); each thread of
/// the vector kernel (256 threads) moves 4 vectors of 16 bytes per phase.
pub fn permute_kind(args: &PermuteArgs) -> Kind {
    if let Some(w) = PERMUTE_WIDE
        .iter()
        .find(|w| w.vectors == u64::from(args.wide))
    {
        return w.kind;
    }
    match (args.pack, u64::from(args.tile)) {
        (16, _) => Kind::PermuteVec,
        (0, PERMUTE_SMALL_TILE) => Kind::Permute32,
        (0, _) => Kind::Permute,
        (_, PERMUTE_PACKED_TILE) => Kind::PermutePacked128,
        _ => Kind::PermutePacked,
    }
}

/// Argument block of `*_permute*` (688 bytes). Extents, strides and steps count elements
/// (for the wide kernels: runs, and 16-byte units); addresses are bytes.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PermuteArgs {
    /// Destination byte address of the element at multi-index 0.
    pub dst: u64,
    /// Source byte address of the element at multi-index 0.
    pub src: u64,
    /// Number of tiles: the product of `nchunks[..rank]`, below 2^31.
    pub tiles: u64,
    /// Number of axes, `4..=PERMUTE_AXES`.
    pub rank: u32,
    /// Elements per 4-byte word of the packed kernels (`copy_permute_packed_bN`,
    /// `copy_permute_packed128_b1`): `4 / size` (set by [`PermuteArgs::packed`]); 16 for the
    /// vector kernel `copy_permute_vec_b1` (set by [`PermuteArgs::vectorized`]); 0 for the
    /// element-wise kernels. The kernels do not read it.
    pub pack: u32,
    /// Extent of each axis (1 for unused axes).
    pub len: [u64; PERMUTE_AXES],
    /// Extent of one piece of each axis (1 for batch and unused axes).
    pub chunk: [u64; PERMUTE_AXES],
    /// `ceil(len / chunk)` per axis.
    pub nchunks: [u64; PERMUTE_AXES],
    /// Fast division by `nchunks[k]`.
    pub div: [FastDiv64; PERMUTE_AXES],
    /// Destination strides.
    pub dst_strides: [i64; PERMUTE_AXES],
    /// Source strides.
    pub src_strides: [i64; PERMUTE_AXES],
    /// `chunk[k] * dst_strides[k]`: the destination step from one piece to the next.
    pub dst_steps: [i64; PERMUTE_AXES],
    /// `chunk[k] * src_strides[k]`.
    pub src_steps: [i64; PERMUTE_AXES],
    /// 32-bit fast division by `nchunks[k]` ([`fast_div32`]): magic numbers.
    pub magic32: [u32; PERMUTE_AXES],
    /// 32-bit fast division by `nchunks[k]`: shifts.
    pub shift32: [u32; PERMUTE_AXES],
    /// Slots per tile side: [`PERMUTE_TILE`], [`PERMUTE_SMALL_TILE`],
    /// [`PERMUTE_PACKED_TILE`] or [`PERMUTE_VEC_TILE`], or a wide kernel's ([`PERMUTE_WIDE`]);
    /// with `pack` and `wide` it tells which kernel runs the plan. The kernels do not read it.
    pub tile: u32,
    /// 1 when the large element-wise kernel for a 2-byte destination stores pairs of elements
    /// as 4-byte words (set by [`PermuteArgs::with_word_stores`]), else 0. The kernels read it.
    pub words: u32,
    /// 1 when every extent is below 2^31 and, for both operands, the sum over the axes of
    /// `|step| * (nchunks - 1)` (a bound on every tile origin's element offset and on every
    /// partial sum of it) is below 2^31, so that the kernels split tile indices into origins
    /// with 32-bit arithmetic; else 0. Set by [`PermuteArgs::new`]; the kernels read it.
    pub origin32: u32,
    /// 16-byte vectors per slot of the wide kernels (`copy_permute_wN`, `N = 16 wide`): 1, 2 or
    /// 4, or 0 for the other kernels. With `wide` set, a slot is a run of `wide` vectors,
    /// contiguous on both sides; extents and chunks count runs, strides and steps 16-byte
    /// units. Set by
    /// [`PermuteArgs::widened`]; the kernels do not read it.
    pub wide: u32,
}

/// Selects one operand's stride of an axis.
type StrideOf = fn(&PermuteAxis) -> i64;

/// One axis of a permute plan: extent, piece size and strides.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PermuteAxis {
    /// Extent.
    pub len: u64,
    /// Piece size (1 for batch axes).
    pub chunk: u64,
    /// Destination stride in elements.
    pub dst: i64,
    /// Source stride in elements.
    pub src: i64,
}

impl PermuteArgs {
    /// Builds the block from the four tile axes (`[a0, a1, b0, b1]`) and the batch axes
    /// (at most 4) for elements of `src_size` and `dst_size` bytes; `None` when an extent or
    /// chunk is zero, a side holds more slots than `tile`, a step overflows, there are 2^31
    /// tiles or more, or an element of a tile lies 2^31 bytes or more from the tile's origin.
    pub fn new(
        dst: u64,
        src: u64,
        tile_axes: [PermuteAxis; 4],
        batch: &[PermuteAxis],
        tile: u64,
        src_size: usize,
        dst_size: usize,
    ) -> Option<Self> {
        if batch.len() > PERMUTE_AXES - 4
            || tile_axes[0].chunk * tile_axes[1].chunk > tile
            || tile_axes[2].chunk * tile_axes[3].chunk > tile
        {
            return None;
        }
        let mut a = Self {
            dst,
            src,
            rank: (4 + batch.len()) as u32,
            len: [1; PERMUTE_AXES],
            chunk: [1; PERMUTE_AXES],
            nchunks: [1; PERMUTE_AXES],
            tile: tile as u32,
            ..Self::default()
        };
        let mut tiles = 1u64;
        for (k, ax) in tile_axes.iter().chain(batch).enumerate() {
            if ax.len == 0 || ax.chunk == 0 || ax.chunk > ax.len {
                return None;
            }
            let n = ax.len.div_ceil(ax.chunk);
            tiles = tiles.checked_mul(n)?;
            a.len[k] = ax.len;
            a.chunk[k] = ax.chunk;
            a.nchunks[k] = n;
            a.div[k] = FastDiv64::new(n);
            a.dst_strides[k] = ax.dst;
            a.src_strides[k] = ax.src;
            a.dst_steps[k] = ax.dst.checked_mul(i64::try_from(ax.chunk).ok()?)?;
            a.src_steps[k] = ax.src.checked_mul(i64::try_from(ax.chunk).ok()?)?;
        }
        // The kernels split tile indices with 32-bit arithmetic.
        if tiles >= 1 << 31 {
            return None;
        }
        for k in 0..PERMUTE_AXES {
            (a.magic32[k], a.shift32[k]) = fast_div32(a.nchunks[k] as u32);
        }
        // The kernels hold each slot's offset from the tile origin as a 32-bit byte offset.
        for side in [&tile_axes[..2], &tile_axes[2..]] {
            let sides: [(StrideOf, usize); 2] = [(|a| a.dst, dst_size), (|a| a.src, src_size)];
            for (stride, size) in sides {
                let reach: u128 = side
                    .iter()
                    .map(|a| u128::from(a.chunk - 1) * u128::from(stride(a).unsigned_abs()))
                    .sum::<u128>()
                    * size as u128;
                if reach > i32::MAX as u128 {
                    return None;
                }
            }
        }
        a.tiles = tiles;
        // The farthest tile origin from element 0, per operand, in elements.
        let reach = |steps: &[i64; PERMUTE_AXES]| -> u128 {
            (0..PERMUTE_AXES)
                .map(|k| u128::from(steps[k].unsigned_abs()) * u128::from(a.nchunks[k] - 1))
                .sum()
        };
        let small = |x: u128| x <= i32::MAX as u128;
        a.origin32 = u32::from(
            a.len.iter().all(|&l| small(u128::from(l)))
                && small(reach(&a.dst_steps))
                && small(reach(&a.src_steps)),
        );
        Some(a)
    }

    /// These arguments with [`PermuteArgs::words`] set when the large element-wise kernel
    /// (tiles of [`PERMUTE_TILE`] slots) for a destination of `dst_size` bytes can store pairs
    /// of elements as aligned 4-byte words: the destination has 2-byte elements, axis 0
    /// destination stride 1 and an even extent and chunk, every other destination stride
    /// (of the tile and batch axes) is even, and the destination base is 4-byte aligned. Then
    /// A slots `2i` and `2i + 1` are always both inside a tile or both outside it, and their
    /// elements form one aligned word. Otherwise the arguments are returned unchanged.
    pub fn with_word_stores(mut self, dst_size: usize) -> Self {
        let r = self.rank as usize;
        let even = |x: i64| x % 2 == 0;
        let ok = dst_size == 2
            && self.pack == 0
            && u64::from(self.tile) == PERMUTE_TILE
            && self.dst % 4 == 0
            && self.dst_strides[0] == 1
            && self.len[0] % 2 == 0
            && self.chunk[0] % 2 == 0
            && self.dst_strides[1..r].iter().all(|&s| even(s));
        self.words = u32::from(ok);
        self
    }

    /// These arguments for `copy_permute_packed_bN` (1- and 2-byte copies) if its conditions
    /// hold, else `None`: with `k = 4 / size` elements per word, axis 0 has destination stride
    /// 1 and axis 2 source stride 1, both with extents and chunks that are multiples of `k`;
    /// every other destination stride and every other source stride is a multiple of `k`; both
    /// base addresses are 4-byte aligned; the tile is [`PERMUTE_TILE`] slots per side, or
    /// [`PERMUTE_PACKED_TILE`] for 1-byte elements. Then every group of `k` slots along axis 0
    /// (or 2) is one aligned word of the destination (or source), and lies inside one piece
    /// of that axis.
    pub fn packed(mut self, size: usize) -> Option<Self> {
        let tile = u64::from(self.tile);
        if !matches!(
            (size, tile),
            (1 | 2, PERMUTE_TILE) | (1, PERMUTE_PACKED_TILE)
        ) {
            return None;
        }
        let k = (4 / size) as u64;
        let ki = k as i64;
        let mult = |x: i64| x % ki == 0;
        let ok = self.dst % 4 == 0
            && self.src % 4 == 0
            && self.dst_strides[0] == 1
            && self.src_strides[2] == 1
            && [0, 2]
                .iter()
                .all(|&a| self.len[a] % k == 0 && self.chunk[a] % k == 0)
            && (0..PERMUTE_AXES).all(|a| a == 0 || mult(self.dst_strides[a]))
            && (0..PERMUTE_AXES).all(|a| a == 2 || mult(self.src_strides[a]));
        ok.then(|| {
            self.pack = k as u32;
            self.words = 0;
            self
        })
    }

    /// These arguments for the vector kernel `copy_permute_vec_b1` (1-byte copies) if its
    /// conditions hold, else `None`: the tile is [`PERMUTE_VEC_TILE`] slots per side, axis 0
    /// has destination stride 1 and axis 2 source stride 1, both with extents and chunks that
    /// are multiples of 16; every other stride of either operand is a multiple of 16; both
    /// base addresses are 16-byte aligned. Then every group of 16 slots along axis 0 (or 2)
    /// is one aligned 16-byte vector of the destination (or source) and lies inside one piece
    /// of that axis, and every row of a tile starts 16-byte aligned in both operands.
    pub fn vectorized(mut self, size: usize) -> Option<Self> {
        let mult = |x: i64| x % 16 == 0;
        let ok = size == 1
            && u64::from(self.tile) == PERMUTE_VEC_TILE
            && self.pack == 0
            && self.wide == 0
            && self.dst % 16 == 0
            && self.src % 16 == 0
            && self.dst_strides[0] == 1
            && self.src_strides[2] == 1
            && [0, 2]
                .iter()
                .all(|&a| self.len[a] % 16 == 0 && self.chunk[a] % 16 == 0)
            && (0..PERMUTE_AXES).all(|a| a == 0 || mult(self.dst_strides[a]))
            && (0..PERMUTE_AXES).all(|a| a == 2 || mult(self.src_strides[a]));
        ok.then(|| {
            self.pack = 16;
            self.words = 0;
            self
        })
    }

    /// These arguments, built for 16-byte elements, for the wide kernel whose slots are runs
    /// of `v` 16-byte vectors, if the tile size is that kernel's ([`wide_tile`]) and both base
    /// addresses are 16-byte aligned; else `None`. The caller folds the runs out of the axes
    /// and checks that every run is contiguous and 16-byte aligned on both sides.
    pub fn widened(mut self, v: u64) -> Option<Self> {
        let ok = wide_tile(v) == Some(u64::from(self.tile))
            && self.pack == 0
            && self.dst % 16 == 0
            && self.src % 16 == 0;
        ok.then(|| {
            self.wide = v as u32;
            self.words = 0;
            self
        })
    }

    /// The tile's origin, computed like the kernels do: element offsets `(dst, src)` of its
    /// first element and the remaining extents `len - origin` of the four tile axes. With
    /// [`PermuteArgs::origin32`], the kernels' 32-bit arithmetic is replayed as well and must
    /// agree (panics if not).
    #[allow(clippy::needless_range_loop)] // the kernels' loop, axis by axis
    pub fn tile_origin(&self, t: u64) -> (i64, i64, [u64; 4]) {
        let (mut x, mut d, mut s) = (t as u32, 0i64, 0i64);
        let mut rem = [0u64; 4];
        for k in 0..self.rank as usize {
            let q = fast_div32_apply(x, self.magic32[k], self.shift32[k]);
            let c = u64::from(x.wrapping_sub(q.wrapping_mul(self.nchunks[k] as u32)));
            d = d.wrapping_add((c as i64).wrapping_mul(self.dst_steps[k]));
            s = s.wrapping_add((c as i64).wrapping_mul(self.src_steps[k]));
            if k < 4 {
                rem[k] = self.len[k].wrapping_sub(c.wrapping_mul(self.chunk[k]));
            }
            x = q;
        }
        if self.origin32 != 0 {
            let (mut x, mut d32, mut s32) = (t as u32, 0i32, 0i32);
            for k in 0..self.rank as usize {
                let q = fast_div32_apply(x, self.magic32[k], self.shift32[k]);
                let c = x.wrapping_sub(q.wrapping_mul(self.nchunks[k] as u32));
                d32 = d32.wrapping_add((c as i32).wrapping_mul(self.dst_steps[k] as i32));
                s32 = s32.wrapping_add((c as i32).wrapping_mul(self.src_steps[k] as i32));
                if k < 4 {
                    let r = (self.len[k] as u32).wrapping_sub(c.wrapping_mul(self.chunk[k] as u32));
                    assert_eq!(u64::from(r), rem[k], "32-bit remaining extent of tile {t}");
                }
                x = q;
            }
            assert_eq!(
                (i64::from(d32), i64::from(s32)),
                (d, s),
                "32-bit origin of tile {t}"
            );
        }
        (d, s, rem)
    }

    /// Local coordinates of slot `j` of side `side` (0: axes 0 and 1, 1: axes 2 and 3), or
    /// `None` for a slot past the side's `chunk[lo] * chunk[hi]`.
    pub fn slot(&self, side: usize, j: u64) -> Option<(u64, u64)> {
        let (c0, c1) = (self.chunk[2 * side], self.chunk[2 * side + 1]);
        (j < c0 * c1).then(|| (j % c0, j / c0))
    }
}

/// Tiles per block that [`permute_grid`] aims at: [`PermuteArgs::tiles_per_block`].
pub const PERMUTE_TILES_PER_BLOCK: u64 = 2;
/// Tiles per block that [`permute_grid`] aims at for the 128-slot packed kernel, whose blocks
/// start with a table of their slots in shared memory.
pub const PERMUTE_PACKED128_TILES_PER_BLOCK: u64 = 8;
/// Most blocks [`permute_grid`] launches per resident block.
pub const PERMUTE_MAX_WAVES: u64 = 16;

impl PermuteArgs {
    /// Tiles per block for [`permute_grid`]: [`PERMUTE_PACKED128_TILES_PER_BLOCK`] for the
    /// 128-slot packed kernel, else [`PERMUTE_TILES_PER_BLOCK`] (also for the vector kernel,
    /// which gains nothing from more tiles per block).
    pub fn tiles_per_block(&self) -> u64 {
        if self.pack == 4 && u64::from(self.tile) == PERMUTE_PACKED_TILE {
            PERMUTE_PACKED128_TILES_PER_BLOCK
        } else {
            PERMUTE_TILES_PER_BLOCK
        }
    }
}

/// Overrides of the rule that sizes a permute kernel's grid, for one launch, for tests and
/// benchmarks that compare grids (the blocks loop over tiles, so every grid is correct).
///
/// The rule: one block per tile up to the blocks the device keeps resident, then whole waves
/// of resident blocks, as many as give each block the few tiles its kernel aims at, up to a
/// fixed number of waves. `None` keeps the rule's choice; `Some(0)` counts as `Some(1)`. The
/// default overrides nothing.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct GridOptions {
    /// Tiles per block that the rule aims at, for every kernel, instead of the kernel's own
    /// number.
    pub tiles_per_block: Option<u32>,
    /// A grid of this many times the blocks the device keeps resident, instead of the rule's
    /// waves (still at most one block per tile).
    pub grid_scale: Option<u32>,
    /// At most this many blocks, so that every block loops over many tiles.
    pub max_grid: Option<u32>,
    /// Run tiled plans on the tiled kernels even where a narrow kernel
    /// ([`tiled_narrow`](super::tiled_narrow)) takes them.
    pub no_narrow: bool,
    /// Run vector copies on the register-pipelined tiled kernels ([`Kind::Tiled`](super::Kind))
    /// even where the `cp.async` kernels take them ([`tiled_launch_kind`](super::tiled_launch_kind)),
    /// as on devices before sm_80.
    pub no_async: bool,
}

/// Grid (x) of a permute kernel on a device that keeps `resident` of its blocks resident (all
/// multiprocessors together; the driver's occupancy for the kernel); 0 when there is nothing
/// to do. One block per tile up to a full device, then whole waves of `resident` blocks, as
/// many as give each block `per_block` tiles ([`PermuteArgs::tiles_per_block`]), at most
/// [`PERMUTE_MAX_WAVES`]; `grid` overrides parts of this rule.
///
/// The blocks loop over tiles, so that their per-thread set-up is paid once for several
/// tiles: a block per tile is slower than a grid of a few waves. Whole waves: a last wave that
/// fills part of the device leaves the rest idle (u8 tiles of 128 x 128 at 3 blocks per
/// multiprocessor: 5.17 waves). Most kernels are fastest aiming at few tiles per block
/// ([`PERMUTE_TILES_PER_BLOCK`]), which keeps the grid large; the 128-slot packed kernel, whose
/// blocks start by writing a table of their slots, aims at more
/// ([`PERMUTE_PACKED128_TILES_PER_BLOCK`]).
pub fn permute_grid(tiles: u64, resident: u64, per_block: u64, grid: GridOptions) -> u32 {
    let resident = resident.max(1);
    let per_block = grid.tiles_per_block.map_or(per_block, u64::from).max(1);
    let blocks = match grid.grid_scale {
        None => resident * (tiles / per_block / resident).clamp(1, PERMUTE_MAX_WAVES),
        Some(scale) => resident.saturating_mul(u64::from(scale.max(1))),
    };
    let cap = grid
        .max_grid
        .map_or(PERMUTE_MAX_GRID, |n| n.clamp(1, PERMUTE_MAX_GRID));
    tiles.min(blocks).min(u64::from(cap)) as u32
}

// SAFETY: `#[repr(C)]`, integers and integer arrays only (the fields' coverage is
// checked in tests).
param_block!(PermuteArgs {
    dst,
    src,
    tiles,
    rank,
    pack,
    len,
    chunk,
    nchunks,
    div,
    dst_strides,
    src_strides,
    dst_steps,
    src_steps,
    magic32,
    shift32,
    tile,
    words,
    origin32,
    wide,
});

#[cfg(test)]
mod tests {
    use super::*;
    use core::mem::{align_of, offset_of, size_of};

    #[test]
    fn layout_matches_the_kernels() {
        assert_eq!(size_of::<PermuteArgs>(), 688);
        assert_eq!(offset_of!(PermuteArgs, tile), 672);
        assert_eq!(offset_of!(PermuteArgs, words), 676);
        assert_eq!(offset_of!(PermuteArgs, origin32), 680);
        assert_eq!(offset_of!(PermuteArgs, wide), 684);
        assert_eq!(align_of::<PermuteArgs>(), 8);
        assert_eq!(offset_of!(PermuteArgs, tiles), 16);
        assert_eq!(offset_of!(PermuteArgs, rank), 24);
        assert_eq!(offset_of!(PermuteArgs, len), 32);
        assert_eq!(offset_of!(PermuteArgs, chunk), 96);
        assert_eq!(offset_of!(PermuteArgs, nchunks), 160);
        assert_eq!(offset_of!(PermuteArgs, div), 224);
        assert_eq!(offset_of!(PermuteArgs, dst_strides), 352);
        assert_eq!(offset_of!(PermuteArgs, src_strides), 416);
        assert_eq!(offset_of!(PermuteArgs, dst_steps), 480);
        assert_eq!(offset_of!(PermuteArgs, src_steps), 544);
        assert_eq!(offset_of!(PermuteArgs, magic32), 608);
        assert_eq!(offset_of!(PermuteArgs, shift32), 640);
    }

    fn ax(len: u64, chunk: u64, dst: i64, src: i64) -> PermuteAxis {
        PermuteAxis {
            len,
            chunk,
            dst,
            src,
        }
    }

    #[test]
    fn tiles_cover_the_axes() {
        let one = ax(1, 1, 0, 0);
        let a = PermuteArgs::new(
            0,
            0,
            [
                ax(5, 5, 1, 100),
                ax(20, 6, 5, 1000),
                ax(70, 32, 100, 1),
                one,
            ],
            &[ax(3, 1, 10_000, 70_000)],
            32,
            4,
            4,
        )
        .unwrap();
        assert_eq!(a.tiles, 4 * 3 * 3);
        assert_eq!(a.rank, 5);
        // Tile 1 + 4 * (2 + 3 * 2): piece 1 of axis 1, piece 2 of axis 2, batch 2.
        let (d, s, rem) = a.tile_origin(1 + 4 * (2 + 3 * 2));
        assert_eq!(d, 6 * 5 + 64 * 100 + 2 * 10_000);
        assert_eq!(s, 6 * 1000 + 64 + 2 * 70_000);
        assert_eq!(rem, [5, 14, 6, 1]);
        assert_eq!(a.slot(0, 29), Some((4, 5)));
        assert_eq!(a.slot(0, 30), None);
        assert_eq!(a.slot(1, 31), Some((31, 0)));
        // Too many slots, zero extents, too many batch axes.
        let new = |t: [PermuteAxis; 4], b: &[PermuteAxis]| PermuteArgs::new(0, 0, t, b, 32, 4, 4);
        assert!(new([ax(5, 5, 1, 1), ax(9, 7, 5, 1), one, one], &[]).is_none());
        assert!(new([ax(0, 1, 1, 1), one, one, one], &[]).is_none());
        assert!(new([one; 4], &[one; 5]).is_none());
        // Offsets inside a tile must fit in 32 bits: 31 * 2^25 * 4 bytes does not.
        assert!(new([ax(64, 32, 1, 1 << 25), one, ax(64, 32, 64, 1), one], &[]).is_none());
        assert!(new([ax(64, 32, 1, 1 << 22), one, ax(64, 32, 64, 1), one], &[]).is_some());
        // 32-bit origins: the farthest origin (here the last tile's, reversed on axis 2) below
        // 2^31 elements on both sides, and every extent too.
        assert_eq!(a.origin32, 1);
        for t in 0..a.tiles {
            a.tile_origin(t); // replays the 32-bit arithmetic and compares
        }
        let batch = |len: u64, dst: i64, src: i64| {
            new(
                [ax(64, 32, 1, 64), one, ax(64, 32, 64, -1), one],
                &[ax(len, 1, dst, src)],
            )
            .unwrap()
        };
        // The farthest origins lie (len - 1) * 4096 + 2080 elements away on both sides (32 +
        // 2048 from the tile axes' second pieces); so the edge is at 2^31 - 1.
        let edge = (i32::MAX as i64 - 2080) / 4096;
        assert_eq!(batch(edge as u64 + 1, 4096, 4096).origin32, 1);
        assert_eq!(batch(edge as u64 + 2, 4096, 4096).origin32, 0);
        assert_eq!(batch(edge as u64 + 2, 4096, -4096).origin32, 0);
        let long = new([ax(1 << 31, 32, 0, 0), one, ax(64, 32, 64, 1), one], &[]).unwrap();
        assert_eq!(long.origin32, 0);
        let big = batch(edge as u64 + 1, 4096, -4096);
        assert_eq!(big.origin32, 1);
        for t in (0..big.tiles).step_by(997).chain(big.tiles - 4..big.tiles) {
            big.tile_origin(t);
        }
        let rule = GridOptions::default();
        // 132 multiprocessors with 4 resident blocks each: 528.
        assert_eq!(permute_grid(0, 528, 2, rule), 0);
        assert_eq!(permute_grid(500, 528, 2, rule), 500);
        // A full device, then whole waves of 8 tiles per block, at most 16 waves.
        assert_eq!(permute_grid(2000, 528, 8, rule), 528);
        assert_eq!(permute_grid(65536, 528, 8, rule), 528 * 15);
        assert_eq!(permute_grid(1 << 30, 528, 8, rule), 528 * 16);
        // 3 resident blocks per multiprocessor: 5 waves, not 2048 blocks (5.17 waves).
        assert_eq!(permute_grid(16384, 396, 8, rule), 396 * 5);
        assert_eq!(permute_grid(16384, 0, 8, rule), 16);
        // 2 tiles per block.
        assert_eq!(permute_grid(8192, 264, 2, rule), 264 * 15);
        assert_eq!(permute_grid(2000, 264, 2, rule), 264 * 3);
        assert_eq!(permute_grid(2000, 264, 0, rule), 264 * 7);
        // Overrides, each on its own and together; zeros count as ones. 264 resident blocks.
        let over = |tiles, per_block, tiles_per_block, grid_scale, max_grid| {
            let grid = GridOptions {
                tiles_per_block,
                grid_scale,
                max_grid,
                ..GridOptions::default()
            };
            permute_grid(tiles, 264, per_block, grid)
        };
        assert_eq!(over(8192, 8, Some(2), None, None), 264 * 15);
        assert_eq!(over(8192, 2, Some(0), None, None), 264 * 16);
        assert_eq!(over(8192, 2, None, Some(4), None), 264 * 4);
        assert_eq!(over(500, 2, None, Some(4), None), 500);
        assert_eq!(over(8192, 2, None, Some(0), None), 264);
        assert_eq!(over(8192, 2, None, Some(u32::MAX), None), 8192);
        assert_eq!(over(8192, 2, None, None, Some(3)), 3);
        assert_eq!(over(2, 2, None, None, Some(3)), 2);
        assert_eq!(over(8192, 2, None, None, Some(0)), 1);
        assert_eq!(over(0, 2, None, None, Some(3)), 0);
        assert_eq!(over(8192, 2, Some(1), Some(2), Some(100)), 100);
        let square = [ax(256, 128, 1, 256), one, ax(256, 128, 256, 1), one];
        let packed128 = PermuteArgs::new(0, 0, square, &[], PERMUTE_PACKED_TILE, 1, 1)
            .and_then(|a| a.packed(1))
            .unwrap();
        assert_eq!(packed128.tiles_per_block(), 8);
        let small = new([ax(64, 32, 1, 64), one, ax(64, 32, 64, 1), one], &[]).unwrap();
        assert_eq!(small.tiles_per_block(), 2);
        // 2^31 tiles or more: not for these kernels.
        let big = ax(1 << 40, 1, 1, 1);
        assert!(new([ax(64, 32, 1, 64), one, ax(64, 32, 64, 1), one], &[big]).is_none());
        let a = new([ax(64, 32, 1, 64), one, ax(64, 32, 64, 1), one], &[]).unwrap();
        assert_eq!(a.tile, 32);
    }
}
