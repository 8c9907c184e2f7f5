//! devspan's Python exceptions: `devspan.Error`, and one subclass of it per [`ErrorKind`].

use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;

use devspan::ErrorKind;

create_exception!(
    devspan,
    Error,
    PyException,
    "An error reported by devspan. Each kind of error has its own subclass \
     (devspan.ShapeMismatchError, devspan.NoDeviceError, ...)."
);

/// Declares one subclass of [`Error`] per line, and [`add_kinds`], which adds them all to a
/// module.
macro_rules! kind_exceptions {
    ($($name:ident: $doc:literal;)*) => {
        $(create_exception!(devspan, $name, Error, $doc);)*

        /// Adds every subclass of [`Error`] to `m`, under its own name.
        fn add_kinds(m: &Bound<'_, PyModule>) -> PyResult<()> {
            $(m.add(stringify!($name), m.py().get_type::<$name>())?;)*
            Ok(())
        }
    };
}

kind_exceptions! {
    OutOfBoundsError: "An element reachable through a layout lies outside the memory it views.";
    MisalignedError: "A pointer, offset or length is not a multiple of what the element type needs.";
    ShapeMismatchError: "Two shapes that must agree do not, or a shape cannot be reached from another.";
    NumericOverflowError: "A shape product, stride product, byte offset or fill value does not fit its type.";
    AliasingError: "A source and a destination overlap in a way the operation cannot handle, or a \
        writable view would reach one element through two indices.";
    IncompatibleLayoutError: "The layout cannot express the requested view without copying.";
    InvalidAxisError: "An axis or index argument is outside the view's dimensions.";
    UnsupportedDtypeError: "The element type or a conversion between element types is not supported.";
    DeviceMismatchError: "Two operands live on different devices, a stream belongs to another \
        device, or a tensor is not in memory a CUDA device can access.";
    NoDeviceError: "No CUDA driver could be loaded or no CUDA device exists.";
    DriverError: "A call into the CUDA driver failed; the message ends with the driver's error.";
    InvalidArgumentError: "Any other invalid argument (a write to a read-only tensor, for example).";
    StreamCaptureError: "The stream is capturing a CUDA graph and the operation cannot be captured; \
        nothing was enqueued and the capture is still usable.";
    CompileError: "A kernel compiled at run time could not be built: NVRTC is missing, or it \
        refused the source (the message holds its log).";
}

/// Adds `Error`, its subclasses and `DevspanError` (another name of `Error`) to `m`.
pub(crate) fn add(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let base = m.py().get_type::<Error>();
    m.add("Error", &base)?;
    m.add("DevspanError", base)?;
    add_kinds(m)
}

/// A devspan [`Error`](devspan::Error) as an instance of the subclass of `devspan.Error` for its
/// kind, with [`py_message`] as the message.
pub(crate) fn to_py(e: devspan::Error) -> PyErr {
    let message = py_message(&e);
    match e.kind() {
        ErrorKind::OutOfBounds => OutOfBoundsError::new_err(message),
        ErrorKind::Misaligned => MisalignedError::new_err(message),
        ErrorKind::ShapeMismatch => ShapeMismatchError::new_err(message),
        ErrorKind::Overflow => NumericOverflowError::new_err(message),
        ErrorKind::Aliasing => AliasingError::new_err(message),
        ErrorKind::IncompatibleLayout => IncompatibleLayoutError::new_err(message),
        ErrorKind::InvalidAxis => InvalidAxisError::new_err(message),
        ErrorKind::UnsupportedDtype => UnsupportedDtypeError::new_err(message),
        ErrorKind::DeviceMismatch => DeviceMismatchError::new_err(message),
        ErrorKind::NoDevice => NoDeviceError::new_err(message),
        ErrorKind::Driver(_) => DriverError::new_err(message),
        ErrorKind::InvalidArgument => InvalidArgumentError::new_err(message),
        ErrorKind::StreamCapture => StreamCaptureError::new_err(message),
        ErrorKind::Compile => CompileError::new_err(message),
        // A kind newer than this binding: the base class.
        _ => Error::new_err(message),
    }
}

/// The exception's message: devspan's message, then the driver's error if there is one
/// (`CUDA driver call failed: CUDA_ERROR_OUT_OF_MEMORY (out of memory)`).
pub(crate) fn py_message(e: &devspan::Error) -> String {
    format!("{e:#}")
}

/// A devspan error of kind `InvalidArgument`, for arguments the binding refuses itself.
pub(crate) fn invalid(message: impl Into<String>) -> devspan::Error {
    devspan::Error::new(ErrorKind::InvalidArgument, message)
}

/// A devspan error of kind `Misaligned`.
pub(crate) fn misaligned(message: impl Into<String>) -> devspan::Error {
    devspan::Error::new(ErrorKind::Misaligned, message)
}

/// A devspan error of kind `Overflow`.
pub(crate) fn overflow(message: impl Into<String>) -> devspan::Error {
    devspan::Error::new(ErrorKind::Overflow, message)
}

/// A devspan error of kind `DeviceMismatch`.
pub(crate) fn device_mismatch(message: impl Into<String>) -> devspan::Error {
    devspan::Error::new(ErrorKind::DeviceMismatch, message)
}

#[cfg(test)]
mod tests {
    use devspan::cudarc::driver::{DriverError, sys::CUresult};

    use super::*;

    fn kinds() -> Vec<ErrorKind> {
        vec![
            ErrorKind::OutOfBounds,
            ErrorKind::Misaligned,
            ErrorKind::ShapeMismatch,
            ErrorKind::Overflow,
            ErrorKind::Aliasing,
            ErrorKind::IncompatibleLayout,
            ErrorKind::InvalidAxis,
            ErrorKind::UnsupportedDtype,
            ErrorKind::DeviceMismatch,
            ErrorKind::NoDevice,
            ErrorKind::Driver(DriverError(CUresult::CUDA_ERROR_OUT_OF_MEMORY)),
            ErrorKind::InvalidArgument,
            ErrorKind::StreamCapture,
            ErrorKind::Compile,
        ]
    }

    #[test]
    fn exception_messages_carry_every_cause_once() {
        let e = devspan::Error::new(ErrorKind::UnsupportedDtype, "DLPack dtype code 9");
        assert_eq!(py_message(&e), "DLPack dtype code 9");
        let driver = DriverError(CUresult::CUDA_ERROR_OUT_OF_MEMORY);
        let m = py_message(&devspan::Error::from(driver));
        assert!(m.starts_with("CUDA driver call failed: "), "{m}");
        assert_eq!(m.matches("CUDA_ERROR_OUT_OF_MEMORY").count(), 1, "{m}");
    }

    #[test]
    fn each_kind_raises_its_own_subclass_of_error() {
        Python::initialize();
        Python::attach(|py| {
            let m = PyModule::new(py, "devspan").unwrap();
            add(&m).unwrap();
            let base = m.getattr("Error").unwrap();
            assert!(base.is(m.getattr("DevspanError").unwrap()));
            let mut seen = Vec::new();
            for kind in kinds() {
                let name = match &kind {
                    ErrorKind::Driver(_) => "DriverError".to_string(),
                    ErrorKind::Overflow => "NumericOverflowError".to_string(),
                    k => format!("{k:?}Error"),
                };
                let err = to_py(devspan::Error::new(kind, "message"));
                let class = m.getattr(name.as_str()).unwrap();
                assert!(err.get_type(py).is(&class), "{name}");
                assert!(err.is_instance(py, &base), "{name}");
                let text = err.value(py).to_string();
                if name == "DriverError" {
                    assert!(text.starts_with("message: "), "{text}");
                    assert!(text.contains("CUDA_ERROR_OUT_OF_MEMORY"), "{text}");
                } else {
                    assert_eq!(text, "message", "{name}");
                }
                seen.push(name);
            }
            seen.sort();
            seen.dedup();
            assert_eq!(seen.len(), kinds().len());
        });
    }
}
