//! Python bindings (feature `python`): the `devspan` Python package (PyO3, stable ABI,
//! Python >= 3.9). The repository's `python/` directory builds it (`pip install ./python`): an
//! extension module `devspan._devspan`, which [`register`] fills, re-exported by `devspan`.
//!
//! ```python
//! import torch, devspan
//! s = torch.cuda.current_stream().cuda_stream
//! t = torch.randn(64, 48, device="cuda")
//! v = devspan.from_dlpack(t[::2, 5:].T, stream=s)   # a view: no copy, keeps `t` alive
//! h = devspan.cast(v, "f16", stream=s)               # a new contiguous devspan tensor
//! devspan.fill(v, 0.5, stream=s)                     # writes land in `t`
//! back = torch.from_dlpack(h)                        # shares h's memory
//! ```
//!
//! | Python | devspan |
//! |---|---|
//! | `from_dlpack(obj, stream=None)` | [`DlpackTensor`](crate::dlpack::DlpackTensor) -> view; `obj` has `__dlpack__` or is a capsule |
//! | `fill(dst, value, stream=None)` | [`DeviceViewMut::fill`](crate::DeviceBase::fill_on) |
//! | `copy(dst, src, stream=None)` | [`DeviceViewMut::assign_cast`](crate::DeviceBase::assign_cast_on) (broadcasting, converting) |
//! | `cast(src, dtype, stream=None)` | [`DeviceView::cast`](crate::DeviceBase::cast_on) |
//! | `to_contiguous(src, stream=None)` | [`DeviceView::to_contiguous`](crate::DeviceView::to_contiguous) |
//! | `Tensor.__dlpack__`, `__dlpack_device__` | [`DeviceView::into_dlpack`](crate::DeviceView::into_dlpack) in a capsule |
//!
//! # Streams
//!
//! `stream` is a framework's stream value: None, 0 or 1 for the legacy default stream (what
//! `torch.cuda.current_stream().cuda_stream` is, 0, for PyTorch's default stream), 2 for the
//! per-thread default stream, or a `CUstream` handle (`torch.cuda.Stream().cuda_stream`,
//! `cupy.cuda.Stream().ptr`) of the tensor's device. Operations are queued on it and return
//! without waiting.
//!
//! - `from_dlpack(obj, stream=s)` passes `s` to `obj.__dlpack__(stream=...)`, so the producer
//!   makes `s` wait for its pending work on the tensor (the DLPack protocol).
//! - devspan records a CUDA event after each operation on a tensor (also after one that
//!   failed part way). A later operation on another stream waits for it: an operation on the
//!   same `devspan.Tensor`, and one on any other live `devspan.Tensor` whose memory overlaps
//!   it, such as a second import of the same producer tensor (`from_dlpack(x, stream=s1)` and
//!   `from_dlpack(x[::2], stream=s2)`) or an export imported again. A consumer's stream given
//!   to `Tensor.__dlpack__(stream=...)` waits for it as well. Overlap is judged on the whole
//!   span a tensor may reach, so tensors that share an allocation but no element may wait for
//!   each other.
//! - When an imported tensor goes away, devspan waits on the host for its work on it before
//!   releasing the memory to the producer; the memory of `cast` and `to_contiguous` results is
//!   freed (stream-ordered) after devspan's work on it, whoever releases it last.
//! - Work that a framework queues on memory devspan also uses, outside these calls, is ordered
//!   by the user (as with every DLPack exchange): devspan does not see it.
//! - Arguments that are not `devspan.Tensor`s are imported for the call only; the call then
//!   waits for its work before releasing them.
//! - Every call leaves the calling thread's current CUDA context as it found it.
//!
//! Errors: a subclass of `devspan.Error` per [`ErrorKind`](crate::ErrorKind), named after the
//! kind (`devspan.UnsupportedDtypeError`, `devspan.DeviceMismatchError`, ...; `DevspanError` is
//! another name of `devspan.Error`), `TypeError` for objects that are neither tensors nor
//! capsules, `ValueError` for bad capsules and streams, `BufferError` for refused exports.

mod capsule;
mod cuda;
mod exceptions;
mod tensor;

use std::sync::Arc;

use cudarc::driver::CudaStream;
use ndarray::IxDyn;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::dlpack::DLDeviceType;
use crate::element::{DType, DeviceElement};
use crate::{DeviceArray, DeviceView, DeviceViewMut, Error};
pub(crate) use exceptions::to_py;
pub use tensor::Tensor;

/// Runs `$body` with `$T` bound to the element type named by a [`DType`].
macro_rules! with_dtype {
    ($dtype:expr, $T:ident => $body:expr) => {
        match $dtype {
            $crate::element::DType::U8 => {
                type $T = u8;
                $body
            }
            $crate::element::DType::I8 => {
                type $T = i8;
                $body
            }
            $crate::element::DType::U16 => {
                type $T = u16;
                $body
            }
            $crate::element::DType::I16 => {
                type $T = i16;
                $body
            }
            $crate::element::DType::U32 => {
                type $T = u32;
                $body
            }
            $crate::element::DType::I32 => {
                type $T = i32;
                $body
            }
            $crate::element::DType::U64 => {
                type $T = u64;
                $body
            }
            $crate::element::DType::I64 => {
                type $T = i64;
                $body
            }
            $crate::element::DType::F16 => {
                type $T = half::f16;
                $body
            }
            $crate::element::DType::BF16 => {
                type $T = half::bf16;
                $body
            }
            $crate::element::DType::F32 => {
                type $T = f32;
                $body
            }
            $crate::element::DType::F64 => {
                type $T = f64;
                $body
            }
        }
    };
}
pub(crate) use with_dtype;

/// Adds the module's functions, `Tensor`, `DTYPES`, `Error` and its subclasses (one per
/// [`ErrorKind`](crate::ErrorKind)) to `m`.
///
/// The `python/` crate's `#[pymodule]` calls it; another extension module may too.
///
/// ```no_run
/// use pyo3::prelude::*;
/// #[pymodule]
/// fn my_module(m: &Bound<'_, PyModule>) -> PyResult<()> {
///     devspan::python::register(m)
/// }
/// ```
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Tensor>()?;
    exceptions::add(m)?;
    m.add(
        "DTYPES",
        DType::ALL.iter().map(|d| d.name()).collect::<Vec<_>>(),
    )?;
    m.add_function(wrap_pyfunction!(from_dlpack, m)?)?;
    m.add_function(wrap_pyfunction!(fill, m)?)?;
    m.add_function(wrap_pyfunction!(copy, m)?)?;
    m.add_function(wrap_pyfunction!(cast, m)?)?;
    m.add_function(wrap_pyfunction!(to_contiguous, m)?)?;
    Ok(())
}

/// The element type named by `name`: devspan's names ("f32"), NumPy's ("float32"),
/// PyTorch's (`torch.float32`), or a NumPy/CuPy dtype or scalar type.
fn parse_dtype(obj: &Bound<'_, PyAny>) -> PyResult<DType> {
    let text: String = if let Ok(s) = obj.extract::<String>() {
        s
    } else if let Ok(n) = obj.getattr("name").and_then(|n| n.extract::<String>()) {
        n
    } else if let Ok(n) = obj.getattr("__name__").and_then(|n| n.extract::<String>()) {
        n
    } else {
        obj.str()?.to_string()
    };
    let name = text.strip_prefix("torch.").unwrap_or(&text);
    let d = match name {
        "u8" | "uint8" => DType::U8,
        "i8" | "int8" => DType::I8,
        "u16" | "uint16" => DType::U16,
        "i16" | "int16" | "short" => DType::I16,
        "u32" | "uint32" => DType::U32,
        "i32" | "int32" | "int" => DType::I32,
        "u64" | "uint64" => DType::U64,
        "i64" | "int64" | "long" => DType::I64,
        "f16" | "float16" | "half" => DType::F16,
        "bf16" | "bfloat16" => DType::BF16,
        "f32" | "float32" | "float" => DType::F32,
        "f64" | "float64" | "double" => DType::F64,
        _ => {
            return Err(PyTypeError::new_err(format!(
                "{text:?} is not one of devspan's element types {:?}",
                DType::ALL.iter().map(|d| d.name()).collect::<Vec<_>>()
            )));
        }
    };
    Ok(d)
}

/// A tensor argument: a devspan tensor, or one imported for this call only.
enum Arg<'py> {
    Shared(Bound<'py, Tensor>),
    Temporary(Tensor),
}

impl Arg<'_> {
    fn get(&self) -> &Tensor {
        match self {
            Arg::Shared(b) => b.get(),
            Arg::Temporary(t) => t,
        }
    }
}

fn arg<'py>(obj: &Bound<'py, PyAny>, stream: Option<i64>) -> PyResult<Arg<'py>> {
    match obj.cast::<Tensor>() {
        Ok(t) => Ok(Arg::Shared(t.clone())),
        Err(_) => Ok(Arg::Temporary(import(obj, stream)?)),
    }
}

/// The stream value to pass to a producer's `__dlpack__`: the array API asks for 1 rather
/// than 0 for the legacy default stream.
fn producer_stream(stream: Option<i64>) -> i64 {
    match stream {
        None | Some(0) => 1,
        Some(s) => s,
    }
}

fn import(obj: &Bound<'_, PyAny>, stream: Option<i64>) -> PyResult<Tensor> {
    let py = obj.py();
    if let Some(s) = stream
        && s < 0
    {
        return Err(PyValueError::new_err(format!(
            "stream {s} is not a CUDA stream: use None, 1 (legacy default), 2 (per-thread default) or a CUstream handle"
        )));
    }
    if !obj.hasattr("__dlpack__")? {
        let t = capsule::take(obj)?;
        return Tensor::import(t, stream);
    }
    let mut device_type = DLDeviceType::CUDA.0;
    if obj.hasattr("__dlpack_device__")? {
        let (kind, id): (i32, i64) = obj.call_method0("__dlpack_device__")?.extract()?;
        let cuda = [
            DLDeviceType::CUDA,
            DLDeviceType::CUDA_MANAGED,
            DLDeviceType::CUDA_HOST,
        ];
        if !cuda.iter().any(|d| d.0 == kind) {
            return Err(to_py(Error::device_mismatch(format!(
                "a tensor on {} (device type {kind}, id {id}) is not memory a CUDA device can access; \
                 kDLCUDA, kDLCUDAManaged and kDLCUDAHost are",
                DLDeviceType(kind).name()
            ))));
        }
        device_type = kind;
    }
    let kwargs = PyDict::new(py);
    if device_type == DLDeviceType::CUDA.0 {
        kwargs.set_item("stream", producer_stream(stream))?;
    }
    kwargs.set_item("max_version", (1, 1))?;
    let cap = match obj.call_method("__dlpack__", (), Some(&kwargs)) {
        Ok(c) => c,
        // A producer older than DLPack 1.0 does not know `max_version`.
        Err(e) if e.is_instance_of::<PyTypeError>(py) => {
            kwargs.del_item("max_version")?;
            obj.call_method("__dlpack__", (), Some(&kwargs))?
        }
        Err(e) => return Err(e),
    };
    let t = capsule::take(&cap)?;
    Tensor::import(t, stream)
}

/// A view over the tensor of any DLPack producer, without copying.
///
/// Each call makes a new `devspan.Tensor`. devspan's operations on it are ordered (on the GPU)
/// after devspan's earlier operations on it and on every other live devspan tensor over
/// overlapping memory, on whatever streams they ran; work the producer or another framework
/// queues on the memory is ordered by the user.
///
/// `obj` has `__dlpack__` (a `torch.Tensor`, `cupy.ndarray`, JAX array, ...) or is a DLPack
/// capsule (named "dltensor" or "dltensor_versioned"; renamed "used_..." once taken). `stream`
/// is where devspan will use the tensor; the producer is asked (`__dlpack__(stream=...)`) to
/// order its pending work before it. A capsule comes with no such promise: its data must be
/// ready on `stream`.
///
/// The view keeps the producer's memory alive until the view and everything exported from it
/// are gone. Tensors marked read-only, and layouts that reach an element twice (broadcasts),
/// give read-only views.
#[pyfunction]
#[pyo3(signature = (obj, stream = None))]
fn from_dlpack(obj: &Bound<'_, PyAny>, stream: Option<i64>) -> PyResult<Py<Tensor>> {
    let _current = cuda::CurrentContext::save();
    if let Ok(t) = obj.cast::<Tensor>() {
        return Ok(t.clone().unbind());
    }
    Py::new(obj.py(), import(obj, stream)?)
}

/// The Python value `value` as a `T`: integers and floats, converted as `T::from` would
/// (`devspan.OverflowError` when out of range).
fn scalar<T: DeviceElement + num_traits::NumCast>(value: &Bound<'_, PyAny>) -> PyResult<T> {
    use crate::convert::{f64_to_bf16, f64_to_f16, i128_to_f64_round_odd};
    // Floating-point elements get the value rounded once, from the value given (nearest, ties
    // to even, out of range to infinity), as devspan's own casts round; integer elements take
    // integers that fit and floats truncated toward zero that fit.
    let float = |f: f64| -> Option<T> {
        match T::DTYPE {
            DType::F16 => num_traits::NumCast::from(f64_to_f16(f)),
            DType::BF16 => num_traits::NumCast::from(f64_to_bf16(f)),
            DType::F32 => num_traits::NumCast::from(f as f32),
            _ => num_traits::NumCast::from(f),
        }
    };
    let int = |i: i128| -> Option<T> {
        match T::DTYPE {
            DType::F16 | DType::BF16 => float(i128_to_f64_round_odd(i)),
            DType::F32 => num_traits::NumCast::from(i as f32),
            DType::F64 => num_traits::NumCast::from(i as f64),
            _ => num_traits::NumCast::from(i),
        }
    };
    let out: Option<T> = if let Ok(i) = value.extract::<i64>() {
        int(i128::from(i))
    } else if let Ok(u) = value.extract::<u64>() {
        int(i128::from(u))
    } else if let Ok(f) = value.extract::<f64>() {
        if T::DTYPE.is_float() {
            float(f)
        } else {
            num_traits::NumCast::from(f)
        }
    } else {
        return Err(PyTypeError::new_err(format!(
            "fill value must be an int or a float, got {}",
            value.get_type().name()?
        )));
    };
    out.ok_or_else(|| {
        to_py(Error::overflow(format!(
            "{} does not fit a {} element",
            value.repr().map(|r| r.to_string()).unwrap_or_default(),
            T::DTYPE
        )))
    })
}

/// Sets every element of `dst` to `value`, on `stream`.
#[pyfunction]
#[pyo3(signature = (dst, value, stream = None))]
fn fill(dst: &Bound<'_, PyAny>, value: &Bound<'_, PyAny>, stream: Option<i64>) -> PyResult<()> {
    let _current = cuda::CurrentContext::save();
    let arg = arg(dst, stream)?;
    let t = arg.get();
    let s = cuda::stream(t.ctx(), stream)?;
    with_dtype!(t.dtype(), T => {
        let v: T = scalar::<T>(value)?;
        let mut view = t.view_mut::<T>().map_err(to_py)?;
        t.before(&s, true)?;
        let done = view.fill_on(&s, v).map_err(to_py);
        cuda::settle(done, || t.after(&s, true), || cuda::synchronize(&s))?;
    });
    Ok(())
}

/// Copies `src` into `dst` element by element on `stream`, converting the element type as
/// Rust's `as` does and broadcasting `src` to `dst`'s shape.
#[pyfunction]
#[pyo3(signature = (dst, src, stream = None))]
fn copy(dst: &Bound<'_, PyAny>, src: &Bound<'_, PyAny>, stream: Option<i64>) -> PyResult<()> {
    let _current = cuda::CurrentContext::save();
    let d = arg(dst, stream)?;
    let sarg = arg(src, stream)?;
    let (dt, st) = (d.get(), sarg.get());
    if dt.device() != st.device() {
        return Err(to_py(Error::device_mismatch(format!(
            "source on CUDA device {} and destination on CUDA device {}",
            st.device(),
            dt.device()
        ))));
    }
    let s = cuda::stream(dt.ctx(), stream)?;
    with_dtype!(dt.dtype(), T => {
        let mut dv = dt.view_mut::<T>().map_err(to_py)?;
        with_dtype!(st.dtype(), U => {
            let sv = st.view::<U>().map_err(to_py)?;
            ordered_cast(&s, dt, &mut dv, st, &sv)?;
        })
    });
    Ok(())
}

/// A new devspan tensor (standard layout) with the elements of `src` converted to `dtype`.
#[pyfunction]
#[pyo3(signature = (src, dtype, stream = None))]
fn cast(
    src: &Bound<'_, PyAny>,
    dtype: &Bound<'_, PyAny>,
    stream: Option<i64>,
) -> PyResult<Py<Tensor>> {
    let _current = cuda::CurrentContext::save();
    let to = parse_dtype(dtype)?;
    let a = arg(src, stream)?;
    let t = converted(a.get(), to, stream)?;
    Py::new(src.py(), t)
}

/// A new devspan tensor (standard layout) with the elements of `src`; always a copy.
#[pyfunction]
#[pyo3(signature = (src, stream = None))]
fn to_contiguous(src: &Bound<'_, PyAny>, stream: Option<i64>) -> PyResult<Py<Tensor>> {
    let _current = cuda::CurrentContext::save();
    let a = arg(src, stream)?;
    let t = converted(a.get(), a.get().dtype(), stream)?;
    Py::new(src.py(), t)
}

/// `dv.assign_cast(sv)` on `stream`, where `dv` views `dst` and `sv` views `src`: ordered after
/// the earlier work on both tensors, and recorded for later work even when the cast fails
/// (`cuda::settle`).
fn ordered_cast<T: DeviceElement, U: DeviceElement>(
    stream: &Arc<CudaStream>,
    dst: &Tensor,
    dv: &mut DeviceViewMut<'_, T, IxDyn>,
    src: &Tensor,
    sv: &DeviceView<'_, U, IxDyn>,
) -> PyResult<()> {
    dst.before(stream, true)?;
    src.before(stream, false)?;
    let done = dv.assign_cast_on(stream, sv).map_err(to_py);
    let record = || {
        let read = src.after(stream, false);
        let written = dst.after(stream, true);
        read.and(written)
    };
    cuda::settle(done, record, || cuda::synchronize(stream))
}

/// A new tensor (standard layout) with the elements of `st` converted to `to`, written on
/// `stream`. The memory is allocated on (and freed on) the legacy default stream, which
/// outlives any stream a caller names.
fn converted(st: &Tensor, to: DType, stream: Option<i64>) -> PyResult<Tensor> {
    let _current = cuda::CurrentContext::save();
    let ctx = st.ctx().clone();
    let s = cuda::stream(&ctx, stream)?;
    let home = ctx.default_stream();
    with_dtype!(st.dtype(), U => {
        let sv = st.view::<U>().map_err(to_py)?;
        with_dtype!(to, T => {
            // SAFETY: `assign_cast` below writes every element before the tensor is returned;
            // on error the tensor is dropped unread.
            let array = unsafe { DeviceArray::<T, IxDyn>::uninit(&home, sv.dim()) }.map_err(to_py)?;
            // From here on the memory is freed after the work recorded on `out`, on any path.
            let out = Tensor::owned(array)?;
            let mut ov = out.view_mut::<T>().map_err(to_py)?;
            ordered_cast(&s, &out, &mut ov, st, &sv)?;
            Ok(out)
        })
    })
}
