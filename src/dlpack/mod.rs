//! DLPack interop: views over tensors of other frameworks, and views handed to them.
//!
//! DLPack (`dlpack.h`) is the C ABI through which PyTorch, CuPy, JAX, NumPy and others lend
//! tensors to each other. A producer hands out a *managed tensor*: a [`DLTensor`] (data pointer,
//! device, element type, shape, strides in elements, byte offset) plus a `deleter` that the
//! consumer calls exactly once when it no longer needs the memory.
//!
//! - **Import.** [`DlpackTensor::from_versioned`] (DLPack >= 1.0) and
//!   [`DlpackTensor::from_legacy`] take ownership of a managed tensor; inspect it
//!   ([`dtype`](DlpackTensor::dtype), [`shape`](DlpackTensor::shape), ...) and turn it into a
//!   `'static` [`DeviceView`](crate::DeviceView) or [`DeviceViewMut`](crate::DeviceViewMut)
//!   with [`into_view`](DlpackTensor::into_view) / [`into_view_mut`](DlpackTensor::into_view_mut).
//!   The views keep the producer alive; its deleter runs exactly once, on whichever thread drops
//!   the last view derived from it, or during the failed conversion that rejected it.
//! - **Export.** [`DeviceView::into_dlpack`](crate::DeviceView::into_dlpack) (read-only, exported
//!   with [`DLPACK_FLAG_BITMASK_READ_ONLY`]), [`DeviceViewMut::into_dlpack`](crate::DeviceViewMut::into_dlpack)
//!   and [`DeviceArray::into_dlpack`](crate::DeviceArray::into_dlpack), each with a `_legacy`
//!   twin, hand a view to a consumer. Only `'static` views can be exported: a borrowed view's
//!   memory could be freed while the consumer still uses it, so the lifetime refuses it.
//!
//! # What is accepted
//!
//! | field | accepted |
//! |---|---|
//! | `device.device_type` | `kDLCUDA`, `kDLCUDAManaged`, `kDLCUDAHost` (see below); anything else is `Err(DeviceMismatch)` |
//! | `device.device_id` | `>= 0`; it becomes the view's device ordinal |
//! | `dtype` | `kDLInt`/`kDLUInt` 8/16/32/64, `kDLFloat` 16/32/64, `kDLBfloat` 16, `lanes == 1`; the rest (bool, complex, fp8, vectors) is `Err(UnsupportedDtype)` |
//! | `ndim` | `0..=`[`MAX_NDIM`] |
//! | `shape` | `>= 0`, element count and byte size at most `isize::MAX` |
//! | `strides` | any sign, null for row-major; every reachable offset must fit in `isize` and the address space |
//! | `data + byte_offset` | aligned for the element type; `data` non-null unless the tensor is empty |
//! | `flags` | [`DLPACK_FLAG_BITMASK_READ_ONLY`] refuses [`DlpackTensor::into_view_mut`]; other bits are ignored |
//!
//! `kDLCUDAManaged` memory is device-accessible by construction. `kDLCUDAHost` memory is pinned
//! host memory that CUDA maps into the unified address space; devspan uses the address as a
//! device address, which holds for memory from `cudaMallocHost`/`cudaHostAlloc` (and
//! `cuMemHostAlloc`) on every 64-bit platform with unified addressing, and for
//! `cudaHostRegister`ed memory on devices with `cudaDevAttrCanUseHostPointerForRegisteredMem`.
//! Callers that do not want host memory read [`DlpackTensor::device`] first.
//!
//! # The span of an imported view
//!
//! DLPack does not say how large the producer's allocation is. devspan relies on the producer's
//! promise that it owns **every element the shape and strides reach** and gives the view a span
//! that covers exactly those elements: it starts at the lowest reachable element (strides may be
//! negative) and ends after the highest, and the view's offset locates index zero inside it.
//! Bounds, overflow and alignment are checked against that span; nothing else can be.
//!
//! # Streams
//!
//! The C structs carry no stream. Before a device operation reads an imported view, the work
//! that produced its data must be complete or ordered before that operation's stream (the
//! Python `__dlpack__(stream=...)` protocol arranges this). The same holds in the other
//! direction for exported views, and a consumer must call the deleter only once its own work on
//! the memory is complete or ordered before any later reuse.
//!
//! devspan keeps that rule as a consumer: every operation on an imported view is recorded on its
//! stream, and the producer's deleter runs only after that work has completed (the drop of the
//! last view waits for it on the host). As a producer, an exported array is freed stream-ordered
//! on its own stream after devspan's work on it, and with its context current, whichever thread
//! calls the deleter.
//!
//! ```
//! use std::sync::Arc;
//! use devspan::{DeviceOwner, DeviceView};
//! use devspan::dlpack::DlpackTensor;
//!
//! struct Fake; // stands for an allocation; the address below is never dereferenced
//! impl DeviceOwner for Fake {}
//!
//! // SAFETY: only metadata is read; no device operation uses the view.
//! let v = unsafe {
//!     DeviceView::<f32, _>::from_raw_parts(0x7f00_0000_0000, 12, ndarray::Ix2(3, 4), &[4, 1], 0, 0, Arc::new(Fake))?
//! };
//! let t = v.t();
//! let exported = t.into_dlpack(); // what a consumer receives
//! // SAFETY: `exported` is a live managed tensor from `into_dlpack`, handed over once.
//! let back = unsafe { DlpackTensor::from_versioned(exported)? };
//! assert!(back.is_read_only());
//! let w = back.into_view::<f32, ndarray::Ix2>()?;
//! assert_eq!((w.shape(), w.strides()), (&[4usize, 3][..], &[1isize, 4][..]));
//! # Ok::<(), devspan::Error>(())
//! ```
//!
//! # Why not `dlpark`
//!
//! The crate `dlpark` 0.10.0 also implements DLPack in Rust (bindgen structs of `dlpack.h` 1.3,
//! owning `Managed<M>` handles, PyO3 0.30 capsules, the `__dlpack__` negotiation and the DLPack
//! 1.3 C exchange API, adapters for cudarc and ndarray). devspan keeps its own layer because
//! these parts of it do not fit:
//!
//! - **Validation.** `TensorRef::from_raw` (behind `Managed::validate`) checks `ndim >= 0`,
//!   null `shape`, negative extents, overflow of the element and byte counts and zero
//!   `bits`/`lanes`, but puts no upper bound on `ndim` (it reads `ndim` values through `shape`
//!   for any `i32`; devspan stops at [`MAX_NDIM`]) and does not check that the offsets the
//!   strides reach fit in `isize` or the address space; devspan bounds its span by them.
//! - **Capsules.** `capsule_to_raw_dlpack` (`src/python/capsule/from_python.rs`) hands the
//!   capsule's pointer to `Managed::from_raw`, which reads the struct, without checking its
//!   alignment; devspan refuses a misaligned managed tensor. Its capsule destructors
//!   (`src/python/capsule/into_python.rs`) call the producer's deleter without setting aside an
//!   in-flight Python exception.
//! - **Device import.** The cudarc adapter (`ManagedCudaSlice`, feature `cudarc`) accepts
//!   only `kDLCUDA` tensors with compact row-major strides and wraps them in a `CudaSlice`;
//!   when it is dropped, `CudaSlice::leak` only makes the slice's stream wait for its events
//!   (and only while the context manages stream synchronisation) before the deleter runs on
//!   the host. devspan imports any strides and `kDLCUDAManaged`/`kDLCUDAHost` memory, and its
//!   owner runs the deleter only once the device work recorded on the views has completed.
//! - **Dependencies.** Its `cudarc` feature depends on cudarc with cudarc's default features
//!   (cuBLAS, cuBLASLt, cuRAND, the runtime API) and turns on `cuda-version-from-build-system`
//!   and `fallback-latest`, where devspan selects cudarc's features itself (`driver`, `nvrtc`,
//!   dynamic loading, one `cuda-*` version). Without that feature it still adds `bitflags` and
//!   `snafu`.
//! - **The structs alone.** Re-exporting its `#[repr(C)]` structs would make dlpark's version
//!   part of devspan's public API, and its `DLManagedTensorVersioned::flags` is its own
//!   `DlpackFlags` type rather than the `u64` of `dlpack.h`, for a few hundred lines whose
//!   layout devspan's `ffi` module already tests against `dlpack.h`.

mod export;
mod ffi;
mod import;

pub use ffi::{
    DLDataType, DLDataTypeCode, DLDevice, DLDeviceType, DLManagedTensor, DLManagedTensorVersioned,
    DLPACK_FLAG_BITMASK_IS_COPIED, DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED,
    DLPACK_FLAG_BITMASK_READ_ONLY, DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION, DLPackVersion,
    DLTensor,
};
pub use import::DlpackTensor;

use crate::element::DType;
use crate::error::{Error, ErrorKind};

/// The largest `ndim` an imported tensor may have. It bounds how much foreign memory
/// [`DlpackTensor`] reads for `shape` and `strides` when `ndim` is garbage.
///
/// ```
/// assert!(devspan::dlpack::MAX_NDIM >= 8);
/// ```
pub const MAX_NDIM: usize = 64;

impl From<DType> for DLDataType {
    /// The DLPack element type of a devspan element type (always one lane).
    ///
    /// ```
    /// use devspan::DType;
    /// use devspan::dlpack::{DLDataType, DLDataTypeCode};
    /// let t = DLDataType::from(DType::BF16);
    /// assert_eq!((t.code, t.bits, t.lanes), (DLDataTypeCode::BFLOAT, 16, 1));
    /// ```
    fn from(dtype: DType) -> Self {
        let code = match dtype {
            DType::I8 | DType::I16 | DType::I32 | DType::I64 => DLDataTypeCode::INT,
            DType::U8 | DType::U16 | DType::U32 | DType::U64 => DLDataTypeCode::UINT,
            DType::F16 | DType::F32 | DType::F64 => DLDataTypeCode::FLOAT,
            DType::BF16 => DLDataTypeCode::BFLOAT,
        };
        DLDataType {
            code,
            bits: (dtype.size() * 8) as u8,
            lanes: 1,
        }
    }
}

impl TryFrom<DLDataType> for DType {
    type Error = Error;

    /// The devspan element type of a DLPack element type; `Err(UnsupportedDtype)` for bool,
    /// complex, opaque handles, the 8/6/4-bit float formats, odd bit widths and `lanes != 1`.
    ///
    /// ```
    /// use devspan::{DType, ErrorKind};
    /// use devspan::dlpack::{DLDataType, DLDataTypeCode};
    /// let t = DLDataType { code: DLDataTypeCode::UINT, bits: 16, lanes: 1 };
    /// assert_eq!(DType::try_from(t)?, DType::U16);
    /// let b = DLDataType { code: DLDataTypeCode::BOOL, bits: 8, lanes: 1 };
    /// assert_eq!(DType::try_from(b).unwrap_err().kind(), &ErrorKind::UnsupportedDtype);
    /// # Ok::<(), devspan::Error>(())
    /// ```
    fn try_from(t: DLDataType) -> Result<Self, Error> {
        let unsupported = |why: &str| {
            Error::new(
                ErrorKind::UnsupportedDtype,
                format!(
                    "DLPack dtype (code {} {}, bits {}, lanes {}) {why}",
                    t.code.0,
                    t.code.name(),
                    t.bits,
                    t.lanes
                ),
            )
        };
        if t.lanes != 1 {
            return Err(unsupported(
                "has lanes != 1; devspan views scalar elements only",
            ));
        }
        let dtype = match (t.code, t.bits) {
            (DLDataTypeCode::INT, 8) => DType::I8,
            (DLDataTypeCode::INT, 16) => DType::I16,
            (DLDataTypeCode::INT, 32) => DType::I32,
            (DLDataTypeCode::INT, 64) => DType::I64,
            (DLDataTypeCode::UINT, 8) => DType::U8,
            (DLDataTypeCode::UINT, 16) => DType::U16,
            (DLDataTypeCode::UINT, 32) => DType::U32,
            (DLDataTypeCode::UINT, 64) => DType::U64,
            (DLDataTypeCode::FLOAT, 16) => DType::F16,
            (DLDataTypeCode::FLOAT, 32) => DType::F32,
            (DLDataTypeCode::FLOAT, 64) => DType::F64,
            (DLDataTypeCode::BFLOAT, 16) => DType::BF16,
            (DLDataTypeCode::BOOL, _) => {
                return Err(unsupported("is bool, which devspan does not support"));
            }
            (DLDataTypeCode::INT | DLDataTypeCode::UINT | DLDataTypeCode::FLOAT, _)
            | (DLDataTypeCode::BFLOAT, _) => {
                return Err(unsupported("has a bit width devspan does not support"));
            }
            _ => return Err(unsupported("is not one of devspan's element types")),
        };
        Ok(dtype)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_dtype_round_trips() {
        for d in DType::ALL {
            let t = DLDataType::from(d);
            assert_eq!(DType::try_from(t).unwrap(), d);
            assert_eq!(t.bits as usize, d.size() * 8);
        }
    }

    #[test]
    fn only_the_twelve_dtypes_decode() {
        let mut ok = 0;
        // Under Miri (`.ci/miri`) the codes past the defined ones are sampled.
        for code in (0..=u8::MAX).filter(|&c| !cfg!(miri) || c < 8 || c == u8::MAX) {
            for bits in [0u8, 1, 4, 6, 8, 16, 32, 64, 128, 255] {
                for lanes in [0u16, 1, 2, 4, u16::MAX] {
                    let t = DLDataType {
                        code: DLDataTypeCode(code),
                        bits,
                        lanes,
                    };
                    match DType::try_from(t) {
                        Ok(d) => {
                            ok += 1;
                            assert_eq!(DLDataType::from(d), t);
                        }
                        Err(e) => {
                            assert_eq!(e.kind(), &ErrorKind::UnsupportedDtype);
                            assert!(e.message().contains(&format!("code {code}")), "{e}");
                        }
                    }
                }
            }
        }
        assert_eq!(ok, 12);
    }

    #[test]
    fn bool_is_named_in_the_error() {
        let t = DLDataType {
            code: DLDataTypeCode::BOOL,
            bits: 8,
            lanes: 1,
        };
        let e = DType::try_from(t).unwrap_err();
        assert!(e.message().contains("bool"), "{e}");
    }
}
