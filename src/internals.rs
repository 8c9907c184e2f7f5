//! Unstable items for devspan's own tests and benches, not covered by semver: present only
//! with the non-default feature `internals`.
//!
//! They steer the copy planner towards chosen kernels ([`Steer`]), override how many blocks
//! the permute kernels launch ([`GridOptions`]; both together: [`Tuning`], taken by
//! [`assign_cast_steered`]; fills: [`fill_steered`]), name the path that a copy, fill or transfer takes
//! ([`copy_path`], [`fill_path`], [`transfer_path`]) and list the embedded PTX
//! ([`ptx_modules`]). None of them changes what an operation writes, only which kernel writes
//! it and with how many blocks. [`inject`] arms a one-shot [`Fault`] at the driver boundary:
//! the chosen allocation or host <-> device copy returns the driver's error without calling the
//! driver; [`intercept`] runs a hook at every such call instead.
//! [`force_cross_device`] sends the calling thread's copies through the cross-device machinery
//! with a chosen [`CrossPath`], also for operands on one device.
//!
//! devspan's tests and benches turn the feature on through a dev-dependency of the crate on
//! itself, so that a plain `cargo test` builds them:
//!
//! ```toml
//! [dev-dependencies]
//! devspan = { path = ".", features = ["internals"] }
//! ```
//!
//! ```no_run
//! # fn main() -> devspan::Result<()> {
//! use devspan::DeviceArray;
//! use devspan::internals::{GridOptions, Steer, Tuning, assign_cast_steered, copy_path};
//!
//! let stream = devspan::default_stream(0)?;
//! let src = DeviceArray::<f32, _>::zeros(&stream, (256, 384))?;
//! let mut dst = DeviceArray::<f32, _>::zeros(&stream, (384, 256))?;
//! let (mut d, s) = (dst.view_mut(), src.t());
//! println!("assign_cast takes {}", copy_path(&mut d, &s));
//! // The transpose kernel wherever it applies, and permute kernels with at most 4 blocks.
//! let tuning = Tuning {
//!     steer: Steer::PreferTranspose,
//!     grid: GridOptions {
//!         max_grid: Some(4),
//!         ..GridOptions::default()
//!     },
//! };
//! let path = assign_cast_steered(&mut d, &stream, &s, tuning)?;
//! assert_eq!(path, "transpose");
//! // A `Steer` or a `GridOptions` alone is a `Tuning` too.
//! assign_cast_steered(&mut d, &stream, &s, Steer::NoWide)?;
//! # Ok(()) }
//! ```
//!
//! The path names and the PTX need no GPU:
//!
//! ```
//! use devspan::internals::{ptx_modules, transfer_path};
//!
//! // An upload from a column-major host array into a row-major device array: one block over
//! // the bus, then a device copy kernel from a temporary.
//! assert_eq!(transfer_path(&[64, 32], &[1, 64], &[32, 1], 4, true), "block/staged");
//! assert!(ptx_modules().iter().any(|&(name, _)| name == "copy_contig_b4"));
//! ```

use std::sync::Arc;

use cudarc::driver::CudaStream;
use ndarray::Dimension;

use crate::element::DeviceElement;
use crate::error::Result;
use crate::plan::{self, PlanOptions};
use crate::view::{DeviceView, DeviceViewMut};

/// One element converted between element types, as little-endian bytes: the host reference of
/// the cast kernels.
pub use crate::convert::convert_bytes;
pub use crate::driver::fault::{Call, Fault, FaultGuard, Intercept, inject, intercept};
/// The architectures machine code was embedded for at build time (empty without `ptxas`), with
/// the number of modules of each.
pub use crate::kernels::ptx::cubin_archs;
pub use crate::kernels::ptx::modules as ptx_modules;
pub use crate::peer::{CrossPath, ForcedPath, force as force_cross_device};
pub use crate::transfer::{DevicePath, transfer_path};
pub use devspan_kernels::abi::GridOptions;

/// The path the planner picks, with `opt`, for `assign_cast(src)` into `dst`.
fn planned_path<T: DeviceElement, U: DeviceElement, D: Dimension>(
    dst: &DeviceViewMut<'_, T, D>,
    src: &DeviceView<'_, U, D>,
    opt: PlanOptions,
) -> Result<String> {
    Ok(dst.copy_plan(src, opt)?.kernel_path().to_string())
}

/// How many copies (and [`copy_path`] queries) on the calling thread have run on a plan kept
/// from an earlier call with the same arguments (each thread keeps the plans of its last 16
/// copies of two axes or more that are not contiguous), for tests of that memo.
pub fn plans_found() -> u64 {
    crate::plan::plans_found()
}

/// The path `assign_cast(src)` into `dst` takes (for benchmarks and diagnostics).
pub fn copy_path<T: DeviceElement, U: DeviceElement, D: Dimension>(
    dst: &mut DeviceViewMut<'_, T, D>,
    src: &DeviceView<'_, U, D>,
) -> String {
    planned_path(dst, src, PlanOptions::default()).unwrap_or_else(|e| format!("error: {e}"))
}

/// The path `assign_cast(src)` into `dst` takes when `steer` steers the planner (what
/// [`assign_cast_steered`] would run), planned on the host alone.
pub fn copy_path_steered<T: DeviceElement, U: DeviceElement, D: Dimension>(
    dst: &DeviceViewMut<'_, T, D>,
    src: &DeviceView<'_, U, D>,
    steer: Steer,
) -> String {
    planned_path(dst, src, steer_options(steer)).unwrap_or_else(|e| format!("error: {e}"))
}

/// The planner's options under `steer`.
fn steer_options(steer: Steer) -> PlanOptions {
    PlanOptions {
        prefer_transpose: steer == Steer::PreferTranspose,
        no_packed: steer == Steer::NoPacking,
        no_packed128: steer == Steer::NoPacked128,
        no_wide: steer == Steer::NoWide,
        no_vec: steer == Steer::NoVec,
        no_tiled: steer == Steer::NoTiled,
        prefer_tiled: steer == Steer::PreferTiled,
        no_rows: steer == Steer::NoRows,
        prefer_gather: steer == Steer::PreferGather,
        prefer_scatter: steer == Steer::PreferScatter,
        short_rows: steer == Steer::ShiftedRows,
        shifted_rows: steer == Steer::ShiftedRows,
        ..PlanOptions::default()
    }
}

/// How [`assign_cast_steered`] steers the planner, for tests and benchmarks comparing kernels.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Steer {
    /// The planner's own choice.
    #[default]
    Default,
    /// The transpose kernels wherever they apply (by default the permute kernels take most of
    /// their cases).
    PreferTranspose,
    /// No packed permute kernels.
    NoPacking,
    /// No packed permute kernels with 128-slot tiles, word-packed or vector (64-slot ones
    /// only).
    NoPacked128,
    /// No wide permute kernels (the row kernels take their cases).
    NoWide,
    /// No vector permute kernel (the word-packed or transpose kernels take its cases).
    NoVec,
    /// The tiled kernels only where no other kernel takes the copy (more than eight axes
    /// after merging); by default they also take permutations that move a narrow axis.
    NoTiled,
    /// The tiled kernels wherever they apply.
    PreferTiled,
    /// No row kernels, plain, reversed or gathered (the permute, tiled or strided kernels
    /// take their cases).
    NoRows,
    /// The gathered rows for every copy or cast whose destination's fastest axis has stride 1,
    /// but contiguous ones (by default only casts of rows read backwards and of short runs read
    /// in reverse order, and copies of 1- and 2-byte elements of those that the reversed row
    /// kernels do not take).
    PreferGather,
    /// The scattered rows for every copy whose source has stride 1 along the destination's
    /// fastest axis, but contiguous ones (by default only copies of 4- and 8-byte elements in
    /// rows of 24 bytes or more from a source contiguous across the rows).
    PreferScatter,
    /// Copied rows off each other's 16-byte alignment on the shifted row kernel at any length
    /// of at least one vector group (by default only from 256 bytes on), and every other row
    /// that the row kernels take on them, whole vectors or not (by default short rows that are
    /// not whole vectors go to the gathered rows, the scattered rows, the tiled kernels or the
    /// strided kernel).
    ShiftedRows,
}

/// How [`assign_cast_steered`] runs a copy: which kernels the planner may pick, and how the
/// permute kernels' grids are sized. The default is what `assign_cast` does.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Tuning {
    /// Steering of the planner.
    pub steer: Steer,
    /// Overrides of the permute kernels' grids.
    pub grid: GridOptions,
}

impl From<Steer> for Tuning {
    fn from(steer: Steer) -> Self {
        Tuning {
            steer,
            ..Tuning::default()
        }
    }
}

impl From<GridOptions> for Tuning {
    fn from(grid: GridOptions) -> Self {
        Tuning {
            grid,
            ..Tuning::default()
        }
    }
}

/// `assign_cast` of `src` (same shape) into `dst` run as `tuning` says (a [`Tuning`], a
/// [`Steer`] or a [`GridOptions`]); returns the path taken.
pub fn assign_cast_steered<T: DeviceElement, U: DeviceElement, D: Dimension>(
    dst: &mut DeviceViewMut<'_, T, D>,
    stream: &Arc<CudaStream>,
    src: &DeviceView<'_, U, D>,
    tuning: impl Into<Tuning>,
) -> Result<String> {
    let Tuning { steer, grid } = tuning.into();
    let opt = steer_options(steer);
    let path = planned_path(dst, src, opt)?;
    // A narrow plan is a vector tiled plan that the tiled kernels run when told to.
    // A shifted one runs on the element-wise tiled kernels then.
    let path = match path.strip_prefix("narrow") {
        Some(rest) if grid.no_narrow => match rest.strip_prefix("_shifted") {
            Some(rest) => format!("tiled_e{rest}"),
            None => format!("tiled{rest}"),
        },
        _ => path,
    };
    dst.assign_cast_with(stream, src, opt, grid)?;
    Ok(path)
}

/// Which path [`fill_steered`] may take.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum FillSteer {
    /// The planner's own choice.
    #[default]
    Default,
    /// The kernels alone: no driver memset, 1-D or 2-D.
    KernelsOnly,
    /// No driver memset and no row kernel: the strided kernels (contiguous views still take
    /// the contiguous fill kernel).
    StridedOnly,
    /// The driver's 2-D memset for pitched rows of any length (by default only for rows of
    /// 8 KiB or more).
    AnyMemset2D,
}

/// `fill_on` of `dst` with `value` on the path that `steer` allows; returns the path taken.
pub fn fill_steered<T: DeviceElement, D: Dimension>(
    dst: &mut DeviceViewMut<'_, T, D>,
    stream: &Arc<CudaStream>,
    value: T,
    steer: FillSteer,
) -> Result<String> {
    let opt = PlanOptions {
        no_driver: matches!(steer, FillSteer::KernelsOnly | FillSteer::StridedOnly),
        no_rows: steer == FillSteer::StridedOnly,
        any_memset_2d: steer == FillSteer::AnyMemset2D,
        ..PlanOptions::default()
    };
    let path = plan::plan_fill(
        dst.device_ptr(),
        dst.shape(),
        dst.strides(),
        std::mem::size_of::<T>(),
        0,
        opt,
    )?
    .kernel_path()
    .to_string();
    dst.fill_with(stream, value, opt)?;
    Ok(path)
}

/// The path `fill` on `dst` takes.
pub fn fill_path<T: DeviceElement, D: Dimension>(dst: &DeviceViewMut<'_, T, D>) -> String {
    match plan::plan_fill(
        dst.device_ptr(),
        dst.shape(),
        dst.strides(),
        std::mem::size_of::<T>(),
        0,
        PlanOptions::default(),
    ) {
        Ok(p) => p.kernel_path().to_string(),
        Err(e) => format!("error: {e}"),
    }
}

/// The launch of the tiled kernel that a copy plans to, for checks that run the kernels
/// outside a GPU (a PTX interpreter).
#[derive(Clone, Debug)]
pub struct TiledLaunch {
    /// The kernel's module and entry point name (`copy_tiled_b4`, `cast_tiled_e_u8_f32`,
    /// `copy_split_c3_b1`, ...).
    pub kernel: String,
    /// The bytes of its parameter block (`TiledArgs`).
    pub params: Vec<u8>,
    /// Threads per block.
    pub threads: u32,
    /// Tiles (any grid is correct: the blocks loop over them).
    pub tiles: u32,
    /// The launches of the parts of the copy that no whole tile covers and that the tiled
    /// kernels take (their own rests' after each), in the order the plan runs them.
    pub rests: Vec<TiledLaunch>,
    /// The parts left to other kernels (at any depth of rests): 0 when this launch and
    /// [`rests`](Self::rests) cover the whole copy.
    pub untiled_rests: usize,
    /// Bytes of dynamic shared memory the launch gives (the pipelined kernels' tile buffers).
    pub dyn_smem: u32,
    /// The parameter block as the planner made it: which elements the launch covers.
    pub args: devspan_kernels::abi::TiledArgs,
}

/// The tiled launch of a copy of `shape` between raw operands (element zero at byte address
/// `dst` / `src`, strides in elements) with the tiled kernels preferred and tiles of at most
/// `max_volume` elements (0: the kernels' limit), with the kernel the launcher runs on a device
/// of compute capability 9.x; `None` when the copy does not take them.
#[allow(clippy::too_many_arguments)]
pub fn tiled_launch(
    dst: u64,
    dst_strides: &[isize],
    to: crate::DType,
    src: u64,
    src_strides: &[isize],
    from: crate::DType,
    shape: &[usize],
    max_volume: u32,
) -> Result<Option<TiledLaunch>> {
    let grid = GridOptions::default();
    tiled_launch_with(
        dst,
        dst_strides,
        to,
        src,
        src_strides,
        from,
        shape,
        max_volume,
        grid,
    )
}

/// [`tiled_launch`] with `grid`'s choices of kernel: with `no_narrow`, the tiled kernel that
/// runs the plan where a narrow kernel would (the same tiles); with `no_async`, the kernels
/// without `cp.async`.
#[allow(clippy::too_many_arguments)]
pub fn tiled_launch_with(
    dst: u64,
    dst_strides: &[isize],
    to: crate::DType,
    src: u64,
    src_strides: &[isize],
    from: crate::DType,
    shape: &[usize],
    max_volume: u32,
    grid: GridOptions,
) -> Result<Option<TiledLaunch>> {
    let opt = PlanOptions {
        prefer_tiled: true,
        tiled_volume: max_volume,
        ..PlanOptions::default()
    };
    let p = plan::plan_copy(dst, dst_strides, to, src, src_strides, from, shape, opt)?;
    Ok(launch_of(&p, grid))
}

impl TiledLaunch {
    /// Whether the plan leaves parts of the copy to other launches (tiled or not).
    pub fn has_rest(&self) -> bool {
        !self.rests.is_empty() || self.untiled_rests > 0
    }
}

/// The tiled launch of plan `p` with those of its rests, with `grid`'s choices of kernel, or
/// `None` for another kind of plan.
fn launch_of(p: &plan::Plan, grid: GridOptions) -> Option<TiledLaunch> {
    let plan::Plan::Tiled {
        args,
        rest,
        from,
        to,
    } = p
    else {
        return None;
    };
    // The kernel the launcher runs on sm_90, for the plan's element types (a cast that keeps
    // every bit is planned as a copy).
    let threads = crate::kernels::tiled_block(args, *from, *to, grid);
    let (kernel, dyn_smem) = crate::kernels::tiled_kernel(args, *from, *to, grid, 9);
    let kernel = kernel.module_name();
    let params = param_bytes(&**args);
    let mut rests = Vec::new();
    let mut untiled_rests = 0;
    for r in rest {
        match launch_of(r, grid) {
            Some(mut l) => {
                untiled_rests += l.untiled_rests;
                let inner = std::mem::take(&mut l.rests);
                rests.push(l);
                rests.extend(inner);
            }
            None => untiled_rests += 1,
        }
    }
    Some(TiledLaunch {
        kernel,
        params,
        threads,
        tiles: args.tiles,
        rests,
        untiled_rests,
        dyn_smem,
        args: **args,
    })
}

/// The launch of the reversed row kernel that a copy plans to, for checks that run it outside
/// a GPU (a PTX interpreter).
#[derive(Clone, Debug)]
pub struct RowsRevLaunch {
    /// The kernel's module and entry point name (`copy_rows_rev_b4`, `copy_rows_rev3_b1`,
    /// `copy_runs_rev2_b4`, ...).
    pub kernel: String,
    /// The bytes of its parameter block (`RowArgs`).
    pub params: Vec<u8>,
    /// Threads per block.
    pub threads: u32,
    /// The grid the launcher gives it (x, y).
    pub grid: (u32, u32),
    /// Its arguments.
    pub args: devspan_kernels::abi::RowArgs,
    /// The form of its rows.
    pub runs: devspan_kernels::abi::RowRuns,
    /// Bytes of the elements it moves (a run of smaller ones may move as one).
    pub elem_size: usize,
}

/// The launch of the reversed row kernel (`copy_rows_rev_bN`, `copy_runs_rev3_bN`, ...) for a copy
/// of `shape` of `dtype` between raw operands (element zero at byte address `dst` / `src`,
/// strides in elements); `None` when the copy plans to another kernel. Rows shorter than 256
/// bytes that are not whole vectors stay on the reversed row kernel here (`assign` gives them
/// to the gathered rows), and rows read forwards off each other's alignment take the shifted
/// row kernel (`copy_rows_shifted_bN`) at any length of a vector or more (`assign` only where
/// they are 256 bytes or more), so that small layouts check them.
pub fn rows_rev_launch(
    dst: u64,
    dst_strides: &[isize],
    src: u64,
    src_strides: &[isize],
    dtype: crate::DType,
    shape: &[usize],
) -> Result<Option<RowsRevLaunch>> {
    let opt = PlanOptions {
        short_rows: true,
        shifted_rows: true,
        ..PlanOptions::default()
    };
    let p = plan::plan_copy(dst, dst_strides, dtype, src, src_strides, dtype, shape, opt)?;
    let plan::Plan::RowsRev { args, elem, runs } = &p else {
        return Ok(None);
    };
    let kind = devspan_kernels::abi::Kind::of_row_runs(*runs);
    let kernel = devspan_kernels::abi::Kernel::copy(kind, *elem, *elem);
    let g = runs.grid_size(elem.size());
    let params = param_bytes(args);
    Ok(Some(RowsRevLaunch {
        kernel: kernel.module_name(),
        params,
        threads: kernel.block().0,
        grid: devspan_kernels::abi::row_grid(args, g, g),
        args: *args,
        runs: *runs,
        elem_size: elem.size(),
    }))
}

/// The bytes of a kernel's parameter block, as a launch passes them.
fn param_bytes<T: devspan_kernels::abi::ParamBlock>(args: &T) -> Vec<u8> {
    // SAFETY: a `ParamBlock` is `#[repr(C)]` integers with no implicit padding (its trait's
    // contract), so all of its `size_of::<T>()` bytes are initialised; the slice borrows
    // `args` for this statement.
    unsafe { std::slice::from_raw_parts((args as *const T) as *const u8, std::mem::size_of::<T>()) }
        .to_vec()
}

/// The launch of a row kernel (plain, gathered or scattered rows of a copy or cast, or the rows
/// of a fill) or of a one-axis strided kernel (grid y 1), for checks that run it outside a GPU
/// (a PTX interpreter).
#[derive(Clone, Debug)]
pub struct RowLaunch {
    /// The kernel's module and entry point name (`cast_rows_u8_f32`,
    /// `cast_rows_gather_u8_f32`, `copy_rows_gather_b1`, ...).
    pub kernel: String,
    /// The bytes of its parameter block (`RowArgs`, `RowGatherArgs`; for a fill, followed
    /// by the value's).
    pub params: Vec<u8>,
    /// Threads per block.
    pub threads: u32,
    /// The grid the launcher gives it (x, y).
    pub grid: (u32, u32),
}

impl RowLaunch {
    /// The launch of `kernel` with the parameter block `params` on `grid`, in the kernel's
    /// block.
    fn new(kernel: devspan_kernels::abi::Kernel, params: Vec<u8>, grid: (u32, u32)) -> Self {
        RowLaunch {
            kernel: kernel.module_name(),
            params,
            threads: kernel.block().0,
            grid,
        }
    }

    /// The launch of the one-axis strided `kernel` (a fill or a copy) for `args`: the
    /// launcher's grid over its elements, y 1.
    fn strided1(
        kernel: devspan_kernels::abi::Kernel,
        args: &devspan_kernels::abi::StridedArgs32,
    ) -> Self {
        let grid = devspan_kernels::abi::strided_grid(u64::from(args.n));
        RowLaunch::new(kernel, param_bytes(args), (grid, 1))
    }
}

/// The launch of the scattered row kernel (`copy_rows_scatter_bN`) for a copy of `shape` of
/// `dtype` between raw operands (element zero at byte address `dst` / `src`, strides in
/// elements), planned as [`Steer::PreferScatter`] steers it; `None` when it plans to another
/// kernel.
pub fn row_scatter_launch(
    dst: u64,
    dst_strides: &[isize],
    src: u64,
    src_strides: &[isize],
    dtype: crate::DType,
    shape: &[usize],
) -> Result<Option<RowLaunch>> {
    let opt = PlanOptions {
        prefer_scatter: true,
        ..PlanOptions::default()
    };
    let p = plan::plan_copy(dst, dst_strides, dtype, src, src_strides, dtype, shape, opt)?;
    Ok(match p {
        plan::Plan::RowsScatter { .. } => row_launch_of(&p),
        _ => None,
    })
}

/// The launch of the row kernel (`copy_rows_bN`, `cast_rows_S_D`) or the gathered row kernel
/// (`copy_rows_gather_bN`, `cast_rows_gather_S_D`) for a copy or cast of `shape` from `from`
/// to `to` between raw operands (element zero at byte address `dst` / `src`, strides in
/// elements), planned as `assign_cast` plans it or, with `prefer`, as
/// [`Steer::PreferGather`] steers it; `None` when it plans to another kernel. Rows that
/// `assign` takes elsewhere stay on the row kernel here (copied rows shorter than 256 bytes that
/// are not whole vectors, and copied rows off each other's alignment, which `assign` gives to
/// the gathered rows, the shifted row kernel or the strided kernel; rows of casts out of phase
/// or short, which it gives to the gathered rows or the strided kernel), so that small layouts
/// check it.
#[allow(clippy::too_many_arguments)]
pub fn row_launch(
    dst: u64,
    dst_strides: &[isize],
    to: crate::DType,
    src: u64,
    src_strides: &[isize],
    from: crate::DType,
    shape: &[usize],
    prefer: bool,
) -> Result<Option<RowLaunch>> {
    let opt = PlanOptions {
        prefer_gather: prefer,
        short_rows: true,
        ..PlanOptions::default()
    };
    let p = plan::plan_copy(dst, dst_strides, to, src, src_strides, from, shape, opt)?;
    Ok(match p {
        plan::Plan::Rows { .. } | plan::Plan::RowsGather { .. } => row_launch_of(&p),
        _ => None,
    })
}

/// The launch of the row fill kernel (`fill_rows_bN`) or of the one-axis strided fill kernel
/// (`fill_strided1_bN`) for a fill of `shape` of `size`-byte elements with the bits `bits` at a
/// raw destination (element zero at byte address `dst`, strides in elements), planned as
/// `fill` plans it; `None` when it plans to another path. Its `params` are the kernel's two
/// parameters as a launch lays them out: the argument block (`RowArgs`, `StridedArgs32`),
/// then the value's 8 bytes; the grid's y is 1 for the strided kernel.
pub fn fill_launch(
    dst: u64,
    dst_strides: &[isize],
    size: usize,
    shape: &[usize],
    bits: u64,
) -> Result<Option<RowLaunch>> {
    use devspan_kernels::abi::{Kernel, Kind, row_grid};
    let p = plan::plan_fill(dst, shape, dst_strides, size, bits, PlanOptions::default())?;
    let mut l = match p {
        plan::Plan::FillRows { args, size, .. } => RowLaunch::new(
            Kernel::fill(Kind::Rows, size),
            param_bytes(&args),
            row_grid(&args, size, size),
        ),
        plan::Plan::FillStrided32 { args, size, .. }
            if crate::kernels::strided32_kind(&args) == Kind::Strided1 =>
        {
            RowLaunch::strided1(Kernel::fill(Kind::Strided1, size), &args)
        }
        _ => return Ok(None),
    };
    l.params.resize(l.params.len().next_multiple_of(8), 0);
    l.params.extend_from_slice(&bits.to_le_bytes());
    Ok(Some(l))
}

/// The launch of the one-axis strided copy kernel (`copy_strided1_bN`) for a copy of `shape`
/// of `dtype` between raw operands (element zero at byte address `dst` / `src`, strides in
/// elements), planned as `assign` plans it; `None` when it plans to another path. The grid's
/// y is 1.
pub fn strided1_copy_launch(
    dst: u64,
    dst_strides: &[isize],
    src: u64,
    src_strides: &[isize],
    dtype: crate::DType,
    shape: &[usize],
) -> Result<Option<RowLaunch>> {
    use devspan_kernels::abi::{Kernel, Kind};
    let opt = PlanOptions::default();
    let p = plan::plan_copy(dst, dst_strides, dtype, src, src_strides, dtype, shape, opt)?;
    let plan::Plan::Strided32 { args, .. } = p else {
        return Ok(None);
    };
    if crate::kernels::strided32_kind(&args) != Kind::Strided1 {
        return Ok(None);
    }
    let kernel = Kernel::copy(Kind::Strided1, dtype, dtype);
    Ok(Some(RowLaunch::strided1(kernel, &args)))
}

/// The launch of a plan of the row kernel, the gathered or the scattered row kernel; `None`
/// for other plans.
fn row_launch_of(p: &plan::Plan) -> Option<RowLaunch> {
    use devspan_kernels::abi::{Kernel, Kind, gather_grid, row_grid};
    let (kernel, params, grid, from, to) = match p {
        plan::Plan::Rows { args, from, to } => (
            Kind::Rows,
            param_bytes(args),
            row_grid(args, from.size(), to.size()),
            from,
            to,
        ),
        plan::Plan::RowsGather { args, from, to } | plan::Plan::RowsScatter { args, from, to } => (
            if matches!(p, plan::Plan::RowsScatter { .. }) {
                Kind::RowsScatter
            } else {
                Kind::RowsGather
            },
            param_bytes(args),
            gather_grid(args, from.size(), to.size()),
            from,
            to,
        ),
        _ => return None,
    };
    let kernel = Kernel::copy(kernel, *from, *to);
    Some(RowLaunch::new(kernel, params, grid))
}
