//! Module cache and launches: the only place besides `bytes.rs` that handles raw device
//! addresses. Modules are JIT-compiled by the driver from the embedded PTX on first use, once
//! per context, and cached.

pub(crate) mod args;
pub(crate) mod permute;
pub(crate) mod ptx;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use cudarc::driver::sys;
use cudarc::driver::{
    CudaContext, CudaFunction, CudaModule, CudaStream, LaunchConfig, PushKernelArg,
};

use crate::element::DType;
use crate::error::{Error, Result};
use crate::plan::Plan;
use args::{
    CONTIG_BLOCK, ROW_BLOCK, STRIDED_BLOCK, TRANSPOSE_BLOCK, contig_grid, fill_grid, row_grid,
    strided_grid, transpose_grid_sized,
};

type ModuleKey = (usize, &'static str);
/// `(context, kernel kind, source type, destination type)`; fills use the unsigned type of the
/// element size for both.
type FunctionKey = (usize, &'static str, DType, DType);

struct Cache {
    modules: HashMap<ModuleKey, Arc<CudaModule>>,
    functions: HashMap<FunctionKey, CudaFunction>,
    /// Resident blocks per multiprocessor of a kernel (at its one block size).
    occupancy: HashMap<FunctionKey, u32>,
}

fn cache() -> &'static Mutex<Cache> {
    static CACHE: OnceLock<Mutex<Cache>> = OnceLock::new();
    CACHE.get_or_init(|| {
        Mutex::new(Cache {
            modules: HashMap::new(),
            functions: HashMap::new(),
            occupancy: HashMap::new(),
        })
    })
}

/// How many blocks of `threads` threads of kernel `f` (the kernel `kind` for `from -> to`)
/// a multiprocessor of `ctx`'s device keeps resident, as the driver computes it from the
/// kernel's registers and shared memory; at least 1. Cached per kernel: every kernel is
/// launched with one block size.
fn blocks_per_sm(
    ctx: &Arc<CudaContext>,
    (kind, from, to): (&'static str, DType, DType),
    f: &CudaFunction,
    threads: u32,
) -> Result<u32> {
    let key = (ctx.cu_ctx() as usize, kind, from, to);
    let mut c = cache().lock().unwrap_or_else(|p| p.into_inner());
    if let Some(&n) = c.occupancy.get(&key) {
        return Ok(n);
    }
    let n = f
        .occupancy_max_active_blocks_per_multiprocessor(threads, 0, None)?
        .max(1);
    c.occupancy.insert(key, n);
    Ok(n)
}

fn no_module(name: &str) -> Error {
    Error::new(
        crate::ErrorKind::UnsupportedDtype,
        format!("no PTX module named {name}"),
    )
}

/// The kernel (and module: every module holds one kernel) `kind` for `from -> to`.
fn kernel_name(kind: &str, from: DType, to: DType) -> String {
    if let Some(fill) = kind.strip_prefix("fill_") {
        format!("fill_{fill}_b{}", to.size())
    } else if kind.starts_with("permute_w") {
        format!("copy_{kind}")
    } else if from == to {
        format!("copy_{kind}_b{}", from.size())
    } else {
        format!("cast_{kind}_{from}_{to}")
    }
}

/// Module `name` in `ctx`: its machine code for the device when that was compiled at build
/// time and the driver takes it, otherwise its PTX, JIT-compiled by the driver.
fn load(ctx: &Arc<CudaContext>, name: &'static str) -> Result<Arc<CudaModule>> {
    if let Ok((major, minor)) = ctx.compute_capability()
        && let Some(bin) = ptx::module_cubin(name, major, minor)
        && let Ok(m) = ctx.load_module(cudarc::nvrtc::Ptx::from_binary(bin.to_vec()))
    {
        return Ok(m);
    }
    let text = ptx::module_ptx(name).ok_or_else(|| no_module(name))?;
    Ok(ctx.load_module(cudarc::nvrtc::Ptx::from_src(text))?)
}

/// The kernel `kind` for `from -> to` in `ctx`, loading its module on first use. The cached
/// module holds `ctx` alive, so a cached context pointer is never reused by another context.
pub(crate) fn kernel(
    ctx: &Arc<CudaContext>,
    kind: &'static str,
    from: DType,
    to: DType,
) -> Result<CudaFunction> {
    let key = (ctx.cu_ctx() as usize, kind, from, to);
    let mut c = cache().lock().unwrap_or_else(|p| p.into_inner());
    if let Some(f) = c.functions.get(&key) {
        return Ok(f.clone());
    }
    let name = kernel_name(kind, from, to);
    let module: &'static str = ptx::module_name(&name).ok_or_else(|| no_module(&name))?;
    let m = match c.modules.get(&(key.0, module)) {
        Some(m) => m.clone(),
        None => {
            let m = load(ctx, module)?;
            c.modules.insert((key.0, module), m.clone());
            m
        }
    };
    let f = m.load_function(module)?;
    c.functions.insert(key, f.clone());
    Ok(f)
}

fn copy_fn(
    stream: &CudaStream,
    kind: &'static str,
    from: DType,
    to: DType,
) -> Result<CudaFunction> {
    kernel(stream.context(), kind, from, to)
}

fn fill_fn(stream: &CudaStream, kind: &'static str, size: usize) -> Result<CudaFunction> {
    let t = match size {
        1 => DType::U8,
        2 => DType::U16,
        4 => DType::U32,
        8 => DType::U64,
        _ => {
            return Err(Error::invalid(format!(
                "no fill kernel for {size}-byte elements"
            )));
        }
    };
    kernel(stream.context(), kind, t, t)
}

/// The number of multiprocessors of the stream's device.
fn sm_count(stream: &CudaStream) -> Result<u32> {
    let n = stream
        .context()
        .attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?;
    Ok(n.max(1) as u32)
}

fn strided_cfg(n: u64) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (strided_grid(n).max(1), 1, 1),
        block_dim: (STRIDED_BLOCK, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// Enqueues `plan` on `stream`, sizing permute kernels' grids by [`permute::permute_grid`]
/// with the overrides in `grid`.
///
/// # Safety
/// Every address in `plan` must come from [`crate::plan`] applied to layouts validated against
/// live allocations (so that every element the plan touches is in bounds), those allocations
/// must stay alive until the work completes, and no other work may access the written elements
/// concurrently.
pub(crate) unsafe fn execute(
    plan: &Plan,
    stream: &CudaStream,
    grid: permute::GridOptions,
) -> Result<()> {
    stream.context().bind_to_thread()?;
    let cs = stream.cu_stream();
    match plan {
        Plan::Nothing => Ok(()),
        Plan::Memset { dst, n, size, bits } => {
            // SAFETY: `dst..dst + n * size` lies in a live allocation (function contract).
            let r = unsafe {
                match size {
                    1 => sys::cuMemsetD8Async(*dst, *bits as u8, *n, cs),
                    2 => sys::cuMemsetD16Async(*dst, *bits as u16, *n, cs),
                    4 => sys::cuMemsetD32Async(*dst, *bits as u32, *n, cs),
                    _ => return Err(Error::invalid(format!("memset of {size}-byte elements"))),
                }
            };
            Ok(r.result()?)
        }
        Plan::Memcpy { dst, src, bytes } => {
            // SAFETY: both ranges lie in live allocations and do not overlap (contract).
            unsafe { cudarc::driver::result::memcpy_dtod_async(*dst, *src, *bytes, cs)? };
            Ok(())
        }
        Plan::FillContig {
            dst,
            n,
            head,
            size,
            bits,
        } => {
            let f = fill_fn(stream, "fill_contig", *size)?;
            let cfg = LaunchConfig {
                grid_dim: (fill_grid(*n, *head, *size).max(1), 1, 1),
                block_dim: (CONTIG_BLOCK, 1, 1),
                shared_mem_bytes: 0,
            };
            let mut b = stream.launch_builder(&f);
            b.arg(dst).arg(n).arg(head).arg(bits);
            // SAFETY: the kernel writes elements `0..n` from `dst`, in bounds (contract); the
            // argument types match the kernel's parameter list.
            unsafe { b.launch(cfg)? };
            Ok(())
        }
        Plan::FillStrided32 { args, size, bits } => {
            let f = fill_fn(stream, "fill_strided32", *size)?;
            let mut b = stream.launch_builder(&f);
            b.arg(args).arg(bits);
            // SAFETY: every offset the arguments describe is in bounds (contract).
            unsafe { b.launch(strided_cfg(args.n as u64))? };
            Ok(())
        }
        Plan::FillStrided64 { args, size, bits } => {
            let f = fill_fn(stream, "fill_strided64", *size)?;
            let mut b = stream.launch_builder(&f);
            b.arg(args).arg(bits);
            // SAFETY: every offset the arguments describe is in bounds (contract).
            unsafe { b.launch(strided_cfg(args.n))? };
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
            let f = copy_fn(stream, "contig", *from, *to)?;
            let cfg = LaunchConfig {
                grid_dim: (contig_grid(*n, *head, from.size(), to.size()).max(1), 1, 1),
                block_dim: (CONTIG_BLOCK, 1, 1),
                shared_mem_bytes: 0,
            };
            let mut b = stream.launch_builder(&f);
            b.arg(dst).arg(src).arg(n).arg(head);
            // SAFETY: elements `0..n` from `dst` and `src` are in bounds and disjoint (contract).
            unsafe { b.launch(cfg)? };
            Ok(())
        }
        Plan::Strided32 { args, from, to } => {
            let f = copy_fn(stream, "strided32", *from, *to)?;
            let mut b = stream.launch_builder(&f);
            b.arg(args);
            // SAFETY: every offset the arguments describe is in bounds (contract).
            unsafe { b.launch(strided_cfg(args.n as u64))? };
            Ok(())
        }
        Plan::Strided64 { args, from, to } => {
            let f = copy_fn(stream, "strided64", *from, *to)?;
            let mut b = stream.launch_builder(&f);
            b.arg(args);
            // SAFETY: every offset the arguments describe is in bounds (contract).
            unsafe { b.launch(strided_cfg(args.n))? };
            Ok(())
        }
        Plan::Transpose { args, from, to } => {
            let f = copy_fn(stream, "transpose", *from, *to)?;
            let (gx, gy, gz) =
                transpose_grid_sized(args.rows, args.cols, args.batch, from.size(), to.size());
            let cfg = LaunchConfig {
                grid_dim: (gx.max(1), gy.max(1), gz.max(1)),
                block_dim: TRANSPOSE_BLOCK,
                shared_mem_bytes: 0,
            };
            let mut b = stream.launch_builder(&f);
            b.arg(args);
            // SAFETY: every offset the arguments describe is in bounds (contract).
            unsafe { b.launch(cfg)? };
            Ok(())
        }
        Plan::Permute { args, from, to } => {
            let (kind, block) = permute::permute_kernel(args);
            let f = copy_fn(stream, kind, *from, *to)?;
            let threads = block.0 * block.1 * block.2;
            let per_sm = blocks_per_sm(stream.context(), (kind, *from, *to), &f, threads)?;
            let resident = u64::from(sm_count(stream)?) * u64::from(per_sm);
            let cfg = LaunchConfig {
                grid_dim: (
                    permute::permute_grid(args.tiles, resident, args.tiles_per_block(), grid)
                        .max(1),
                    1,
                    1,
                ),
                block_dim: block,
                shared_mem_bytes: 0,
            };
            let mut b = stream.launch_builder(&f);
            b.arg(args);
            // SAFETY: every element the tiles cover is in bounds of both operands (contract);
            // the kernel takes exactly one `PermuteArgs` block.
            unsafe { b.launch(cfg)? };
            Ok(())
        }
        Plan::Rows { args, from, to } => {
            let f = copy_fn(stream, "rows", *from, *to)?;
            let (gx, gy) = row_grid(args, from.size(), to.size());
            let cfg = LaunchConfig {
                grid_dim: (gx.max(1), gy.max(1), 1),
                block_dim: (ROW_BLOCK, 1, 1),
                shared_mem_bytes: 0,
            };
            let mut b = stream.launch_builder(&f);
            b.arg(args);
            // SAFETY: every element of every row the arguments describe is in bounds and the
            // two operands are disjoint (contract); `RowArgs` is the kernel's parameter block.
            unsafe { b.launch(cfg)? };
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every kernel the launcher can ask for exists, by name, in the module it loads.
    #[test]
    fn every_requested_kernel_exists() {
        let mut checked = 0;
        let has = |name: &str| {
            let text = ptx::module_ptx(name).unwrap_or_else(|| panic!("no module {name}"));
            text.contains(&format!(".visible .entry {name}("))
        };
        for t in [DType::U8, DType::U16, DType::U32, DType::U64] {
            for kind in ["fill_contig", "fill_strided32", "fill_strided64"] {
                let n = kernel_name(kind, t, t);
                assert!(has(&n), "{n}");
                checked += 1;
            }
        }
        for from in DType::ALL {
            for to in DType::ALL {
                for kind in [
                    "contig",
                    "strided32",
                    "strided64",
                    "transpose",
                    "rows",
                    "permute",
                    "permute32",
                ] {
                    let n = kernel_name(kind, from, to);
                    assert!(has(&n), "{n}");
                    checked += 1;
                }
            }
        }
        assert_eq!(checked, 12 + 144 * 7);
    }

    /// The block shape the launcher gives each permute kernel is the one its PTX requires
    /// (`.reqntid`).
    #[test]
    fn permute_blocks_match_the_kernels() {
        use permute::{
            PERMUTE_PACKED_TILE, PERMUTE_SMALL_TILE, PERMUTE_TILE, PERMUTE_VEC_TILE, PermuteArgs,
            permute_kernel,
        };
        for (pack, tile, from, to) in [
            (0, PERMUTE_TILE, DType::F32, DType::F32),
            (0, PERMUTE_TILE, DType::F32, DType::F16),
            (0, PERMUTE_SMALL_TILE, DType::U8, DType::U8),
            (0, PERMUTE_SMALL_TILE, DType::F64, DType::I8),
            (4, PERMUTE_TILE, DType::U8, DType::U8),
            (2, PERMUTE_TILE, DType::F16, DType::F16),
            (4, PERMUTE_PACKED_TILE, DType::U8, DType::U8),
            (16, PERMUTE_VEC_TILE, DType::U8, DType::U8),
        ] {
            let args = PermuteArgs {
                pack,
                tile: tile as u32,
                ..PermuteArgs::default()
            };
            check(&args, from, to);
        }
        // The wide kernels, whichever element type the copy has.
        for v in [1, 2, 4] {
            let args = PermuteArgs {
                wide: v,
                tile: permute::wide_tile(u64::from(v)).unwrap() as u32,
                ..PermuteArgs::default()
            };
            check(&args, DType::F16, DType::F16);
            let (kind, _) = permute_kernel(&args);
            assert_eq!(
                kernel_name(kind, DType::U8, DType::U8),
                format!("copy_{kind}")
            );
            assert_eq!(kind, format!("permute_w{}", 16 * v));
            // The kernel's shared tile holds the planner's tile: T rows of v (T + 1) vectors.
            let t = u64::from(args.tile);
            let bytes = t * u64::from(v) * (t + 1) * 16;
            let text = ptx::module_ptx(&format!("copy_{kind}")).unwrap();
            assert!(
                text.contains(&format!(".b8 copy_{kind}_tile[{bytes}];")),
                "copy_{kind}: its shared tile is not {t} x {t} runs of {v} vectors"
            );
        }
        fn check(args: &PermuteArgs, from: DType, to: DType) {
            let (kind, (bx, by, bz)) = permute_kernel(args);
            let name = kernel_name(kind, from, to);
            let text = ptx::module_ptx(&name).unwrap_or_else(|| panic!("no module {name}"));
            assert!(
                text.contains(&format!(".reqntid {bx}, {by}, {bz}\n")),
                "{name}: block ({bx}, {by}, {bz}) is not the one its PTX requires"
            );
        }
    }
}
