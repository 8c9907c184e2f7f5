//! The transfer planner: pure host code that decides how the elements of a host view and a
//! device view of the same shape cross the bus.
//!
//! Data always crosses as one contiguous *bus buffer* of `m` elements. Its element order is
//! the host view's memory order (axes sorted by `|host stride|`, negative strides flipped), so
//! the host side reads or writes memory front to back. Then:
//!
//! * host side ([`HostPath`]): the host elements *are* a gap-free block (`Block`, one memcpy),
//!   or (uploads only, when the block spanned by the elements is smaller than the view, as for
//!   a broadcast host view) that block is sent once and the device broadcasts it (`Superset`;
//!   forcing it on a view with gaps sends the gaps too), or the elements are gathered /
//!   scattered run by run (`Pack`);
//! * device side ([`DevicePath`]): the device view has exactly the bus buffer's layout
//!   (`Direct`: the DMA lands in, or leaves from, the view's own memory), or the buffer goes
//!   through a device temporary and the planner's strided copy kernels (`Staged`), which
//!   handle transposes, steps, negative strides and broadcasting on the device, where they cost
//!   a fraction of the bus time.

use crate::error::{Error, Result};

/// Which way the data moves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Direction {
    /// Host to device.
    Up,
    /// Device to host.
    Down,
}

/// One host axis after normalisation (innermost first): stride in elements, never negative.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct HostAxis {
    pub len: usize,
    pub stride: usize,
}

/// How the host side of a transfer crosses the bus: the planner's choice, which
/// [`TransferOptions::host_path`](crate::TransferOptions::host_path) can steer where it is
/// legal.
///
/// ```
/// use devspan::{HostPath, TransferOptions};
///
/// // Gather a broadcast host view's elements instead of uploading the block they span.
/// let opt = TransferOptions {
///     host_path: Some(HostPath::Pack),
///     ..TransferOptions::default()
/// };
/// assert!(opt.check().is_ok());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum HostPath {
    /// The host elements form one gap-free block: copied as is.
    Block,
    /// The block spanned by the host elements is sent whole, gaps included (uploads only).
    Superset,
    /// Elements are gathered (up) or scattered (down) run by run.
    Pack,
}

/// How the device side of a transfer is done.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum DevicePath {
    /// The device view's memory is the bus buffer itself.
    Direct,
    /// Through a device temporary and a device copy kernel.
    Staged,
}

/// A planned transfer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct TransferPlan {
    pub host: HostPath,
    pub device: DevicePath,
    /// Elements in the bus buffer.
    pub m: usize,
    /// Host element offset, from the view's element zero, of the bus buffer's first element
    /// (the lowest address the view reaches).
    pub host_start: isize,
    /// The bus buffer's order over host memory, innermost first, relative to `host_start`.
    pub runs: Vec<HostAxis>,
    /// Stride (elements) of every original axis inside the bus buffer.
    pub buf_strides: Vec<isize>,
    /// Index in the bus buffer of the element at index zero.
    pub buf_zero: usize,
}

// Gaps are never uploaded unless the block holds fewer elements than the view (a broadcast
// host view sends its one copy, and the device broadcasts it): packing the view's runs is never
// slower than sending the block they span with its gaps, and reads no host memory outside the
// view.

fn overflow(shape: &[usize], strides: &[isize]) -> Error {
    Error::overflow(format!(
        "host view of shape {shape:?} and strides {strides:?} spans more memory than an isize can address"
    ))
}

/// Plans a transfer between a host view (`host_strides`) and a device view (`dev_strides`) of
/// `shape`, both in elements of `elem_size` bytes. `force` overrides the host path where it is
/// legal (tests and benchmarks): `Pack` always is, `Superset` only where the planner would
/// choose it (a broadcast of a gap-free block); a block is never sent with gaps.
/// `Err(Shape)` when the stride lists do not match the shape's rank, `Err(Overflow)` when the
/// host view's extent or the bus bytes do not fit `isize`.
pub(crate) fn plan_transfer(
    shape: &[usize],
    host_strides: &[isize],
    dev_strides: &[isize],
    elem_size: usize,
    dir: Direction,
    force: Option<HostPath>,
) -> Result<TransferPlan> {
    let rank = shape.len();
    if host_strides.len() != rank || dev_strides.len() != rank {
        return Err(Error::shape(format!(
            "shape {shape:?} with {} host and {} device strides",
            host_strides.len(),
            dev_strides.len()
        )));
    }
    let n = shape
        .iter()
        .try_fold(1usize, |a, &l| a.checked_mul(l))
        .filter(|&n| {
            n.checked_mul(elem_size)
                .is_some_and(|b| b <= isize::MAX as usize)
        })
        .ok_or_else(|| overflow(shape, host_strides))?;
    if n == 0 {
        return Ok(TransferPlan {
            host: HostPath::Block,
            device: DevicePath::Direct,
            m: 0,
            host_start: 0,
            runs: vec![HostAxis { len: 0, stride: 1 }],
            buf_strides: vec![0; rank],
            buf_zero: 0,
        });
    }
    // Lowest reachable offset and extent of the host view.
    let (mut lo, mut span) = (0isize, 1usize);
    for (&len, &s) in shape.iter().zip(host_strides) {
        if len <= 1 {
            continue;
        }
        let ext = (len - 1)
            .checked_mul(s.unsigned_abs())
            .ok_or_else(|| overflow(shape, host_strides))?;
        span = span
            .checked_add(ext)
            .ok_or_else(|| overflow(shape, host_strides))?;
        if s < 0 {
            lo = lo
                .checked_sub_unsigned(ext)
                .ok_or_else(|| overflow(shape, host_strides))?;
        }
    }
    if span
        .checked_mul(elem_size)
        .is_none_or(|b| b > isize::MAX as usize)
    {
        return Err(overflow(shape, host_strides));
    }
    // Axes of length > 1 in host memory order: outermost first, ties by axis number.
    let mut order: Vec<usize> = (0..rank).filter(|&i| shape[i] > 1).collect();
    order.sort_by(|&a, &b| {
        host_strides[b]
            .unsigned_abs()
            .cmp(&host_strides[a].unsigned_abs())
            .then(a.cmp(&b))
    });
    // Runs: merged, innermost first.
    let mut runs: Vec<HostAxis> = Vec::with_capacity(order.len());
    for &i in order.iter().rev() {
        let ax = HostAxis {
            len: shape[i],
            stride: host_strides[i].unsigned_abs(),
        };
        match runs.last_mut() {
            Some(inner) if ax.stride == inner.stride * inner.len => inner.len *= ax.len,
            _ => runs.push(ax),
        }
    }
    if runs.is_empty() {
        runs.push(HostAxis { len: 1, stride: 1 });
    }
    // Without its broadcast (stride 0) axes, the view is gap-free when the rest merges into one
    // run of stride 1: only then does the block from `lo` to `lo + span` hold the view's own
    // elements and nothing else. Any other block would read host memory outside the view,
    // which another thread may be writing through a disjoint view. Broadcast axes sort
    // innermost and never merge with the others, so the other runs are theirs alone.
    let mut strided = runs.iter().filter(|r| r.stride != 0);
    let gap_free = match (strided.next(), strided.next()) {
        (None, _) => true,
        (Some(r), None) => r.stride == 1,
        _ => false,
    };
    let dense = gap_free && span == n;
    let broadcast = gap_free && span < n;
    let host = match dir {
        _ if dense => HostPath::Block,
        Direction::Up if broadcast && force != Some(HostPath::Pack) => HostPath::Superset,
        _ => HostPath::Pack,
    };
    let (m, runs, buf_strides, buf_zero) = match host {
        HostPath::Block | HostPath::Superset => (
            span,
            vec![HostAxis {
                len: span,
                stride: 1,
            }],
            host_strides.to_vec(),
            lo.unsigned_abs(),
        ),
        HostPath::Pack => {
            let mut buf_strides = vec![0isize; rank];
            let mut zero = 0usize;
            let mut packed = 1usize;
            for &i in order.iter().rev() {
                if host_strides[i] < 0 {
                    buf_strides[i] = -(packed as isize);
                    zero += (shape[i] - 1) * packed;
                } else {
                    buf_strides[i] = packed as isize;
                }
                packed *= shape[i];
            }
            (n, runs, buf_strides, zero)
        }
    };
    let same_layout = (0..rank).all(|i| shape[i] <= 1 || dev_strides[i] == buf_strides[i]);
    let device = if m == n && same_layout {
        DevicePath::Direct
    } else {
        DevicePath::Staged
    };
    Ok(TransferPlan {
        host,
        device,
        m,
        host_start: lo,
        runs,
        buf_strides,
        buf_zero,
    })
}
