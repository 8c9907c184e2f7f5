//! The `devspan` Python extension module: a thin shell around `devspan::python`.
//!
//! Build with `cargo build --release -p devspan-python` and copy
//! `libdevspan_python.so` to `devspan.abi3.so` somewhere on `sys.path` (`python/build.sh` does).

use pyo3::prelude::*;

/// devspan: strided views over CUDA tensors of any DLPack framework, with fill, copy, cast and
/// to_contiguous kernels.
#[pymodule]
#[pyo3(name = "devspan")]
fn devspan_module(m: &Bound<'_, PyModule>) -> PyResult<()> {
    devspan::python::register(m)
}
