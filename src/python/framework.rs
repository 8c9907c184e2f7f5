//! The Python frameworks whose current stream devspan follows when a call names no stream.

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::PyTuple;

/// A framework that has a current CUDA stream per thread and device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Framework {
    /// PyTorch: `torch.cuda.current_stream(device).cuda_stream`.
    Torch,
    /// CuPy: `cupy.cuda.get_current_stream(device).ptr`.
    CuPy,
}

impl Framework {
    /// The framework whose package defines `obj`'s type or one of its base classes (the first
    /// in the method resolution order whose `__module__` is in package `torch` or `cupy`), if
    /// any. Nothing is imported: the module of a live object's class is already loaded.
    pub(crate) fn of(obj: &Bound<'_, PyAny>) -> Option<Framework> {
        let mro = obj.get_type().getattr("__mro__").ok()?;
        let mro = mro.cast::<PyTuple>().ok()?;
        mro.iter().find_map(|class| {
            let module: String = class.getattr("__module__").ok()?.extract().ok()?;
            match module.split('.').next() {
                Some("torch") => Some(Framework::Torch),
                Some("cupy") => Some(Framework::CuPy),
                _ => None,
            }
        })
    }

    /// The framework's current stream on the calling thread for CUDA device `device` (its
    /// current device when `None`), as a stream value: 0 for the legacy default stream, as
    /// both frameworks report it, 2 for the per-thread default stream, or a `CUstream` handle.
    pub(crate) fn current_stream(self, py: Python<'_>, device: Option<usize>) -> PyResult<i64> {
        match self {
            Framework::Torch => {
                let cuda = py.import("torch")?.getattr("cuda")?;
                let stream = match device {
                    Some(d) => cuda.call_method1("current_stream", (d,))?,
                    None => cuda.call_method0("current_stream")?,
                };
                stream.getattr("cuda_stream")?.extract()
            }
            Framework::CuPy => {
                let cuda = py.import("cupy")?.getattr("cuda")?;
                let stream = match device {
                    // Older CuPy releases take no device argument.
                    Some(d) => match cuda.call_method1("get_current_stream", (d,)) {
                        Err(e) if e.is_instance_of::<PyTypeError>(py) => {
                            cuda.call_method0("get_current_stream")?
                        }
                        r => r?,
                    },
                    None => cuda.call_method0("get_current_stream")?,
                };
                stream.getattr("ptr")?.extract()
            }
        }
    }
}
