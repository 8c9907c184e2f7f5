//! Executes plans over host memory with the kernels' own index math, so that the planner can be
//! tested against ndarray on machines without a GPU.

use super::Plan;
pub(crate) use crate::convert::convert_bytes as convert;
use crate::element::DType;
use devspan_kernels::abi::{
    CONTIG_ALIGN, PermuteArgs, ROW_BLOCK, ROW_MAX_TEAM_SHIFT, ROW_SCALAR_UNROLL, RowArgs,
    RowGatherArgs, RowRuns, TILED_SHIFTED_DEST, TILED_SHIFTED_SOURCE, TiledArgs,
    contig_group_elems, gather_grid, row_grid, row_head, row_rev_head, row_units_per_lane,
    tiled_vectors,
};

/// Host buffers standing in for device allocations at chosen addresses.
#[derive(Default, Debug)]
pub(crate) struct HostMem {
    regions: Vec<(u64, Vec<u8>)>,
    /// Start address of every write, in order, when enabled.
    pub(crate) writes: Option<Vec<u64>>,
}

impl HostMem {
    pub(crate) fn add(&mut self, base: u64, bytes: Vec<u8>) {
        self.regions.push((base, bytes));
    }

    pub(crate) fn region(&self, base: u64) -> &[u8] {
        &self
            .regions
            .iter()
            .find(|r| r.0 == base)
            .expect("no region at base")
            .1
    }

    fn locate(&self, addr: u64, len: usize) -> (usize, usize) {
        for (i, (base, buf)) in self.regions.iter().enumerate() {
            if addr >= *base && addr + len as u64 <= base + buf.len() as u64 {
                return (i, (addr - base) as usize);
            }
        }
        panic!("plan touches 0x{addr:x}+{len}, outside every allocation");
    }

    fn read(&self, addr: u64, len: usize) -> Vec<u8> {
        let (i, o) = self.locate(addr, len);
        self.regions[i].1[o..o + len].to_vec()
    }

    fn write(&mut self, addr: u64, bytes: &[u8]) {
        if let Some(w) = &mut self.writes {
            w.push(addr);
        }
        let (i, o) = self.locate(addr, bytes.len());
        self.regions[i].1[o..o + bytes.len()].copy_from_slice(bytes);
    }
}

/// One element of `from` as `to`: the same bits when the types are equal (the copy kernels move
/// bit patterns, NaN payloads included), else the cast kernels' conversion.
pub(crate) fn element(from: DType, to: DType, bytes: &[u8]) -> Vec<u8> {
    if from == to {
        bytes.to_vec()
    } else {
        convert(from, to, bytes)
    }
}

fn copy_elem(mem: &mut HostMem, dst: u64, to: DType, src: u64, from: DType) {
    let v = mem.read(src, from.size());
    mem.write(dst, &element(from, to, &v));
}

fn at(base: u64, off: i64, size: usize) -> u64 {
    (base as i64 + off * size as i64) as u64
}

/// Runs `plan` over `mem`, panicking if it touches memory outside the regions or breaks a
/// kernel's alignment precondition.
pub(crate) fn run(plan: &Plan, mem: &mut HostMem) {
    match *plan {
        Plan::Nothing => {}
        Plan::Memset { dst, n, size, bits } => {
            assert_eq!(dst % size as u64, 0, "memset destination misaligned");
            for i in 0..n {
                mem.write(dst + (i * size) as u64, &bits.to_le_bytes()[..size]);
            }
        }
        Plan::Memset2D {
            dst,
            pitch,
            width,
            height,
            size,
            bits,
        } => {
            assert_eq!(dst % size as u64, 0, "2-D memset destination misaligned");
            assert_eq!(pitch % size, 0, "2-D memset pitch misaligned");
            assert!(pitch >= width * size, "2-D memset rows overlap");
            assert!(
                pitch <= i32::MAX as usize,
                "2-D memset pitch of 2^31 bytes or more"
            );
            for r in 0..height {
                for i in 0..width {
                    let at = dst + (r * pitch + i * size) as u64;
                    mem.write(at, &bits.to_le_bytes()[..size]);
                }
            }
        }
        Plan::Memcpy { dst, src, bytes } => {
            let v = mem.read(src, bytes);
            mem.write(dst, &v);
        }
        Plan::FillContig {
            dst,
            n,
            head,
            size,
            bits,
        } => {
            if head < n {
                assert_eq!(
                    (dst + head * size as u64) % CONTIG_ALIGN,
                    0,
                    "fill head does not align"
                );
            }
            for i in 0..n {
                mem.write(dst + i * size as u64, &bits.to_le_bytes()[..size]);
            }
        }
        Plan::FillStrided32 {
            ref args,
            size,
            bits,
        } => {
            for i in 0..args.n {
                let (d, _) = args.offsets(i);
                mem.write(at(args.dst, d as i64, size), &bits.to_le_bytes()[..size]);
            }
        }
        Plan::FillStrided64 {
            ref args,
            size,
            bits,
        } => {
            for i in 0..args.n {
                let (d, _) = args.offsets(i);
                mem.write(at(args.dst, d, size), &bits.to_le_bytes()[..size]);
            }
        }
        Plan::Contig {
            dst,
            src,
            n,
            head,
            from,
            to,
        } => {
            if head < n {
                assert_eq!(
                    (dst + head * to.size() as u64) % CONTIG_ALIGN,
                    0,
                    "contig head misaligns dst"
                );
                assert_eq!(
                    (src + head * from.size() as u64) % CONTIG_ALIGN,
                    0,
                    "contig head misaligns src"
                );
            }
            for i in 0..n {
                copy_elem(
                    mem,
                    dst + i * to.size() as u64,
                    to,
                    src + i * from.size() as u64,
                    from,
                );
            }
        }
        Plan::Strided32 { ref args, from, to } => {
            for i in 0..args.n {
                let (d, s) = args.offsets(i);
                copy_elem(
                    mem,
                    at(args.dst, d as i64, to.size()),
                    to,
                    at(args.src, s as i64, from.size()),
                    from,
                );
            }
        }
        Plan::Strided64 { ref args, from, to } => {
            for i in 0..args.n {
                let (d, s) = args.offsets(i);
                copy_elem(
                    mem,
                    at(args.dst, d, to.size()),
                    to,
                    at(args.src, s, from.size()),
                    from,
                );
            }
        }
        Plan::Transpose { ref args, from, to } => {
            let rank = args.batch_rank as usize;
            for b in 0..args.batch {
                let (mut x, mut bd, mut bs) = (b, 0i64, 0i64);
                for k in 0..rank {
                    let q = args.batch_div[k].div(x);
                    let c = (x - q * args.batch_shape[k]) as i64;
                    bd += c * args.batch_dst_strides[k];
                    bs += c * args.batch_src_strides[k];
                    x = q;
                }
                for r in 0..args.rows as i64 {
                    for c in 0..args.cols as i64 {
                        let d = at(args.dst, bd + r * args.dst_row_stride + c, to.size());
                        let s = at(args.src, bs + r + c * args.src_col_stride, from.size());
                        copy_elem(mem, d, to, s, from);
                    }
                }
            }
        }
        Plan::Rows { ref args, from, to } => {
            let (gx, gy) = row_grid(args, from.size(), to.size());
            run_rows(args, from, to, (gx.max(1), gy.max(1)), mem);
        }
        Plan::FillRows {
            ref args,
            size,
            bits,
        } => {
            let (gx, gy) = row_grid(args, size, size);
            run_fill_rows(args, size, bits, (gx.max(1), gy.max(1)), mem);
        }
        Plan::RowsRev {
            ref args,
            elem,
            runs,
        } => {
            let g = runs.grid_size(elem.size());
            let (gx, gy) = row_grid(args, g, g);
            run_rows_rev(args, elem, runs, (gx.max(1), gy.max(1)), mem);
        }
        Plan::RowsGather { ref args, from, to } => {
            let grid = gather_grid(args, from.size(), to.size());
            run_rows_gather(args, from, to, false, grid, mem);
        }
        Plan::RowsScatter { ref args, from, to } => {
            let grid = gather_grid(args, from.size(), to.size());
            run_rows_gather(args, from, to, true, grid, mem);
        }
        Plan::Permute { ref args, from, to } => run_permute(args, from, to, mem),
        Plan::Tiled {
            ref args,
            from,
            to,
            ref rest,
        } => {
            run_tiled(args, from, to, mem);
            for p in rest {
                run(p, mem);
            }
        }
        Plan::StridedN { ref args, from, to } => {
            for i in 0..args.n {
                let (d, s) = args.offsets(i);
                copy_elem(
                    mem,
                    at(args.dst, d, to.size()),
                    to,
                    at(args.src, s, from.size()),
                    from,
                );
            }
        }
        Plan::FillStridedN {
            ref args,
            size,
            bits,
        } => {
            for i in 0..args.n {
                let (d, _) = args.offsets(i);
                mem.write(at(args.dst, d, size), &bits.to_le_bytes()[..size]);
            }
        }
    }
}

/// Runs a tiled kernel over `mem` with its index math: per tile, every load of `Vs` source
/// elements (read order) into a shared tile of converted elements, then every store of `Vd`
/// destination elements (write order) gathered from it. Panics if a vector kernel's load or
/// store is not `V` consecutive elements from an address aligned to its width (for a tile of
/// shifted source vectors, [`TILED_SHIFTED_SOURCE`], if the two 16-byte blocks that a load
/// reads end outside its allocation; the stores of a tile of shifted destination vectors,
/// [`TILED_SHIFTED_DEST`], may start anywhere), or a store reads a place of the shared tile
/// that no load filled.
pub(crate) fn run_tiled(args: &TiledArgs, from: DType, to: DType, mem: &mut HostMem) {
    let vector = args.vector != 0;
    let shifted_src = args.vector == TILED_SHIFTED_SOURCE;
    let shifted_dst = args.vector == TILED_SHIFTED_DEST;
    let (ss, ds) = (from.size(), to.size());
    let (vs, vd) = tiled_vectors(vector, ss, ds);
    let volume = args.volume;
    assert_eq!(volume % vs, 0, "volume {volume} is not whole loads of {vs}");
    assert_eq!(
        volume % vd,
        0,
        "volume {volume} is not whole stores of {vd}"
    );
    for t in 0..args.tiles {
        let (od, os) = args.tile_origin(t);
        let mut shared = vec![None::<Vec<u8>>; volume as usize];
        for u in (0..volume).step_by(vs as usize) {
            let s0 = args.read_offset(u);
            let a = at(args.src, os + i64::from(s0), ss);
            let width = u64::from(vs) * ss as u64;
            if shifted_src {
                // The kernel reads the aligned 16-byte block that holds the vector's first
                // byte and the next block (whether the vector reaches into it or not): the
                // bytes from the vector's start up to the end of that second block must be in
                // the allocation (the first block's start is, allocations being 16-byte
                // aligned).
                let _ = mem.read(a, ((a & !15) + 32 - a) as usize);
            } else if vector {
                assert_eq!(
                    a % width,
                    0,
                    "tile {t}: misaligned {width}-byte load at {a:#x}"
                );
            }
            for j in 0..vs {
                assert_eq!(
                    args.read_offset(u + j),
                    s0 + j as i32,
                    "tile {t}: load {u} is not consecutive elements"
                );
                let v = mem.read(a + u64::from(j) * ss as u64, ss);
                shared[(u + j) as usize] = Some(element(from, to, &v));
            }
        }
        for w in (0..volume).step_by(vd as usize) {
            let (d0, _) = args.write_offset(w);
            let a = at(args.dst, od + i64::from(d0), ds);
            if vector && !shifted_dst {
                let width = u64::from(vd) * ds as u64;
                assert_eq!(
                    a % width,
                    0,
                    "tile {t}: misaligned {width}-byte store at {a:#x}"
                );
            }
            for j in 0..vd {
                let (d, r) = args.write_offset(w + j);
                assert_eq!(
                    d,
                    d0 + j as i32,
                    "tile {t}: store {w} is not consecutive elements"
                );
                let v = shared[r as usize]
                    .clone()
                    .expect("the write phase reads a place the read phase left");
                mem.write(a + u64::from(j) * ds as u64, &v);
            }
        }
    }
}

/// A slot's byte offset from its tile's origin as the permute kernels compute it: 32-bit
/// wrapping arithmetic on the low words of the strides, sign-extended.
fn slot_offset(l: (u64, u64), s0: i64, s1: i64, size: usize) -> i64 {
    let e = (l.0 as i32)
        .wrapping_mul(s0 as i32)
        .wrapping_add((l.1 as i32).wrapping_mul(s1 as i32));
    i64::from(e.wrapping_shl(size.trailing_zeros()))
}

/// Runs a permute kernel over `mem` tile by tile, slot by slot, with the kernel's index math.
/// With [`PermuteArgs::words`], A slots `2i` and `2i + 1` are written as one word at the
/// destination address of slot `2i`, as the kernel's word stores do; panics if that address
/// is not 4-byte aligned or slot `2i + 1` is outside the tile while slot `2i` is inside.
pub(crate) fn run_permute(args: &PermuteArgs, from: DType, to: DType, mem: &mut HostMem) {
    if args.pack == 16 {
        assert!(
            from == to && from.size() == 1,
            "vector permute: 1-byte copies only"
        );
        return run_permute_vec(args, mem);
    }
    if args.pack != 0 {
        return run_permute_packed(args, from, to, mem);
    }
    if args.wide != 0 {
        return run_permute_wide(args, mem);
    }
    let t = u64::from(args.tile);
    let (ss, ds) = (from.size(), to.size());
    let words = args.words != 0;
    if words {
        assert_eq!(ds, 2, "word stores of 2-byte elements only");
    }
    let (dsr, ssr) = (&args.dst_strides, &args.src_strides);
    for tile in 0..args.tiles {
        let (bd, bs, rem) = tile_start(args, tile, ss, ds);
        let inside = |side, j| slot_inside(args, &rem, side, j);
        let step = if words { 2 } else { 1 };
        for j in (0..t).step_by(step) {
            let Some(la) = inside(0, j) else { continue };
            let pair = words.then(|| inside(0, j + 1).expect("word pair split by the tile edge"));
            for l in 0..t {
                let Some(lb) = inside(1, l) else { continue };
                let d = bd
                    .wrapping_add(slot_offset(la, dsr[0], dsr[1], ds) as u64)
                    .wrapping_add(slot_offset(lb, dsr[2], dsr[3], ds) as u64);
                let src_of = |la| {
                    bs.wrapping_add(slot_offset(la, ssr[0], ssr[1], ss) as u64)
                        .wrapping_add(slot_offset(lb, ssr[2], ssr[3], ss) as u64)
                };
                copy_elem(mem, d, to, src_of(la), from);
                if let Some(la1) = pair {
                    assert_eq!(d % 4, 0, "word store at {d:#x} not 4-byte aligned");
                    copy_elem(mem, d + 2, to, src_of(la1), from);
                }
            }
        }
    }
}

/// Runs a wide kernel (`copy_permute_wN`) over `mem`: every used slot inside its tile moves a
/// run of `wide` 16-byte vectors, addressed in 16-byte units like the kernels do; panics if a
/// run is not 16-byte aligned on either side.
fn run_permute_wide(args: &PermuteArgs, mem: &mut HostMem) {
    let t = u64::from(args.tile);
    let bytes = 16 * args.wide as usize;
    let (dsr, ssr) = (&args.dst_strides, &args.src_strides);
    for tile in 0..args.tiles {
        let (bd, bs, rem) = tile_start(args, tile, 16, 16);
        for j in 0..t {
            let Some(la) = slot_inside(args, &rem, 0, j) else {
                continue;
            };
            for l in 0..t {
                let Some(lb) = slot_inside(args, &rem, 1, l) else {
                    continue;
                };
                let at = |base: u64, s: &[i64; 8]| {
                    base.wrapping_add(slot_offset(la, s[0], s[1], 16) as u64)
                        .wrapping_add(slot_offset(lb, s[2], s[3], 16) as u64)
                };
                let (d, s) = (at(bd, dsr), at(bs, ssr));
                assert!(
                    d % 16 == 0 && s % 16 == 0,
                    "misaligned run {s:#x} -> {d:#x}"
                );
                let run = mem.read(s, bytes);
                mem.write(d, &run);
            }
        }
    }
}

/// Runs the vector kernel (`copy_permute_vec_b1`) over `mem` with its index math. Per tile,
/// the read phase loads, for every A 4-group `ga` and B 16-group `gb` inside the tile, the four
/// 16-byte source vectors at A slot `4 ga` plus `r` axis-0 source strides (`r < 4`) and B slot
/// `16 gb`, into a shared tile `[B slot][A slot]`; the write phase stores, for every A 16-group
/// `q` and B slot `j` inside the tile, the 16 bytes of shared row `j` from A slot `16 q` at the
/// destination address of those two slots. Panics if a vector is not 16-byte aligned, a slot
/// of a group is skipped while its group's first slot is not, a group's rows are not one
/// axis-0 stride apart, or the write phase reads a shared byte that the read phase did not fill.
fn run_permute_vec(args: &PermuteArgs, mem: &mut HostMem) {
    let t = u64::from(args.tile) as usize;
    let (dsr, ssr) = (&args.dst_strides, &args.src_strides);
    for tile in 0..args.tiles {
        let (bd, bs, rem) = tile_start(args, tile, 1, 1);
        let inside = |side, j: usize| slot_inside(args, &rem, side, j as u64);
        // A group of `n` slots from `j`: the first slot's coordinates, if it is inside; every
        // other slot of the group is inside exactly when the first one is.
        let group = |side: usize, j: usize, n: usize| {
            let first = inside(side, j);
            for i in 1..n {
                assert_eq!(
                    inside(side, j + i).is_some(),
                    first.is_some(),
                    "side {side}: group at slot {j} split"
                );
            }
            first
        };
        let mut shared = vec![None::<u8>; t * t];
        for ga in 0..t / 4 {
            let Some(la) = group(0, 4 * ga, 4) else {
                continue;
            };
            for gb in 0..t / 16 {
                let Some(lb) = group(1, 16 * gb, 16) else {
                    continue;
                };
                for r in 0..4 {
                    let ar = args.slot(0, (4 * ga + r) as u64).expect("checked");
                    let row = slot_offset(la, ssr[0], ssr[1], 1) + r as i64 * ssr[0];
                    assert_eq!(
                        slot_offset(ar, ssr[0], ssr[1], 1),
                        row,
                        "A 4-group {ga} is not one piece of axis 0"
                    );
                    let s = bs
                        .wrapping_add(row as u64)
                        .wrapping_add(slot_offset(lb, ssr[2], ssr[3], 1) as u64);
                    assert_eq!(s % 16, 0, "misaligned source vector {s:#x}");
                    for (b, &x) in mem.read(s, 16).iter().enumerate() {
                        shared[(16 * gb + b) * t + 4 * ga + r] = Some(x);
                    }
                }
            }
        }
        for q in 0..t / 16 {
            let Some(la) = group(0, 16 * q, 16) else {
                continue;
            };
            for j in 0..t {
                let Some(lb) = inside(1, j) else { continue };
                let d = bd
                    .wrapping_add(slot_offset(la, dsr[0], dsr[1], 1) as u64)
                    .wrapping_add(slot_offset(lb, dsr[2], dsr[3], 1) as u64);
                assert_eq!(d % 16, 0, "misaligned destination vector {d:#x}");
                let v: Vec<u8> = shared[j * t + 16 * q..j * t + 16 * q + 16]
                    .iter()
                    .map(|x| x.expect("the write phase reads a byte the read phase left"))
                    .collect();
                mem.write(d, &v);
            }
        }
    }
}

/// Byte addresses `(dst, src)` of a tile's first element for elements of `ss` (source) and
/// `ds` (destination) bytes, and the tile axes' remaining extents.
fn tile_start(args: &PermuteArgs, tile: u64, ss: usize, ds: usize) -> (u64, u64, [u64; 4]) {
    let (od, os, rem) = args.tile_origin(tile);
    (
        args.dst.wrapping_add((od as u64).wrapping_mul(ds as u64)),
        args.src.wrapping_add((os as u64).wrapping_mul(ss as u64)),
        rem,
    )
}

/// The local coordinates of slot `j` of `side` in a tile whose remaining extents are `rem`, if
/// the slot is used and inside the tile.
fn slot_inside(args: &PermuteArgs, rem: &[u64; 4], side: usize, j: u64) -> Option<(u64, u64)> {
    args.slot(side, j)
        .filter(|l| l.0 < rem[2 * side] && l.1 < rem[2 * side + 1])
}

/// Runs the packed kernels (`copy_permute_packed_bN`, `copy_permute_packed128_b1`) over `mem`
/// with their index math: per tile, the word of `k` elements that starts at A slot `k ga` (or
/// B slot `k gb`) is addressed through that slot alone; element `(r, b)` of the `k x k` block
/// of groups `(ga, gb)` is read at byte `b * size` of the source word of A slot `k ga + r`
/// (which the kernels address as A slot `k ga` plus `r` source strides of axis 0) and written
/// at byte `r * size` of the destination word of B slot `k gb + b`. Panics if a word is not
/// 4-byte aligned, a slot of a group is skipped while its group's first slot is not, or a
/// group's words are not one axis-0 stride apart.
fn run_permute_packed(args: &PermuteArgs, from: DType, to: DType, mem: &mut HostMem) {
    let size = from.size();
    assert_eq!(size, to.size(), "packed permute copies only");
    let k = u64::from(args.pack);
    assert_eq!(k * size as u64, 4, "packed permute: 4-byte words");
    let t = u64::from(args.tile);
    let (dsr, ssr) = (&args.dst_strides, &args.src_strides);
    for tile in 0..args.tiles {
        let (bd, bs, rem) = tile_start(args, tile, size, size);
        for ga in 0..t / k {
            let Some(la) = slot_inside(args, &rem, 0, k * ga) else {
                continue;
            };
            for gb in 0..t / k {
                let Some(lb) = slot_inside(args, &rem, 1, k * gb) else {
                    continue;
                };
                for i in 0..k {
                    assert!(
                        slot_inside(args, &rem, 0, k * ga + i).is_some(),
                        "A group split"
                    );
                    assert!(
                        slot_inside(args, &rem, 1, k * gb + i).is_some(),
                        "B group split"
                    );
                }
                for r in 0..k {
                    let ar = args.slot(0, k * ga + r).expect("checked");
                    // The kernels: the group's first slot plus r axis-0 source strides.
                    assert_eq!(
                        slot_offset(ar, ssr[0], ssr[1], size),
                        slot_offset(la, ssr[0], ssr[1], size) + r as i64 * ssr[0] * size as i64,
                        "A group {ga} is not one piece of axis 0"
                    );
                    let sw = bs
                        .wrapping_add(slot_offset(ar, ssr[0], ssr[1], size) as u64)
                        .wrapping_add(slot_offset(lb, ssr[2], ssr[3], size) as u64);
                    assert_eq!(sw % 4, 0, "misaligned source word");
                    for b in 0..k {
                        let bb = args.slot(1, k * gb + b).expect("checked");
                        let dw = bd
                            .wrapping_add(slot_offset(la, dsr[0], dsr[1], size) as u64)
                            .wrapping_add(slot_offset(bb, dsr[2], dsr[3], size) as u64);
                        assert_eq!(dw % 4, 0, "misaligned destination word");
                        let sz = size as u64;
                        copy_elem(mem, dw + r * sz, to, sw + b * sz, from);
                    }
                }
            }
        }
    }
}

/// One lane of a row kernel's launch ([`RowArgs`]' teams on a grid): where its scalar
/// elements and its units of a row start and how far apart they are, as the kernels compute
/// them.
struct RowLane {
    /// `log2` of the lanes of a team.
    shift: u32,
    /// Lanes of a team.
    team: u64,
    /// The lane's first scalar element and the stride of its scalar elements.
    s0: u64,
    sstride: u64,
    /// The lane's first unit and the stride of its iterations over units.
    u0: u64,
    ustride: u64,
}

impl RowLane {
    /// Calls `f(e)` for each of the lane's scalar elements of a row of `nscalar` of them,
    /// [`ROW_SCALAR_UNROLL`] per iteration, in the kernel's order: scalar element `j` is the
    /// row's element `j` below `head`, else `j + tailoff`.
    fn scalars(&self, head: u64, tailoff: u64, nscalar: u64, mut f: impl FnMut(u64)) {
        let unroll = u64::from(ROW_SCALAR_UNROLL);
        let mut j = self.s0;
        while j < nscalar {
            for k in 0..unroll {
                let jk = j + k * self.sstride;
                if jk < nscalar {
                    f(if jk < head { jk } else { jk + tailoff });
                }
            }
            j += self.sstride * unroll;
        }
    }

    /// Calls `f(u)` for each of the lane's units of a row of `nunits` of them, `units` per
    /// iteration a team apart, in the kernel's order (unit `j` of an iteration exists where
    /// `(left - 1) >> shift >= j`).
    fn units(&self, nunits: u64, units: u64, mut f: impl FnMut(u64)) {
        let mut g = self.u0;
        while g < nunits {
            let left = nunits - g;
            for jj in 0..units {
                if jj > 0 && (left - 1) >> self.shift < jj {
                    continue;
                }
                f(g + jj * self.team);
            }
            g += self.ustride;
        }
    }
}

/// Calls `f(lane, row)` for every row that each lane of a row kernel's launch on `grid` takes
/// (`units` units per lane and iteration), block by block and lane by lane.
fn for_each_row_lane(
    args: &RowArgs,
    units: u64,
    grid: (u32, u32),
    mut f: impl FnMut(&RowLane, u64),
) {
    let shift = args.team_shift.min(ROW_MAX_TEAM_SHIFT);
    let team = 1u64 << shift;
    let teams = u64::from(ROW_BLOCK) >> shift;
    let (gx, gy) = (u64::from(grid.0), u64::from(grid.1));
    for by in 0..gy {
        for bx in 0..gx {
            for thr in 0..u64::from(ROW_BLOCK) {
                let lane = thr & (team - 1);
                let l = RowLane {
                    shift,
                    team,
                    s0: bx * team + lane,
                    sstride: gx * team,
                    u0: bx * units * team + lane,
                    ustride: gx * team * units,
                };
                let mut row = by * teams + (thr >> shift);
                while row < args.rows {
                    f(&l, row);
                    row += gy * teams;
                }
            }
        }
    }
}

/// The reversed row kernels (`copy_rows_rev_bN`, `copy_rows_rev3_bN`, `copy_runs_revR_bN`) on
/// `grid`, thread by thread as the kernel maps its work: run `i` of a row from `src - run * i`
/// (its elements in order) or `src + run * i` (its elements reversed), whole groups of runs
/// from run [`row_rev_head`], each from the source bytes of its runs (aligned blocks, or
/// shifted out of one more inside the row, one group fewer at its end), permuted.
pub(crate) fn run_rows_rev(
    args: &RowArgs,
    elem: DType,
    runs: RowRuns,
    grid: (u32, u32),
    mem: &mut HostMem,
) {
    let s = elem.size() as u64;
    let run = runs.run as u64;
    let v = runs.runs_per_group(elem.size());
    // Bytes of a run and of a group.
    let rb = runs.run_bytes(elem.size());
    let gb = runs.group_bytes(elem.size());
    let units = row_units_per_lane(elem.size(), elem.size());
    for_each_row_lane(args, units, grid, |l, row| {
        let (od, os) = args.row_offsets(row);
        let dr = at(args.dst, od, s as usize);
        let sr = at(args.src, os, s as usize);
        let len = args.row_len;
        let (head, m) = row_rev_head(dr, sr, s as usize, runs, len);
        let rem = len - head;
        let mut ngroups = rem / v;
        let mut nscalar = head + rem % v;
        // Shifted rows: one vector fewer at the end, its elements scalar.
        if m != 0 && ngroups > 0 {
            ngroups -= 1;
            nscalar += v;
        }
        l.scalars(head, ngroups * v, nscalar, |e| {
            for i in 0..run {
                let (d, s0) = if runs.backwards {
                    (dr + e * rb + i * s, sr - e * rb + i * s)
                } else {
                    (dr + e * rb + i * s, sr + e * rb + (run - 1 - i) * s)
                };
                copy_elem(mem, d, elem, s0, elem);
            }
        });
        l.units(ngroups, units, |u| {
            // The bytes of the group's runs: below the end of run head + u * v (read
            // backwards), or from its start.
            let sa = if runs.backwards {
                sr + rb - (head + (u + 1) * v) * rb
            } else {
                sr + (head + u * v) * rb
            };
            let da = dr + (head + u * v) * rb;
            assert_eq!(sa % 16, m, "reversed row: source bytes misplaced");
            assert_eq!(da % 16, 0, "reversed row: destination vector misaligned");
            // The aligned blocks read around them stay in the row: the upper one ends below
            // its top, the lower one starts above its lowest byte.
            if m != 0 {
                let top = (sa & !15) + gb + 16;
                let (low, high) = if runs.backwards {
                    (sr - (len - 1) * rb, sr + rb)
                } else {
                    (sr, sr + len * rb)
                };
                assert!(top <= high, "reversed row: block past the row's top");
                assert!(sa & !15 >= low, "reversed row: block below the row");
            }
            let block = mem.read(sa, gb as usize);
            let (rb, s) = (rb as usize, s as usize);
            let mut out = Vec::with_capacity(gb as usize);
            for q in 0..v as usize {
                if runs.backwards {
                    let q = v as usize - 1 - q;
                    out.extend_from_slice(&block[q * rb..(q + 1) * rb]);
                } else {
                    for k in (0..run as usize).rev() {
                        let at = q * rb + k * s;
                        out.extend_from_slice(&block[at..at + s]);
                    }
                }
            }
            mem.write(da, &out);
        });
    });
}

/// Runs a row kernel over `mem` with the given grid, thread by thread, with the kernel's index
/// math; panics if a vector access breaks its alignment.
pub(crate) fn run_rows(
    args: &RowArgs,
    from: DType,
    to: DType,
    grid: (u32, u32),
    mem: &mut HostMem,
) {
    let (ss, ds) = (from.size() as u64, to.size() as u64);
    let v = contig_group_elems(from.size(), to.size()) as u64;
    let r = ss.max(ds) / ss.min(ds);
    let unit = 16 / ss.max(ds);
    let units = row_units_per_lane(from.size(), to.size());
    for_each_row_lane(args, units, grid, |l, row| {
        let (od, os) = args.row_offsets(row);
        let dr = at(args.dst, od, ds as usize);
        let sr = at(args.src, os, ss as usize);
        let len = args.row_len;
        let head = row_head(dr, ds as usize, sr, ss as usize, len);
        let rem = len - head;
        let ngroups = rem / v;
        let nscalar = head + rem % v;
        let nunits = ngroups * r;
        l.scalars(head, ngroups * v, nscalar, |e| {
            copy_elem(mem, dr + e * ds, to, sr + e * ss, from);
        });
        if l.u0 < nunits {
            assert_eq!((sr + head * ss) % CONTIG_ALIGN, 0, "row groups: src");
            assert_eq!((dr + head * ds) % CONTIG_ALIGN, 0, "row groups: dst");
        }
        l.units(nunits, units, |u| {
            let sa = sr + head * ss + u * unit * ss;
            let da = dr + head * ds + u * unit * ds;
            assert_eq!(sa % (unit * ss), 0, "row unit: src vector misaligned");
            assert_eq!(da % (unit * ds), 0, "row unit: dst vector misaligned");
            for e in 0..unit {
                copy_elem(mem, da + e * ds, to, sa + e * ss, from);
            }
        });
    });
}

/// The row fill kernel (`fill_rows_bN`) over `mem` on `grid`, thread by thread with the
/// kernel's index math: each row's elements from its first 16-byte boundary on as aligned
/// vectors of `16 / size` elements, the others one by one; panics if a vector is misaligned.
pub(crate) fn run_fill_rows(
    args: &RowArgs,
    size: usize,
    bits: u64,
    grid: (u32, u32),
    mem: &mut HostMem,
) {
    let s = size as u64;
    let v = contig_group_elems(size, size) as u64;
    let value = &bits.to_le_bytes()[..size];
    let units = row_units_per_lane(size, size);
    for_each_row_lane(args, units, grid, |l, row| {
        let (od, _) = args.row_offsets(row);
        let dr = at(args.dst, od, size);
        let len = args.row_len;
        let head = row_head(dr, size, dr, size, len);
        let rem = len - head;
        let ngroups = rem / v;
        let nscalar = head + rem % v;
        l.scalars(head, ngroups * v, nscalar, |e| mem.write(dr + e * s, value));
        l.units(ngroups, units, |u| {
            let da = dr + (head + u * v) * s;
            assert_eq!(da % CONTIG_ALIGN, 0, "row fill: vector misaligned");
            for e in 0..v {
                mem.write(da + e * s, value);
            }
        });
    });
}

/// The gathered row kernels (`copy_rows_gather_bN`, `cast_rows_gather_S_D`) on `grid`, thread
/// by thread as the kernel maps its work: element `i` of a row from
/// [`RowGatherArgs::element_offset`], the units of `16 / max(size)` elements from the
/// destination's alignment on stored whole (aligned), the head and tail element by element.
/// With `scatter`, their mirror (`copy_rows_scatter_bN`): the source's row contiguous, its
/// units loaded whole (aligned) from the source's alignment on, element `i` stored at
/// [`RowGatherArgs::element_offset`] in the destination.
pub(crate) fn run_rows_gather(
    args: &RowGatherArgs,
    from: DType,
    to: DType,
    scatter: bool,
    grid: (u32, u32),
    mem: &mut HostMem,
) {
    let row_args = &args.row;
    let (ss, ds) = (from.size() as u64, to.size() as u64);
    let unit = 16 / ss.max(ds);
    // The size of the contiguous side, whose units are aligned.
    let cs = if scatter { ss } else { ds };
    let unit_bytes = unit * cs;
    let units = row_units_per_lane(from.size(), to.size());
    // The kernel's block coordinates: (piece, rows) of the launch grid, swapped with
    // rows_first.
    let (gx, gy) = (grid.0.max(1), grid.1.max(1));
    let grid = if args.rows_first != 0 {
        (gy, gx)
    } else {
        (gx, gy)
    };
    for_each_row_lane(row_args, units, grid, |l, row| {
        let (od, os) = row_args.row_offsets(row);
        let dr = at(row_args.dst, od, ds as usize);
        let sr = at(row_args.src, os, ss as usize);
        // Element `e`'s destination and source addresses.
        let addrs = |e: u64| {
            let off = args.element_offset(e);
            if scatter {
                (dr.wrapping_add((off * ds as i64) as u64), sr + e * ss)
            } else {
                (dr + e * ds, sr.wrapping_add((off * ss as i64) as u64))
            }
        };
        let len = row_args.row_len;
        let contig = if scatter { sr } else { dr };
        let head = ((contig.wrapping_neg() % unit_bytes) / cs).min(len);
        let rem = len - head;
        let nunits = rem / unit;
        l.scalars(head, nunits * unit, head + rem % unit, |e| {
            let (d, s) = addrs(e);
            copy_elem(mem, d, to, s, from);
        });
        l.units(nunits, units, |u| {
            let e0 = head + u * unit;
            assert_eq!(
                (contig + e0 * cs) % unit_bytes,
                0,
                "unit misaligned on the contiguous side"
            );
            for e in e0..e0 + unit {
                let (d, s) = addrs(e);
                copy_elem(mem, d, to, s, from);
            }
        });
    });
}
