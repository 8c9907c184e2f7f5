//! The contiguous kernels (fill, copy and cast): block size, alignment, groups and grid.

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
