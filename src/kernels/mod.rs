//! Module cache and launches: the only place besides `bytes.rs` that handles raw device
//! addresses. Modules are JIT-compiled by the driver from the embedded PTX on first use, once
//! per context, and cached.

pub(crate) mod args;
pub(crate) mod ptx;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use cudarc::driver::sys;
use cudarc::driver::{CudaContext, CudaFunction, CudaModule, CudaStream, LaunchConfig, PushKernelArg};

use crate::element::DType;
use crate::error::{Error, Result};
use crate::plan::Plan;
use args::{CONTIG_BLOCK, STRIDED_BLOCK, TRANSPOSE_BLOCK, contig_grid, fill_grid, strided_grid, transpose_grid};

type ModuleKey = (usize, &'static str);
type FunctionKey = (usize, String);

struct Cache {
    modules: HashMap<ModuleKey, Arc<CudaModule>>,
    functions: HashMap<FunctionKey, CudaFunction>,
    sm_counts: HashMap<usize, u32>,
}

fn cache() -> &'static Mutex<Cache> {
    static CACHE: OnceLock<Mutex<Cache>> = OnceLock::new();
    CACHE.get_or_init(|| Mutex::new(Cache { modules: HashMap::new(), functions: HashMap::new(), sm_counts: HashMap::new() }))
}

/// The function `name` of module `module` in `ctx`, loading the module on first use. The cached
/// module holds `ctx` alive, so a cached context pointer is never reused by another context.
pub(crate) fn function(ctx: &Arc<CudaContext>, module: &'static str, name: &str) -> Result<CudaFunction> {
    let key = ctx.cu_ctx() as usize;
    let mut c = cache().lock().unwrap_or_else(|p| p.into_inner());
    if let Some(f) = c.functions.get(&(key, name.to_owned())) {
        return Ok(f.clone());
    }
    let m = match c.modules.get(&(key, module)) {
        Some(m) => m.clone(),
        None => {
            let text = ptx::module_ptx(module)
                .ok_or_else(|| Error::new(crate::ErrorKind::UnsupportedDtype, format!("no PTX module named {module}")))?;
            let m = ctx.load_module(cudarc::nvrtc::Ptx::from_src(text))?;
            c.modules.insert((key, module), m.clone());
            m
        }
    };
    let f = m.load_function(name)?;
    c.functions.insert((key, name.to_owned()), f.clone());
    Ok(f)
}

/// Number of multiprocessors of `ctx`'s device (cached).
pub(crate) fn sm_count(ctx: &Arc<CudaContext>) -> Result<u32> {
    let key = ctx.cu_ctx() as usize;
    let mut c = cache().lock().unwrap_or_else(|p| p.into_inner());
    if let Some(&n) = c.sm_counts.get(&key) {
        return Ok(n);
    }
    let n = ctx.attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)? as u32;
    c.sm_counts.insert(key, n);
    Ok(n)
}

fn module_name(from: DType, to: DType) -> String {
    if from == to { format!("copy_b{}", from.size()) } else { format!("cast_{}_{}", from.name(), to.name()) }
}

fn kernel_name(kind: &str, from: DType, to: DType) -> String {
    if from == to {
        format!("copy_{kind}_b{}", from.size())
    } else {
        format!("cast_{kind}_{}_{}", from.name(), to.name())
    }
}

fn static_module(name: &str) -> Result<&'static str> {
    ptx::module_names()
        .find(|m| *m == name)
        .ok_or_else(|| Error::new(crate::ErrorKind::UnsupportedDtype, format!("no PTX module named {name}")))
}

fn copy_fn(stream: &CudaStream, kind: &str, from: DType, to: DType) -> Result<CudaFunction> {
    let module = static_module(&module_name(from, to))?;
    function(stream.context(), module, &kernel_name(kind, from, to))
}

fn fill_fn(stream: &CudaStream, kind: &str, size: usize) -> Result<CudaFunction> {
    let module = static_module(&format!("fill_b{size}"))?;
    function(stream.context(), module, &format!("fill_{kind}_b{size}"))
}

fn strided_cfg(n: u64) -> LaunchConfig {
    LaunchConfig { grid_dim: (strided_grid(n).max(1), 1, 1), block_dim: (STRIDED_BLOCK, 1, 1), shared_mem_bytes: 0 }
}

/// Enqueues `plan` on `stream`.
///
/// # Safety
/// Every address in `plan` must come from [`crate::plan`] applied to layouts validated against
/// live allocations (so that every element the plan touches is in bounds), those allocations
/// must stay alive until the work completes, and no other work may access the written elements
/// concurrently.
pub(crate) unsafe fn execute(plan: &Plan, stream: &CudaStream) -> Result<()> {
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
        Plan::Memcpy2D { dst, dst_pitch, src, src_pitch, width, height } => {
            let p = sys::CUDA_MEMCPY2D_st {
                srcXInBytes: 0,
                srcY: 0,
                srcMemoryType: sys::CUmemorytype::CU_MEMORYTYPE_DEVICE,
                srcHost: std::ptr::null(),
                srcDevice: *src,
                srcArray: std::ptr::null_mut(),
                srcPitch: *src_pitch,
                dstXInBytes: 0,
                dstY: 0,
                dstMemoryType: sys::CUmemorytype::CU_MEMORYTYPE_DEVICE,
                dstHost: std::ptr::null_mut(),
                dstDevice: *dst,
                dstArray: std::ptr::null_mut(),
                dstPitch: *dst_pitch,
                WidthInBytes: *width,
                Height: *height,
            };
            // SAFETY: the rows lie in live allocations (contract); `p` outlives the call, which
            // copies the descriptor before returning.
            Ok(unsafe { sys::cuMemcpy2DAsync_v2(&p, cs) }.result()?)
        }
        Plan::FillContig { dst, n, head, size, bits } => {
            let f = fill_fn(stream, "contig", *size)?;
            let cfg = LaunchConfig {
                grid_dim: (fill_grid(*n, *head, *size, sm_count(stream.context())?).max(1), 1, 1),
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
            let f = fill_fn(stream, "strided32", *size)?;
            let mut b = stream.launch_builder(&f);
            b.arg(args).arg(bits);
            // SAFETY: every offset the arguments describe is in bounds (contract).
            unsafe { b.launch(strided_cfg(args.n as u64))? };
            Ok(())
        }
        Plan::FillStrided64 { args, size, bits } => {
            let f = fill_fn(stream, "strided64", *size)?;
            let mut b = stream.launch_builder(&f);
            b.arg(args).arg(bits);
            // SAFETY: every offset the arguments describe is in bounds (contract).
            unsafe { b.launch(strided_cfg(args.n))? };
            Ok(())
        }
        Plan::Contig { dst, src, n, head, from, to } => {
            let f = copy_fn(stream, "contig", *from, *to)?;
            let cfg = LaunchConfig {
                grid_dim: (contig_grid(*n, *head, from.size(), to.size(), sm_count(stream.context())?).max(1), 1, 1),
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
            let (gx, gy, gz) = transpose_grid(args.rows, args.cols, args.batch);
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
    }
}
