//! The crate's error type.

use std::fmt;

use cudarc::driver::DriverError;

/// What went wrong, as a value a caller can match on.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// An element reachable through a layout lies outside the memory it views.
    OutOfBounds,
    /// A pointer, offset or length is not a multiple of what the element type needs.
    Misaligned,
    /// Two shapes that must agree do not, or a shape cannot be reached from another.
    ShapeMismatch,
    /// A shape product, stride product or byte offset does not fit in `isize`/`usize`.
    Overflow,
    /// A mutable view would reach one element through two indices, or a source and a
    /// destination overlap in a way the operation cannot handle.
    Aliasing,
    /// The layout cannot express the requested view without copying (reshape of a
    /// non-contiguous view, for example).
    IncompatibleLayout,
    /// An axis or index argument is outside the view's dimensions.
    InvalidAxis,
    /// The element type or a conversion between element types is not supported.
    UnsupportedDtype,
    /// Two operands live on different devices, or a stream belongs to another device.
    DeviceMismatch,
    /// No CUDA driver could be loaded or no CUDA device exists.
    NoDevice,
    /// A call into the CUDA driver failed.
    Driver(DriverError),
    /// Any other invalid argument (a zero step, an empty chunk size, ...).
    InvalidArgument,
}

/// The error type of every fallible devspan operation.
///
/// ```
/// use devspan::{ErrorKind, Layout};
/// let err = Layout::new_strided(ndarray::Ix2(4, 4), &[4, 1], 0, 8).unwrap_err();
/// assert_eq!(err.kind(), &ErrorKind::OutOfBounds);
/// println!("{err}");
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct Error {
    kind: ErrorKind,
    message: String,
}

/// `Result<T, devspan::Error>`.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// A new error of `kind` with a message that names the values involved.
    ///
    /// ```
    /// let e = devspan::Error::new(devspan::ErrorKind::InvalidArgument, "chunk size must be nonzero");
    /// assert_eq!(e.to_string(), "chunk size must be nonzero");
    /// ```
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Error {
            kind,
            message: message.into(),
        }
    }

    /// What went wrong.
    ///
    /// ```
    /// let e = devspan::Layout::contiguous(ndarray::Ix1(4)).reshape(5usize).unwrap_err();
    /// assert_eq!(e.kind(), &devspan::ErrorKind::ShapeMismatch);
    /// ```
    pub fn kind(&self) -> &ErrorKind {
        &self.kind
    }

    /// The human-readable description.
    ///
    /// ```
    /// let e = devspan::Layout::contiguous(ndarray::Ix1(4)).reshape(5usize).unwrap_err();
    /// assert!(e.message().contains("[4]"));
    /// ```
    pub fn message(&self) -> &str {
        &self.message
    }

    pub(crate) fn out_of_bounds(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::OutOfBounds, message)
    }
    pub(crate) fn misaligned(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Misaligned, message)
    }
    pub(crate) fn shape(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::ShapeMismatch, message)
    }
    pub(crate) fn overflow(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Overflow, message)
    }
    pub(crate) fn aliasing(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Aliasing, message)
    }
    pub(crate) fn axis(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::InvalidAxis, message)
    }
    pub(crate) fn invalid(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::InvalidArgument, message)
    }
    pub(crate) fn device_mismatch(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::DeviceMismatch, message)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            ErrorKind::Driver(e) => write!(f, "{} (CUDA driver: {e:?})", self.message),
            _ => f.write_str(&self.message),
        }
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Error({:?}: {})", self.kind, self.message)
    }
}

impl std::error::Error for Error {}

impl From<DriverError> for Error {
    fn from(e: DriverError) -> Self {
        Error {
            message: format!("CUDA driver call failed: {e}"),
            kind: ErrorKind::Driver(e),
        }
    }
}
