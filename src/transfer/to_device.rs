//! Host -> device: uploads into device views and arrays made from host arrays.

use std::sync::Arc;

use cudarc::driver::CudaStream;
use ndarray::{ArrayBase, ArrayView, Data, Dimension};

use super::plan::{DevicePath, Direction, HostPath, TransferPlan, plan_transfer};
use super::{Transfer, TransferOptions, check_same_shape, device_temporary, pinned, pipeline};
use crate::array::DeviceArray;
use crate::device::check_stream;
use crate::driver;
use crate::element::DeviceElement;
use crate::error::Result;
use crate::span::DeviceSpan;
use crate::view::{DeviceBase, DeviceView, DeviceViewMut, SpanDataMut};

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
        return unsafe { driver::copy_htod(stream, dev, base, plan.m) };
    }
    // SAFETY: `runs` from `base` reach the view's elements (Pack) or the block between its
    // lowest and highest element (Block, Superset), which the planner allows only when every
    // element of the block is an element of the view (no gaps); all inside the view's single
    // allocation.
    unsafe { pipeline::upload(stream, base, &plan.runs, plan.m, dev, opt) }
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
