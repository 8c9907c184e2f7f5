//! Import: a managed tensor lent by another framework, as a `'static` devspan view that keeps
//! the producer alive.

use std::fmt;
use std::ptr::NonNull;
use std::sync::Arc;

use ndarray::Dimension;

use super::MAX_NDIM;
use super::ffi::{
    DLDataType, DLDevice, DLDeviceType, DLManagedTensor, DLManagedTensorVersioned,
    DLPACK_FLAG_BITMASK_READ_ONLY, DLPACK_MAJOR_VERSION, DLPackVersion, DLTensor,
};
use crate::element::{DType, DeviceElement};
use crate::error::{Error, ErrorKind, Result};
use crate::layout::{checked_size, reach};
use crate::owner::DeviceOwner;
use crate::view::{DeviceView, DeviceViewMut};

/// The managed tensor an owner releases.
#[derive(Clone, Copy)]
enum Managed {
    Versioned(NonNull<DLManagedTensorVersioned>),
    Legacy(NonNull<DLManagedTensor>),
}

/// Owns one managed tensor; dropping it calls the producer's deleter, once.
struct ManagedOwner {
    managed: Managed,
    /// Copied from the tensor for `describe`; only valid for major version 1.
    device: Option<DLDevice>,
}

// SAFETY: the pointer is used for one thing only: calling the producer's deleter, once, in
// `Drop`, on whichever thread drops the owner. DLPack allows the deleter to be called from an
// arbitrary thread and context (dmlc/dlpack#103; the Python specification makes deleters acquire
// the GIL themselves), and `DlpackTensor::from_versioned` / `from_legacy` make their caller
// promise that of the producer.
unsafe impl Send for ManagedOwner {}
// SAFETY: a shared `&ManagedOwner` reaches nothing but `describe`, which reads the copied
// `device` field and never the producer's memory.
unsafe impl Sync for ManagedOwner {}

impl DeviceOwner for ManagedOwner {
    fn describe(&self) -> String {
        let kind = match self.managed {
            Managed::Versioned(_) => "DLManagedTensorVersioned",
            Managed::Legacy(_) => "DLManagedTensor",
        };
        match self.device {
            Some(d) => format!("{kind} ({}:{})", d.device_type.name(), d.device_id),
            None => kind.to_string(),
        }
    }
}

impl Drop for ManagedOwner {
    fn drop(&mut self) {
        match self.managed {
            Managed::Versioned(p) => {
                // SAFETY: 1. `p` is the aligned, live managed tensor whose ownership the caller of
                // `from_versioned` handed over; 2. the `deleter` field has the same place in
                // every major version; 3. this is the only call: the owner is neither `Clone`
                // nor dropped twice, and the caller promised no one else calls it.
                unsafe {
                    if let Some(deleter) = (*p.as_ptr()).deleter {
                        deleter(p.as_ptr());
                    }
                }
            }
            Managed::Legacy(p) => {
                // SAFETY: as above, for the tensor handed over to `from_legacy`.
                unsafe {
                    if let Some(deleter) = (*p.as_ptr()).deleter {
                        deleter(p.as_ptr());
                    }
                }
            }
        }
    }
}

/// A DLPack managed tensor that devspan owns: its metadata, read and checked once, and the
/// duty to call the producer's deleter.
///
/// Made by [`from_versioned`](Self::from_versioned) or [`from_legacy`](Self::from_legacy);
/// inspected with [`dtype`](Self::dtype), [`shape`](Self::shape), [`device`](Self::device), ...;
/// turned into a view with [`into_view`](Self::into_view) or
/// [`into_view_mut`](Self::into_view_mut). The deleter runs exactly once: when the last view
/// derived from it is dropped (on that thread), when a conversion fails, or when the
/// `DlpackTensor` itself is dropped.
///
/// ```
/// use std::sync::Arc;
/// use devspan::{DType, DeviceOwner, DeviceView};
/// use devspan::dlpack::DlpackTensor;
/// struct Fake;
/// impl DeviceOwner for Fake {}
/// // SAFETY: only metadata is read; the address is never dereferenced.
/// let v = unsafe {
///     DeviceView::<u16, _>::from_raw_parts(0x7f00_0000_0000, 8, ndarray::Ix1(8), &[1], 0, 0, Arc::new(Fake))?
/// };
/// // SAFETY: `into_dlpack` returns a live managed tensor, handed over once.
/// let t = unsafe { DlpackTensor::from_versioned(v.into_dlpack())? };
/// match t.dtype()? {
///     DType::U16 => assert_eq!(t.into_view::<u16, ndarray::IxDyn>()?.len(), 8),
///     other => panic!("unexpected {other}"),
/// }
/// # Ok::<(), devspan::Error>(())
/// ```
pub struct DlpackTensor {
    owner: ManagedOwner,
    version: Option<DLPackVersion>,
    flags: u64,
    data: u64,
    byte_offset: u64,
    device: DLDevice,
    dtype: DLDataType,
    shape: Vec<usize>,
    /// Strides in elements; row-major when the producer gave none.
    strides: Vec<isize>,
}

impl fmt::Debug for DlpackTensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DlpackTensor")
            .field("version", &self.version)
            .field("flags", &self.flags)
            .field("device", &self.device)
            .field("dtype", &self.dtype)
            .field("shape", &self.shape)
            .field("strides", &self.strides)
            .field("data", &format_args!("0x{:x}", self.data))
            .field("byte_offset", &self.byte_offset)
            .finish()
    }
}

/// Copies `n` values from a producer's `shape` or `strides` array.
///
/// # Safety
/// If `ptr` is non-null and aligned and `n > 0`, it points to `n` readable `i64`.
unsafe fn read_array(ptr: *const i64, n: usize, what: &str) -> Result<Vec<i64>> {
    if n == 0 {
        return Ok(Vec::new());
    }
    if ptr.is_null() {
        return Err(Error::invalid(format!(
            "null {what} pointer for a tensor of {n} dimensions"
        )));
    }
    if !ptr.is_aligned() {
        return Err(Error::misaligned(format!(
            "{what} pointer {ptr:p} is not aligned for int64_t"
        )));
    }
    // SAFETY: non-null and aligned (checked above), `n <= MAX_NDIM` values readable (the
    // caller's contract), copied before the producer could free them.
    Ok(unsafe { std::slice::from_raw_parts(ptr, n) }.to_vec())
}

/// Row-major strides of `shape` (whose nonzero axis lengths multiply to at most `isize::MAX`).
fn row_major(shape: &[usize]) -> Vec<isize> {
    let mut strides = vec![0isize; shape.len()];
    let mut acc: isize = 1;
    for (s, &n) in strides.iter_mut().zip(shape).rev() {
        *s = acc;
        acc = acc.saturating_mul(n.max(1) as isize);
    }
    strides
}

/// Where an imported view's span starts, how long it is, and where index zero lies in it.
struct Placement<D> {
    base: u64,
    span_len: usize,
    offset: usize,
    device: usize,
    dim: D,
}

impl DlpackTensor {
    /// Takes ownership of a versioned managed tensor (DLPack >= 1.0) and reads its metadata.
    ///
    /// Returns `Err` for a null or misaligned pointer (nothing is called), and, after calling
    /// the deleter, for a major version other than [`DLPACK_MAJOR_VERSION`](super::DLPACK_MAJOR_VERSION),
    /// `ndim` outside `0..=`[`MAX_NDIM`](super::MAX_NDIM), a null or misaligned `shape` (or
    /// misaligned `strides`), a negative axis length, or more than `isize::MAX` elements.
    /// Everything that depends on the requested element type and writability is checked by
    /// [`into_view`](Self::into_view) and [`into_view_mut`](Self::into_view_mut).
    ///
    /// # Safety
    /// `tensor` is null, or it points to a live `DLManagedTensorVersioned` whose ownership the
    /// caller hands over: nobody else calls its deleter, now or later. If its major version is
    /// 1:
    /// 1. `dl_tensor.shape` and, unless null, `dl_tensor.strides` point to `ndim` readable
    ///    `int64_t` each (they are copied during this call);
    /// 2. the producer owns every element that shape and strides reach from
    ///    `data + byte_offset`, as memory of the described device that the GPU can access, until
    ///    the deleter is called, and the data is ready (the work that wrote it is complete, or
    ///    ordered before every stream that devspan operations on the view will use);
    /// 3. nobody writes that memory while a device operation reads a view of it; unless
    ///    `DLPACK_FLAG_BITMASK_READ_ONLY` is set, devspan may write it through
    ///    [`into_view_mut`](Self::into_view_mut), and nobody else accesses it meanwhile;
    /// 4. the deleter, if not null, may be called once from any thread (DLPack requires it).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use devspan::{DeviceOwner, DeviceView};
    /// use devspan::dlpack::DlpackTensor;
    /// struct Fake;
    /// impl DeviceOwner for Fake {}
    /// // SAFETY: only metadata is read; the address is never dereferenced.
    /// let v = unsafe {
    ///     DeviceView::<f32, _>::from_raw_parts(0x7f00_0000_0000, 6, ndarray::Ix2(2, 3), &[3, 1], 0, 0, Arc::new(Fake))?
    /// };
    /// let ptr = v.into_dlpack();
    /// // SAFETY: `ptr` is a live managed tensor from `into_dlpack`, handed over once.
    /// let t = unsafe { DlpackTensor::from_versioned(ptr)? };
    /// assert_eq!(t.shape(), &[2, 3]);
    /// # Ok::<(), devspan::Error>(())
    /// ```
    pub unsafe fn from_versioned(tensor: *mut DLManagedTensorVersioned) -> Result<Self> {
        let p = NonNull::new(tensor)
            .ok_or_else(|| Error::invalid("null DLManagedTensorVersioned pointer"))?;
        if !tensor.is_aligned() {
            return Err(Error::misaligned(format!(
                "DLManagedTensorVersioned pointer {tensor:p} is not aligned; its deleter cannot be read"
            )));
        }
        // SAFETY: `p` is non-null, aligned and live (the caller's contract); `version` has the
        // same place in every major version.
        let version = unsafe { (*p.as_ptr()).version };
        let owner = ManagedOwner {
            managed: Managed::Versioned(p),
            device: None,
        };
        if version.major != DLPACK_MAJOR_VERSION {
            return Err(Error::invalid(format!(
                "DLPack version {}.{} is not supported (devspan reads major version {DLPACK_MAJOR_VERSION})",
                version.major, version.minor
            )));
        }
        // SAFETY: major version 1 has exactly the layout of `DLManagedTensorVersioned`; the
        // fields are plain values copied out.
        let (flags, tensor) = unsafe { ((*p.as_ptr()).flags, (*p.as_ptr()).dl_tensor) };
        // SAFETY: the caller's contract 1 covers `tensor.shape` and `tensor.strides`.
        unsafe { Self::read(owner, Some(version), flags, &tensor) }
    }

    /// Takes ownership of a legacy (unversioned) managed tensor and reads its metadata,
    /// checked as in [`from_versioned`](Self::from_versioned).
    ///
    /// Legacy tensors have no flags: DLPack gives no way to mark them read-only, so
    /// [`into_view_mut`](Self::into_view_mut) trusts the caller (contract 3).
    ///
    /// # Safety
    /// `tensor` is null, or it points to a live `DLManagedTensor` whose ownership the caller
    /// hands over: nobody else calls its deleter, now or later. Moreover:
    /// 1. `dl_tensor.shape` and, unless null, `dl_tensor.strides` point to `ndim` readable
    ///    `int64_t` each (they are copied during this call);
    /// 2. the producer owns every element that shape and strides reach from
    ///    `data + byte_offset`, as memory of the described device that the GPU can access, until
    ///    the deleter is called, and the data is ready (see [`from_versioned`](Self::from_versioned));
    /// 3. nobody writes that memory while a device operation reads a view of it; if
    ///    [`into_view_mut`](Self::into_view_mut) is called, the producer allows writes and nobody
    ///    else accesses the memory while the writable view is used;
    /// 4. the deleter, if not null, may be called once from any thread.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use devspan::{DeviceOwner, DeviceViewMut};
    /// use devspan::dlpack::DlpackTensor;
    /// struct Fake;
    /// impl DeviceOwner for Fake {}
    /// // SAFETY: only metadata is read; the address is never dereferenced.
    /// let v = unsafe {
    ///     DeviceViewMut::<i32, _>::from_raw_parts_mut(0x7f00_0000_0000, 4, ndarray::Ix1(4), &[1], 0, 0, Arc::new(Fake))?
    /// };
    /// let ptr = v.into_dlpack_legacy();
    /// // SAFETY: `ptr` is a live managed tensor from `into_dlpack_legacy`, handed over once; it
    /// // came from a writable view.
    /// let t = unsafe { DlpackTensor::from_legacy(ptr)? };
    /// assert_eq!(t.version(), None);
    /// let w = t.into_view_mut::<i32, ndarray::Ix1>()?;
    /// assert_eq!(w.len(), 4);
    /// # Ok::<(), devspan::Error>(())
    /// ```
    pub unsafe fn from_legacy(tensor: *mut DLManagedTensor) -> Result<Self> {
        let p =
            NonNull::new(tensor).ok_or_else(|| Error::invalid("null DLManagedTensor pointer"))?;
        if !tensor.is_aligned() {
            return Err(Error::misaligned(format!(
                "DLManagedTensor pointer {tensor:p} is not aligned; its deleter cannot be read"
            )));
        }
        let owner = ManagedOwner {
            managed: Managed::Legacy(p),
            device: None,
        };
        // SAFETY: `p` is non-null, aligned and live (the caller's contract); the tensor is a
        // plain value copied out.
        let tensor = unsafe { (*p.as_ptr()).dl_tensor };
        // SAFETY: the caller's contract 1 covers `tensor.shape` and `tensor.strides`.
        unsafe { Self::read(owner, None, 0, &tensor) }
    }

    /// Copies and checks the metadata of `t`; on `Err`, `owner` is dropped (deleter called).
    ///
    /// # Safety
    /// `t.shape` and, unless null, `t.strides` point to `t.ndim` readable values when
    /// `0 <= t.ndim <= MAX_NDIM`.
    unsafe fn read(
        mut owner: ManagedOwner,
        version: Option<DLPackVersion>,
        flags: u64,
        t: &DLTensor,
    ) -> Result<Self> {
        owner.device = Some(t.device);
        let ndim = usize::try_from(t.ndim)
            .ok()
            .filter(|&n| n <= MAX_NDIM)
            .ok_or_else(|| Error::invalid(format!("ndim {} is outside 0..={MAX_NDIM}", t.ndim)))?;
        // SAFETY: the caller's contract; `ndim <= MAX_NDIM`.
        let raw_shape = unsafe { read_array(t.shape, ndim, "shape")? };
        let raw_strides = if t.strides.is_null() {
            None
        } else {
            // SAFETY: the caller's contract; `ndim <= MAX_NDIM`.
            Some(unsafe { read_array(t.strides, ndim, "strides")? })
        };
        let shape = raw_shape
            .iter()
            .map(|&n| {
                usize::try_from(n).map_err(|_| {
                    let kind = if n < 0 {
                        ErrorKind::InvalidArgument
                    } else {
                        ErrorKind::Overflow
                    };
                    Error::new(
                        kind,
                        format!("axis length {n} in shape {raw_shape:?} is not a valid length"),
                    )
                })
            })
            .collect::<Result<Vec<usize>>>()?;
        checked_size(&shape, 1)?;
        let strides = match raw_strides {
            None => row_major(&shape),
            Some(raw) => raw
                .iter()
                .map(|&s| {
                    isize::try_from(s).map_err(|_| {
                        Error::overflow(format!("stride {s} in strides {raw:?} overflows isize"))
                    })
                })
                .collect::<Result<Vec<isize>>>()?,
        };
        Ok(DlpackTensor {
            owner,
            version,
            flags,
            data: t.data.addr() as u64,
            byte_offset: t.byte_offset,
            device: t.device,
            dtype: t.dtype,
            shape,
            strides,
        })
    }

    /// The DLPack version of a versioned tensor; `None` for a legacy one.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # struct Fake;
    /// # impl devspan::DeviceOwner for Fake {}
    /// # // SAFETY: metadata only.
    /// # let v = unsafe { devspan::DeviceView::<f32, _>::from_raw_parts(0x7f00_0000_0000, 1, ndarray::Ix0(), &[], 0, 0, Arc::new(Fake))? };
    /// // SAFETY: a live managed tensor from `into_dlpack`, handed over once.
    /// let t = unsafe { devspan::dlpack::DlpackTensor::from_versioned(v.into_dlpack())? };
    /// assert_eq!(t.version().map(|v| v.major), Some(1));
    /// # Ok::<(), devspan::Error>(())
    /// ```
    pub fn version(&self) -> Option<DLPackVersion> {
        self.version
    }

    /// The `DLPACK_FLAG_BITMASK_*` flags (0 for a legacy tensor).
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # struct Fake;
    /// # impl devspan::DeviceOwner for Fake {}
    /// # // SAFETY: metadata only.
    /// # let v = unsafe { devspan::DeviceView::<f32, _>::from_raw_parts(0x7f00_0000_0000, 1, ndarray::Ix0(), &[], 0, 0, Arc::new(Fake))? };
    /// use devspan::dlpack::{DlpackTensor, DLPACK_FLAG_BITMASK_READ_ONLY};
    /// // SAFETY: a live managed tensor from `into_dlpack`, handed over once.
    /// let t = unsafe { DlpackTensor::from_versioned(v.into_dlpack())? };
    /// assert_eq!(t.flags() & DLPACK_FLAG_BITMASK_READ_ONLY, DLPACK_FLAG_BITMASK_READ_ONLY);
    /// # Ok::<(), devspan::Error>(())
    /// ```
    pub fn flags(&self) -> u64 {
        self.flags
    }

    /// Whether the producer marked the tensor read-only (`DLPACK_FLAG_BITMASK_READ_ONLY`);
    /// always `false` for a legacy tensor, which cannot say so.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # struct Fake;
    /// # impl devspan::DeviceOwner for Fake {}
    /// # // SAFETY: metadata only.
    /// # let v = unsafe { devspan::DeviceView::<f32, _>::from_raw_parts(0x7f00_0000_0000, 1, ndarray::Ix0(), &[], 0, 0, Arc::new(Fake))? };
    /// // SAFETY: a live managed tensor from `into_dlpack`, handed over once.
    /// let t = unsafe { devspan::dlpack::DlpackTensor::from_versioned(v.into_dlpack())? };
    /// assert!(t.is_read_only());
    /// assert!(t.into_view_mut::<f32, ndarray::Ix0>().is_err());
    /// # Ok::<(), devspan::Error>(())
    /// ```
    pub fn is_read_only(&self) -> bool {
        self.flags & DLPACK_FLAG_BITMASK_READ_ONLY != 0
    }

    /// Where the data lives, as the producer described it.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # struct Fake;
    /// # impl devspan::DeviceOwner for Fake {}
    /// # // SAFETY: metadata only.
    /// # let v = unsafe { devspan::DeviceView::<f32, _>::from_raw_parts(0x7f00_0000_0000, 1, ndarray::Ix0(), &[], 0, 3, Arc::new(Fake))? };
    /// use devspan::dlpack::DLDevice;
    /// // SAFETY: a live managed tensor from `into_dlpack`, handed over once.
    /// let t = unsafe { devspan::dlpack::DlpackTensor::from_versioned(v.into_dlpack())? };
    /// assert_eq!(t.device(), DLDevice::cuda(3));
    /// # Ok::<(), devspan::Error>(())
    /// ```
    pub fn device(&self) -> DLDevice {
        self.device
    }

    /// The element type, or `Err(UnsupportedDtype)` if devspan has none for it.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # struct Fake;
    /// # impl devspan::DeviceOwner for Fake {}
    /// # // SAFETY: metadata only.
    /// # let v = unsafe { devspan::DeviceView::<half::bf16, _>::from_raw_parts(0x7f00_0000_0000, 1, ndarray::Ix0(), &[], 0, 0, Arc::new(Fake))? };
    /// // SAFETY: a live managed tensor from `into_dlpack`, handed over once.
    /// let t = unsafe { devspan::dlpack::DlpackTensor::from_versioned(v.into_dlpack())? };
    /// assert_eq!(t.dtype()?, devspan::DType::BF16);
    /// # Ok::<(), devspan::Error>(())
    /// ```
    pub fn dtype(&self) -> Result<DType> {
        DType::try_from(self.dtype)
    }

    /// The element type as the producer wrote it.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # struct Fake;
    /// # impl devspan::DeviceOwner for Fake {}
    /// # // SAFETY: metadata only.
    /// # let v = unsafe { devspan::DeviceView::<i8, _>::from_raw_parts(0x7f00_0000_0000, 1, ndarray::Ix0(), &[], 0, 0, Arc::new(Fake))? };
    /// use devspan::dlpack::DLDataTypeCode;
    /// // SAFETY: a live managed tensor from `into_dlpack`, handed over once.
    /// let t = unsafe { devspan::dlpack::DlpackTensor::from_versioned(v.into_dlpack())? };
    /// assert_eq!((t.dl_dtype().code, t.dl_dtype().bits), (DLDataTypeCode::INT, 8));
    /// # Ok::<(), devspan::Error>(())
    /// ```
    pub fn dl_dtype(&self) -> DLDataType {
        self.dtype
    }

    /// Axis lengths.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # struct Fake;
    /// # impl devspan::DeviceOwner for Fake {}
    /// # // SAFETY: metadata only.
    /// # let v = unsafe { devspan::DeviceView::<f32, _>::from_raw_parts(0x7f00_0000_0000, 6, ndarray::Ix2(2, 3), &[3, 1], 0, 0, Arc::new(Fake))? };
    /// // SAFETY: a live managed tensor from `into_dlpack`, handed over once.
    /// let t = unsafe { devspan::dlpack::DlpackTensor::from_versioned(v.into_dlpack())? };
    /// assert_eq!(t.shape(), &[2, 3]);
    /// # Ok::<(), devspan::Error>(())
    /// ```
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// Strides in elements; the row-major strides of the shape when the producer gave none.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # struct Fake;
    /// # impl devspan::DeviceOwner for Fake {}
    /// # // SAFETY: metadata only.
    /// # let v = unsafe { devspan::DeviceView::<f32, _>::from_raw_parts(0x7f00_0000_0000, 6, ndarray::Ix2(2, 3), &[3, 1], 0, 0, Arc::new(Fake))? };
    /// // SAFETY: a live managed tensor from `into_dlpack`, handed over once.
    /// let t = unsafe { devspan::dlpack::DlpackTensor::from_versioned(v.t().into_dlpack())? };
    /// assert_eq!(t.strides(), &[1, 3]);
    /// # Ok::<(), devspan::Error>(())
    /// ```
    pub fn strides(&self) -> &[isize] {
        &self.strides
    }

    /// The producer's `data` pointer.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # struct Fake;
    /// # impl devspan::DeviceOwner for Fake {}
    /// # // SAFETY: metadata only.
    /// # let v = unsafe { devspan::DeviceView::<f32, _>::from_raw_parts(0x7f00_0000_0000, 6, ndarray::Ix1(6), &[1], 0, 0, Arc::new(Fake))? };
    /// let v = v.slice(ndarray::s![2..]);
    /// let p = v.device_ptr();
    /// // SAFETY: a live managed tensor from `into_dlpack`, handed over once.
    /// let t = unsafe { devspan::dlpack::DlpackTensor::from_versioned(v.into_dlpack())? };
    /// assert_eq!(t.data_ptr() + t.byte_offset(), p);
    /// # Ok::<(), devspan::Error>(())
    /// ```
    pub fn data_ptr(&self) -> u64 {
        self.data
    }

    /// The producer's `byte_offset`: index zero is at `data_ptr() + byte_offset()`.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # struct Fake;
    /// # impl devspan::DeviceOwner for Fake {}
    /// # // SAFETY: metadata only.
    /// # let v = unsafe { devspan::DeviceView::<f32, _>::from_raw_parts(0x7f00_0000_0000, 6, ndarray::Ix1(6), &[1], 0, 0, Arc::new(Fake))? };
    /// // SAFETY: a live managed tensor from `into_dlpack`, handed over once.
    /// let t = unsafe { devspan::dlpack::DlpackTensor::from_versioned(v.into_dlpack())? };
    /// assert_eq!(t.byte_offset(), 0); // devspan exports the address of index zero as `data`
    /// # Ok::<(), devspan::Error>(())
    /// ```
    pub fn byte_offset(&self) -> u64 {
        self.byte_offset
    }

    /// A read-only `'static` view of the tensor, which keeps the producer alive.
    ///
    /// `Err` (the deleter called before returning) when `T` is not the tensor's element type,
    /// the tensor's `ndim` does not fit `D`, its memory is not device-accessible (see the
    /// [module docs](super)), `device_id` is negative, `data` is null under a non-empty shape,
    /// `data + byte_offset` is not aligned for `T`, or the reachable elements do not fit the
    /// address space or `isize::MAX` bytes.
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # struct Fake;
    /// # impl devspan::DeviceOwner for Fake {}
    /// # // SAFETY: metadata only.
    /// # let v = unsafe { devspan::DeviceView::<f32, _>::from_raw_parts(0x7f00_0000_0000, 6, ndarray::Ix2(2, 3), &[3, 1], 0, 0, Arc::new(Fake))? };
    /// let ptr = v.slice(ndarray::s![.., ..;-1]).into_dlpack();
    /// // SAFETY: a live managed tensor from `into_dlpack`, handed over once.
    /// let t = unsafe { devspan::dlpack::DlpackTensor::from_versioned(ptr)? };
    /// let w = t.into_view::<f32, ndarray::Ix2>()?;
    /// assert_eq!(w.strides(), &[3, -1]);
    /// assert_eq!(w.span()?.len(), 6); // exactly the reachable elements
    /// # Ok::<(), devspan::Error>(())
    /// ```
    pub fn into_view<T: DeviceElement, D: Dimension>(self) -> Result<DeviceView<'static, T, D>> {
        let p = self.placement::<T, D>()?;
        let owner: Arc<dyn DeviceOwner> = Arc::new(self.owner);
        // SAFETY: the span `p.base .. p.base + p.span_len` elements covers exactly the elements
        // that shape and strides reach from `data + byte_offset`, which the producer owns as
        // device-accessible memory until the deleter runs (contract 2 of `from_versioned` /
        // `from_legacy`), and the deleter runs only when `owner` is dropped; nobody writes it
        // while a device operation reads it (contract 3).
        unsafe {
            DeviceView::from_raw_parts(
                p.base,
                p.span_len,
                p.dim,
                &self.strides,
                p.offset,
                p.device,
                owner,
            )
        }
    }

    /// A writable `'static` view of the tensor, which keeps the producer alive.
    ///
    /// `Err` (the deleter called before returning) in every case of [`into_view`](Self::into_view),
    /// and when the tensor is marked read-only (`InvalidArgument`) or two indices reach the same
    /// element (`Aliasing`, e.g. a broadcast with stride 0).
    ///
    /// ```
    /// # use std::sync::Arc;
    /// # struct Fake;
    /// # impl devspan::DeviceOwner for Fake {}
    /// # // SAFETY: metadata only.
    /// # let v = unsafe { devspan::DeviceViewMut::<u8, _>::from_raw_parts_mut(0x7f00_0000_0000, 6, ndarray::Ix2(2, 3), &[3, 1], 0, 0, Arc::new(Fake))? };
    /// // SAFETY: a live managed tensor from `into_dlpack`, handed over once.
    /// let t = unsafe { devspan::dlpack::DlpackTensor::from_versioned(v.into_dlpack())? };
    /// assert!(!t.is_read_only());
    /// let w = t.into_view_mut::<u8, ndarray::IxDyn>()?;
    /// assert_eq!(w.shape(), &[2, 3]);
    /// # Ok::<(), devspan::Error>(())
    /// ```
    pub fn into_view_mut<T: DeviceElement, D: Dimension>(
        self,
    ) -> Result<DeviceViewMut<'static, T, D>> {
        if self.is_read_only() {
            return Err(Error::invalid(format!(
                "the tensor (shape {:?}) is marked DLPACK_FLAG_BITMASK_READ_ONLY and cannot be viewed as writable",
                self.shape
            )));
        }
        let p = self.placement::<T, D>()?;
        let owner: Arc<dyn DeviceOwner> = Arc::new(self.owner);
        // SAFETY: as in `into_view`; in addition the tensor is not read-only, so the producer
        // allows writes and nobody else accesses the memory while the view is used (contract 3).
        // `from_raw_parts_mut` refuses layouts that reach an element twice.
        unsafe {
            DeviceViewMut::from_raw_parts_mut(
                p.base,
                p.span_len,
                p.dim,
                &self.strides,
                p.offset,
                p.device,
                owner,
            )
        }
    }

    /// Checks what the view of `T` and `D` needs and computes its span.
    fn placement<T: DeviceElement, D: Dimension>(&self) -> Result<Placement<D>> {
        let dtype = self.dtype()?;
        if dtype != T::DTYPE {
            return Err(Error::new(
                ErrorKind::UnsupportedDtype,
                format!(
                    "the tensor holds {dtype} elements; a view of {} was asked for",
                    T::DTYPE
                ),
            ));
        }
        let d = self.device;
        if ![
            DLDeviceType::CUDA,
            DLDeviceType::CUDA_MANAGED,
            DLDeviceType::CUDA_HOST,
        ]
        .contains(&d.device_type)
        {
            return Err(Error::device_mismatch(format!(
                "a tensor on {} (device type {}, id {}) is not memory a CUDA device can access; \
                 kDLCUDA, kDLCUDAManaged and kDLCUDAHost are",
                d.device_type.name(),
                d.device_type.0,
                d.device_id
            )));
        }
        let device = usize::try_from(d.device_id).map_err(|_| {
            Error::invalid(format!(
                "negative device id {} ({})",
                d.device_id,
                d.device_type.name()
            ))
        })?;
        let ndim = self.shape.len();
        if D::NDIM.is_some_and(|n| n != ndim) {
            return Err(Error::shape(format!(
                "a {ndim}-d tensor of shape {:?} cannot be viewed with {} axes",
                self.shape,
                D::NDIM.unwrap_or(ndim)
            )));
        }
        let mut dim = D::zeros(ndim);
        dim.slice_mut().copy_from_slice(&self.shape);

        let elem = std::mem::size_of::<T>();
        let count = checked_size(&self.shape, elem)?;
        let first = self.data.checked_add(self.byte_offset).ok_or_else(|| {
            Error::overflow(format!(
                "data 0x{:x} + byte_offset {} overflows the address space",
                self.data, self.byte_offset
            ))
        })?;
        let align = std::mem::align_of::<T>() as u64;
        if first % align != 0 {
            return Err(Error::misaligned(format!(
                "data 0x{:x} + byte_offset {} = 0x{first:x} is not aligned to {align} bytes as {} needs",
                self.data,
                self.byte_offset,
                T::DTYPE
            )));
        }
        let Some((lo, hi)) = reach(&self.shape, &self.strides)? else {
            return Ok(Placement {
                base: first,
                span_len: 0,
                offset: 0,
                device,
                dim,
            });
        };
        if self.data == 0 {
            return Err(Error::invalid(format!(
                "null data pointer for a tensor of {count} elements (shape {:?})",
                self.shape
            )));
        }
        let elem = elem as i128;
        let base = first as i128 + lo as i128 * elem;
        let span_len = hi as i128 - lo as i128 + 1;
        let bytes = span_len * elem;
        if base <= 0 {
            return Err(Error::out_of_bounds(format!(
                "shape {:?} with strides {:?} reaches {} elements below 0x{first:x}, past address 0",
                self.shape,
                self.strides,
                -(lo as i128)
            )));
        }
        if bytes > isize::MAX as i128 || base + bytes > u64::MAX as i128 {
            return Err(Error::overflow(format!(
                "shape {:?} with strides {:?} spans {span_len} elements of {} from 0x{base:x}, \
                 more than the address space or isize::MAX bytes hold",
                self.shape,
                self.strides,
                T::DTYPE
            )));
        }
        Ok(Placement {
            base: base as u64,
            span_len: span_len as usize,
            offset: (-(lo as i128)) as usize,
            device,
            dim,
        })
    }
}
