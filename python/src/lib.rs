//! The `devspan._devspan` Python extension module: a thin shell around `devspan::python`,
//! re-exported by the pure-Python package `python/devspan/`.
//!
//! `pip install ./python` builds and installs the package (maturin). `python/build.sh` builds
//! the module with cargo alone and places it in `python/devspan/`, where the source package
//! imports it.

use pyo3::prelude::*;

/// devspan: strided views over CUDA tensors of any DLPack framework, with fill, copy, cast and
/// to_contiguous kernels.
#[pymodule]
#[pyo3(name = "_devspan")]
fn devspan_module(m: &Bound<'_, PyModule>) -> PyResult<()> {
    devspan::python::register(m)?;
    // The version of this crate, which is the version of the Python package.
    m.add("__version__", env!("CARGO_PKG_VERSION"))
}
