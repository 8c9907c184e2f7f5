//! Host-side gather and scatter of the bus buffer's element ranges.

use super::plan::HostAxis;

/// Calls `f(host_offset, count, buf_index)` for every run of the linear range `[start, end)` of
/// the order `runs` (innermost first): `count` elements at `host_offset`, `host_offset +
/// runs[0].stride`, ... that are the bus buffer's elements `buf_index..buf_index + count`.
pub(crate) fn for_each_run(
    runs: &[HostAxis],
    start: usize,
    end: usize,
    mut f: impl FnMut(usize, usize, usize),
) {
    if start >= end || runs.is_empty() {
        return;
    }
    let r = runs.len();
    let mut idx = vec![0usize; r];
    let mut rem = start;
    let mut off = 0usize;
    for k in 0..r {
        idx[k] = rem % runs[k].len;
        rem /= runs[k].len;
        off += idx[k] * runs[k].stride;
    }
    let mut pos = start;
    loop {
        let count = (runs[0].len - idx[0]).min(end - pos);
        f(off, count, pos);
        pos += count;
        if pos >= end {
            return;
        }
        // The run reached the end of axis 0: carry into the outer axes.
        off -= idx[0] * runs[0].stride;
        idx[0] = 0;
        let mut k = 1;
        loop {
            idx[k] += 1;
            off += runs[k].stride;
            if idx[k] < runs[k].len {
                break;
            }
            off -= runs[k].len * runs[k].stride;
            idx[k] = 0;
            k += 1;
        }
    }
}

/// Gathers the bus buffer's elements `[start, start + out.len())` from host memory.
///
/// # Safety
/// Every host offset the range reaches through `runs` (relative to `host`) must be a readable
/// element of one allocation, and `out` must be writable for `out.len()` elements and not
/// overlap those host elements.
pub(crate) unsafe fn pack<T: Copy>(
    host: *const T,
    runs: &[HostAxis],
    start: usize,
    out: *mut T,
    len: usize,
) {
    let stride = runs.first().map_or(1, |a| a.stride);
    for_each_run(runs, start, start + len, |off, count, pos| {
        // SAFETY: `off` and the `count` elements at `stride` from it are elements of the host
        // view (caller's contract); `pos - start + count <= len` is inside `out`.
        unsafe {
            let src = host.add(off);
            let dst = out.add(pos - start);
            if stride == 1 {
                std::ptr::copy_nonoverlapping(src, dst, count);
            } else {
                for j in 0..count {
                    dst.add(j).write(src.add(j * stride).read());
                }
            }
        }
    });
}

/// Scatters the bus buffer's elements `[start, start + len)`, read from `src`, into host memory.
///
/// # Safety
/// Every host offset the range reaches through `runs` (relative to `host`) must be a writable
/// element of one allocation that nothing else accesses meanwhile, and `src` must be readable
/// for `len` elements and not overlap those host elements.
pub(crate) unsafe fn unpack<T: Copy>(
    host: *mut T,
    runs: &[HostAxis],
    start: usize,
    src: *const T,
    len: usize,
) {
    let stride = runs.first().map_or(1, |a| a.stride);
    for_each_run(runs, start, start + len, |off, count, pos| {
        // SAFETY: as in `pack`, with the roles of the two sides exchanged.
        unsafe {
            let dst = host.add(off);
            let s = src.add(pos - start);
            if stride == 1 {
                std::ptr::copy_nonoverlapping(s, dst, count);
            } else {
                for j in 0..count {
                    dst.add(j * stride).write(s.add(j).read());
                }
            }
        }
    });
}
