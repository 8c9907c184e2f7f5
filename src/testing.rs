//! Helpers for kernel correctness tests: compare a device view with an ndarray reference.
//!
//! [`assert_close`] copies the device view back, compares element by element under a
//! [`Tolerance`] (absolute, relative, ULPs; NaN equal only when asked) and panics with a report
//! naming the first mismatching indices with both values, the maximum absolute and relative
//! error and the number of mismatches. [`check_close`] returns the same report as an `Err`.
//!
//! ```no_run
//! # fn main() -> devspan::Result<()> {
//! use devspan::testing::{assert_close, Tolerance};
//! use ndarray::Array2;
//! let stream = devspan::default_stream(0)?;
//! let host = Array2::from_shape_fn((8, 8), |(i, j)| (i as f32).sin() + j as f32);
//! let dev = devspan::DeviceArray::from_host(&stream, &host)?;
//! let t = dev.t().to_contiguous()?;
//! assert_close(&t, &host.t(), Tolerance::exact());
//! # Ok(()) }
//! ```

use std::fmt::Write as _;
use std::sync::Arc;

use cudarc::driver::CudaStream;
use half::{bf16, f16};
use ndarray::{ArrayBase, Data, Dimension};

use crate::element::DeviceElement;
use crate::view::{DeviceBase, SpanData};

/// How close two elements must be. An element pair passes if any enabled criterion accepts it.
///
/// ```
/// use devspan::testing::Tolerance;
/// let t = Tolerance::abs(1e-6).with_rel(1e-4).with_ulps(4).nan_equal();
/// assert!(t.accepts(1.0, 1.0 + 1e-7));
/// assert!(t.accepts(f64::NAN, f64::NAN));
/// assert!(!Tolerance::exact().accepts(f64::NAN, f64::NAN));
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Tolerance {
    /// Accept `|a - b| <= abs`.
    pub abs: f64,
    /// Accept `|a - b| <= rel * max(|a|, |b|)`.
    pub rel: f64,
    /// Accept floats at most this many units in the last place apart (of the element type).
    pub ulps: u32,
    /// Treat two NaNs as equal.
    pub nan_equal: bool,
}

impl Tolerance {
    /// Bit-for-bit equality of values (NaN never equal unless [`nan_equal`](Self::nan_equal)).
    ///
    /// ```
    /// assert!(devspan::testing::Tolerance::exact().accepts(2.0, 2.0));
    /// ```
    pub fn exact() -> Self {
        Tolerance {
            abs: 0.0,
            rel: 0.0,
            ulps: 0,
            nan_equal: false,
        }
    }
    /// An absolute tolerance.
    ///
    /// ```
    /// assert!(devspan::testing::Tolerance::abs(0.1).accepts(1.0, 1.05));
    /// ```
    pub fn abs(abs: f64) -> Self {
        Tolerance {
            abs,
            ..Self::exact()
        }
    }
    /// A relative tolerance.
    ///
    /// ```
    /// assert!(devspan::testing::Tolerance::rel(1e-3).accepts(1000.0, 1000.5));
    /// ```
    pub fn rel(rel: f64) -> Self {
        Tolerance {
            rel,
            ..Self::exact()
        }
    }
    /// A ULP tolerance.
    ///
    /// ```
    /// let one_up = f32::from_bits(1.0f32.to_bits() + 1);
    /// assert!(devspan::testing::Tolerance::ulps(1).accepts_f32(1.0, one_up));
    /// ```
    pub fn ulps(ulps: u32) -> Self {
        Tolerance {
            ulps,
            ..Self::exact()
        }
    }
    /// Adds an absolute criterion.
    ///
    /// ```
    /// let t = devspan::testing::Tolerance::rel(1e-6).with_abs(1e-9);
    /// assert!(t.accepts(0.0, 1e-10));
    /// ```
    pub fn with_abs(mut self, abs: f64) -> Self {
        self.abs = abs;
        self
    }
    /// Adds a relative criterion.
    ///
    /// ```
    /// let t = devspan::testing::Tolerance::abs(0.0).with_rel(0.5);
    /// assert!(t.accepts(2.0, 3.0));
    /// ```
    pub fn with_rel(mut self, rel: f64) -> Self {
        self.rel = rel;
        self
    }
    /// Adds a ULP criterion.
    ///
    /// ```
    /// let t = devspan::testing::Tolerance::abs(0.0).with_ulps(2);
    /// assert!(t.accepts(1.0, f64::from_bits(1.0f64.to_bits() + 2)));
    /// ```
    pub fn with_ulps(mut self, ulps: u32) -> Self {
        self.ulps = ulps;
        self
    }
    /// Treats NaN as equal to NaN.
    ///
    /// ```
    /// assert!(devspan::testing::Tolerance::exact().nan_equal().accepts(f64::NAN, f64::NAN));
    /// ```
    pub fn nan_equal(mut self) -> Self {
        self.nan_equal = true;
        self
    }

    /// Whether two `f64` values pass (ULPs counted in `f64`), through `approx`'s comparisons.
    ///
    /// ```
    /// assert!(!devspan::testing::Tolerance::abs(0.1).accepts(1.0, 1.2));
    /// ```
    pub fn accepts(&self, a: f64, b: f64) -> bool {
        if let Some(r) = self.nan_or_equal(a, b) {
            return r;
        }
        (self.abs > 0.0 && approx::abs_diff_eq!(a, b, epsilon = self.abs))
            || (self.rel > 0.0
                && approx::relative_eq!(a, b, epsilon = 0.0, max_relative = self.rel))
            || (self.ulps > 0 && approx::ulps_eq!(a, b, epsilon = 0.0, max_ulps = self.ulps))
    }

    /// Whether two `f32` values pass (ULPs counted in `f32`), through `approx`'s comparisons.
    ///
    /// ```
    /// assert!(devspan::testing::Tolerance::exact().accepts_f32(0.5, 0.5));
    /// ```
    pub fn accepts_f32(&self, a: f32, b: f32) -> bool {
        if let Some(r) = self.nan_or_equal(a as f64, b as f64) {
            return r;
        }
        (self.abs > 0.0 && approx::abs_diff_eq!(a as f64, b as f64, epsilon = self.abs))
            || (self.rel > 0.0
                && approx::relative_eq!(a as f64, b as f64, epsilon = 0.0, max_relative = self.rel))
            || (self.ulps > 0 && approx::ulps_eq!(a, b, epsilon = 0.0, max_ulps = self.ulps))
    }

    /// The verdict when either value is NaN or both are equal; `None` otherwise.
    fn nan_or_equal(&self, a: f64, b: f64) -> Option<bool> {
        if a.is_nan() || b.is_nan() {
            return Some(self.nan_equal && a.is_nan() && b.is_nan());
        }
        (a == b).then_some(true)
    }

    /// For 16-bit floats: value criteria in `f64`, ULPs counted on the 16-bit patterns.
    fn accepts_16(&self, a: f64, b: f64, ulps: u64) -> bool {
        if let Some(r) = self.nan_or_equal(a, b) {
            return r;
        }
        (self.abs > 0.0 && approx::abs_diff_eq!(a, b, epsilon = self.abs))
            || (self.rel > 0.0
                && approx::relative_eq!(a, b, epsilon = 0.0, max_relative = self.rel))
            || (self.ulps > 0 && ulps <= self.ulps as u64)
    }
}

fn ordered_16(bits: u16) -> i32 {
    let b = bits as i16;
    if b < 0 {
        i16::MIN as i32 - b as i32
    } else {
        b as i32
    }
}

/// An element type [`assert_close`] can compare.
pub trait CloseElement: DeviceElement {
    /// Whether `got` passes against `expected` under `tol`; integers compare exactly unless an
    /// absolute tolerance is given.
    fn close(got: Self, expected: Self, tol: &Tolerance) -> bool;
    /// The value as `f64`, for error statistics.
    fn as_f64(self) -> f64;
}

macro_rules! close_int {
    ($($t:ty),*) => {$(
        impl CloseElement for $t {
            fn close(got: Self, expected: Self, tol: &Tolerance) -> bool {
                got == expected || (tol.abs > 0.0 && (got as f64 - expected as f64).abs() <= tol.abs)
            }
            fn as_f64(self) -> f64 { self as f64 }
        }
    )*};
}
close_int!(u8, i8, u16, i16, u32, i32, u64, i64);

impl CloseElement for f32 {
    fn close(got: Self, expected: Self, tol: &Tolerance) -> bool {
        tol.accepts_f32(got, expected)
    }
    fn as_f64(self) -> f64 {
        self as f64
    }
}

impl CloseElement for f64 {
    fn close(got: Self, expected: Self, tol: &Tolerance) -> bool {
        tol.accepts(got, expected)
    }
    fn as_f64(self) -> f64 {
        self
    }
}

impl CloseElement for f16 {
    fn close(got: Self, expected: Self, tol: &Tolerance) -> bool {
        let ulps =
            (ordered_16(got.to_bits()) - ordered_16(expected.to_bits())).unsigned_abs() as u64;
        tol.accepts_16(got.to_f64(), expected.to_f64(), ulps)
    }
    fn as_f64(self) -> f64 {
        self.to_f64()
    }
}

impl CloseElement for bf16 {
    fn close(got: Self, expected: Self, tol: &Tolerance) -> bool {
        let ulps =
            (ordered_16(got.to_bits()) - ordered_16(expected.to_bits())).unsigned_abs() as u64;
        tol.accepts_16(got.to_f64(), expected.to_f64(), ulps)
    }
    fn as_f64(self) -> f64 {
        self.to_f64()
    }
}

/// The host reference of the cast kernels: `x` converted to `D` exactly as
/// [`assign_cast`](crate::DeviceBase::assign_cast) converts on the device: Rust's `as`, and
/// for `f16`/`bf16` the `half` crate's conversions, except that `f64 -> f16/bf16` rounds once,
/// correctly, where `half::f16::from_f64` may round twice (through `f32`, on CPUs with F16C) and
/// `half::bf16::from_f64` ignores the low bits of the `f64`.
///
/// ```
/// use devspan::testing::cast_reference;
/// assert_eq!(cast_reference::<f32, u8>(-3.7), 0);
/// assert_eq!(cast_reference::<f32, i8>(300.0), 127);
/// assert_eq!(cast_reference::<f64, i32>(f64::NAN), 0);
/// assert_eq!(cast_reference::<i32, half::f16>(70000), half::f16::INFINITY);
/// assert_eq!(cast_reference::<u16, i8>(0x1ff), -1);
/// ```
pub fn cast_reference<S: DeviceElement, D: DeviceElement>(x: S) -> D {
    let bytes = crate::convert::convert_bytes(S::DTYPE, D::DTYPE, bytemuck::bytes_of(&x));
    bytemuck::pod_read_unaligned(&bytes)
}

/// Compares two host arrays of the same shape; `Err(report)` on mismatch.
///
/// ```
/// use devspan::testing::{compare, Tolerance};
/// let a = ndarray::arr1(&[1.0f32, 2.0, 3.0]);
/// let b = ndarray::arr1(&[1.0f32, 2.5, 3.0]);
/// let report = compare(&a, &b.view(), Tolerance::abs(0.1)).unwrap_err();
/// assert!(report.contains("1 of 3 elements differ"));
/// assert!(report.contains("[1]"));
/// ```
pub fn compare<T: CloseElement, D: Dimension, S1: Data<Elem = T>, S2: Data<Elem = T>>(
    got: &ArrayBase<S1, D>,
    expected: &ArrayBase<S2, D>,
    tol: Tolerance,
) -> std::result::Result<(), String> {
    if got.shape() != expected.shape() {
        return Err(format!(
            "shape {:?} differs from the reference's {:?}",
            got.shape(),
            expected.shape()
        ));
    }
    let mut bad = 0usize;
    let mut first = String::new();
    let (mut max_abs, mut max_rel) = (0.0f64, 0.0f64);
    for ((idx, &g), &e) in got.indexed_iter().zip(expected.iter()) {
        if T::close(g, e, &tol) {
            continue;
        }
        bad += 1;
        let (a, b) = (g.as_f64(), e.as_f64());
        let d = (a - b).abs();
        if d.is_finite() {
            max_abs = max_abs.max(d);
            let m = a.abs().max(b.abs());
            if m > 0.0 {
                max_rel = max_rel.max(d / m);
            }
        }
        if bad <= 8 {
            let _ = writeln!(
                first,
                "  at {:?}: got {g}, expected {e}",
                ndarray::IntoDimension::into_dimension(idx).slice()
            );
        }
    }
    if bad == 0 {
        return Ok(());
    }
    Err(format!(
        "{bad} of {} elements differ (tolerance {tol:?}); max abs error {max_abs:e}, max rel error {max_rel:e}; first mismatches:\n{first}",
        got.len()
    ))
}

/// Copies `got` (an array or a view) back from the device on its own stream and compares it
/// with `expected` (any ndarray host array or view); `Err(report)` on mismatch (an `Err` from
/// the device copy is reported too).
///
/// ```no_run
/// # fn main() -> devspan::Result<()> {
/// use devspan::testing::{check_close, Tolerance};
/// let stream = devspan::default_stream(0)?;
/// let a = devspan::DeviceArray::<u8, _>::zeros(&stream, 4)?;
/// assert!(check_close(&a, &ndarray::arr1(&[0u8, 0, 0, 1]), Tolerance::exact()).is_err());
/// # Ok(()) }
/// ```
pub fn check_close<T: CloseElement, D: Dimension, X: SpanData<Elem = T>, S: Data<Elem = T>>(
    got: &DeviceBase<X, D>,
    expected: &ArrayBase<S, D>,
    tol: Tolerance,
) -> std::result::Result<(), String> {
    let host = got
        .to_host()
        .map_err(|e| format!("copying the device view back failed: {e:#}"))?;
    compare(&host, expected, tol)
}

/// [`check_close`] copying back on `stream`.
///
/// ```no_run
/// # fn main() -> devspan::Result<()> {
/// use devspan::testing::{check_close_on, Tolerance};
/// let stream = devspan::default_stream(0)?;
/// let a = devspan::DeviceArray::<u8, _>::zeros(&stream, 2)?;
/// assert!(check_close_on(&stream, &a.view(), &ndarray::arr1(&[0u8, 0]), Tolerance::exact()).is_ok());
/// # Ok(()) }
/// ```
pub fn check_close_on<T: CloseElement, D: Dimension, X: SpanData<Elem = T>, S: Data<Elem = T>>(
    stream: &Arc<CudaStream>,
    got: &DeviceBase<X, D>,
    expected: &ArrayBase<S, D>,
    tol: Tolerance,
) -> std::result::Result<(), String> {
    let host = got
        .to_host_on(stream)
        .map_err(|e| format!("copying the device view back failed: {e:#}"))?;
    compare(&host, expected, tol)
}

/// Panics with a report unless `got` (an array or a view, copied back on its own stream)
/// equals `expected` within `tol`.
///
/// ```no_run
/// # fn main() -> devspan::Result<()> {
/// use devspan::testing::{assert_close, Tolerance};
/// let stream = devspan::default_stream(0)?;
/// let mut a = devspan::DeviceArray::<f32, _>::zeros(&stream, 3)?;
/// a.fill(0.1)?;
/// assert_close(&a, &ndarray::arr1(&[0.1f32; 3]), Tolerance::ulps(1));
/// # Ok(()) }
/// ```
#[track_caller]
pub fn assert_close<T: CloseElement, D: Dimension, X: SpanData<Elem = T>, S: Data<Elem = T>>(
    got: &DeviceBase<X, D>,
    expected: &ArrayBase<S, D>,
    tol: Tolerance,
) {
    if let Err(report) = check_close(got, expected, tol) {
        panic!("device result differs from the reference: {report}");
    }
}

/// [`assert_close`] copying back on `stream`.
///
/// ```no_run
/// # fn main() -> devspan::Result<()> {
/// use devspan::testing::{assert_close_on, Tolerance};
/// let stream = devspan::default_stream(0)?;
/// let a = devspan::DeviceArray::<f32, _>::zeros(&stream, 3)?;
/// assert_close_on(&stream, &a, &ndarray::arr1(&[0.0f32; 3]), Tolerance::exact());
/// # Ok(()) }
/// ```
#[track_caller]
pub fn assert_close_on<T: CloseElement, D: Dimension, X: SpanData<Elem = T>, S: Data<Elem = T>>(
    stream: &Arc<CudaStream>,
    got: &DeviceBase<X, D>,
    expected: &ArrayBase<S, D>,
    tol: Tolerance,
) {
    if let Err(report) = check_close_on(stream, got, expected, tol) {
        panic!("device result differs from the reference: {report}");
    }
}

/// The stream GPU tests run on. Panics, naming the reason, when no GPU is usable: GPU tests are
/// marked `#[ignore]` so that a plain `cargo test` reports them as ignored, and when they are run
/// anyway (`--include-ignored`, as the GPU runner does with `DEVSPAN_REQUIRE_GPU=1`) without a
/// GPU they fail rather than pass.
///
/// ```no_run
/// #[test]
/// #[ignore = "needs a CUDA GPU"]
/// fn my_kernel_matches_ndarray() {
///     let stream = devspan::testing::gpu_stream();
///     // ... the test body ...
/// #   let _ = stream;
/// }
/// ```
#[track_caller]
pub fn gpu_stream() -> Arc<CudaStream> {
    match crate::new_stream(0) {
        Ok(s) => s,
        Err(e) => {
            let required = std::env::var("DEVSPAN_REQUIRE_GPU").is_ok_and(|v| v == "1");
            panic!(
                "this GPU test cannot run: {e}{}",
                if required {
                    " (DEVSPAN_REQUIRE_GPU=1)"
                } else {
                    "; run without --include-ignored to skip GPU tests"
                }
            );
        }
    }
}
