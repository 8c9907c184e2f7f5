//! Export: `'static` devspan views handed to another framework as DLPack managed tensors.
//!
//! One heap allocation per export holds the managed tensor (first, so that the pointer handed
//! out is the allocation's), the shape and strides arrays it points to, and the view's
//! keep-alive. `manager_ctx` points to that allocation; the deleter frees it, which releases the
//! keep-alive.

use std::ffi::c_void;
use std::sync::Arc;

use ndarray::Dimension;

use super::ffi::{
    DLDataType, DLDevice, DLManagedTensor, DLManagedTensorVersioned, DLPACK_FLAG_BITMASK_READ_ONLY,
    DLPackVersion, DLTensor,
};
use crate::array::DeviceArray;
use crate::bytes::RawBytes;
use crate::element::DeviceElement;
use crate::error::Result;
use crate::layout::Layout;
use crate::view::{DeviceView, DeviceViewMut};

/// The allocation behind one exported managed tensor `M`.
#[repr(C)]
struct Exported<M> {
    managed: M,
    shape: Vec<i64>,
    strides: Vec<i64>,
    /// Released when the deleter frees the allocation.
    _keep: RawBytes<'static>,
}

/// The parts of an export common to both managed tensor kinds.
struct Parts {
    tensor: DLTensor,
    shape: Vec<i64>,
    strides: Vec<i64>,
    keep: RawBytes<'static>,
}

fn parts<T: DeviceElement, D: Dimension>(raw: RawBytes<'static>, layout: &Layout<D>) -> Parts {
    let data = raw.ptr() + (layout.offset() * std::mem::size_of::<T>()) as u64;
    // Axis lengths are at most isize::MAX (layout invariant 1), so both conversions are exact.
    let shape = layout.shape().iter().map(|&n| n as i64).collect();
    let strides = layout.strides().iter().map(|&s| s as i64).collect();
    let tensor = DLTensor {
        // A device address: it carries no host provenance.
        data: std::ptr::without_provenance_mut(data as usize),
        // No CUDA device has an ordinal past i32::MAX; -1 makes consumers refuse such a view.
        device: DLDevice::cuda(i32::try_from(raw.device).unwrap_or(-1)),
        ndim: layout.ndim() as i32,
        dtype: DLDataType::from(T::DTYPE),
        shape: std::ptr::null_mut(),
        strides: std::ptr::null_mut(),
        byte_offset: 0,
    };
    Parts {
        tensor,
        shape,
        strides,
        keep: raw,
    }
}

/// Boxes `managed` with its arrays and keep-alive and points `manager_ctx`, `shape` and
/// `strides` into the box; returns the pointer handed to the consumer.
fn publish<M>(
    managed: M,
    p: Parts,
    fields: impl FnOnce(&mut M) -> (&mut *mut c_void, &mut DLTensor),
) -> *mut M {
    let raw = Box::into_raw(Box::new(Exported {
        managed,
        shape: p.shape,
        strides: p.strides,
        _keep: p.keep,
    }));
    // SAFETY: `raw` comes from `Box::into_raw` and is the only pointer to the allocation; the
    // vectors' buffers stay where they are, untouched, until the deleter frees the allocation.
    unsafe {
        let e = &mut *raw;
        let shape = e.shape.as_mut_ptr();
        let strides = e.strides.as_mut_ptr();
        let (ctx, tensor) = fields(&mut e.managed);
        *ctx = raw.cast::<c_void>();
        tensor.shape = shape;
        tensor.strides = strides;
    }
    // `managed` is the first field of the `#[repr(C)]` allocation.
    raw.cast::<M>()
}

unsafe extern "C" fn delete_versioned(tensor: *mut DLManagedTensorVersioned) {
    if tensor.is_null() {
        return;
    }
    // SAFETY: `tensor` was returned by `export_versioned`, whose `manager_ctx` is the
    // `Box<Exported<DLManagedTensorVersioned>>` holding it; DLPack's consumer calls the deleter
    // once, so the box is freed once. Dropping it releases the keep-alive (Send + Sync, so any
    // thread will do).
    unsafe {
        let ctx = (*tensor)
            .manager_ctx
            .cast::<Exported<DLManagedTensorVersioned>>();
        drop(Box::from_raw(ctx));
    }
}

unsafe extern "C" fn delete_legacy(tensor: *mut DLManagedTensor) {
    if tensor.is_null() {
        return;
    }
    // SAFETY: as in `delete_versioned`, for a box made by `export_legacy`.
    unsafe {
        let ctx = (*tensor).manager_ctx.cast::<Exported<DLManagedTensor>>();
        drop(Box::from_raw(ctx));
    }
}

fn export_versioned(p: Parts, read_only: bool) -> *mut DLManagedTensorVersioned {
    let managed = DLManagedTensorVersioned {
        version: DLPackVersion::CURRENT,
        manager_ctx: std::ptr::null_mut(),
        deleter: Some(delete_versioned),
        flags: if read_only {
            DLPACK_FLAG_BITMASK_READ_ONLY
        } else {
            0
        },
        dl_tensor: p.tensor,
    };
    publish(managed, p, |m| (&mut m.manager_ctx, &mut m.dl_tensor))
}

fn export_legacy(p: Parts) -> *mut DLManagedTensor {
    let managed = DLManagedTensor {
        dl_tensor: p.tensor,
        manager_ctx: std::ptr::null_mut(),
        deleter: Some(delete_legacy),
    };
    publish(managed, p, |m| (&mut m.manager_ctx, &mut m.dl_tensor))
}

impl<T: DeviceElement, D: Dimension> DeviceView<'static, T, D> {
    /// Hands the view to a DLPack consumer as a versioned managed tensor, marked
    /// `DLPACK_FLAG_BITMASK_READ_ONLY`.
    ///
    /// The tensor's `data` is the address of index zero ([`device_ptr`](Self::device_ptr)),
    /// `byte_offset` is 0, `strides` are always given (in elements, possibly negative), the
    /// device is `kDLCUDA` with the view's ordinal, whatever the memory kind it was imported as.
    /// The view's keep-alive moves into the tensor: the consumer must call its deleter exactly
    /// once (from any thread), which releases it; a tensor never deleted leaks the memory.
    /// Work that wrote the data must be complete or ordered before the consumer reads it; the
    /// tensor carries no stream. Only `'static` views can be exported: a borrowed view's memory
    /// could be freed while the consumer still uses it.
    ///
    /// A panic in the `Drop` of a [`DeviceOwner`](crate::DeviceOwner) released by the deleter
    /// aborts the process, since unwinding cannot cross the C ABI.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use devspan::dlpack::{DLDataTypeCode, DLPACK_FLAG_BITMASK_READ_ONLY};
    /// struct Fake;
    /// impl devspan::DeviceOwner for Fake {}
    /// // SAFETY: only metadata is read; the address is never dereferenced.
    /// let v = unsafe {
    ///     devspan::DeviceView::<f32, _>::from_raw_parts(0x7f00_0000_0000, 6, ndarray::Ix2(2, 3), &[3, 1], 0, 0, Arc::new(Fake))?
    /// };
    /// let m = v.into_dlpack();
    /// // SAFETY: `m` is live until its deleter is called below; `shape` holds `ndim` values.
    /// unsafe {
    ///     let t = &(*m).dl_tensor;
    ///     assert_eq!((*m).flags, DLPACK_FLAG_BITMASK_READ_ONLY);
    ///     assert_eq!(t.dtype.code, DLDataTypeCode::FLOAT);
    ///     assert_eq!(std::slice::from_raw_parts(t.shape, 2), &[2, 3]);
    ///     ((*m).deleter.unwrap())(m); // what the consumer does when done
    /// }
    /// # Ok::<(), devspan::Error>(())
    /// ```
    ///
    /// A view that borrows (here from a [`DeviceArray`](crate::DeviceArray)) is refused at
    /// compile time:
    ///
    /// ```compile_fail,E0521
    /// fn export(a: &devspan::DeviceArray<f32, ndarray::Ix1>) {
    ///     let _ = a.view().into_dlpack();
    /// }
    /// ```
    pub fn into_dlpack(self) -> *mut DLManagedTensorVersioned {
        export_versioned(parts::<T, D>(self.span.raw, &self.layout), true)
    }

    /// Hands the view to a DLPack consumer as a legacy (unversioned) managed tensor, laid out as
    /// in [`into_dlpack`](Self::into_dlpack).
    ///
    /// Legacy tensors have no read-only flag: the consumer must be told by other means not to
    /// write through this one.
    ///
    /// ```
    /// use std::sync::Arc;
    /// struct Fake;
    /// impl devspan::DeviceOwner for Fake {}
    /// // SAFETY: only metadata is read; the address is never dereferenced.
    /// let v = unsafe {
    ///     devspan::DeviceView::<u8, _>::from_raw_parts(0x7f00_0000_0000, 4, ndarray::Ix1(4), &[1], 0, 0, Arc::new(Fake))?
    /// };
    /// let m = v.into_dlpack_legacy();
    /// // SAFETY: `m` is live until its deleter is called, once.
    /// unsafe {
    ///     assert_eq!((*m).dl_tensor.ndim, 1);
    ///     ((*m).deleter.unwrap())(m);
    /// }
    /// # Ok::<(), devspan::Error>(())
    /// ```
    pub fn into_dlpack_legacy(self) -> *mut DLManagedTensor {
        export_legacy(parts::<T, D>(self.span.raw, &self.layout))
    }
}

impl<T: DeviceElement, D: Dimension> DeviceViewMut<'static, T, D> {
    /// Hands the writable view to a DLPack consumer as a versioned managed tensor without the
    /// read-only flag: the consumer may write the elements (it received the only writable
    /// handle). Otherwise as [`DeviceView::into_dlpack`].
    ///
    /// ```
    /// use std::sync::Arc;
    /// struct Fake;
    /// impl devspan::DeviceOwner for Fake {}
    /// // SAFETY: only metadata is read; the address is never dereferenced.
    /// let v = unsafe {
    ///     devspan::DeviceViewMut::<i64, _>::from_raw_parts_mut(0x7f00_0000_0000, 6, ndarray::Ix2(2, 3), &[3, 1], 0, 0, Arc::new(Fake))?
    /// };
    /// let m = v.into_dlpack();
    /// // SAFETY: `m` is live until its deleter is called, once.
    /// unsafe {
    ///     assert_eq!((*m).flags, 0);
    ///     ((*m).deleter.unwrap())(m);
    /// }
    /// # Ok::<(), devspan::Error>(())
    /// ```
    ///
    /// A writable view that borrows is refused at compile time:
    ///
    /// ```compile_fail,E0521
    /// fn export(a: &mut devspan::DeviceArray<f32, ndarray::Ix1>) {
    ///     let _ = a.view_mut().into_dlpack();
    /// }
    /// ```
    pub fn into_dlpack(self) -> *mut DLManagedTensorVersioned {
        export_versioned(parts::<T, D>(self.span.raw, &self.layout), false)
    }

    /// Hands the writable view to a DLPack consumer as a legacy managed tensor. Otherwise as
    /// [`DeviceView::into_dlpack_legacy`].
    ///
    /// ```
    /// use std::sync::Arc;
    /// struct Fake;
    /// impl devspan::DeviceOwner for Fake {}
    /// // SAFETY: only metadata is read; the address is never dereferenced.
    /// let v = unsafe {
    ///     devspan::DeviceViewMut::<f64, _>::from_raw_parts_mut(0x7f00_0000_0000, 3, ndarray::Ix1(3), &[1], 0, 0, Arc::new(Fake))?
    /// };
    /// let m = v.into_dlpack_legacy();
    /// // SAFETY: `m` is live until its deleter is called, once.
    /// unsafe { ((*m).deleter.unwrap())(m) };
    /// # Ok::<(), devspan::Error>(())
    /// ```
    pub fn into_dlpack_legacy(self) -> *mut DLManagedTensor {
        export_legacy(parts::<T, D>(self.span.raw, &self.layout))
    }
}

/// A `'static` writable view that owns the array, once the array's stream has finished the work
/// queued on it. The array frees its memory stream-ordered on its stream, with its context
/// current, whichever thread drops the last handle.
fn owning_view<T: DeviceElement, D: Dimension + 'static>(
    array: DeviceArray<T, D>,
) -> Result<DeviceViewMut<'static, T, D>> {
    let stream = array.as_cuda_slice().stream();
    crate::capture::refuse(
        stream,
        "exporting a device array to DLPack",
        "the export waits on the host for the array's stream",
    )?;
    stream.synchronize()?;
    let dim = array.dim();
    let ptr = crate::bytes::address_of(array.as_cuda_slice());
    let (len, device) = (array.len(), array.device());
    let strides = Layout::contiguous(dim.clone()).strides().to_vec();
    // SAFETY: the array owns `len` elements of `T` at `ptr` on `device` and moves into the
    // owner that the view keeps alive; this view is the only handle on it, and the array frees
    // its memory stream-ordered on the stream it names as its release stream.
    unsafe {
        DeviceViewMut::from_raw_parts_mut(ptr, len, dim, &strides, 0, device, Arc::new(array))
    }
}

impl<T: DeviceElement, D: Dimension + 'static> DeviceArray<T, D> {
    /// Hands the array, allocation and all, to a DLPack consumer as a writable versioned managed
    /// tensor; the consumer's deleter call frees it (stream-ordered on the array's stream).
    ///
    /// Synchronises the array's stream first, so that the consumer finds the data complete
    /// whatever stream it uses. `Err` if that synchronisation fails, and
    /// `Err(StreamCapture)` while the stream is capturing a graph (the array is then dropped,
    /// and its memory freed once the capture has ended).
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let stream = devspan::default_stream(0)?;
    /// let a = devspan::DeviceArray::<f32, _>::zeros(&stream, (2, 3))?;
    /// let m = a.into_dlpack()?;
    /// // ... hand `m` to the consumer, which calls its deleter when done:
    /// // SAFETY: `m` is live until its deleter is called, once.
    /// unsafe { ((*m).deleter.unwrap())(m) };
    /// # Ok(()) }
    /// ```
    pub fn into_dlpack(self) -> Result<*mut DLManagedTensorVersioned> {
        Ok(owning_view(self)?.into_dlpack())
    }

    /// Hands the array to a DLPack consumer as a legacy managed tensor, as
    /// [`into_dlpack`](Self::into_dlpack) does.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let stream = devspan::default_stream(0)?;
    /// let a = devspan::DeviceArray::<u8, _>::zeros(&stream, 16)?;
    /// let m = a.into_dlpack_legacy()?;
    /// // SAFETY: `m` is live until its deleter is called, once.
    /// unsafe { ((*m).deleter.unwrap())(m) };
    /// # Ok(()) }
    /// ```
    pub fn into_dlpack_legacy(self) -> Result<*mut DLManagedTensor> {
        Ok(owning_view(self)?.into_dlpack_legacy())
    }
}
