//! The identity of every kernel, and the name of its PTX module.

use super::{
    CONTIG_BLOCK, DType, NARROW_MAX_CHANNELS, NARROW_MIN_CHANNELS, NARROW_SHIFTED_SIZES,
    NARROW_SIZES, NARROW_THREADS, Narrow, PERMUTE_BLOCK, PERMUTE_PACKED_BLOCK, PERMUTE_PACKED_TILE,
    PERMUTE_PACKED128_BLOCK, PERMUTE_SMALL_BLOCK, PERMUTE_SMALL_TILE, PERMUTE_TILE,
    PERMUTE_VEC_BLOCK, PERMUTE_VEC_TILE, PERMUTE_WIDE, ROW_BLOCK, RowRuns, STRIDED_BLOCK,
    TILED_EW_SIZES, TILED_WIDE_THREADS, TRANSPOSE_BLOCK, WideKernel, narrow_shifted_exists,
    tiled_max_threads,
};

/// The largest element of the row fill kernels (`fill_rows_b1`, `fill_rows_b2`). On an H100
/// the strided fill kernel stored 4-byte elements as fast as the row kernel or faster (rows
/// of 64 to 256 bytes of f32 at 0.92-1.16 of a memcpy of the bytes written, where the row
/// kernel ran at 0.82-1.07; the same from rows of 1 KiB on; 8-byte elements were not
/// measured), while it stored 1- and 2-byte elements at about 0.32 and 0.64.
pub const FILL_ROWS_MAX_SIZE: usize = 2;

/// What a kernel does with its operands, and so its argument list: with the element types,
/// a [`Kernel`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    /// Contiguous operands: `(dst, src, n, head)`, fills `(dst, n, head, value_bits)`.
    Contig,
    /// Any strides, 32-bit index math: [`StridedArgs32`](super::StridedArgs32) (fills: and
    /// `value_bits`).
    Strided32,
    /// Any strides, 64-bit index math: [`StridedArgs64`](super::StridedArgs64) (fills: and
    /// `value_bits`).
    Strided64,
    /// [`Kind::Strided32`] of one axis (`rank` 1; its code splits no index): fills and copies,
    /// whose first use in a process JIT-compiles a fraction of the general kernel's code.
    Strided1,
    /// Tiled transpose of the two innermost axes: [`TransposeArgs`](super::TransposeArgs).
    Transpose,
    /// Rows contiguous on both sides: [`RowArgs`](super::RowArgs) (fills: rows contiguous in
    /// the destination, the source's fields unused, and `value_bits`).
    Rows,
    /// Rows read backwards: the destination's run forwards, the source's backwards (element
    /// `i` of a row from `src - i`), moved as 16-byte vectors whose elements are reversed in
    /// registers: [`RowArgs`](super::RowArgs) (`src` the address of each row's element zero,
    /// its highest). Copies only.
    RowsRev,
    /// [`Kind::RowsRev`] of runs of 3 elements, each run's elements in order (an image of 3
    /// channels per pixel read right to left): groups of `16 / size` runs move as three
    /// 16-byte vectors, in rows of teams of whole warps through shared memory, a warp's 32
    /// groups at a time, so that its loads and stores cover consecutive vectors (register
    /// limit [`ROW_STAGED_MAX_REGISTERS`](super::ROW_STAGED_MAX_REGISTERS)). Copies of 1- and
    /// 2-byte elements only ([`RowRuns::exists`]).
    RowsRev3,
    /// Rows of runs of 2 elements in order, each run's elements reversed (pairs swapped):
    /// [`RowArgs`](super::RowArgs) (`src` each row's lowest byte), groups of runs in 16-byte
    /// vectors. Copies only; see [`RowRuns`](super::RowRuns).
    RunsRev2,
    /// [`Kind::RunsRev2`] of runs of 3 elements (an image of 3 channels per pixel with its
    /// channels reversed, RGB <-> BGR): groups of `16 / size` runs in three 16-byte vectors,
    /// through shared memory as for [`Kind::RowsRev3`]; 1- and 2-byte elements only.
    RunsRev3,
    /// [`Kind::RunsRev2`] of runs of 4 elements (RGBA <-> ABGR).
    RunsRev4,
    /// Rows read forwards whose two sides are off each other's 16-byte alignment (a column
    /// slice `x[.., a..b]` read or written, rows of an odd length in reverse order): each
    /// aligned destination vector from the two aligned source blocks that cover its bytes,
    /// shifted in registers: [`RowArgs`](super::RowArgs) (`src` each row's element zero), the
    /// reversed row kernels' code with runs of one element each read backwards, which is each
    /// element as it is ([`RowRuns::SHIFTED`](super::RowRuns::SHIFTED)). Copies only.
    RowsShifted,
    /// Rows contiguous in the destination whose source holds each row in periods of
    /// elements: [`RowGatherArgs`](super::RowGatherArgs) (images flipped left-right or with
    /// their channels reversed, rows read backwards; casts of them in one pass, and copies of
    /// runs that the reversed row kinds do not take). Each lane stores 16-byte units of the
    /// wider side (aligned stores of the destination) and loads their elements one by one.
    RowsGather,
    /// The mirror of [`Kind::RowsGather`]: rows contiguous in the source whose destination
    /// holds each row in periods of elements ([`RowGatherArgs`](super::RowGatherArgs), the
    /// period describing the destination): a contiguous array written into a column slice
    /// `x[.., ..c]`, also with the slice's rows in reverse order. Each lane loads 16-byte
    /// units of the source (aligned loads) and stores their elements one by one. Copies
    /// only.
    RowsScatter,
    /// Element-wise permute in tiles of [`PERMUTE_TILE`] slots:
    /// [`PermuteArgs`](super::PermuteArgs), as are all the permute kinds.
    Permute,
    /// Element-wise permute in tiles of [`PERMUTE_SMALL_TILE`] slots.
    Permute32,
    /// Permute of 1- and 2-byte elements in 4-byte words, tiles of [`PERMUTE_TILE`] slots.
    PermutePacked,
    /// Permute of 1-byte elements in 4-byte words, tiles of [`PERMUTE_PACKED_TILE`] slots.
    PermutePacked128,
    /// Permute of 1-byte elements in 16-byte vectors, tiles of [`PERMUTE_VEC_TILE`] slots.
    PermuteVec,
    /// Permute of runs of 16 bytes ([`PERMUTE_WIDE`]).
    PermuteW16,
    /// Permute of runs of 32 bytes ([`PERMUTE_WIDE`]).
    PermuteW32,
    /// Permute of runs of 64 bytes ([`PERMUTE_WIDE`]).
    PermuteW64,
    /// Tiles spanning several axes, 16-byte vectors on both sides:
    /// [`TiledArgs`](super::TiledArgs).
    Tiled,
    /// Tiles spanning several axes, one element per access: [`TiledArgs`](super::TiledArgs).
    TiledE,
    /// [`Kind::TiledE`] for copies of 1-, 2- and 4-byte elements in blocks of up to
    /// [`TILED_WIDE_THREADS`](super::TILED_WIDE_THREADS) threads, tiles of up to
    /// [`tiled_ew_max_volume`](super::tiled_ew_max_volume) elements:
    /// [`TiledArgs`](super::TiledArgs).
    TiledEW,
    /// [`Kind::Tiled`] for copies of 1- and 2-byte elements with the source copied into
    /// shared memory by `cp.async`, [`TILED_ASYNC_BUFFERS`](super::TILED_ASYNC_BUFFERS) tiles
    /// per block (sm_80 and later): [`TiledArgs`](super::TiledArgs).
    TiledA,
    /// A tile of a narrow axis and pixels, split into planes or joined from them with
    /// 16-byte vectors on both sides ([`Kernel::Narrow`]): [`TiledArgs`](super::TiledArgs).
    Narrow,
    /// Any strides and any number of axes, 64-bit index math:
    /// [`StridedArgsN`](super::StridedArgsN) (fills: and `value_bits`).
    StridedN,
}

impl Kind {
    /// Every kind.
    pub const ALL: [Kind; 28] = [
        Kind::Contig,
        Kind::Strided32,
        Kind::Strided64,
        Kind::Strided1,
        Kind::Transpose,
        Kind::Rows,
        Kind::RowsRev,
        Kind::RowsRev3,
        Kind::RunsRev2,
        Kind::RunsRev3,
        Kind::RunsRev4,
        Kind::RowsShifted,
        Kind::RowsGather,
        Kind::RowsScatter,
        Kind::Permute,
        Kind::Permute32,
        Kind::PermutePacked,
        Kind::PermutePacked128,
        Kind::PermuteVec,
        Kind::PermuteW16,
        Kind::PermuteW32,
        Kind::PermuteW64,
        Kind::Tiled,
        Kind::TiledE,
        Kind::TiledEW,
        Kind::TiledA,
        Kind::Narrow,
        Kind::StridedN,
    ];

    /// The kinds of the fill kernels ([`Kind::Rows`] for elements of up to
    /// [`FILL_ROWS_MAX_SIZE`] bytes).
    pub const FILL: [Kind; 6] = [
        Kind::Contig,
        Kind::Strided32,
        Kind::Strided64,
        Kind::Strided1,
        Kind::Rows,
        Kind::StridedN,
    ];

    /// The kinds that exist for every copy and cast.
    pub const ELEMENTWISE: [Kind; 10] = [
        Kind::Contig,
        Kind::Strided32,
        Kind::Strided64,
        Kind::Transpose,
        Kind::Rows,
        Kind::Permute,
        Kind::Permute32,
        Kind::Tiled,
        Kind::TiledE,
        Kind::StridedN,
    ];

    /// How the reversed row kinds read their rows; `None` for the other kinds.
    pub const fn row_runs(self) -> Option<RowRuns> {
        match self {
            Kind::RowsRev => Some(RowRuns::new(1, true)),
            Kind::RowsRev3 => Some(RowRuns::new(3, true)),
            Kind::RunsRev2 => Some(RowRuns::new(2, false)),
            Kind::RunsRev3 => Some(RowRuns::new(3, false)),
            Kind::RunsRev4 => Some(RowRuns::new(4, false)),
            Kind::RowsShifted => Some(RowRuns::SHIFTED),
            _ => None,
        }
    }

    /// The reversed row kind that reads rows as `runs` says.
    pub fn of_row_runs(runs: RowRuns) -> Kind {
        Kind::ALL
            .into_iter()
            .find(|k| k.row_runs() == Some(runs))
            .expect("a reversed row form with kernels")
    }

    /// The kind's part of the kernel names (`"contig"`, `"permute_w16"`, ...).
    pub const fn name(self) -> &'static str {
        match self {
            Kind::Contig => "contig",
            Kind::Strided32 => "strided32",
            Kind::Strided64 => "strided64",
            Kind::Strided1 => "strided1",
            Kind::Transpose => "transpose",
            Kind::Rows => "rows",
            Kind::RowsRev => "rows_rev",
            Kind::RowsRev3 => "rows_rev3",
            Kind::RunsRev2 => "runs_rev2",
            Kind::RunsRev3 => "runs_rev3",
            Kind::RunsRev4 => "runs_rev4",
            Kind::RowsShifted => "rows_shifted",
            Kind::RowsGather => "rows_gather",
            Kind::RowsScatter => "rows_scatter",
            Kind::Permute => "permute",
            Kind::Permute32 => "permute32",
            Kind::PermutePacked => "permute_packed",
            Kind::PermutePacked128 => "permute_packed128",
            Kind::PermuteVec => "permute_vec",
            Kind::PermuteW16 => "permute_w16",
            Kind::PermuteW32 => "permute_w32",
            Kind::PermuteW64 => "permute_w64",
            Kind::Tiled => "tiled",
            Kind::TiledE => "tiled_e",
            Kind::TiledEW => "tiled_ew",
            Kind::TiledA => "tiled_a",
            Kind::Narrow => "narrow",
            Kind::StridedN => "stridedn",
        }
    }

    /// The wide kernel of this kind, if it is a wide kind.
    pub fn wide(self) -> Option<&'static WideKernel> {
        PERMUTE_WIDE.iter().find(|w| w.kind == self)
    }

    /// Slots per side of the tiles of a permute kind; `None` for the other kinds.
    pub fn permute_tile(self) -> Option<u64> {
        match self {
            Kind::Permute | Kind::PermutePacked => Some(PERMUTE_TILE),
            Kind::Permute32 => Some(PERMUTE_SMALL_TILE),
            Kind::PermutePacked128 => Some(PERMUTE_PACKED_TILE),
            Kind::PermuteVec => Some(PERMUTE_VEC_TILE),
            k => k.wide().map(|w| w.tile),
        }
    }
}

impl std::fmt::Display for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// One kernel, which is also one PTX module (every module holds one kernel, named like it).
///
/// [`Kernel::all`] lists every kernel that exists; [`Kernel::module_name`] is the one
/// place kernel names are made.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kernel {
    /// `fill_{kind}_bN`: stores a bit pattern of `size` = N bytes.
    Fill {
        /// One of [`Kind::FILL`].
        kind: Kind,
        /// Element size in bytes: 1, 2, 4 or 8.
        size: usize,
    },
    /// `copy_{kind}_bN`: copies bit patterns of `size` = N bytes; the wide kinds'
    /// `copy_permute_wN` copy runs of `size` = N bytes, whatever the element type.
    Copy {
        /// The kind.
        kind: Kind,
        /// Element size in bytes (1, 2, 4 or 8), or a wide kind's run (16, 32 or 64).
        size: usize,
    },
    /// `cast_{kind}_S_D`: converts `from` = S to `to` = D (casts that change bits: not
    /// [`DType::same_bits`]).
    Cast {
        /// One of [`Kind::ELEMENTWISE`], or [`Kind::RowsGather`].
        kind: Kind,
        /// Source element type.
        from: DType,
        /// Destination element type.
        to: DType,
    },
    /// `copy_{split,join}[_shifted]_cC_bN` ([`Kind::Narrow`]): copies bit patterns of
    /// `size` = N bytes between `C` interleaved channels and `C` planes.
    Narrow {
        /// Element size in bytes: 1, 4 or 8 ([`NARROW_SIZES`]); 2 too for the shifted kernels
        /// ([`NARROW_SHIFTED_SIZES`]).
        size: usize,
        /// Channels and direction.
        narrow: Narrow,
    },
}

impl Kernel {
    /// The kernel `kind` that copies `from` to `to`: a copy of bit patterns when the cast
    /// keeps every bit ([`DType::same_bits`]: equal types, integer types of one size; the wide
    /// kinds: whatever they are), else a cast. It need not exist
    /// ([`Kernel::exists`]).
    pub fn copy(kind: Kind, from: DType, to: DType) -> Kernel {
        if let Some(w) = kind.wide() {
            Kernel::Copy {
                kind,
                size: 16 * w.vectors as usize,
            }
        } else if from.same_bits(to) {
            Kernel::Copy {
                kind,
                size: from.size(),
            }
        } else {
            Kernel::Cast { kind, from, to }
        }
    }

    /// The fill kernel `kind` for elements of `size` bytes. It need not exist
    /// ([`Kernel::exists`]).
    pub fn fill(kind: Kind, size: usize) -> Kernel {
        Kernel::Fill { kind, size }
    }

    /// Every kernel, in the order fills, copies, casts.
    pub fn all() -> Vec<Kernel> {
        let mut all = Vec::new();
        for size in [1, 2, 4, 8] {
            for kind in Kind::FILL {
                if kind != Kind::Rows || size <= FILL_ROWS_MAX_SIZE {
                    all.push(Kernel::Fill { kind, size });
                }
            }
            for kind in Kind::ELEMENTWISE {
                all.push(Kernel::Copy { kind, size });
            }
            for kind in [Kind::Strided1, Kind::RowsGather, Kind::RowsScatter] {
                all.push(Kernel::Copy { kind, size });
            }
            for runs in RowRuns::ALL {
                if runs.exists(size) {
                    all.push(Kernel::Copy {
                        kind: Kind::of_row_runs(runs),
                        size,
                    });
                }
            }
            if size <= 2 {
                all.push(Kernel::Copy {
                    kind: Kind::PermutePacked,
                    size,
                });
            }
            if size == 2 {
                all.push(Kernel::Copy {
                    kind: Kind::TiledA,
                    size,
                });
            }
            if TILED_EW_SIZES.contains(&size) {
                all.push(Kernel::Copy {
                    kind: Kind::TiledEW,
                    size,
                });
            }
            if size == 1 {
                for kind in [Kind::PermutePacked128, Kind::PermuteVec, Kind::TiledA] {
                    all.push(Kernel::Copy { kind, size });
                }
            }
        }
        for w in &PERMUTE_WIDE {
            all.push(Kernel::copy(w.kind, DType::U8, DType::U8));
        }
        for size in NARROW_SHIFTED_SIZES {
            for (join, shifted) in [(false, false), (false, true), (true, false), (true, true)] {
                if !shifted && !NARROW_SIZES.contains(&size) {
                    continue;
                }
                for channels in NARROW_MIN_CHANNELS..=NARROW_MAX_CHANNELS {
                    if shifted && !narrow_shifted_exists(size, channels) {
                        continue;
                    }
                    let narrow = Narrow {
                        channels,
                        join,
                        shifted,
                    };
                    all.push(Kernel::Narrow { size, narrow });
                }
            }
        }
        for from in DType::ALL {
            for to in DType::ALL {
                if !from.same_bits(to) {
                    for kind in Kind::ELEMENTWISE {
                        all.push(Kernel::Cast { kind, from, to });
                    }
                    all.push(Kernel::Cast {
                        kind: Kind::RowsGather,
                        from,
                        to,
                    });
                }
            }
        }
        all
    }

    /// Whether the kernel is one of [`Kernel::all`].
    pub fn exists(&self) -> bool {
        Kernel::all().contains(self)
    }

    /// The kernel's kind.
    pub fn kind(&self) -> Kind {
        match *self {
            Kernel::Fill { kind, .. } | Kernel::Copy { kind, .. } | Kernel::Cast { kind, .. } => {
                kind
            }
            Kernel::Narrow { .. } => Kind::Narrow,
        }
    }

    /// Source and destination element sizes in bytes (a fill's both the element size; a
    /// wide kernel's both 16, its vectors).
    pub fn sizes(&self) -> (usize, usize) {
        match *self {
            Kernel::Fill { size, .. } | Kernel::Narrow { size, .. } => (size, size),
            Kernel::Copy { kind, .. } if kind.wide().is_some() => (16, 16),
            Kernel::Copy { size, .. } => (size, size),
            Kernel::Cast { from, to, .. } => (from.size(), to.size()),
        }
    }

    /// The name of the kernel's entry point and of its PTX module: `fill_{kind}_bN`,
    /// `copy_{kind}_bN`, `copy_{kind}` for the wide kinds, `cast_{kind}_S_D`, and
    /// `copy_split_cC_bN`, `copy_join_cC_bN` and their shifted kinds
    /// (`copy_split_shifted_cC_bN`, `copy_join_shifted_cC_bN`) for the narrow kernels.
    pub fn module_name(&self) -> String {
        match *self {
            Kernel::Fill { kind, size } => format!("fill_{kind}_b{size}"),
            Kernel::Copy { kind, .. } if kind.wide().is_some() => format!("copy_{kind}"),
            Kernel::Copy { kind, size } => format!("copy_{kind}_b{size}"),
            Kernel::Cast { kind, from, to } => format!("cast_{kind}_{from}_{to}"),
            Kernel::Narrow { size, narrow } => {
                let dir = match (narrow.join, narrow.shifted) {
                    (false, false) => "split",
                    (false, true) => "split_shifted",
                    (true, false) => "join",
                    (true, true) => "join_shifted",
                };
                format!("copy_{dir}_c{}_b{size}", narrow.channels)
            }
        }
    }

    /// The kernel whose [`Kernel::module_name`] is `name`, if it exists.
    pub fn from_module_name(name: &str) -> Option<Kernel> {
        Kernel::all().into_iter().find(|k| k.module_name() == name)
    }

    /// The kernel's block shape, which its PTX requires exactly (`.reqntid`); for the tiled
    /// kinds the largest block, which their PTX allows (`.maxntid`; the launch takes
    /// [`tiled_threads`](super::tiled_threads)), and for the narrow kernels the block the
    /// launch takes, also their largest (`.maxntid`).
    pub fn block(&self) -> (u32, u32, u32) {
        let kind = self.kind();
        match kind {
            Kind::Contig => (CONTIG_BLOCK, 1, 1),
            Kind::Strided32 | Kind::Strided64 | Kind::Strided1 | Kind::StridedN => {
                (STRIDED_BLOCK, 1, 1)
            }
            Kind::Tiled | Kind::TiledE | Kind::TiledA => {
                let (from, to) = self.sizes();
                (tiled_max_threads(kind != Kind::TiledE, from, to), 1, 1)
            }
            Kind::TiledEW => (TILED_WIDE_THREADS, 1, 1),
            Kind::Narrow => (NARROW_THREADS, 1, 1),
            Kind::Rows
            | Kind::RowsRev
            | Kind::RowsRev3
            | Kind::RunsRev2
            | Kind::RunsRev3
            | Kind::RunsRev4
            | Kind::RowsShifted
            | Kind::RowsGather
            | Kind::RowsScatter => (ROW_BLOCK, 1, 1),
            Kind::Transpose => TRANSPOSE_BLOCK,
            Kind::Permute => PERMUTE_BLOCK,
            Kind::Permute32 => PERMUTE_SMALL_BLOCK,
            Kind::PermutePacked if self.sizes().0 == 1 => PERMUTE_PACKED_BLOCK,
            Kind::PermutePacked => PERMUTE_SMALL_BLOCK,
            Kind::PermutePacked128 => PERMUTE_PACKED128_BLOCK,
            Kind::PermuteVec => PERMUTE_VEC_BLOCK,
            Kind::PermuteW16 | Kind::PermuteW32 | Kind::PermuteW64 => {
                kind.wide().map_or((0, 0, 0), |w| w.block)
            }
        }
    }
}

impl std::fmt::Display for Kernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.module_name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    #[test]
    fn names_are_unique_and_round_trip() {
        let all = Kernel::all();
        let names: BTreeSet<String> = all.iter().map(Kernel::module_name).collect();
        assert_eq!(names.len(), all.len());
        for k in &all {
            assert_eq!(Kernel::from_module_name(&k.module_name()), Some(*k));
            assert!(k.exists());
        }
        assert_eq!(Kernel::from_module_name("cast_contig_f32_f32"), None);
        assert_eq!(Kernel::from_module_name("copy_permute_packed_b4"), None);
    }

    #[test]
    fn counts_per_family() {
        let all = Kernel::all();
        let fills = all
            .iter()
            .filter(|k| matches!(k, Kernel::Fill { .. }))
            .count();
        let copies = all
            .iter()
            .filter(|k| matches!(k, Kernel::Copy { .. }))
            .count();
        let casts = all
            .iter()
            .filter(|k| matches!(k, Kernel::Cast { .. }))
            .count();
        let narrow = all
            .iter()
            .filter(|k| matches!(k, Kernel::Narrow { .. }))
            .count();
        // Contiguous, strided (32- and 64-bit, one axis) and rank-generic per size; rows of 1
        // and 2 bytes.
        assert_eq!(fills, 5 * 4 + 2);
        // Ten kinds, one-axis strided, reversed, shifted, gathered and scattered rows per size,
        // reversed rows of runs of 3
        // (1 and 2 bytes), runs reversed of 2 (every size), 3 (1 and 2 bytes) and 4 (1, 2
        // and 4 bytes); packed b1, b2, packed128 b1, vec b1, tiled_a b1, b2, tiled_ew b1,
        // b2, b4; three wide.
        assert_eq!(copies, 4 * 15 + 2 + 4 + 2 + 3 + 5 + 1 + 3 + 3);
        // Every ordered pair of distinct types but the 8 of integer types of one size
        // (copies), ten kinds each and the gathered rows.
        assert_eq!(casts, (12 * 11 - 8) * 11);
        // Three sizes, two directions, aligned and shifted, 2 to 16 channels; 2-byte
        // elements shifted only; no shifted kernels of 4- and 8-byte units under 5 channels
        // (2 sizes, 2 directions, 3 channel counts).
        assert_eq!(narrow, 3 * 4 * 15 + 2 * 15 - 2 * 2 * 3);
        assert_eq!(all.len(), 1320 + 14 + 132 + 210 + 3 - 12);
        assert!(!narrow_shifted_exists(4, 4) && !narrow_shifted_exists(8, 2));
        assert!(narrow_shifted_exists(8, 5) && narrow_shifted_exists(2, 2));
        assert!(narrow_shifted_exists(1, 16) && !narrow_shifted_exists(1, 17));
        assert!(!narrow_shifted_exists(16, 5) && !narrow_shifted_exists(1, 1));
    }

    #[test]
    fn names() {
        let k = |kind, from, to| Kernel::copy(kind, from, to).module_name();
        assert_eq!(k(Kind::Contig, DType::F32, DType::F32), "copy_contig_b4");
        assert_eq!(
            k(Kind::Permute32, DType::BF16, DType::I8),
            "cast_permute32_bf16_i8"
        );
        assert_eq!(
            k(Kind::PermuteW32, DType::F16, DType::F16),
            "copy_permute_w32"
        );
        assert_eq!(
            k(Kind::PermuteW64, DType::U8, DType::U8),
            "copy_permute_w64"
        );
        assert_eq!(
            Kernel::fill(Kind::Strided32, 2).module_name(),
            "fill_strided32_b2"
        );
        let rev = |run, backwards| Kind::of_row_runs(RowRuns::new(run, backwards));
        assert_eq!(k(rev(3, true), DType::F16, DType::F16), "copy_rows_rev3_b2");
        assert_eq!(k(rev(1, true), DType::U8, DType::U8), "copy_rows_rev_b1");
        assert_eq!(k(rev(3, false), DType::U8, DType::U8), "copy_runs_rev3_b1");
        assert_eq!(
            k(rev(4, false), DType::F32, DType::F32),
            "copy_runs_rev4_b4"
        );
        assert!(!Kernel::copy(rev(4, false), DType::F64, DType::F64).exists());
        for t in [DType::U8, DType::F16, DType::F32, DType::F64] {
            let name = format!("copy_rows_shifted_b{}", t.size());
            assert_eq!(k(Kind::RowsShifted, t, t), name);
        }
        assert_eq!(
            k(Kind::RowsGather, DType::U8, DType::F32),
            "cast_rows_gather_u8_f32"
        );
        assert_eq!(
            k(Kind::RowsGather, DType::U8, DType::I8),
            "copy_rows_gather_b1"
        );
        assert_eq!(
            Kernel::copy(Kind::PermuteVec, DType::I8, DType::I8).block(),
            PERMUTE_VEC_BLOCK
        );
        assert_eq!(
            Kernel::copy(Kind::PermutePacked, DType::U8, DType::U8).block(),
            (32, 4, 1)
        );
        assert_eq!(
            Kernel::copy(Kind::PermutePacked, DType::F16, DType::F16).block(),
            (32, 8, 1)
        );
        assert_eq!(
            Kernel::copy(Kind::PermuteW32, DType::F16, DType::F16).sizes(),
            (16, 16)
        );
        let split = Narrow {
            channels: 3,
            join: false,
            shifted: false,
        };
        let n = Kernel::Narrow {
            size: 1,
            narrow: split,
        };
        assert_eq!(n.module_name(), "copy_split_c3_b1");
        assert_eq!(
            (n.kind(), n.sizes(), n.block()),
            (Kind::Narrow, (1, 1), (128, 1, 1))
        );
        let join = Narrow {
            channels: 16,
            join: true,
            shifted: false,
        };
        let n = Kernel::Narrow {
            size: 8,
            narrow: join,
        };
        assert_eq!(n.module_name(), "copy_join_c16_b8");
        let n = Kernel::Narrow {
            size: 1,
            narrow: Narrow {
                shifted: true,
                ..join
            },
        };
        assert_eq!(n.module_name(), "copy_join_shifted_c16_b1");
    }
}
