//! Module cache and launches: the only place besides `bytes.rs` that handles raw device
//! addresses. Modules are JIT-compiled by the driver from the embedded PTX on first use, once
//! per context, and cached.

mod param;
pub(crate) mod ptx;

use std::collections::HashMap;
use std::sync::Arc;

use cudarc::driver::{
    CudaContext, CudaFunction, CudaModule, CudaStream, LaunchConfig, PushKernelArg,
};
use devspan_kernels::abi::{
    DType, GridOptions, Kernel, Kind, NARROW_THREADS, Narrow, StridedArgs32, TiledArgs,
    contig_grid, fill_grid, gather_grid, narrow_grid, narrow_items, permute_grid, permute_kind,
    row_grid, strided_grid, tiled_async_max_smem_bytes, tiled_async_smem_bytes, tiled_e_wide,
    tiled_grid, tiled_kind, tiled_launch_kind, tiled_narrow, tiled_threads, transpose_grid_sized,
};

use crate::driver;
use crate::error::{Error, Result};
use crate::plan::Plan;
use param::Param;

/// The kernels loaded in one context (kept in its [`Runtime`](crate::driver::runtime::Runtime)).
#[derive(Default)]
pub(crate) struct Cache {
    /// The kernel of each loaded module (every module holds one kernel); the function holds
    /// its module, and so the context, alive.
    functions: HashMap<Kernel, CudaFunction>,
    /// Resident blocks per multiprocessor of a kernel at a block size and dynamic shared
    /// memory.
    occupancy: HashMap<(Kernel, u32, u32), u32>,
    /// The device's multiprocessor count and compute capability (major), once asked.
    device: Option<(u32, u32)>,
}

impl Cache {
    /// Kernel `k` in `ctx` (whose cache this is), loading its module on first use.
    fn function(&mut self, ctx: &Arc<CudaContext>, k: Kernel) -> Result<CudaFunction> {
        if let Some(f) = self.functions.get(&k) {
            return Ok(f.clone());
        }
        let name = k.module_name();
        // Loading a module is among the calls that the global and thread-local capture modes
        // forbid while a stream captures a graph; the first use of a kernel may happen inside
        // a capture.
        let f = {
            let _relaxed = crate::capture::RelaxedMode::enter()?;
            let f = load(ctx, &name)?.load_function(&name)?;
            if k.kind() == Kind::TiledA {
                // Its tile buffers are dynamic shared memory, up to 64 KiB of them: more than
                // the 48 KiB that a launch may take without the function's consent.
                f.set_attribute(
                    driver::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                    tiled_async_max_smem_bytes(k.sizes().1) as i32,
                )?;
            }
            f
        };
        self.functions.insert(k, f.clone());
        Ok(f)
    }

    /// How many blocks of kernel `k` (function `f`) a multiprocessor of the context's device
    /// keeps resident at `threads` threads per block and `smem` bytes of dynamic shared
    /// memory, as the driver computes it from the kernel's registers and shared memory; at
    /// least 1. Cached per kernel, block size and dynamic shared memory.
    fn blocks_per_sm(
        &mut self,
        k: Kernel,
        f: &CudaFunction,
        threads: u32,
        smem: u32,
    ) -> Result<u32> {
        let key = (k, threads, smem);
        if let Some(&n) = self.occupancy.get(&key) {
            return Ok(n);
        }
        let n = f
            .occupancy_max_active_blocks_per_multiprocessor(threads, smem as usize, None)?
            .max(1);
        self.occupancy.insert(key, n);
        Ok(n)
    }

    /// The multiprocessor count and compute capability (major) of the device of `ctx` (whose
    /// cache this is), asked of the driver once.
    fn device(&mut self, ctx: &CudaContext) -> Result<(u32, u32)> {
        if let Some(d) = self.device {
            return Ok(d);
        }
        let attr = |a| ctx.attribute(a);
        let sms = attr(driver::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?;
        let major = attr(driver::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?;
        let d = (sms.max(1) as u32, major.max(0) as u32);
        self.device = Some(d);
        Ok(d)
    }
}

/// Module `name` in `ctx`: its machine code for the device when that was compiled at build
/// time and the driver takes it, otherwise its PTX, JIT-compiled by the driver.
/// `DEVSPAN_PTX_ONLY=1` in the environment (read once) skips the machine code.
fn load(ctx: &Arc<CudaContext>, name: &str) -> Result<Arc<CudaModule>> {
    static PTX_ONLY: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    let ptx_only =
        *PTX_ONLY.get_or_init(|| std::env::var("DEVSPAN_PTX_ONLY").is_ok_and(|v| v == "1"));
    if !ptx_only
        && let Ok((major, minor)) = ctx.compute_capability()
        && let Some(bin) = ptx::module_cubin(name, major, minor)
        && let Ok(m) = ctx.load_module(cudarc::nvrtc::Ptx::from_binary(bin.to_vec()))
    {
        return Ok(m);
    }
    let text = ptx::module_ptx(name).ok_or_else(|| {
        Error::new(
            crate::ErrorKind::UnsupportedDtype,
            format!("no PTX module named {name}"),
        )
    })?;
    Ok(ctx.load_module(cudarc::nvrtc::Ptx::from_src(text))?)
}

/// Kernel `k` in `ctx`, loading its module on first use (cached in the context's runtime).
pub(crate) fn kernel(ctx: &Arc<CudaContext>, k: Kernel) -> Result<CudaFunction> {
    let rt = crate::driver::runtime::of(ctx);
    let mut c = crate::driver::runtime::lock(&rt.kernels);
    c.function(ctx, k)
}

/// The function of the kernel that `pick` names for the compute capability (major) of the
/// device of `ctx`, and how many of its blocks of `threads` threads the device keeps resident
/// (multiprocessors x [`Cache::blocks_per_sm`]), from one look at the context's runtime.
fn kernel_and_resident(
    ctx: &Arc<CudaContext>,
    threads: u32,
    pick: impl FnOnce(u32) -> Kernel,
) -> Result<(CudaFunction, u64)> {
    let (f, resident, _) = kernel_and_resident_smem(ctx, threads, |major| (pick(major), 0))?;
    Ok((f, resident))
}

/// [`kernel_and_resident`] for a kernel that takes dynamic shared memory: `pick` names the
/// kernel and its bytes of dynamic shared memory, which are returned with the function.
fn kernel_and_resident_smem(
    ctx: &Arc<CudaContext>,
    threads: u32,
    pick: impl FnOnce(u32) -> (Kernel, u32),
) -> Result<(CudaFunction, u64, u32)> {
    let rt = crate::driver::runtime::of(ctx);
    let mut c = crate::driver::runtime::lock(&rt.kernels);
    let (sms, major) = c.device(ctx)?;
    let (k, smem) = pick(major);
    let f = c.function(ctx, k)?;
    let per_sm = c.blocks_per_sm(k, &f, threads, smem)?;
    Ok((f, u64::from(sms) * u64::from(per_sm), smem))
}

/// The narrow kernel that runs the tiled plan `args` from `from` to `to` ([`tiled_narrow`]):
/// copies only, unless `grid` keeps the tiled kernels.
pub(crate) fn narrow_of(
    args: &TiledArgs,
    from: DType,
    to: DType,
    grid: GridOptions,
) -> Option<Narrow> {
    if !from.same_bits(to) || grid.no_narrow {
        return None;
    }
    tiled_narrow(args, from.size())
}

/// The threads of the block that runs the tiled plan `args` from `from` to `to` with `grid`'s
/// choices ([`tiled_kernel`]; on every device): [`NARROW_THREADS`] for a narrow kernel, else
/// [`tiled_threads`].
pub(crate) fn tiled_block(args: &TiledArgs, from: DType, to: DType, grid: GridOptions) -> u32 {
    if narrow_of(args, from, to, grid).is_some() {
        return NARROW_THREADS;
    }
    let vector = args.vector == 1;
    tiled_threads(u64::from(args.volume), vector, from.size(), to.size())
}

/// The kernel that runs the tiled plan `args` from `from` to `to` on a device of compute
/// capability `major`, with `grid`'s choices, in blocks of [`tiled_block`] threads: the narrow
/// kernel where one takes the plan ([`narrow_of`]), else the tiled kind that the launcher
/// picks ([`tiled_launch_kind`], or [`tiled_kind`] under `no_async`); with its bytes of
/// dynamic shared memory.
pub(crate) fn tiled_kernel(
    args: &TiledArgs,
    from: DType,
    to: DType,
    grid: GridOptions,
    major: u32,
) -> (Kernel, u32) {
    if let Some(narrow) = narrow_of(args, from, to, grid) {
        let k = Kernel::Narrow {
            size: from.size(),
            narrow,
        };
        return (k, 0);
    }
    let threads = tiled_block(args, from, to, grid);
    let kind = if grid.no_async {
        tiled_e_wide(tiled_kind(args), threads, from, to)
    } else {
        tiled_launch_kind(args, from, to, threads, major)
    };
    let smem = if kind == Kind::TiledA {
        tiled_async_smem_bytes(u64::from(args.volume), to.size()) as u32
    } else {
        0
    };
    (Kernel::copy(kind, from, to), smem)
}

/// The strided kind that runs `args`: [`Kind::Strided1`] for one axis, else
/// [`Kind::Strided32`].
pub(crate) fn strided32_kind(args: &StridedArgs32) -> Kind {
    if args.rank == 1 {
        Kind::Strided1
    } else {
        Kind::Strided32
    }
}

/// The launch configuration of kernel `k` with grid `grid` (at least one block on each
/// axis) and no dynamic shared memory.
fn config(k: Kernel, (gx, gy, gz): (u32, u32, u32)) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (gx.max(1), gy.max(1), gz.max(1)),
        block_dim: k.block(),
        shared_mem_bytes: 0,
    }
}

/// Enqueues `plan` on `stream`, sizing permute kernels' grids by [`permute_grid`] with the
/// overrides in `grid`.
///
/// # Safety
/// Every address in `plan` must come from [`crate::plan`] applied to layouts validated against
/// live allocations (so that every element the plan touches is in bounds), those allocations
/// must stay alive until the work completes, and no other work may access the written elements
/// concurrently.
pub(crate) unsafe fn execute(plan: &Plan, stream: &CudaStream, grid: GridOptions) -> Result<()> {
    stream.context().bind_to_thread()?;
    let cs = stream.cu_stream();
    match plan {
        Plan::Nothing => Ok(()),
        Plan::Memset { dst, n, size, bits } => {
            // SAFETY: `dst..dst + n * size` lies in a live allocation (function contract) of the
            // context bound above, whose stream `cs` is.
            unsafe { driver::memset(*dst, *bits, *n, *size, cs) }
        }
        Plan::Memset2D {
            dst,
            pitch,
            width,
            height,
            size,
            bits,
        } => {
            // SAFETY: every row lies in a live allocation (function contract) of the context
            // bound above, whose stream `cs` is. (`dst` is element-aligned as every typed
            // span's elements are, and `pitch` a whole number of elements; the driver rejects
            // misaligned ones with an error.)
            unsafe { driver::memset_2d(*dst, *pitch, *bits, *width, *height, *size, cs) }
        }
        Plan::Memcpy { dst, src, bytes } => {
            // SAFETY: both ranges lie in live allocations and do not overlap (contract).
            unsafe { driver::copy_dtod(*dst, *src, *bytes, cs) }
        }
        Plan::FillContig {
            dst,
            n,
            head,
            size,
            bits,
        } => {
            let k = Kernel::fill(Kind::Contig, *size);
            let f = kernel(stream.context(), k)?;
            let cfg = config(k, (fill_grid(*n, *head, *size), 1, 1));
            let mut b = stream.launch_builder(&f);
            b.arg(dst).arg(n).arg(head).arg(bits);
            // SAFETY: the kernel writes elements `0..n` from `dst`, in bounds (contract); the
            // argument types match the kernel's parameter list.
            unsafe { b.launch(cfg)? };
            Ok(())
        }
        Plan::FillStrided32 { args, size, bits } => {
            let k = Kernel::fill(strided32_kind(args), *size);
            let f = kernel(stream.context(), k)?;
            let args = Param(*args);
            let mut b = stream.launch_builder(&f);
            b.arg(&args).arg(bits);
            // SAFETY: every offset the arguments describe is in bounds (contract).
            unsafe { b.launch(config(k, (strided_grid(u64::from(args.0.n)), 1, 1)))? };
            Ok(())
        }
        Plan::FillStrided64 { args, size, bits } => {
            let k = Kernel::fill(Kind::Strided64, *size);
            let f = kernel(stream.context(), k)?;
            let args = Param(*args);
            let mut b = stream.launch_builder(&f);
            b.arg(&args).arg(bits);
            // SAFETY: every offset the arguments describe is in bounds (contract).
            unsafe { b.launch(config(k, (strided_grid(args.0.n), 1, 1)))? };
            Ok(())
        }
        Plan::FillRows { args, size, bits } => {
            let k = Kernel::fill(Kind::Rows, *size);
            let f = kernel(stream.context(), k)?;
            let (gx, gy) = row_grid(args, *size, *size);
            let args = Param(*args);
            let mut b = stream.launch_builder(&f);
            b.arg(&args).arg(bits);
            // SAFETY: every element of every row the arguments describe is in bounds of the
            // destination (contract); the kernel reads no source. `RowArgs` and the value's
            // bits are the kernel's parameters.
            unsafe { b.launch(config(k, (gx, gy, 1)))? };
            Ok(())
        }
        Plan::Contig {
            dst,
            src,
            n,
            head,
            from,
            to,
        } => {
            let k = Kernel::copy(Kind::Contig, *from, *to);
            let f = kernel(stream.context(), k)?;
            let cfg = config(k, (contig_grid(*n, *head, from.size(), to.size()), 1, 1));
            let mut b = stream.launch_builder(&f);
            b.arg(dst).arg(src).arg(n).arg(head);
            // SAFETY: elements `0..n` from `dst` and `src` are in bounds and disjoint (contract).
            unsafe { b.launch(cfg)? };
            Ok(())
        }
        Plan::Strided32 { args, from, to } => {
            // One axis: the one-axis kernel, which exists for copies (casts take the general
            // kernel).
            let kind = if from.same_bits(*to) {
                strided32_kind(args)
            } else {
                Kind::Strided32
            };
            let k = Kernel::copy(kind, *from, *to);
            let f = kernel(stream.context(), k)?;
            let args = Param(*args);
            let mut b = stream.launch_builder(&f);
            b.arg(&args);
            // SAFETY: every offset the arguments describe is in bounds (contract).
            unsafe { b.launch(config(k, (strided_grid(u64::from(args.0.n)), 1, 1)))? };
            Ok(())
        }
        Plan::Strided64 { args, from, to } => {
            let k = Kernel::copy(Kind::Strided64, *from, *to);
            let f = kernel(stream.context(), k)?;
            let args = Param(*args);
            let mut b = stream.launch_builder(&f);
            b.arg(&args);
            // SAFETY: every offset the arguments describe is in bounds (contract).
            unsafe { b.launch(config(k, (strided_grid(args.0.n), 1, 1)))? };
            Ok(())
        }
        Plan::Transpose { args, from, to } => {
            let k = Kernel::copy(Kind::Transpose, *from, *to);
            let f = kernel(stream.context(), k)?;
            let grid =
                transpose_grid_sized(args.rows, args.cols, args.batch, from.size(), to.size());
            let args = Param(*args);
            let mut b = stream.launch_builder(&f);
            b.arg(&args);
            // SAFETY: every offset the arguments describe is in bounds (contract).
            unsafe { b.launch(config(k, grid))? };
            Ok(())
        }
        Plan::Permute { args, from, to } => {
            let k = Kernel::copy(permute_kind(args), *from, *to);
            let (bx, by, bz) = k.block();
            let (f, resident) = kernel_and_resident(stream.context(), bx * by * bz, |_| k)?;
            let blocks = permute_grid(args.tiles, resident, args.tiles_per_block(), grid);
            let args = Param(*args);
            let mut b = stream.launch_builder(&f);
            b.arg(&args);
            // SAFETY: every element the tiles cover is in bounds of both operands (contract);
            // the kernel takes exactly one `PermuteArgs` block.
            unsafe { b.launch(config(k, (blocks, 1, 1)))? };
            Ok(())
        }
        Plan::Tiled {
            args,
            from,
            to,
            rest,
        } => {
            let threads = tiled_block(args, *from, *to, grid);
            let mut kernel = None;
            let (f, resident, smem) =
                kernel_and_resident_smem(stream.context(), threads, |major| {
                    let (k, smem) = tiled_kernel(args, *from, *to, grid, major);
                    kernel = Some(k);
                    (k, smem)
                })?;
            let blocks = match kernel {
                Some(Kernel::Narrow { size, narrow }) => {
                    narrow_grid(narrow_items(args, size, narrow), resident)
                }
                _ => tiled_grid(u64::from(args.tiles), resident),
            };
            let cfg = LaunchConfig {
                grid_dim: (blocks.max(1), 1, 1),
                block_dim: (threads, 1, 1),
                shared_mem_bytes: smem,
            };
            let p = Param(**args);
            let mut b = stream.launch_builder(&f);
            b.arg(&p);
            // SAFETY: every element of every tile is in bounds of both operands (contract);
            // the kernel takes exactly one `TiledArgs` block: the tiled kernels with any block
            // of at most `tiled_max_threads` threads that covers the tile (`TiledEW`, which
            // `tiled_e_wide` picks for element-wise copies in larger blocks: at most
            // `TILED_WIDE_THREADS`; `TiledA` with the
            // dynamic shared memory of its buffers for that tile; tiles of shifted vectors on
            // the element-wise kernels), the narrow kernels with `NARROW_THREADS` and a tile
            // that `tiled_narrow` accepted (its two axes, 16-byte aligned addresses on the
            // interleaved side). A shifted join also reads the 16-byte block after the one
            // that holds each plane vector's first byte: its plan (`shifted_narrow`) leaves at
            // least 16 bytes of the source above every vector, so that block lies in the
            // source's allocation, and the block below lies in it too, allocations starting
            // 16-byte aligned. A shifted split writes only the destination's elements.
            unsafe { b.launch(cfg)? };
            for p in rest {
                // SAFETY: the rest's plans cover parts of the same operands (contract).
                unsafe { execute(p, stream, grid)? };
            }
            Ok(())
        }
        Plan::StridedN { args, from, to } => {
            let k = Kernel::copy(Kind::StridedN, *from, *to);
            let f = kernel(stream.context(), k)?;
            let p = Param(**args);
            let mut b = stream.launch_builder(&f);
            b.arg(&p);
            // SAFETY: every offset the arguments describe is in bounds (contract).
            unsafe { b.launch(config(k, (strided_grid(args.n), 1, 1)))? };
            Ok(())
        }
        Plan::FillStridedN { args, size, bits } => {
            let k = Kernel::fill(Kind::StridedN, *size);
            let f = kernel(stream.context(), k)?;
            let p = Param(**args);
            let mut b = stream.launch_builder(&f);
            b.arg(&p).arg(bits);
            // SAFETY: every offset the arguments describe is in bounds (contract).
            unsafe { b.launch(config(k, (strided_grid(args.n), 1, 1)))? };
            Ok(())
        }
        Plan::Rows { args, from, to } => {
            let k = Kernel::copy(Kind::Rows, *from, *to);
            let f = kernel(stream.context(), k)?;
            let (gx, gy) = row_grid(args, from.size(), to.size());
            let args = Param(*args);
            let mut b = stream.launch_builder(&f);
            b.arg(&args);
            // SAFETY: every element of every row the arguments describe is in bounds and the
            // two operands are disjoint (contract); `RowArgs` is the kernel's parameter block.
            unsafe { b.launch(config(k, (gx, gy, 1)))? };
            Ok(())
        }
        Plan::RowsGather { args, from, to } | Plan::RowsScatter { args, from, to } => {
            let kind = if matches!(plan, Plan::RowsScatter { .. }) {
                Kind::RowsScatter
            } else {
                Kind::RowsGather
            };
            let k = Kernel::copy(kind, *from, *to);
            let f = kernel(stream.context(), k)?;
            let (gx, gy) = gather_grid(args, from.size(), to.size());
            let args = Param(*args);
            let mut b = stream.launch_builder(&f);
            b.arg(&args);
            // SAFETY: every element of every row the arguments describe (element `i` of a row
            // at the offset `RowGatherArgs::element_offset(i)` from the row's, in the source
            // for the gathered rows, in the destination for the scattered ones) is in bounds
            // and the two operands are disjoint (contract); the kernel accesses exactly those
            // elements and the other side's contiguous row; `RowGatherArgs` is its parameter
            // block.
            unsafe { b.launch(config(k, (gx, gy, 1)))? };
            Ok(())
        }
        Plan::RowsRev { args, elem, runs } => {
            let k = Kernel::copy(Kind::of_row_runs(*runs), *elem, *elem);
            let f = kernel(stream.context(), k)?;
            let g = runs.grid_size(elem.size());
            let (gx, gy) = row_grid(args, g, g);
            let args = Param(*args);
            let mut b = stream.launch_builder(&f);
            b.arg(&args);
            // SAFETY: every element of every row the arguments describe (run `i` of a row at
            // `src - run * i` or `src + run * i` in the source) is in bounds and the two
            // operands are disjoint (contract); the kernel reads aligned 16-byte source blocks
            // inside the row: those of a group's bytes where they line up, else one more that
            // cover them (`row_rev_head`: a group more at the row's head and one fewer at its
            // end keep every block between the row's lowest byte and its top); `RowArgs` is
            // its parameter block.
            unsafe { b.launch(config(k, (gx, gy, 1)))? };
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use devspan_kernels::abi::{DType, FILL_ROWS_MAX_SIZE, RowRuns};

    /// Every kernel exists, by name, in the module the launcher loads for it, with the block
    /// shape the launcher gives it (`.reqntid`); every module is a kernel.
    #[test]
    fn every_kernel_is_embedded() {
        let all = Kernel::all();
        for k in &all {
            let name = k.module_name();
            let text = ptx::module_ptx(&name).unwrap_or_else(|| panic!("no module {name}"));
            assert!(text.contains(&format!(".visible .entry {name}(")), "{name}");
            let (bx, by, bz) = k.block();
            let directive = if matches!(
                k.kind(),
                Kind::Tiled | Kind::TiledE | Kind::TiledEW | Kind::TiledA | Kind::Narrow
            ) {
                "maxntid"
            } else {
                "reqntid"
            };
            assert!(
                text.contains(&format!(".{directive} {bx}, {by}, {bz}\n")),
                "{name}: block ({bx}, {by}, {bz}) is not the one its PTX requires"
            );
        }
        assert_eq!(ptx::modules().len(), all.len());
    }

    /// The launcher's kernels for every plan's element types exist.
    #[test]
    fn every_requested_kernel_exists() {
        for size in [1, 2, 4, 8] {
            for kind in Kind::FILL {
                let rows_too_wide = kind == Kind::Rows && size > FILL_ROWS_MAX_SIZE;
                assert_eq!(Kernel::fill(kind, size).exists(), !rows_too_wide);
            }
        }
        for from in DType::ALL {
            for to in DType::ALL {
                for kind in Kind::ELEMENTWISE {
                    assert!(Kernel::copy(kind, from, to).exists());
                }
                // The one-axis strided kernel of copies (the launcher's choice for copies of
                // one bit type).
                let one = Kernel::copy(Kind::Strided1, from, to);
                assert_eq!(one.exists(), from.same_bits(to), "{one:?}");
            }
            // The reversed rows copy every element type (the plans name their bit type).
            for runs in RowRuns::ALL {
                let k = Kernel::copy(Kind::of_row_runs(runs), from, from);
                assert_eq!(k.exists(), runs.exists(from.size()), "{k:?}");
            }
        }
        // The tiled kernel the launcher picks, for every pair of element types, vector or
        // element-wise tiles, every block size and device generation.
        for from in DType::ALL {
            for to in DType::ALL {
                for vector in [0, 1] {
                    let args = TiledArgs {
                        vector,
                        ..TiledArgs::default()
                    };
                    for threads in (32..=1024).step_by(32) {
                        for major in [5, 7, 8, 9, 10] {
                            let kind = tiled_launch_kind(&args, from, to, threads, major);
                            let k = Kernel::copy(kind, from, to);
                            assert!(k.exists(), "{}", k.module_name());
                        }
                    }
                }
            }
        }
    }

    /// The permute kernel the launcher picks for each kind of arguments, and the wide
    /// kernels' shared tiles: `T` rows of `v (T + 1)` vectors, the planner's tile.
    #[test]
    fn permute_kernels_match_their_arguments() {
        use devspan_kernels::abi::{
            PERMUTE_PACKED_TILE, PERMUTE_SMALL_TILE, PERMUTE_TILE, PERMUTE_VEC_TILE, PermuteArgs,
            wide_tile,
        };
        for (pack, tile, from, to, name) in [
            (0, PERMUTE_TILE, DType::F32, DType::F32, "copy_permute_b4"),
            (
                0,
                PERMUTE_TILE,
                DType::F32,
                DType::F16,
                "cast_permute_f32_f16",
            ),
            (
                0,
                PERMUTE_SMALL_TILE,
                DType::U8,
                DType::U8,
                "copy_permute32_b1",
            ),
            (
                0,
                PERMUTE_SMALL_TILE,
                DType::F64,
                DType::I8,
                "cast_permute32_f64_i8",
            ),
            (
                4,
                PERMUTE_TILE,
                DType::U8,
                DType::U8,
                "copy_permute_packed_b1",
            ),
            (
                2,
                PERMUTE_TILE,
                DType::F16,
                DType::F16,
                "copy_permute_packed_b2",
            ),
            (
                4,
                PERMUTE_PACKED_TILE,
                DType::U8,
                DType::U8,
                "copy_permute_packed128_b1",
            ),
            (
                16,
                PERMUTE_VEC_TILE,
                DType::U8,
                DType::U8,
                "copy_permute_vec_b1",
            ),
        ] {
            let args = PermuteArgs {
                pack,
                tile: tile as u32,
                ..PermuteArgs::default()
            };
            let k = Kernel::copy(permute_kind(&args), from, to);
            assert_eq!(k.module_name(), name);
            assert_eq!(k.kind().permute_tile(), Some(tile));
        }
        for v in [1, 2, 4] {
            let args = PermuteArgs {
                wide: v,
                tile: wide_tile(u64::from(v)).unwrap() as u32,
                ..PermuteArgs::default()
            };
            let k = Kernel::copy(permute_kind(&args), DType::F16, DType::F16);
            let name = format!("copy_permute_w{}", 16 * v);
            assert_eq!(k.module_name(), name);
            let t = u64::from(args.tile);
            let bytes = t * u64::from(v) * (t + 1) * 16;
            let text = ptx::module_ptx(&name).unwrap();
            assert!(
                text.contains(&format!(".b8 {name}_tile[{bytes}];")),
                "{name}: its shared tile is not {t} x {t} runs of {v} vectors"
            );
        }
    }
}
