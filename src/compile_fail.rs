//! What the borrow checker and the type system must keep refusing, as `compile_fail` doc tests.
//! Stable rustdoc does not check the error code named on each, so every refused snippet is
//! followed by a twin that differs only where the rule is kept and compiles (`no_run`): the
//! refused one fails for the reason named, not for a typo.
//!
//! Two live mutable views of one array (E0499):
//!
//! ```compile_fail,E0499
//! # fn f(stream: &std::sync::Arc<cudarc::driver::CudaStream>) -> devspan::Result<()> {
//! let mut a = devspan::DeviceArray::<f32, _>::zeros(stream, (4, 4))?;
//! let mut x = a.view_mut();
//! let mut y = a.view_mut();
//! x.fill(1.0)?;
//! y.fill(2.0)?;
//! # Ok(()) }
//! ```
//!
//! ```no_run
//! # fn f(stream: &std::sync::Arc<cudarc::driver::CudaStream>) -> devspan::Result<()> {
//! let mut a = devspan::DeviceArray::<f32, _>::zeros(stream, (4, 4))?;
//! let mut x = a.view_mut();
//! x.fill(1.0)?;
//! let mut y = a.view_mut();
//! y.fill(2.0)?;
//! # Ok(()) }
//! ```
//!
//! A mutable sub-view and its parent used together (E0499):
//!
//! ```compile_fail,E0499
//! # fn f(stream: &std::sync::Arc<cudarc::driver::CudaStream>) -> devspan::Result<()> {
//! use ndarray::s;
//! let mut a = devspan::DeviceArray::<f32, _>::zeros(stream, (4, 4))?;
//! let mut top = a.slice_mut(s![..2, ..]);
//! a.fill(0.0)?;
//! top.fill(1.0)?;
//! # Ok(()) }
//! ```
//!
//! ```no_run
//! # fn f(stream: &std::sync::Arc<cudarc::driver::CudaStream>) -> devspan::Result<()> {
//! use ndarray::s;
//! let mut a = devspan::DeviceArray::<f32, _>::zeros(stream, (4, 4))?;
//! a.fill(0.0)?;
//! let mut top = a.slice_mut(s![..2, ..]);
//! top.fill(1.0)?;
//! # Ok(()) }
//! ```
//!
//! Reading an array while a mutable view of it is live (E0502):
//!
//! ```compile_fail,E0502
//! # fn f(stream: &std::sync::Arc<cudarc::driver::CudaStream>) -> devspan::Result<()> {
//! let mut a = devspan::DeviceArray::<f32, _>::zeros(stream, 8)?;
//! let mut m = a.view_mut();
//! let _host = a.to_host()?;
//! m.fill(1.0)?;
//! # Ok(()) }
//! ```
//!
//! ```no_run
//! # fn f(stream: &std::sync::Arc<cudarc::driver::CudaStream>) -> devspan::Result<()> {
//! let mut a = devspan::DeviceArray::<f32, _>::zeros(stream, 8)?;
//! let mut m = a.view_mut();
//! m.fill(1.0)?;
//! let _host = a.to_host()?;
//! # Ok(()) }
//! ```
//!
//! Writing through a read-only view (E0599: `fill` needs writable storage):
//!
//! ```compile_fail,E0599
//! # fn f(stream: &std::sync::Arc<cudarc::driver::CudaStream>) -> devspan::Result<()> {
//! let a = devspan::DeviceArray::<f32, _>::zeros(stream, 8)?;
//! let mut v = a.view();
//! v.fill(1.0)?;
//! # Ok(()) }
//! ```
//!
//! ```no_run
//! # fn f(stream: &std::sync::Arc<cudarc::driver::CudaStream>) -> devspan::Result<()> {
//! let mut a = devspan::DeviceArray::<f32, _>::zeros(stream, 8)?;
//! let mut v = a.view_mut();
//! v.fill(1.0)?;
//! # Ok(()) }
//! ```
//!
//! Writing into an array held by shared reference (E0596):
//!
//! ```compile_fail,E0596
//! # fn f(a: &devspan::DeviceArray<f32, ndarray::Ix1>) -> devspan::Result<()> {
//! a.view_mut().fill(1.0)?;
//! # Ok(()) }
//! ```
//!
//! ```no_run
//! # fn f(a: &mut devspan::DeviceArray<f32, ndarray::Ix1>) -> devspan::Result<()> {
//! a.view_mut().fill(1.0)?;
//! # Ok(()) }
//! ```
//!
//! A view outliving its array (E0597):
//!
//! ```compile_fail,E0597
//! # fn f(stream: &std::sync::Arc<cudarc::driver::CudaStream>) -> devspan::Result<()> {
//! let v;
//! {
//!     let a = devspan::DeviceArray::<f32, _>::zeros(stream, 8)?;
//!     v = a.view();
//! }
//! let _ = v.to_host()?;
//! # Ok(()) }
//! ```
//!
//! ```no_run
//! # fn f(stream: &std::sync::Arc<cudarc::driver::CudaStream>) -> devspan::Result<()> {
//! let v;
//! let a = devspan::DeviceArray::<f32, _>::zeros(stream, 8)?;
//! {
//!     v = a.view();
//! }
//! let _ = v.to_host()?;
//! # Ok(()) }
//! ```
//!
//! Dropping an array while a view of it is live (E0505):
//!
//! ```compile_fail,E0505
//! # fn f(stream: &std::sync::Arc<cudarc::driver::CudaStream>) -> devspan::Result<()> {
//! let a = devspan::DeviceArray::<f32, _>::zeros(stream, 8)?;
//! let v = a.view();
//! drop(a);
//! let _ = v.to_host()?;
//! # Ok(()) }
//! ```
//!
//! ```no_run
//! # fn f(stream: &std::sync::Arc<cudarc::driver::CudaStream>) -> devspan::Result<()> {
//! let a = devspan::DeviceArray::<f32, _>::zeros(stream, 8)?;
//! let v = a.view();
//! let _ = v.to_host()?;
//! drop(a);
//! # Ok(()) }
//! ```
//!
//! A mutable view of a broadcast (E0599: a broadcast is read-only, it reaches elements
//! repeatedly):
//!
//! ```compile_fail,E0599
//! # fn f(stream: &std::sync::Arc<cudarc::driver::CudaStream>) -> devspan::Result<()> {
//! let a = devspan::DeviceArray::<f32, _>::zeros(stream, 4)?;
//! let mut b = a.broadcast((3, 4))?;
//! b.view_mut().fill(1.0)?;
//! # Ok(()) }
//! ```
//!
//! ```no_run
//! # fn f(stream: &std::sync::Arc<cudarc::driver::CudaStream>) -> devspan::Result<()> {
//! let a = devspan::DeviceArray::<f32, _>::zeros(stream, 4)?;
//! let b = a.broadcast((3, 4))?;
//! let _ = b.view().to_host()?;
//! # Ok(()) }
//! ```
//!
//! Splitting an owned array into two owners (E0599: `split_at` is for views):
//!
//! ```compile_fail,E0599
//! # fn f(stream: &std::sync::Arc<cudarc::driver::CudaStream>) -> devspan::Result<()> {
//! let a = devspan::DeviceArray::<f32, _>::zeros(stream, (4, 4))?;
//! let (_x, _y) = a.split_at(ndarray::Axis(0), 2);
//! # Ok(()) }
//! ```
//!
//! ```no_run
//! # fn f(stream: &std::sync::Arc<cudarc::driver::CudaStream>) -> devspan::Result<()> {
//! let a = devspan::DeviceArray::<f32, _>::zeros(stream, (4, 4))?;
//! let (_x, _y) = a.view().split_at(ndarray::Axis(0), 2);
//! # Ok(()) }
//! ```
//!
//! Sending a borrowed view to a thread that may outlive the array (E0597):
//!
//! ```compile_fail,E0597
//! # fn f(stream: &std::sync::Arc<cudarc::driver::CudaStream>) -> devspan::Result<()> {
//! let a = devspan::DeviceArray::<f32, _>::zeros(stream, 8)?;
//! let v = a.view();
//! std::thread::spawn(move || v.len());
//! # Ok(()) }
//! ```
//!
//! ```no_run
//! # fn f(stream: &std::sync::Arc<cudarc::driver::CudaStream>) -> devspan::Result<()> {
//! let a = devspan::DeviceArray::<f32, _>::zeros(stream, 8)?;
//! let v = a.view();
//! std::thread::scope(|s| {
//!     s.spawn(move || v.len());
//! });
//! # Ok(()) }
//! ```
//!
//! Assigning elements of another type without a cast (E0271):
//!
//! ```compile_fail,E0271
//! # fn f(stream: &std::sync::Arc<cudarc::driver::CudaStream>) -> devspan::Result<()> {
//! let src = devspan::DeviceArray::<f64, _>::zeros(stream, 4)?;
//! let mut dst = devspan::DeviceArray::<f32, _>::zeros(stream, 4)?;
//! dst.assign(&src)?;
//! # Ok(()) }
//! ```
//!
//! ```no_run
//! # fn f(stream: &std::sync::Arc<cudarc::driver::CudaStream>) -> devspan::Result<()> {
//! let src = devspan::DeviceArray::<f64, _>::zeros(stream, 4)?;
//! let mut dst = devspan::DeviceArray::<f32, _>::zeros(stream, 4)?;
//! dst.assign_cast(&src)?;
//! # Ok(()) }
//! ```
