//! Copies between devices: `assign` and `assign_cast` whose source lives on another GPU than the
//! destination.
//!
//! The work runs on the operation's stream, a stream of the destination's device. The source's
//! accesses are ordered and recorded on a stream of its own device (its memory's stream, or that
//! device's default stream for memory with no stream of its own): the operation's stream first
//! waits for that stream, which has waited for the earlier devspan writes of the source, and that
//! stream afterwards waits for the operation, so that later writes and the release of the source
//! follow the read.
//!
//! Two paths ([`CrossPath`]):
//! - **Peer**: where the destination's device can read the source's memory (peer access, which
//!   devspan enables for the pair, and for memory from a stream-ordered pool the pool's access),
//!   the destination device's copy kernels read the source directly, the layout change and the
//!   cast fused into the one pass, as on one device.
//! - **Staged**: otherwise the source is packed into a standard-layout temporary on its own
//!   device (when it is not standard-layout already), copied with `cuMemcpyPeerAsync` (which the
//!   driver stages where the devices cannot reach each other), and written into the destination
//!   on its device (directly when it is standard-layout of the same type, else through a
//!   temporary and the copy kernels). Temporaries come from stream-ordered allocation.
//!
//! Copies between devices cannot be captured into a graph: `Err(StreamCapture)` when either
//! stream captures one.

use std::cell::Cell;
use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaStream};
use ndarray::Dimension;

use crate::array::DeviceArray;
use crate::driver;
use crate::element::DeviceElement;
use crate::error::{Error, Result};
use crate::plan::PlanOptions;
use crate::view::{DeviceView, DeviceViewMut};
use devspan_kernels::abi::GridOptions;

/// How a copy between devices moves the data (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CrossPath {
    /// The destination device's kernels read the source through peer access.
    Peer,
    /// Packed on the source's device, copied by the driver, unpacked on the destination's.
    Staged,
}

thread_local! {
    static FORCED: Cell<Option<CrossPath>> = const { Cell::new(None) };
}

/// The path forced on this thread by [`force`], if any; always `None` in builds without the
/// `internals` feature, where nothing can force one (the check then costs nothing).
pub(crate) fn forced() -> Option<CrossPath> {
    if cfg!(feature = "internals") {
        FORCED.with(Cell::get)
    } else {
        None
    }
}

/// While alive, makes every `assign` / `assign_cast` on the calling thread take the cross-device
/// machinery with `path`, also for operands on one device; dropping it restores the earlier
/// setting.
#[derive(Debug)]
pub struct ForcedPath(Option<CrossPath>);

impl Drop for ForcedPath {
    fn drop(&mut self) {
        FORCED.with(|f| f.set(self.0));
    }
}

#[cfg_attr(not(feature = "internals"), allow(dead_code))]
/// Forces `path` for the copies made on the calling thread until the guard is dropped (for
/// tests on one device). On one device the peer path reads the memory directly.
pub fn force(path: CrossPath) -> ForcedPath {
    ForcedPath(FORCED.with(|f| f.replace(Some(path))))
}

/// Whether the destination's device (`dst_ctx`) can read the source's memory at `src_ptr` (on
/// `src_ctx`'s device) directly, enabling the access where the driver allows it: peer access
/// between the contexts, once per destination context and source device, and read-write
/// access to the memory pool the source was allocated from, if any.
fn peer_readable(dst_ctx: &Arc<CudaContext>, src_ctx: &Arc<CudaContext>, src_ptr: u64) -> bool {
    if dst_ctx.ordinal() == src_ctx.ordinal() {
        return true;
    }
    let can = driver::can_access_peer(dst_ctx.cu_device(), src_ctx.cu_device()).unwrap_or(false);
    if !can || dst_ctx.bind_to_thread().is_err() {
        return false;
    }
    {
        // The source devices whose memory the destination's context reads by peer access.
        let rt = crate::driver::runtime::of(dst_ctx);
        let mut enabled = crate::driver::runtime::lock(&rt.peers);
        if !enabled.contains(&src_ctx.ordinal()) {
            // SAFETY: `src_ctx` is a live context; the call maps the peer's allocations into the
            // current context (`dst_ctx`, bound above).
            if unsafe { driver::enable_peer_access(src_ctx.cu_ctx()) }.is_err() {
                return false;
            }
            enabled.push(src_ctx.ordinal());
        }
    }
    // Memory from a stream-ordered pool is reachable from another device only once the pool
    // grants it access.
    if let Ok(Some(pool)) = driver::pointer_pool(src_ptr) {
        let Ok(device) = std::ffi::c_int::try_from(dst_ctx.ordinal()) else {
            return false;
        };
        // SAFETY: the pool is that of live memory (the source view keeps it alive), so the
        // pool is live.
        if unsafe { driver::grant_pool_access(pool, device) }.is_err() {
            return false;
        }
    }
    // What the destination's context (current) may do with the memory, as the driver reports it.
    driver::pointer_access_flags(src_ptr).is_ok_and(|flags| flags != 0)
}

/// The stream of the source's device that its accesses are ordered and recorded on.
fn source_stream<U: DeviceElement, D: Dimension>(
    src: &DeviceView<'_, U, D>,
) -> Result<Arc<CudaStream>> {
    match src.stream() {
        Some(s) if s.context().ordinal() == src.device() => Ok(s),
        _ => crate::device::default_stream(src.device()),
    }
}

/// `Err(StreamCapture)` when `stream` is capturing a graph.
fn refuse_capture(stream: &CudaStream) -> Result<()> {
    crate::capture::refuse(
        stream,
        "a copy between devices",
        "it orders streams of two devices, which one graph capture cannot hold",
    )
}

/// `dst = src as T` for a source on another device (or any source while a path is forced):
/// `src` is already broadcast to `dst`'s shape and checked not to overlap it, `stream` belongs
/// to `dst`'s device.
pub(crate) fn assign_cast_across<T: DeviceElement, U: DeviceElement, D: Dimension>(
    dst: &mut DeviceViewMut<'_, T, D>,
    stream: &Arc<CudaStream>,
    src: &DeviceView<'_, U, D>,
    opt: PlanOptions,
    grid: GridOptions,
) -> Result<()> {
    if dst.is_empty() {
        return Ok(());
    }
    // The temporaries' copies below are local to one device each.
    let _unforced = ForcedPath(FORCED.with(|f| f.replace(None)));
    let other = source_stream(src)?;
    refuse_capture(stream)?;
    refuse_capture(&other)?;
    let path = forced().unwrap_or_else(|| {
        if peer_readable(stream.context(), other.context(), src.device_ptr()) {
            CrossPath::Peer
        } else {
            CrossPath::Staged
        }
    });
    match path {
        CrossPath::Peer => {
            let p = dst.copy_plan(src, opt)?;
            dst.raw()
                .keep
                .writing_reading_across(&src.raw().keep, stream, &other, || {
                    // SAFETY: both layouts are validated against their spans (kept alive by
                    // their keep-alives, the source's until `other` has followed this work), the
                    // destination's device reads the source's memory (peer access, checked
                    // above, or the same device), the operands do not overlap (checked by the
                    // caller) and `&mut` excludes other writers through devspan.
                    unsafe { crate::kernels::execute(&p, stream, grid) }
                })
        }
        CrossPath::Staged => staged(dst, stream, src, &other, opt, grid),
    }
}

/// The staged path: pack on the source's device, `cuMemcpyPeerAsync`, unpack on the
/// destination's.
fn staged<T: DeviceElement, U: DeviceElement, D: Dimension>(
    dst: &mut DeviceViewMut<'_, T, D>,
    stream: &Arc<CudaStream>,
    src: &DeviceView<'_, U, D>,
    other: &Arc<CudaStream>,
    opt: PlanOptions,
    grid: GridOptions,
) -> Result<()> {
    let packed;
    let s = if src.is_standard_layout() {
        src.clone()
    } else {
        packed = src.to_contiguous_on(other)?;
        packed.view()
    };
    let bytes = s
        .len()
        .checked_mul(std::mem::size_of::<U>())
        .ok_or_else(|| Error::overflow("the staged copy's size overflows usize"))?;
    let from = s.device_ptr();
    let copy = |to: u64| -> Result<()> {
        stream.context().bind_to_thread()?;
        // SAFETY: `to` starts `bytes` bytes of standard-layout destination memory on the
        // destination's device and `from` `bytes` bytes on the source's (both spans checked,
        // both kept alive); the copy is stream-ordered on `stream`, which has waited for the
        // source's stream.
        unsafe {
            driver::copy_peer(
                to,
                stream.context().cu_ctx(),
                from,
                other.context().cu_ctx(),
                bytes,
                stream.cu_stream(),
            )
        }
    };
    if U::DTYPE.same_bits(T::DTYPE) && dst.is_standard_layout() {
        let to = dst.device_ptr();
        return dst
            .raw()
            .keep
            .writing_reading_across(&s.raw().keep, stream, other, || copy(to));
    }
    // SAFETY: the peer copy below writes every element before the kernels read them.
    let mut landed = unsafe { DeviceArray::<U, D>::uninit(stream, s.dim())? };
    let to = landed.view().device_ptr();
    landed
        .view_mut()
        .raw()
        .keep
        .writing_reading_across(&s.raw().keep, stream, other, || copy(to))?;
    dst.assign_cast_local(stream, &landed.view(), opt, grid)
}
