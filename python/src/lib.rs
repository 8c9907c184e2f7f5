//! The `devspan` Python package's extension module `devspan._devspan` (PyO3, stable ABI,
//! Python >= 3.9), re-exported by the pure-Python package `python/devspan/`. Built on devspan's
//! public API alone (the binding's keep-alive and ordering are [`devspan::SharedOwner`]s).
//!
//! `pip install ./python` builds and installs the package (maturin). `python/build.sh` builds
//! the module with cargo alone and places it in `python/devspan/`, where the source package
//! imports it.
//!
//! ```python
//! import torch, devspan
//! t = torch.randn(64, 48, device="cuda")
//! v = devspan.from_dlpack(t[::2, 5:].T)   # a view: no copy, keeps `t` alive
//! h = devspan.cast(v, "f16")               # a new contiguous devspan tensor
//! devspan.fill(v, 0.5)                     # writes land in `t`, on PyTorch's current stream
//! back = torch.from_dlpack(h)              # shares h's memory
//! ```
//!
//! | Python | devspan |
//! |---|---|
//! | `from_dlpack(obj, stream=None)` | [`DlpackTensor`](devspan::dlpack::DlpackTensor) -> view; `obj` has `__dlpack__` or `__cuda_array_interface__`, or is a capsule |
//! | `from_cuda_array_interface(obj, stream=None)` | the interface as a [`DlpackTensor`](devspan::dlpack::DlpackTensor) -> view |
//! | `fill(dst, value, stream=None)` | [`DeviceViewMut::fill`](devspan::DeviceBase::fill_on) |
//! | `copy(dst, src, stream=None)` | [`DeviceViewMut::assign_cast`](devspan::DeviceBase::assign_cast_on) (broadcasting, converting; `src` on any device) |
//! | `cast(src, dtype, stream=None, device=None)` | [`DeviceView::cast`](devspan::DeviceBase::cast_on) (on `device`) |
//! | `to_contiguous(src, stream=None, device=None)` | [`DeviceView::to_contiguous`](devspan::DeviceView::to_contiguous) (on `device`) |
//! | `Tensor.__dlpack__`, `__dlpack_device__` | [`DeviceView::into_dlpack`](devspan::DeviceView::into_dlpack) in a capsule |
//! | `Tensor.__cuda_array_interface__` | shape, type string, address and byte strides of the view, version 3 |
//!
//! # Streams
//!
//! `stream` is a framework's stream value: 0 or 1 for the legacy default stream (0 is what
//! `torch.cuda.current_stream().cuda_stream` is for PyTorch's default stream), 2 for the
//! per-thread default stream, or a `CUstream` handle (`torch.cuda.Stream().cuda_stream`,
//! `cupy.cuda.Stream().ptr`) of the tensor's device. Operations are queued on it and return
//! without waiting.
//!
//! With `stream=None` a call runs on the stream its tensor arguments ask for, the first that
//! asks (`copy`: `dst`, then `src`; for a `src` on another device, `dst` alone, and `src` is
//! taken on the stream it asks for on its own device):
//! - a tensor of PyTorch (an instance of a class defined in package `torch`) asks for
//!   `torch.cuda.current_stream(device)`, one of CuPy for `cupy.cuda.get_current_stream(device)`;
//!   devspan looks at the class's module only, and never imports either framework itself;
//! - a `devspan.Tensor` asks for the current stream of the framework its producer belongs to
//!   (for the results of `cast` and `to_contiguous`, their source's producer);
//! - an object read through `__cuda_array_interface__` asks for the interface's `stream`, or
//!   when it has none, for its framework's current stream;
//! - with no such argument (a capsule, a JAX array, devspan tensors of other producers), the
//!   call runs on the legacy default stream. That is the stream a DLPack producer must assume
//!   when `__dlpack__` is called with `stream=None` (Python array API standard, `__dlpack__`:
//!   "None: producer must assume the legacy default stream (default)"), so devspan's default
//!   and an exchange without a stream name the same stream; and the legacy default stream
//!   waits for, and is waited on by, every blocking stream of the context, which orders it
//!   with producers that do not use non-blocking streams. The per-thread default stream (2)
//!   would be ordered with none of them.
//!
//! Ordering:
//! - Importing `obj` on stream `s` passes `s` to `obj.__dlpack__(stream=...)`, so the producer
//!   makes `s` wait for its pending work on the tensor (the DLPack protocol).
//! - devspan records a CUDA event after each operation on a tensor (also after one that
//!   failed part way), in the log of the tensor's owner, which every devspan view keeps (the
//!   ordering of the Rust API). A later operation on another stream waits for it: an
//!   operation on the same `devspan.Tensor`, and one on any other live `devspan.Tensor` whose
//!   memory overlaps it, such as a second import of the same producer tensor
//!   (`from_dlpack(x, stream=s1)` and `from_dlpack(x[::2], stream=s2)`) or an export imported
//!   again. Overlap is judged on the whole span a tensor may reach, so tensors that share an
//!   allocation but no element may wait for each other.
//! - `Tensor.__dlpack__(stream=c)` makes the consumer's stream `c` wait for devspan's work on
//!   the tensor (None: the legacy default stream; -1: no ordering), as the DLPack protocol asks
//!   of producers.
//! - The CUDA Array Interface names a stream instead. Importing an interface whose `stream`
//!   is given makes devspan's stream wait for it; the producer's stream is then kept in step
//!   with the view: each devspan operation on it waits for the work queued on that stream and
//!   makes the stream wait for the operation. `Tensor.__cuda_array_interface__` names a stream
//!   that devspan keeps for the tensor's consumers, kept in step the same way.
//! - When an imported tensor goes away, devspan waits on the host for its work on it (and for
//!   the work queued on the stream it named to CUDA Array Interface consumers) before
//!   releasing the memory to the producer; the memory of `cast` and `to_contiguous` results is
//!   freed (stream-ordered) after that work, whoever releases it last.
//! - Other work that a framework queues on memory devspan also uses is ordered by the user (as
//!   with every DLPack exchange): devspan does not see it.
//! - Arguments that are not `devspan.Tensor`s are imported for the call only. The call does
//!   not wait for its work: devspan holds them until that work has completed, and then
//!   releases them, at its next call or within about 10 ms (a devspan thread checks while any
//!   are held; at interpreter exit, an `atexit` handler waits for what is left). Until then
//!   later devspan work on the same memory is ordered after it.
//! - A plain `torch.Tensor` (the class itself, in CUDA memory, strided, not requiring
//!   gradients, with no negative bit, not empty) is imported from its own `data_ptr()`,
//!   `shape` and `stride()` rather than through `__dlpack__`, with the same ordering: the call's
//!   stream waits for PyTorch's current stream on the tensor's device unless it is that stream.
//!   The view holds the tensor's storage (`untyped_storage()`, whatever later becomes of the
//!   tensor object). Other PyTorch tensors go through `__dlpack__`.
//! - Every call leaves the calling thread's current CUDA context as it found it.
//!
//! Errors: a subclass of `devspan.Error` per [`ErrorKind`](devspan::ErrorKind), named after the
//! kind (`devspan.UnsupportedDtypeError`, `devspan.DeviceMismatchError`, ...; `DevspanError` is
//! another name of `devspan.Error`), also for malformed `__cuda_array_interface__` dicts;
//! `TypeError` for objects that are neither tensors nor capsules, `ValueError` for bad
//! capsules and streams, `BufferError` for refused exports.

mod cai;
mod capsule;
mod cuda;
mod elementwise;
mod exceptions;
mod framework;
mod source;
mod tensor;

use std::sync::Arc;

use devspan::cudarc::driver::CudaStream;
use devspan::ndarray::IxDyn;
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;

use devspan::{DType, DeviceElement};
use devspan::{DeviceArray, DeviceView, DeviceViewMut};
pub(crate) use exceptions::to_py;
use source::{Arg, Source, call_stream, check_stream};
pub use tensor::Tensor;

/// Runs `$body` with `$T` bound to the element type named by a [`DType`].
macro_rules! with_dtype {
    ($dtype:expr, $T:ident => $body:expr) => {
        match $dtype {
            devspan::DType::U8 => {
                type $T = u8;
                $body
            }
            devspan::DType::I8 => {
                type $T = i8;
                $body
            }
            devspan::DType::U16 => {
                type $T = u16;
                $body
            }
            devspan::DType::I16 => {
                type $T = i16;
                $body
            }
            devspan::DType::U32 => {
                type $T = u32;
                $body
            }
            devspan::DType::I32 => {
                type $T = i32;
                $body
            }
            devspan::DType::U64 => {
                type $T = u64;
                $body
            }
            devspan::DType::I64 => {
                type $T = i64;
                $body
            }
            devspan::DType::F16 => {
                type $T = devspan::half::f16;
                $body
            }
            devspan::DType::BF16 => {
                type $T = devspan::half::bf16;
                $body
            }
            devspan::DType::F32 => {
                type $T = f32;
                $body
            }
            devspan::DType::F64 => {
                type $T = f64;
                $body
            }
        }
    };
}
pub(crate) use with_dtype;

/// devspan: strided views over CUDA tensors of any DLPack framework, with fill, copy, cast and
/// to_contiguous kernels.
///
/// The module's functions, `Tensor`, `ElementwiseKernel`, `DTYPES`, `Error` and its subclasses
/// (one per [`ErrorKind`](devspan::ErrorKind)), and `__version__` (this crate's version, which
/// is the Python package's).
#[pymodule]
#[pyo3(name = "_devspan")]
fn devspan_module(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Tensor>()?;
    m.add_class::<elementwise::PyElementwiseKernel>()?;
    exceptions::add(m)?;
    m.add(
        "DTYPES",
        DType::ALL.iter().map(|d| d.name()).collect::<Vec<_>>(),
    )?;
    m.add_function(wrap_pyfunction!(from_dlpack, m)?)?;
    m.add_function(wrap_pyfunction!(from_cuda_array_interface, m)?)?;
    m.add_function(wrap_pyfunction!(fill, m)?)?;
    m.add_function(wrap_pyfunction!(copy, m)?)?;
    m.add_function(wrap_pyfunction!(cast, m)?)?;
    m.add_function(wrap_pyfunction!(to_contiguous, m)?)?;
    // Not an attribute of the module: only `atexit` holds it.
    let release_at_exit = wrap_pyfunction!(release_at_exit, m)?;
    m.py()
        .import("atexit")?
        .call_method1("register", (release_at_exit,))?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))
}

/// Run by `atexit`: see [`cuda::Releases::shut_down`].
#[pyfunction]
fn release_at_exit(py: Python<'_>) {
    cuda::RELEASES.shut_down(py);
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

/// A view over the tensor of any DLPack or CUDA Array Interface producer, without copying.
///
/// Each call makes a new `devspan.Tensor`. devspan's operations on it are ordered (on the GPU)
/// after devspan's earlier operations on it and on every other live devspan tensor over
/// overlapping memory, on whatever streams they ran; work the producer or another framework
/// queues on the memory is ordered by the user.
///
/// `obj` has `__dlpack__` (a `torch.Tensor`, `cupy.ndarray`, JAX array, ...), or is a DLPack
/// capsule (named "dltensor" or "dltensor_versioned"; renamed "used_..." once taken), or has
/// `__cuda_array_interface__` and no `__dlpack__` (see `from_cuda_array_interface`). `stream`
/// is where devspan will use the tensor; the producer is asked (`__dlpack__(stream=...)`) to
/// order its pending work before it. With no stream, that is the current stream of the
/// framework that made `obj` (PyTorch, CuPy), else the legacy default stream. A capsule comes
/// with no such promise: its data must be ready on `stream`.
///
/// The view keeps the producer's memory alive until the view and everything exported from it
/// are gone. Tensors marked read-only, and layouts that reach an element twice (broadcasts),
/// give read-only views. Later calls on the view with no stream use the current stream of the
/// framework that made `obj`.
#[pyfunction]
#[pyo3(signature = (obj, stream = None))]
fn from_dlpack(obj: &Bound<'_, PyAny>, stream: Option<i64>) -> PyResult<Py<Tensor>> {
    let _current = cuda::ContextGuard::save();
    check_stream(stream)?;
    let source = Source::of(obj)?;
    imported(obj.py(), source, stream)
}

/// A view over the memory that an object's `__cuda_array_interface__` (version 0 to 3)
/// describes, without copying; it keeps the object alive.
///
/// The interface is checked before any CUDA call: a malformed one (a missing or mistyped
/// entry, a negative or too large shape, strides that are not a multiple of the element size,
/// a type string that is not one of devspan's element types, a mask, no data pointer for a
/// non-empty array, stream 0) raises a subclass of `devspan.Error`; an object without the
/// attribute raises `TypeError`. The memory's device is the one the driver reports for its
/// address.
///
/// The interface's `stream`, when given, is where the producer may still have work queued on
/// the data: devspan's stream (`stream`; with none, the interface's stream itself, else the
/// current stream of the producer's framework, else the legacy default stream) waits for it,
/// and for the life of the view devspan's operations on it wait for the work queued on the
/// producer's stream and make that stream wait for them, as the interface asks of consumers.
#[pyfunction]
#[pyo3(signature = (obj, stream = None))]
fn from_cuda_array_interface(obj: &Bound<'_, PyAny>, stream: Option<i64>) -> PyResult<Py<Tensor>> {
    let _current = cuda::ContextGuard::save();
    check_stream(stream)?;
    let source = Source::cai(obj)?;
    imported(obj.py(), source, stream)
}

/// The tensor `source` is, or imports, as a new Python object.
fn imported(py: Python<'_>, source: Source<'_>, stream: Option<i64>) -> PyResult<Py<Tensor>> {
    let s = call_stream(&[&source], stream)?;
    match source.import_kept(s)? {
        Arg::Shared(t) => Ok(t.unbind()),
        Arg::Temporary(t) => Py::new(py, t),
    }
}

/// The Python value `value` as a `T`: integers and floats, converted as `T::from` would
/// (`devspan.NumericOverflowError` when out of range).
fn scalar<T: DeviceElement + num_traits::NumCast>(value: &Bound<'_, PyAny>) -> PyResult<T> {
    use devspan::foreign::{f64_to_bf16, f64_to_f16, i128_to_f64_round_odd};
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
    // A float (a `float` subclass too) is read as one at once: asking a float for an integer
    // first would raise, and catch, two exceptions per call.
    let as_float = |f: f64| -> Option<T> {
        if T::DTYPE.is_float() {
            float(f)
        } else {
            num_traits::NumCast::from(f)
        }
    };
    let out: Option<T> = if let Ok(f) = value.cast::<pyo3::types::PyFloat>() {
        as_float(f.value())
    } else if let Ok(i) = value.extract::<i64>() {
        int(i128::from(i))
    } else if let Ok(u) = value.extract::<u64>() {
        int(i128::from(u))
    } else if let Ok(f) = value.extract::<f64>() {
        as_float(f)
    } else {
        return Err(PyTypeError::new_err(format!(
            "fill value must be an int or a float, got {}",
            value.get_type().name()?
        )));
    };
    out.ok_or_else(|| {
        to_py(crate::exceptions::overflow(format!(
            "{} does not fit a {} element",
            value.repr().map(|r| r.to_string()).unwrap_or_default(),
            T::DTYPE
        )))
    })
}

/// Sets every element of `dst` to `value`, on `stream` (None: the current stream of the
/// framework that made `dst`, else the legacy default stream).
#[pyfunction]
#[pyo3(signature = (dst, value, stream = None))]
fn fill(dst: &Bound<'_, PyAny>, value: &Bound<'_, PyAny>, stream: Option<i64>) -> PyResult<()> {
    let _current = cuda::ContextGuard::save();
    check_stream(stream)?;
    let source = Source::of(dst)?;
    let stream = call_stream(&[&source], stream)?;
    let arg = source.import(stream, false)?;
    let t = arg.get();
    let s = cuda::stream(t.ctx(), stream)?;
    with_dtype!(t.dtype(), T => {
        let v: T = scalar::<T>(value)?;
        let mut view = t.view_mut::<T>().map_err(to_py)?;
        t.before(&s, true)?;
        let done = view.fill_on(&s, v).map_err(to_py);
        cuda::settle(done, || t.after(&s), || cuda::synchronize(&s))?;
    });
    Ok(())
}

/// Copies `src` into `dst` element by element on `stream`, converting the element type as
/// Rust's `as` does and broadcasting `src` to `dst`'s shape. With no stream: the current
/// stream of the framework that made `dst`, else of the one that made `src`, else the legacy
/// default stream.
///
/// `src` may live on another device than `dst`. The copy then runs on `stream`, a stream of
/// `dst`'s device (with none: the current stream of `dst`'s framework on that device, else the
/// legacy default stream), and `src` is taken on a stream of its own device (its framework's
/// current stream there, or its CUDA Array Interface's stream, else the legacy default stream):
/// `stream` waits for that stream first, and that stream waits for the copy afterwards, so that
/// later work on `src` follows the read. The destination's device reads the source directly
/// where the driver allows peer access (devspan enables it for the pair of devices, and grants
/// `dst`'s device access to a stream-ordered pool the source was allocated from); otherwise the
/// copy is staged through `cuMemcpyPeerAsync`. A copy between devices cannot be captured into a
/// CUDA graph (`devspan.StreamCaptureError`). A source whose device is not known before it is
/// taken (a capsule, a DLPack producer without `__dlpack_device__`) is taken with the call's
/// stream value, which must then be 0, 1 or 2 when it lives on another device than `dst`.
#[pyfunction]
#[pyo3(signature = (dst, src, stream = None))]
fn copy(dst: &Bound<'_, PyAny>, src: &Bound<'_, PyAny>, stream: Option<i64>) -> PyResult<()> {
    let _current = cuda::ContextGuard::save();
    check_stream(stream)?;
    let dsource = Source::of(dst)?;
    let ssource = Source::of_next(src, &dsource)?;
    let across = match dsource.device()? {
        Some(d) => ssource.device()?.is_some_and(|s| s != d),
        None => false,
    };
    let (stream, sstream) = if across {
        let s = call_stream(&[&dsource], stream)?;
        (s, ssource.preferred_stream()?.unwrap_or(1))
    } else {
        let s = call_stream(&[&dsource, &ssource], stream)?;
        (s, s)
    };
    // `dst` first: when it cannot be imported, `src` is never taken.
    let d = dsource.import(stream, false)?;
    // A source on another device is read on its own device's stream too.
    let sarg = ssource.import(sstream, across)?;
    let (dt, st) = (d.get(), sarg.get());
    let s = cuda::stream(dt.ctx(), stream)?;
    with_dtype!(dt.dtype(), T => {
        let mut dv = dt.view_mut::<T>().map_err(to_py)?;
        with_dtype!(st.dtype(), U => {
            let sv = st.view::<U>().map_err(to_py)?;
            ordered_cast(&s, dt, &mut dv, st, &sv, sstream)?;
        })
    });
    Ok(())
}

/// A new devspan tensor (standard layout) with the elements of `src` converted to `dtype`,
/// written on `stream` (None: the current stream of the framework that made `src`, else the
/// legacy default stream). Later calls on it with no stream follow `src`'s framework too.
///
/// `device` places the new tensor on another CUDA device than `src`'s; `stream` is then a
/// stream of that device (None: the current stream there of `src`'s framework, else the legacy
/// default stream), and `src` is read as `copy` reads a source on another device.
#[pyfunction]
#[pyo3(signature = (src, dtype, stream = None, device = None))]
fn cast(
    src: &Bound<'_, PyAny>,
    dtype: &Bound<'_, PyAny>,
    stream: Option<i64>,
    device: Option<usize>,
) -> PyResult<Py<Tensor>> {
    let _current = cuda::ContextGuard::save();
    check_stream(stream)?;
    let to = parse_dtype(dtype)?;
    let source = Source::of(src)?;
    let t = new_tensor(src.py(), source, Some(to), stream, device)?;
    Py::new(src.py(), t)
}

/// A new devspan tensor (standard layout) with the elements of `src`; always a copy, written
/// on `stream` and placed on `device` as in `cast`.
#[pyfunction]
#[pyo3(signature = (src, stream = None, device = None))]
fn to_contiguous(
    src: &Bound<'_, PyAny>,
    stream: Option<i64>,
    device: Option<usize>,
) -> PyResult<Py<Tensor>> {
    let _current = cuda::ContextGuard::save();
    check_stream(stream)?;
    let source = Source::of(src)?;
    let t = new_tensor(src.py(), source, None, stream, device)?;
    Py::new(src.py(), t)
}

/// `cast` / `to_contiguous` (`to` None: `source`'s element type) after the stream check.
fn new_tensor(
    py: Python<'_>,
    source: Source<'_>,
    to: Option<DType>,
    stream: Option<i64>,
    device: Option<usize>,
) -> PyResult<Tensor> {
    let home = match device {
        // A device that does not exist is refused before any framework is asked about it.
        Some(d) => {
            cuda::context(d)?;
            source.device()?
        }
        None => None,
    };
    let across = matches!((device, home), (Some(d), Some(h)) if d != h);
    let (call, taken) = match device {
        Some(d) if across => {
            let call = match (stream, source.framework()) {
                (Some(s), _) => s,
                (None, Some(f)) => f.current_stream(py, Some(d))?,
                (None, None) => 1,
            };
            (call, source.preferred_stream()?.unwrap_or(1))
        }
        _ => {
            let s = call_stream(&[&source], stream)?;
            (s, s)
        }
    };
    let a = source.import(taken, across)?;
    let st = a.get();
    converted(st, to.unwrap_or_else(|| st.dtype()), call, taken, device)
}

/// `dv.assign_cast(sv)` on `stream`, where `dv` views `dst` and `sv` views `src`: ordered after
/// the earlier work on both tensors, and recorded for later work even when the cast fails
/// (`cuda::settle`). `taken` is the stream value `src` was taken on: for a source on another
/// device than `dst`, that stream of the source's device then waits for the read, as it follows
/// a copy on one device, which runs on it.
fn ordered_cast<T: DeviceElement, U: DeviceElement>(
    stream: &Arc<CudaStream>,
    dst: &Tensor,
    dv: &mut DeviceViewMut<'_, T, IxDyn>,
    src: &Tensor,
    sv: &DeviceView<'_, U, IxDyn>,
    taken: i64,
) -> PyResult<()> {
    dst.before(stream, true)?;
    src.before(stream, false)?;
    let done = dv.assign_cast_on(stream, sv).map_err(to_py);
    let record = || {
        let read = src.after(stream);
        let written = dst.after(stream);
        let followed = if src.device() == dst.device() {
            Ok(())
        } else {
            cuda::stream(src.ctx(), taken)
                .and_then(|ss| ss.join(stream).map_err(|e| to_py(e.into())))
        };
        read.and(written).and(followed)
    };
    cuda::settle(done, record, || cuda::synchronize(stream))
}

/// A new tensor (standard layout) with the elements of `st` (taken on stream value `taken`)
/// converted to `to`, written on `stream`, following the framework `st` follows, on `device`
/// (None: `st`'s). The memory is allocated on (and freed on) the legacy default stream, which
/// outlives any stream a caller names.
fn converted(
    st: &Tensor,
    to: DType,
    stream: i64,
    taken: i64,
    device: Option<usize>,
) -> PyResult<Tensor> {
    let _current = cuda::ContextGuard::save();
    let ctx = match device {
        Some(d) if d != st.device() => cuda::context(d)?,
        _ => st.ctx().clone(),
    };
    let s = cuda::stream(&ctx, stream)?;
    let home = ctx.default_stream();
    with_dtype!(st.dtype(), U => {
        let sv = st.view::<U>().map_err(to_py)?;
        with_dtype!(to, T => {
            // SAFETY: `assign_cast` below writes every element before the tensor is returned;
            // on error the tensor is dropped unread.
            let array = unsafe { DeviceArray::<T, IxDyn>::uninit(&home, sv.dim()) }.map_err(to_py)?;
            // From here on the memory is freed after the work recorded on `out`, on any path.
            let out = Tensor::owned(array)?.following(st.framework());
            let mut ov = out.view_mut::<T>().map_err(to_py)?;
            ordered_cast(&s, &out, &mut ov, st, &sv, taken)?;
            Ok(out)
        })
    })
}
