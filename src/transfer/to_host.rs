//! Device -> host: downloads into host arrays, new host arrays, and the `Display` of device
//! views (through a download).

use std::sync::Arc;

use cudarc::driver::CudaStream;
use ndarray::{Array, ArrayBase, DataMut, Dimension, Ix1};

use super::plan::{DevicePath, Direction, HostPath, TransferPlan, plan_transfer};
use super::{Transfer, TransferOptions, check_same_shape, device_temporary, pinned, pipeline};
use crate::array::DeviceArray;
use crate::device::check_stream;
use crate::driver;
use crate::element::DeviceElement;
use crate::error::{Error, Result};
use crate::view::{DeviceBase, DeviceView, DeviceViewMut, SpanData};

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
        unsafe { driver::copy_dtoh(stream, base, dev, plan.m)? };
        stream.synchronize()?;
        return Ok(());
    }
    // SAFETY: `runs` from `base` reach exactly the view's elements (the caller's contract).
    unsafe { pipeline::download(stream, dev, plan.m, base, &plan.runs, opt) }
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
