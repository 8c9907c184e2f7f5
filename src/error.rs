//! The crate's error type.

use std::fmt;
use std::sync::OnceLock;

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
    /// A call into the CUDA driver failed; the error's `source()` is the driver's error.
    Driver(DriverError),
    /// Any other invalid argument (a zero step, an empty chunk size, ...).
    InvalidArgument,
    /// The stream is capturing a CUDA graph and the operation cannot be captured: it waits on
    /// the host (host transfers), allocates memory, or must follow earlier work on its memory
    /// that has not completed (see the crate docs, "Graph capture"). Nothing was enqueued and
    /// the capture is still usable.
    StreamCapture,
    /// A kernel compiled at run time (an [`ElementwiseKernel`](crate::elementwise::ElementwiseKernel))
    /// could not be built: NVRTC is missing, or it refused the source (the message holds its
    /// log).
    Compile,
    /// An NCCL call failed, or libnccl could not be loaded (feature `nccl`); the message holds
    /// NCCL's error string.
    Nccl,
}

/// The error type of every fallible devspan operation.
///
/// ```
/// use devspan::{ErrorKind, Layout};
/// let err = Layout::new_strided(ndarray::Ix2(4, 4), &[4, 1], 0, 8).unwrap_err();
/// assert_eq!(err.kind(), &ErrorKind::OutOfBounds);
/// println!("{err}");
/// ```
///
/// # How an error prints
///
/// Each cause is printed once, whichever way the error is reported:
///
/// - `Display` (`{err}`, `err.to_string()`) is devspan's own message: what went wrong, naming
///   the values involved (`CUDA driver call failed` for a [`DriverError`] converted by `?`). It
///   never includes the text of the error's [`source`](std::error::Error::source).
/// - [`source`](std::error::Error::source) is the [`DriverError`] for [`ErrorKind::Driver`] and
///   `None` for every other kind. Reporters that walk the chain (`anyhow`'s `{:#}` and
///   `{:?}`, a loop over `source()`) print the driver's error after devspan's message.
/// - The alternate form `{err:#}` is the whole chain on one line, `message: driver error`, like
///   `anyhow`'s `{:#}`: use it where only one string is kept (a log line, an exception). The
///   driver's error is written as its name and the driver's description of it,
///   `CUDA_ERROR_OUT_OF_MEMORY (out of memory)`.
/// - `Debug` shows the kind and the alternate form: `Error(Driver: allocating 4096 bytes:
///   CUDA_ERROR_OUT_OF_MEMORY (out of memory))`, `Error(ShapeMismatch: ...)`.
///
/// Errors without a source, [`ErrorKind::NoDevice`] among them, carry everything in the
/// message.
///
/// ```
/// use std::error::Error as _;
/// use devspan::cudarc::driver::{DriverError, sys::CUresult};
///
/// let driver = DriverError(CUresult::CUDA_ERROR_OUT_OF_MEMORY);
/// let err = devspan::Error::new(devspan::ErrorKind::Driver(driver), "allocating 4096 bytes");
/// assert_eq!(err.to_string(), "allocating 4096 bytes");
/// assert_eq!(err.source().unwrap().downcast_ref::<DriverError>(), Some(&driver));
/// // `{err:#}` is "allocating 4096 bytes: " followed by the driver's error, named once.
/// let line = format!("{err:#}");
/// assert!(line.starts_with("allocating 4096 bytes: CUDA_ERROR_OUT_OF_MEMORY"));
/// assert_eq!(line.matches("CUDA_ERROR_OUT_OF_MEMORY").count(), 1);
/// ```
///
/// `?` converts it into `Box<dyn std::error::Error + Send + Sync>` (and so into `anyhow` and
/// similar types), keeping the source:
///
/// ```
/// fn layout() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
///     devspan::Layout::contiguous(ndarray::Ix1(4)).reshape(5usize)?;
///     Ok(())
/// }
/// assert!(layout().unwrap_err().to_string().contains("[4]"));
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

    /// The human-readable description: what was being done and what went wrong, without the
    /// text of the [`source`](std::error::Error::source) (the `Display` form).
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
    pub(crate) fn capture(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::StreamCapture, message)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)?;
        match &self.kind {
            ErrorKind::Driver(e) if f.alternate() => write!(f, ": {}", DriverText(e)),
            _ => Ok(()),
        }
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            ErrorKind::Driver(e) => write!(f, "Error(Driver: {}: {})", self.message, DriverText(e)),
            kind => write!(f, "Error({kind:?}: {})", self.message),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.kind {
            ErrorKind::Driver(e) => Some(e),
            _ => None,
        }
    }
}

impl From<DriverError> for Error {
    fn from(e: DriverError) -> Self {
        Error {
            message: "CUDA driver call failed".into(),
            kind: ErrorKind::Driver(e),
        }
    }
}

/// A [`DriverError`] as its name followed by the driver's description of it,
/// `CUDA_ERROR_OUT_OF_MEMORY (out of memory)`, each once; the name alone when the driver library
/// cannot be loaded (only a `DriverError` built by hand meets that: the description comes from
/// the driver).
struct DriverText<'a>(&'a DriverError);

impl fmt::Display for DriverText<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        static DRIVER_PRESENT: OnceLock<bool> = OnceLock::new();
        write!(f, "{:?}", self.0.0)?;
        let present = *DRIVER_PRESENT.get_or_init(crate::driver::library_present);
        if present && let Ok(text) = self.0.error_string() {
            write!(f, " ({})", text.to_string_lossy())?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::error::Error as StdError;

    use cudarc::driver::sys::CUresult;

    use super::*;

    fn out_of_memory() -> DriverError {
        DriverError(CUresult::CUDA_ERROR_OUT_OF_MEMORY)
    }

    /// Whether cudarc can format a `DriverError`: it asks libcuda for the description.
    fn driver_present() -> bool {
        crate::driver::library_present()
    }

    /// Every link of the chain on its own line, as `Box<dyn Error>` reporters print it.
    fn chain(e: &(dyn StdError + 'static)) -> String {
        let mut out = e.to_string();
        let mut next = e.source();
        while let Some(cause) = next {
            out += &format!("\ncaused by: {cause}");
            next = cause.source();
        }
        out
    }

    #[test]
    fn the_source_of_a_driver_error_is_the_driver_error() {
        for e in [
            Error::from(out_of_memory()),
            Error::new(ErrorKind::Driver(out_of_memory()), "allocating 4096 bytes"),
        ] {
            let source = e.source().expect("a driver error has a source");
            assert_eq!(source.downcast_ref::<DriverError>(), Some(&out_of_memory()));
            assert!(source.source().is_none());
        }
    }

    #[test]
    fn display_leaves_the_driver_error_to_the_source() {
        let e = Error::new(ErrorKind::Driver(out_of_memory()), "allocating 4096 bytes");
        assert_eq!(e.to_string(), "allocating 4096 bytes");
        assert_eq!(e.to_string(), e.message());
        let plain = Error::from(out_of_memory()).to_string();
        assert_eq!(plain, "CUDA driver call failed");
        assert!(!plain.contains("CUDA_ERROR_OUT_OF_MEMORY"));
    }

    #[test]
    fn every_report_prints_the_driver_error_once() {
        let e = Error::new(ErrorKind::Driver(out_of_memory()), "allocating 4096 bytes");
        let name = "CUDA_ERROR_OUT_OF_MEMORY";
        let alternate = format!("{e:#}");
        let debug = format!("{e:?}");
        assert!(
            alternate.starts_with("allocating 4096 bytes: CUDA_ERROR_OUT_OF_MEMORY"),
            "{alternate}"
        );
        assert_eq!(alternate.matches(name).count(), 1, "{alternate}");
        assert_eq!(debug, format!("Error(Driver: {alternate})"));
        assert_eq!(debug.matches(name).count(), 1, "{debug}");
        // The driver's description comes from libcuda; without it only the name is printed,
        // and the chain is checked through its links: devspan's link names no driver error
        // and the next is the error.
        if driver_present() {
            let description = out_of_memory()
                .error_string()
                .expect("the driver describes its errors")
                .to_string_lossy()
                .into_owned();
            assert_eq!(
                alternate,
                format!("allocating 4096 bytes: {name} ({description})")
            );
            assert_eq!(debug.matches(&description).count(), 1, "{debug}");
            let driver = out_of_memory().to_string();
            let report = chain(&e);
            assert_eq!(report.matches(&driver).count(), 1, "{report}");
            assert_eq!(report.matches(name).count(), 1, "{report}");
            let boxed: Box<dyn StdError + Send + Sync> = e.clone().into();
            assert_eq!(chain(boxed.as_ref()), report);
        } else {
            assert_eq!(alternate, format!("allocating 4096 bytes: {name}"));
            println!("no libcuda: the driver cannot describe its errors, checking the links only");
        }
        let boxed: Box<dyn StdError + Send + Sync> = e.into();
        assert_eq!(boxed.to_string(), "allocating 4096 bytes");
        let cause = boxed.source().expect("the source survives boxing");
        assert_eq!(cause.downcast_ref::<DriverError>(), Some(&out_of_memory()));
        assert!(cause.source().is_none());
    }

    #[test]
    fn other_errors_have_no_source_and_print_their_message() {
        let e = Error::shape("shapes [2, 3] and [3, 2] differ");
        assert!(e.source().is_none());
        assert_eq!(e.to_string(), "shapes [2, 3] and [3, 2] differ");
        assert_eq!(format!("{e:#}"), e.to_string());
        assert_eq!(chain(&e), e.to_string());
        assert_eq!(
            format!("{e:?}"),
            "Error(ShapeMismatch: shapes [2, 3] and [3, 2] differ)"
        );
        let none = Error::new(ErrorKind::NoDevice, "no NVIDIA driver on this machine");
        assert!(none.source().is_none());
    }

    #[test]
    fn question_mark_converts_to_a_boxed_error() {
        fn fails() -> std::result::Result<(), Box<dyn StdError + Send + Sync>> {
            Err(Error::from(out_of_memory()))?;
            Ok(())
        }
        let e = fails().unwrap_err();
        let e = e.downcast::<Error>().expect("the devspan error is kept");
        assert_eq!(e.kind(), &ErrorKind::Driver(out_of_memory()));
    }
}
