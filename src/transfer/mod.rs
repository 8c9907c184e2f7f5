//! Host <-> device copies between any host layout and any device layout.
//!
//! [`plan`] decides how the elements cross the bus (a contiguous block, a block with gaps sent
//! whole, or gathered run by run; straight into the device view or through a device temporary
//! and a copy kernel). Pageable host memory goes through [`pipeline`]: pinned staging chunks,
//! two per worker thread, packing one chunk while the copy engine moves the other.
//! Page-locked memory ([`PinnedBuffer`], or any view the driver knows as page-locked) is copied
//! directly.

mod dma;
mod pack;
mod pinned;
mod pinned_host_slice;
mod pipeline;
pub(crate) mod plan;
#[cfg(test)]
mod tests;

use std::sync::Arc;

use cudarc::driver::CudaStream;
use ndarray::{Array, ArrayBase, ArrayView, Data, DataMut, Dimension, Ix1};

use crate::array::DeviceArray;
use crate::device::check_stream;
use crate::element::DeviceElement;
use crate::error::{Error, Result};
use crate::span::DeviceSpan;
use crate::view::{DeviceBase, DeviceView, DeviceViewMut, SpanData, SpanDataMut};

pub use pinned::PinnedBuffer;
pub use pipeline::TransferOptions;
pub use plan::{DevicePath, HostPath};
use plan::{Direction, TransferPlan, plan_transfer};

fn check_same_shape(host: &[usize], dev: &[usize]) -> Result<()> {
    if host != dev {
        return Err(Error::shape(format!(
            "host shape {host:?} does not match device shape {dev:?}"
        )));
    }
    Ok(())
}

/// The paths a transfer would take, `"host/device"` (benchmarks and diagnostics).
#[cfg(any(test, feature = "internals"))]
pub fn transfer_path(
    shape: &[usize],
    host_strides: &[isize],
    dev_strides: &[isize],
    elem_size: usize,
    up: bool,
) -> String {
    let dir = if up { Direction::Up } else { Direction::Down };
    match plan_transfer(shape, host_strides, dev_strides, elem_size, dir, None) {
        Ok(p) => format!("{:?}/{:?}", p.host, p.device).to_lowercase(),
        Err(e) => format!("error: {e}"),
    }
}

/// An uninitialised device temporary of `m` elements on `stream`, for the bus buffer of a
/// transfer whose device path is [`DevicePath::Staged`].
///
/// # Safety
/// As [`DeviceArray::uninit`]: every element is written before it is read.
unsafe fn device_temporary<T: DeviceElement>(
    stream: &Arc<CudaStream>,
    m: usize,
) -> Result<DeviceArray<T, Ix1>> {
    #[cfg(feature = "internals")]
    crate::fault::check(crate::fault::Fault::DeviceAlloc)?;
    // SAFETY: the caller's contract.
    unsafe { DeviceArray::<T, Ix1>::uninit(stream, m) }
}

/// Moves the bus buffer up into the `m` device elements at `dev`. With `pinned_direct`, the
/// copy reads host memory directly and the caller must synchronise before the host borrow
/// ends; otherwise the host has been read when this returns.
///
/// # Safety
/// `host` is element zero of a host view of `plan`'s shape and strides (all its elements in
/// one allocation, readable); `dev` is `plan.m` writable device elements in `stream`'s context.
unsafe fn send<T: DeviceElement>(
    stream: &Arc<CudaStream>,
    plan: &TransferPlan,
    host: *const T,
    dev: u64,
    opt: &TransferOptions,
    pinned_direct: bool,
) -> Result<()> {
    let size = std::mem::size_of::<T>();
    let base = host.wrapping_offset(plan.host_start);
    if pinned_direct
        && plan.host != HostPath::Pack
        && pinned::is_page_locked(stream.context(), base.cast(), plan.m * size)
    {
        // SAFETY: `base..base + m` is the block the view spans, inside its allocation; the
        // caller waits for the stream before the borrow ends.
        return unsafe { dma::htod(stream, dev, base, plan.m) };
    }
    // SAFETY: `runs` from `base` reach the view's elements (Pack) or the block between its
    // lowest and highest element (Block, Superset), which the planner allows only when every
    // element of the block is an element of the view (no gaps); all inside the view's single
    // allocation.
    unsafe { pipeline::upload(stream, base, &plan.runs, plan.m, dev, opt) }
}

/// Moves the `plan.m` device elements at `dev` down into host memory and waits for them.
///
/// # Safety
/// `host` is element zero of a writable host view of `plan`'s shape and strides that nothing
/// else accesses; `dev` is `plan.m` device elements whose producers are ordered on `stream`.
unsafe fn receive<T: DeviceElement>(
    stream: &Arc<CudaStream>,
    plan: &TransferPlan,
    host: *mut T,
    dev: u64,
    opt: &TransferOptions,
    pinned_direct: bool,
) -> Result<()> {
    let size = std::mem::size_of::<T>();
    let base = host.wrapping_offset(plan.host_start);
    if pinned_direct
        && plan.host == HostPath::Block
        && pinned::is_page_locked(stream.context(), base.cast_const().cast(), plan.m * size)
    {
        // SAFETY: `base..base + m` is exactly the view's elements (a gap-free block); the
        // stream is synchronised before returning, so the borrow outlives the copy.
        unsafe { dma::dtoh(stream, base, dev, plan.m)? };
        stream.synchronize()?;
        return Ok(());
    }
    // SAFETY: `runs` from `base` reach exactly the view's elements (the caller's contract).
    unsafe { pipeline::download(stream, dev, plan.m, base, &plan.runs, opt) }
}

/// Uploads `host` into `dst` (shapes checked); the host may still be read by a direct copy
/// from page-locked memory until the stream is synchronised.
fn upload<T: DeviceElement, D: Dimension>(
    dst: &mut DeviceViewMut<'_, T, D>,
    stream: &Arc<CudaStream>,
    host: &ArrayView<'_, T, D>,
    opt: &TransferOptions,
    pinned_direct: bool,
) -> Result<()> {
    check_same_shape(host.shape(), dst.shape())?;
    check_stream(stream, dst.device(), "the destination view")?;
    let size = std::mem::size_of::<T>();
    let plan = plan_transfer(
        dst.shape(),
        host.strides(),
        dst.strides(),
        size,
        Direction::Up,
        opt.host_path,
    )?;
    if plan.m == 0 {
        return Ok(());
    }
    let hp = host.as_ptr();
    match plan.device {
        DevicePath::Direct => {
            let dev = dst.device_ptr() - (plan.buf_zero * size) as u64;
            dst.raw().keep.writing(stream, || {
                // SAFETY: the bus buffer has the view's own layout (planned Direct), so its
                // `m` elements are exactly the view's elements, in its validated span.
                unsafe { send(stream, &plan, hp, dev, opt, pinned_direct) }
            })
        }
        DevicePath::Staged => {
            // SAFETY: every element is written by `send` before the kernel below reads it.
            let mut tmp = unsafe { device_temporary::<T>(stream, plan.m)? };
            {
                let tv = tmp.view_mut();
                let dev = tv.device_ptr();
                tv.raw().keep.writing(stream, || {
                    // SAFETY: `tmp` holds the `m` elements.
                    unsafe { send(stream, &plan, hp, dev, opt, pinned_direct) }
                })?;
            }
            let src = DeviceView::from_span(
                DeviceSpan::from_cuda(tmp.as_cuda_slice()),
                dst.dim(),
                &plan.buf_strides,
                plan.buf_zero,
            )?;
            dst.assign_on(stream, &src)
        }
    }
}

/// Validates and plans a download, enqueueing the device-side gather into a temporary when
/// the plan needs one.
fn prepare_download<T: DeviceElement, D: Dimension>(
    src: &DeviceView<'_, T, D>,
    stream: &Arc<CudaStream>,
    host_shape: &[usize],
    host_strides: &[isize],
    opt: &TransferOptions,
) -> Result<(TransferPlan, Option<DeviceArray<T, Ix1>>)> {
    check_same_shape(host_shape, src.shape())?;
    check_stream(stream, src.device(), "the source view")?;
    crate::capture::refuse(stream, "copying to the host", crate::capture::HOST_TRANSFER)?;
    let plan = plan_transfer(
        src.shape(),
        host_strides,
        src.strides(),
        std::mem::size_of::<T>(),
        Direction::Down,
        opt.host_path,
    )?;
    if plan.m == 0 || plan.device == DevicePath::Direct {
        return Ok((plan, None));
    }
    // SAFETY: the gather below writes every element (the bus layout is a bijection onto the
    // `m` elements) before the download reads them.
    let mut tmp = unsafe { device_temporary::<T>(stream, plan.m)? };
    {
        let mut tv = DeviceViewMut::from_span_mut(
            tmp.whole_span_mut(),
            src.dim(),
            &plan.buf_strides,
            plan.buf_zero,
        )?;
        tv.assign_on(stream, src)?;
    }
    Ok((plan, Some(tmp)))
}

/// Completes a prepared download into host memory.
///
/// # Safety
/// `host` is element zero of a writable host view of the planned shape and strides that
/// nothing else accesses until this returns.
unsafe fn finish_download<T: DeviceElement, D: Dimension>(
    src: &DeviceView<'_, T, D>,
    stream: &Arc<CudaStream>,
    plan: &TransferPlan,
    tmp: Option<&DeviceArray<T, Ix1>>,
    host: *mut T,
    opt: &TransferOptions,
    pinned_direct: bool,
) -> Result<()> {
    if plan.m == 0 {
        return Ok(());
    }
    let size = std::mem::size_of::<T>();
    match tmp {
        None => {
            let dev = src.device_ptr() - (plan.buf_zero * size) as u64;
            src.raw().keep.reading(stream, || {
                // SAFETY: Direct plan: the bus buffer is exactly the view's elements; the host
                // side is the caller's contract.
                unsafe { receive(stream, plan, host, dev, opt, pinned_direct) }
            })
        }
        Some(tmp) => {
            let tv = tmp.view();
            let dev = tv.device_ptr();
            tv.raw().keep.reading(stream, || {
                // SAFETY: `tmp` holds the `m` gathered elements; host side as above.
                unsafe { receive(stream, plan, host, dev, opt, pinned_direct) }
            })
        }
    }
}

/// Downloads `src` into host memory at `host` with `host_strides` (shape checked).
///
/// # Safety
/// As [`finish_download`].
unsafe fn download<T: DeviceElement, D: Dimension>(
    src: &DeviceView<'_, T, D>,
    stream: &Arc<CudaStream>,
    host_shape: &[usize],
    host_strides: &[isize],
    host: *mut T,
    opt: &TransferOptions,
) -> Result<()> {
    let (plan, tmp) = prepare_download(src, stream, host_shape, host_strides, opt)?;
    // SAFETY: the caller's contract.
    unsafe {
        finish_download(
            src,
            stream,
            &plan,
            tmp.as_ref(),
            host,
            opt,
            opt.pinned_direct,
        )
    }
}

/// A host <-> device copy in flight, holding the borrows of both sides until it completes.
///
/// [`wait`](Self::wait) finishes the copy and reports errors. Dropping the handle finishes it
/// too; a destructor cannot return an error, so a failure is then written to standard error
/// as one line starting with `devspan:` (wait for the transfer to handle errors).
///
/// Forgetting it (`std::mem::forget`) is safe and leaks no device memory. The host memory is
/// never touched after the handle is gone: downloads then leave the host view unwritten, and
/// uploads have read the host view already. What a forgotten handle leaks is host memory: a
/// download through a device temporary (a device view that must be gathered first) copied the
/// gathered elements into page-locked staging memory when it started, and released the
/// temporary then; that staging memory is never freed or reused once the handle is forgotten.
///
/// ```no_run
/// # fn main() -> devspan::Result<()> {
/// use ndarray::Array2;
/// let stream = devspan::default_stream(0)?;
/// let host = Array2::from_shape_fn((256, 256), |(i, j)| (i + j) as f32);
/// let mut dev = devspan::DeviceArray::<f32, _>::zeros(&stream, (256, 256))?;
/// {
///     let (mut dv, ht) = (dev.view_mut(), host.t());
///     let up = dv.copy_from_host_async_on(&stream, &ht)?;
///     // ... other host work ...
///     up.wait()?;
/// }
/// let mut back = Array2::<f32>::zeros((256, 256));
/// let view = dev.view();
/// let mut out = back.view_mut();
/// view.copy_to_host_async_on(&stream, &mut out)?.wait()?;
/// assert_eq!(back, host.t());
/// # Ok(()) }
/// ```
#[must_use = "a transfer finishes when it is waited for or dropped"]
pub struct Transfer<'a> {
    finish: Option<Box<dyn FnOnce() -> Result<()> + 'a>>,
}

impl std::fmt::Debug for Transfer<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Transfer")
            .field("finished", &self.finish.is_none())
            .finish()
    }
}

impl Transfer<'_> {
    /// Finishes the copy (waiting for the device) and reports its result.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let stream = devspan::default_stream(0)?;
    /// let host = ndarray::arr1(&[1u8, 2, 3]);
    /// let mut dev = devspan::DeviceArray::<u8, _>::zeros(&stream, 3)?;
    /// dev.view_mut().copy_from_host_async_on(&stream, &host.view())?.wait()?;
    /// # Ok(()) }
    /// ```
    pub fn wait(mut self) -> Result<()> {
        self.finish.take().map_or(Ok(()), |f| f())
    }
}

impl Drop for Transfer<'_> {
    fn drop(&mut self) {
        if let Some(f) = self.finish.take()
            && let Err(e) = f()
        {
            report_dropped(&e, &mut std::io::stderr());
        }
    }
}

/// Writes the error of a transfer that was dropped without being waited for, as one line
/// starting with `devspan:`. A failed write is ignored: this never panics.
fn report_dropped(e: &Error, out: &mut dyn std::io::Write) {
    let msg = format!("{e:#}").replace(['\n', '\r'], " ");
    let _ = writeln!(
        out,
        "devspan: a transfer dropped without wait() failed: {msg}"
    );
}

/// Host -> device, into mutable arrays and views. The plain form runs on the memory's stream
/// ([`stream`](DeviceBase::stream)); the `_on` and `_with` forms on the stream given.
impl<X: SpanDataMut, D: Dimension> DeviceBase<X, D> {
    /// Copies a host array or view of any kind and layout into `self` (same shape, any
    /// layout) and waits for it. Pageable host memory goes through pinned staging chunks
    /// (packed by several threads while the copy engine moves the previous ones); page-locked
    /// memory is copied directly. `Err` with nothing written when the shapes differ, the
    /// stream belongs to another device, the host view's extent overflows or memory for the
    /// staging runs out; a driver error during the copy leaves each element either old or new
    /// (see [Failures](crate#failures)).
    /// [`copy_from_host_with`](Self::copy_from_host_with) takes [`TransferOptions`].
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// use ndarray::{Array2, s};
    /// let stream = devspan::default_stream(0)?;
    /// let host = Array2::from_shape_fn((8, 6), |(i, j)| (i * 6 + j) as i32);
    /// let mut dev = devspan::DeviceArray::<i32, _>::zeros(&stream, (6, 8))?;
    /// dev.slice_mut(s![.., ..;-1]).copy_from_host_on(&stream, &host.t())?;
    /// assert_eq!(dev.to_host_on(&stream)?, host.t().slice(s![.., ..;-1]));
    /// # Ok(()) }
    /// ```
    pub fn copy_from_host<S: Data<Elem = X::Elem>>(
        &mut self,
        host: &ArrayBase<S, D>,
    ) -> Result<()> {
        let stream = self.own_stream("copy_from_host")?;
        self.copy_from_host_with(&stream, host, &TransferOptions::default())
    }

    /// [`copy_from_host`](Self::copy_from_host) on `stream`.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let stream = devspan::default_stream(0)?;
    /// let mut dev = devspan::DeviceArray::<u8, _>::zeros(&stream, 3)?;
    /// dev.copy_from_host_on(&stream, &ndarray::arr1(&[1u8, 2, 3]))?;
    /// # Ok(()) }
    /// ```
    pub fn copy_from_host_on<S: Data<Elem = X::Elem>>(
        &mut self,
        stream: &Arc<CudaStream>,
        host: &ArrayBase<S, D>,
    ) -> Result<()> {
        self.copy_from_host_with(stream, host, &TransferOptions::default())
    }

    /// [`copy_from_host`](Self::copy_from_host) on `stream` with the staging options `opt`: chunk size,
    /// worker threads, host path, direct copies from page-locked memory. `Err` with nothing
    /// written when `opt` fails [`TransferOptions::check`], and as `copy_from_host` otherwise.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// use devspan::TransferOptions;
    /// let stream = devspan::default_stream(0)?;
    /// let host = ndarray::Array2::from_shape_fn((1024, 512), |(i, j)| (i ^ j) as f32);
    /// let mut dev = devspan::DeviceArray::<f32, _>::zeros(&stream, (512, 1024))?;
    /// // Two staging threads moving 1 MiB chunks.
    /// let opt = TransferOptions {
    ///     chunk_bytes: 1 << 20,
    ///     threads: 2,
    ///     ..TransferOptions::default()
    /// };
    /// dev.copy_from_host_with(&stream, &host.t(), &opt)?;
    /// assert_eq!(dev.to_host_on(&stream)?, host.t());
    /// # Ok(()) }
    /// ```
    pub fn copy_from_host_with<S: Data<Elem = X::Elem>>(
        &mut self,
        stream: &Arc<CudaStream>,
        host: &ArrayBase<S, D>,
        opt: &TransferOptions,
    ) -> Result<()> {
        opt.check()?;
        crate::capture::refuse(
            stream,
            "copying from the host",
            crate::capture::HOST_TRANSFER,
        )?;
        let r = upload(
            &mut self.view_mut(),
            stream,
            &host.view(),
            opt,
            opt.pinned_direct,
        );
        // A direct copy from page-locked host memory may be in flight even when a later step
        // failed: the host borrow must not end before the stream has finished with it.
        let s = stream.synchronize();
        r?;
        Ok(s?)
    }

    /// Starts copying a host array or view of any layout into `self` (same shape); the
    /// returned [`Transfer`] borrows both until it is waited for or dropped.
    /// Host data is read into pinned staging before this returns; the device-side copy and
    /// layout change run asynchronously. Errors as [`copy_from_host`](Self::copy_from_host).
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let stream = devspan::default_stream(0)?;
    /// let host = ndarray::Array3::<f32>::ones((4, 5, 6));
    /// let mut dev = devspan::DeviceArray::<f32, _>::zeros(&stream, (6, 5, 4))?;
    /// let ht = host.t();
    /// let t = dev.copy_from_host_async(&ht)?;
    /// t.wait()?;
    /// # Ok(()) }
    /// ```
    pub fn copy_from_host_async<'s, S: Data<Elem = X::Elem>>(
        &'s mut self,
        host: &'s ArrayBase<S, D>,
    ) -> Result<Transfer<'s>> {
        let stream = self.own_stream("copy_from_host_async")?;
        self.copy_from_host_async_on(&stream, host)
    }

    /// [`copy_from_host_async`](Self::copy_from_host_async) on `stream`.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let stream = devspan::default_stream(0)?;
    /// let host = ndarray::Array1::<f32>::ones(8);
    /// let mut dev = devspan::DeviceArray::<f32, _>::zeros(&stream, 8)?;
    /// dev.copy_from_host_async_on(&stream, &host)?.wait()?;
    /// # Ok(()) }
    /// ```
    pub fn copy_from_host_async_on<'s, S: Data<Elem = X::Elem>>(
        &'s mut self,
        stream: &Arc<CudaStream>,
        host: &'s ArrayBase<S, D>,
    ) -> Result<Transfer<'s>> {
        let opt = TransferOptions::default();
        crate::capture::refuse(
            stream,
            "copying from the host",
            crate::capture::HOST_TRANSFER,
        )?;
        upload(&mut self.view_mut(), stream, &host.view(), &opt, false)?;
        let done = stream.context().new_event(None)?;
        done.record(stream)?;
        Ok(Transfer {
            finish: Some(Box::new(move || Ok(done.synchronize()?))),
        })
    }
}

/// Device -> host, from arrays and views of every kind. The plain form runs on the memory's
/// stream ([`stream`](DeviceBase::stream)); the `_on` and `_with` forms on the stream given.
impl<X: SpanData, D: Dimension> DeviceBase<X, D> {
    /// Copies these elements (any layout) into a host array or view of any layout (same
    /// shape) and waits for it. `Err` with nothing written when the shapes differ, the
    /// stream belongs to another device, the host view's extent overflows or memory for the
    /// staging runs out; a driver error during the copy leaves each element either old or new
    /// (see [Failures](crate#failures)).
    /// [`copy_to_host_with`](Self::copy_to_host_with) takes [`TransferOptions`].
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// use ndarray::{Array2, s};
    /// let stream = devspan::default_stream(0)?;
    /// let dev = devspan::DeviceArray::from_host(&stream, &Array2::from_shape_fn((4, 5), |(i, j)| (i * 5 + j) as u8).view())?;
    /// let mut host = Array2::<u8>::zeros((5, 4));
    /// dev.view().copy_to_host_on(&stream, &mut host.view_mut().reversed_axes())?;
    /// assert_eq!(host.t(), dev.to_host_on(&stream)?);
    /// # Ok(()) }
    /// ```
    pub fn copy_to_host<S: DataMut<Elem = X::Elem>>(
        &self,
        host: &mut ArrayBase<S, D>,
    ) -> Result<()> {
        let stream = self.own_stream("copy_to_host")?;
        self.copy_to_host_with(&stream, host, &TransferOptions::default())
    }

    /// [`copy_to_host`](Self::copy_to_host) on `stream`.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let stream = devspan::default_stream(0)?;
    /// let dev = devspan::DeviceArray::<u8, _>::zeros(&stream, 3)?;
    /// let mut host = ndarray::Array1::<u8>::ones(3);
    /// dev.copy_to_host_on(&stream, &mut host)?;
    /// assert_eq!(host, ndarray::arr1(&[0u8, 0, 0]));
    /// # Ok(()) }
    /// ```
    pub fn copy_to_host_on<S: DataMut<Elem = X::Elem>>(
        &self,
        stream: &Arc<CudaStream>,
        host: &mut ArrayBase<S, D>,
    ) -> Result<()> {
        self.copy_to_host_with(stream, host, &TransferOptions::default())
    }

    /// [`copy_to_host`](Self::copy_to_host) on `stream` with the staging options `opt`: chunk size,
    /// worker threads, direct copies into page-locked memory. `Err` with nothing written when
    /// `opt` fails [`TransferOptions::check`], and as `copy_to_host` otherwise.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// use devspan::TransferOptions;
    /// let stream = devspan::default_stream(0)?;
    /// let dev = devspan::DeviceArray::<f32, _>::zeros(&stream, (512, 1024))?;
    /// let mut host = ndarray::Array2::<f32>::ones((1024, 512));
    /// // One staging thread: unpacking on the calling thread only.
    /// let opt = TransferOptions {
    ///     threads: 1,
    ///     ..TransferOptions::default()
    /// };
    /// dev.view().copy_to_host_with(&stream, &mut host.view_mut().reversed_axes(), &opt)?;
    /// assert!(host.iter().all(|&x| x == 0.0));
    /// # Ok(()) }
    /// ```
    pub fn copy_to_host_with<S: DataMut<Elem = X::Elem>>(
        &self,
        stream: &Arc<CudaStream>,
        host: &mut ArrayBase<S, D>,
        opt: &TransferOptions,
    ) -> Result<()> {
        opt.check()?;
        let mut host = host.view_mut();
        let shape = host.shape().to_vec();
        let strides = host.strides().to_vec();
        // SAFETY: element zero of a writable view with these shape and strides, borrowed
        // exclusively for the call.
        unsafe {
            download(
                &self.view(),
                stream,
                &shape,
                &strides,
                host.as_mut_ptr(),
                opt,
            )
        }
    }

    /// Starts copying these elements into a host array or view of any layout (same shape).
    /// The host view is written only by [`Transfer::wait`] (or on drop), never
    /// before. When the device view's elements must first be gathered on the device, the
    /// gather into a device temporary and the copy of the temporary into page-locked staging
    /// memory are enqueued now and the temporary is released at once (stream-ordered, after
    /// the copy); `wait` waits for the copy and scatters the staged elements into the host
    /// view. The staging memory then holds all the view's elements, in chunks from the pool of
    /// staging chunks (new ones when the pool has too few). Otherwise the whole copy happens
    /// in `wait`. Errors as
    /// [`copy_to_host`](Self::copy_to_host); those of the shapes, the stream and the host
    /// view's extent come before anything is enqueued.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let stream = devspan::default_stream(0)?;
    /// let dev = devspan::DeviceArray::<i32, _>::zeros(&stream, (3, 4))?;
    /// let mut host = ndarray::Array2::<i32>::ones((4, 3));
    /// let mut h = host.view_mut();
    /// let vt = dev.t();
    /// let pending = vt.copy_to_host_async(&mut h)?;
    /// pending.wait()?;
    /// assert!(host.iter().all(|&x| x == 0));
    /// # Ok(()) }
    /// ```
    pub fn copy_to_host_async<'s, S: DataMut<Elem = X::Elem>>(
        &'s self,
        host: &'s mut ArrayBase<S, D>,
    ) -> Result<Transfer<'s>> {
        let stream = self.own_stream("copy_to_host_async")?;
        self.copy_to_host_async_on(&stream, host)
    }

    /// [`copy_to_host_async`](Self::copy_to_host_async) on `stream`.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let stream = devspan::default_stream(0)?;
    /// let dev = devspan::DeviceArray::<i32, _>::zeros(&stream, 4)?;
    /// let mut host = ndarray::Array1::<i32>::ones(4);
    /// dev.copy_to_host_async_on(&stream, &mut host)?.wait()?;
    /// assert_eq!(host, ndarray::arr1(&[0, 0, 0, 0]));
    /// # Ok(()) }
    /// ```
    pub fn copy_to_host_async_on<'s, S: DataMut<Elem = X::Elem>>(
        &'s self,
        stream: &Arc<CudaStream>,
        host: &'s mut ArrayBase<S, D>,
    ) -> Result<Transfer<'s>> {
        let opt = TransferOptions::default();
        let this = self.view();
        // One mutable view for the whole transfer: its pointer and strides stay those planned.
        let mut host = host.view_mut();
        let (plan, tmp) = prepare_download(&this, stream, host.shape(), host.strides(), &opt)?;
        if let Some(tmp) = tmp {
            let staged = {
                let tv = tmp.view();
                let dev = tv.device_ptr();
                tv.raw().keep.reading(stream, || {
                    // SAFETY: `tmp` holds the `m` elements, written by the gather enqueued on
                    // `stream` before these copies, and is freed on `stream` after them.
                    unsafe { pipeline::StagedDownload::<X::Elem>::start(stream, dev, plan.m, &opt) }
                })?
            };
            // The transfer holds no device memory from here on.
            drop(tmp);
            return Ok(Transfer {
                finish: Some(Box::new(move || {
                    let base = host.as_mut_ptr().wrapping_offset(plan.host_start);
                    // SAFETY: `host` is borrowed exclusively by the transfer; the plan was made
                    // for its shape and strides, so `runs` from `base` reach exactly its
                    // elements, in the bus order the staged elements are in.
                    unsafe { staged.finish(base, &plan.runs) }
                })),
            });
        }
        let stream = stream.clone();
        Ok(Transfer {
            finish: Some(Box::new(move || {
                // SAFETY: `host` is borrowed exclusively by the transfer, and the plan was made
                // for its shape and strides.
                unsafe {
                    finish_download(&this, &stream, &plan, None, host.as_mut_ptr(), &opt, false)
                }
            })),
        })
    }

    /// These elements in a new host array (standard layout), waiting for the copy
    /// (ndarray's `to_owned`, across the bus).
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// use ndarray::s;
    /// let stream = devspan::default_stream(0)?;
    /// let a = devspan::DeviceArray::from_host(&stream, &ndarray::arr1(&[1i32, 2, 3, 4]))?;
    /// assert_eq!(a.slice(s![..;-2]).to_host()?, ndarray::arr1(&[4, 2]));
    /// assert_eq!(a.to_host()?, ndarray::arr1(&[1, 2, 3, 4]));
    /// # Ok(()) }
    /// ```
    pub fn to_host(&self) -> Result<Array<X::Elem, D>> {
        let stream = self.own_stream("to_host")?;
        to_host_with(&self.view(), &stream, &TransferOptions::default())
    }

    /// [`to_host`](Self::to_host) on `stream`.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let stream = devspan::default_stream(0)?;
    /// let dev = devspan::DeviceArray::<i16, _>::zeros(&stream, (2, 2))?;
    /// assert_eq!(dev.to_host_on(&stream)?, ndarray::Array2::<i16>::zeros((2, 2)));
    /// # Ok(()) }
    /// ```
    pub fn to_host_on(&self, stream: &Arc<CudaStream>) -> Result<Array<X::Elem, D>> {
        to_host_with(&self.view(), stream, &TransferOptions::default())
    }
}

/// Prints the elements as ndarray prints an `Array` (nested brackets; large arrays summarised
/// with `...`; the formatter's precision and width apply to each element), after copying them
/// to the host on the memory's stream, or the device's default stream for memory with no stream
/// of its own. A failed copy prints as `<devspan error: ...>`; it never panics.
///
/// ```no_run
/// # fn main() -> devspan::Result<()> {
/// let stream = devspan::default_stream(0)?;
/// let a = devspan::DeviceArray::from_host(&stream, &ndarray::array![[1.0f32, 2.5], [3.0, 4.0]])?;
/// assert_eq!(format!("{a:.1}"), "[[1.0, 2.5],\n [3.0, 4.0]]");
/// assert_eq!(a.t().to_string(), "[[1, 3],\n [2.5, 4]]");
/// # Ok(()) }
/// ```
impl<X: SpanData, D: Dimension> std::fmt::Display for DeviceBase<X, D>
where
    X::Elem: std::fmt::Display,
{
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let stream = match self.stream() {
            Some(s) => Ok(s),
            None => crate::device::default_stream(self.device()),
        };
        match stream.and_then(|s| self.to_host_on(&s)) {
            Ok(host) => std::fmt::Display::fmt(&host, f),
            Err(e) => write!(f, "<devspan error: {e}>"),
        }
    }
}

/// A new standard-layout host array with the elements of `src`.
pub(crate) fn to_host_with<T: DeviceElement, D: Dimension>(
    src: &DeviceView<'_, T, D>,
    stream: &Arc<CudaStream>,
    opt: &TransferOptions,
) -> Result<Array<T, D>> {
    let n = src.len();
    let strides = crate::layout::Layout::contiguous(src.dim())
        .strides()
        .to_vec();
    let mut v: Vec<T> = Vec::with_capacity(n);
    // SAFETY: the vector's capacity holds `n` elements in standard order, which the download
    // writes, all of them, before `set_len`; nothing else sees the vector meanwhile.
    unsafe {
        download(src, stream, src.shape(), &strides, v.as_mut_ptr(), opt)?;
        v.set_len(n);
    }
    Array::from_shape_vec(src.dim(), v)
        .map_err(|e| Error::shape(format!("device view of shape {:?}: {e}", src.shape())))
}

impl<T: DeviceElement, D: Dimension> DeviceArray<T, D> {
    /// A device copy of a host array of any kind (`Array`, `ArrayView`, `ArcArray`,
    /// `CowArray`) and any layout, transferred on `stream` (the layout change runs on the device
    /// where that is faster), waiting for it.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let stream = devspan::default_stream(0)?;
    /// let host = ndarray::Array::from_shape_fn((3, 4), |(i, j)| (i * 4 + j) as f64);
    /// let dev = devspan::DeviceArray::from_host(&stream, &host)?;
    /// let dev_t = devspan::DeviceArray::from_host(&stream, &host.t())?;
    /// let shared = devspan::DeviceArray::from_host(&stream, &host.to_shared())?;
    /// assert_eq!(dev_t.to_host_on(&stream)?, host.t());
    /// assert_eq!(shared.to_host_on(&stream)?, dev.to_host_on(&stream)?);
    /// # Ok(()) }
    /// ```
    ///
    /// [`from_host_with`](Self::from_host_with) takes [`TransferOptions`].
    pub fn from_host<S: Data<Elem = T>>(
        stream: &Arc<CudaStream>,
        host: &ArrayBase<S, D>,
    ) -> Result<Self> {
        Self::from_host_with(stream, host, &TransferOptions::default())
    }

    /// [`from_host`](Self::from_host) with the staging options `opt` (see
    /// [`DeviceBase::copy_from_host_with`]). `Err` with nothing allocated when `opt` fails
    /// [`TransferOptions::check`].
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// use devspan::{HostPath, TransferOptions};
    /// let stream = devspan::default_stream(0)?;
    /// let row = ndarray::Array1::from_shape_fn(4096, |i| i as f32);
    /// let host = row.broadcast((64, 4096)).unwrap();
    /// // Gather the broadcast view's elements on the host instead of uploading its one row and
    /// // broadcasting it on the device.
    /// let opt = TransferOptions {
    ///     host_path: Some(HostPath::Pack),
    ///     ..TransferOptions::default()
    /// };
    /// let dev = devspan::DeviceArray::from_host_with(&stream, &host, &opt)?;
    /// assert_eq!(dev.to_host_on(&stream)?, host);
    /// # Ok(()) }
    /// ```
    pub fn from_host_with<S: Data<Elem = T>>(
        stream: &Arc<CudaStream>,
        host: &ArrayBase<S, D>,
        opt: &TransferOptions,
    ) -> Result<Self> {
        opt.check()?;
        // SAFETY: the upload writes every element before the array is returned; on error the
        // array is dropped unread.
        let mut a = unsafe { DeviceArray::uninit(stream, host.raw_dim())? };
        a.copy_from_host_with(stream, host, opt)?;
        Ok(a)
    }
}
