//! NCCL (feature `nccl`), loaded at run time: the raw calls behind [`crate::nccl`].
//!
//! The library is `DEVSPAN_NCCL_LIB` when set (a path or a file name), else the first of
//! `libnccl.so.2` and `libnccl.so` that the dynamic loader finds (`LD_LIBRARY_PATH`, the
//! system's library directories). A missing library or symbol is `Err(Nccl)`; nothing panics.
//! Every call returns `Err(Nccl)` with NCCL's error string when its result is not `ncclSuccess`.

use std::ffi::{CStr, c_char, c_int, c_void};
use std::sync::OnceLock;

use super::CUstream;
use crate::error::{Error, ErrorKind, Result};

/// An NCCL communicator handle (`ncclComm_t`).
pub(crate) type Comm = *mut c_void;

/// `ncclUniqueId`: 128 opaque bytes.
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct UniqueId(pub(crate) [c_char; 128]);

/// `ncclDataType_t` values.
pub(crate) mod dtype {
    use std::ffi::c_int;
    pub(crate) const INT8: c_int = 0;
    pub(crate) const UINT8: c_int = 1;
    pub(crate) const INT32: c_int = 2;
    pub(crate) const UINT32: c_int = 3;
    pub(crate) const INT64: c_int = 4;
    pub(crate) const UINT64: c_int = 5;
    pub(crate) const FLOAT16: c_int = 6;
    pub(crate) const FLOAT32: c_int = 7;
    pub(crate) const FLOAT64: c_int = 8;
    pub(crate) const BFLOAT16: c_int = 9;
}

/// `ncclRedOp_t` values.
pub(crate) mod op {
    use std::ffi::c_int;
    pub(crate) const SUM: c_int = 0;
    pub(crate) const PROD: c_int = 1;
    pub(crate) const MAX: c_int = 2;
    pub(crate) const MIN: c_int = 3;
    pub(crate) const AVG: c_int = 4;
}

type Res = c_int;
type P2p = unsafe extern "C" fn(*const c_void, usize, c_int, c_int, Comm, CUstream) -> Res;

/// The entry points devspan calls.
struct Api {
    _lib: libloading::Library,
    get_version: unsafe extern "C" fn(*mut c_int) -> Res,
    get_unique_id: unsafe extern "C" fn(*mut UniqueId) -> Res,
    comm_init_rank: unsafe extern "C" fn(*mut Comm, c_int, UniqueId, c_int) -> Res,
    comm_init_all: unsafe extern "C" fn(*mut Comm, c_int, *const c_int) -> Res,
    comm_abort: unsafe extern "C" fn(Comm) -> Res,
    get_error_string: unsafe extern "C" fn(Res) -> *const c_char,
    send: P2p,
    recv: unsafe extern "C" fn(*mut c_void, usize, c_int, c_int, Comm, CUstream) -> Res,
    broadcast: unsafe extern "C" fn(
        *const c_void,
        *mut c_void,
        usize,
        c_int,
        c_int,
        Comm,
        CUstream,
    ) -> Res,
    all_gather:
        unsafe extern "C" fn(*const c_void, *mut c_void, usize, c_int, Comm, CUstream) -> Res,
    all_reduce: unsafe extern "C" fn(
        *const c_void,
        *mut c_void,
        usize,
        c_int,
        c_int,
        Comm,
        CUstream,
    ) -> Res,
    group_start: unsafe extern "C" fn() -> Res,
    group_end: unsafe extern "C" fn() -> Res,
}

/// The names tried, in order.
fn candidates() -> Vec<String> {
    match std::env::var("DEVSPAN_NCCL_LIB") {
        Ok(p) if !p.is_empty() => vec![p],
        _ => vec!["libnccl.so.2".into(), "libnccl.so".into()],
    }
}

fn load_from(names: &[String]) -> std::result::Result<Api, String> {
    if cfg!(miri) {
        return Err("Miri cannot load shared libraries".into());
    }
    let mut errors = Vec::new();
    for name in names {
        // SAFETY: loading NCCL runs its initialisers, which have no preconditions.
        let lib = match unsafe { libloading::Library::new(name) } {
            Ok(lib) => lib,
            Err(e) => {
                errors.push(format!("{name}: {e}"));
                continue;
            }
        };
        macro_rules! sym {
            ($name:literal) => {
                // SAFETY: the symbol is NCCL's function of that name, whose C signature is the
                // field's type (nccl.h, stable since NCCL 2.7).
                *unsafe { lib.get(concat!($name, "\0").as_bytes()) }
                    .map_err(|e| format!("{name}: symbol {}: {e}", $name))?
            };
        }
        let api = Api {
            get_version: sym!("ncclGetVersion"),
            get_unique_id: sym!("ncclGetUniqueId"),
            comm_init_rank: sym!("ncclCommInitRank"),
            comm_init_all: sym!("ncclCommInitAll"),
            comm_abort: sym!("ncclCommAbort"),
            get_error_string: sym!("ncclGetErrorString"),
            send: sym!("ncclSend"),
            recv: sym!("ncclRecv"),
            broadcast: sym!("ncclBroadcast"),
            all_gather: sym!("ncclAllGather"),
            all_reduce: sym!("ncclAllReduce"),
            group_start: sym!("ncclGroupStart"),
            group_end: sym!("ncclGroupEnd"),
            _lib: lib,
        };
        return Ok(api);
    }
    Err(format!(
        "libnccl could not be loaded (set DEVSPAN_NCCL_LIB to its path, or add its directory \
         to LD_LIBRARY_PATH): {}",
        errors.join("; ")
    ))
}

fn api() -> Result<&'static Api> {
    static API: OnceLock<std::result::Result<Api, String>> = OnceLock::new();
    API.get_or_init(|| load_from(&candidates()))
        .as_ref()
        .map_err(|e| Error::new(ErrorKind::Nccl, e.clone()))
}

/// `Ok(())` for `ncclSuccess` (0), `Err(Nccl)` naming `what` and NCCL's error string otherwise.
fn check(api: &Api, what: &str, r: Res) -> Result<()> {
    if r == 0 {
        return Ok(());
    }
    // SAFETY: `ncclGetErrorString` returns a static NUL-terminated string for any code.
    let s = unsafe { CStr::from_ptr((api.get_error_string)(r)) };
    Err(Error::new(
        ErrorKind::Nccl,
        format!("{what} failed: {} (ncclResult_t {r})", s.to_string_lossy()),
    ))
}

/// Whether libnccl can be loaded.
pub(crate) fn present() -> bool {
    api().is_ok()
}

/// NCCL's version code (`ncclGetVersion`: 22803 for 2.28.3).
pub(crate) fn version() -> Result<i32> {
    let api = api()?;
    let mut v: c_int = 0;
    // SAFETY: writes one int to the valid pointer.
    check(api, "ncclGetVersion", unsafe { (api.get_version)(&mut v) })?;
    Ok(v)
}

/// A new unique id for [`comm_init_rank`].
pub(crate) fn unique_id() -> Result<UniqueId> {
    let api = api()?;
    let mut id = UniqueId([0; 128]);
    // SAFETY: writes one `ncclUniqueId` to the valid pointer.
    check(api, "ncclGetUniqueId", unsafe {
        (api.get_unique_id)(&mut id)
    })?;
    Ok(id)
}

/// `ncclCommInitRank`: blocks until all `world` ranks have joined. The device's context must be
/// current.
pub(crate) fn comm_init_rank(world: c_int, id: UniqueId, rank: c_int) -> Result<Comm> {
    let api = api()?;
    let mut comm: Comm = std::ptr::null_mut();
    // SAFETY: writes one handle to the valid pointer; the id is passed by value.
    check(api, "ncclCommInitRank", unsafe {
        (api.comm_init_rank)(&mut comm, world, id, rank)
    })?;
    Ok(comm)
}

/// `ncclCommInitAll`: one communicator per device of `devices`, in order.
pub(crate) fn comm_init_all(devices: &[c_int]) -> Result<Vec<Comm>> {
    let api = api()?;
    let mut comms: Vec<Comm> = vec![std::ptr::null_mut(); devices.len()];
    let n = c_int::try_from(devices.len())
        .map_err(|_| Error::new(ErrorKind::InvalidArgument, "too many devices"))?;
    // SAFETY: `comms` has room for `n` handles and `devices` holds `n` ordinals.
    check(api, "ncclCommInitAll", unsafe {
        (api.comm_init_all)(comms.as_mut_ptr(), n, devices.as_ptr())
    })?;
    Ok(comms)
}

/// `ncclCommAbort`: frees the communicator's resources without waiting for other ranks.
///
/// # Safety
/// `comm` is a live communicator, not used afterwards.
pub(crate) unsafe fn comm_abort(comm: Comm) -> Result<()> {
    let api = api()?;
    // SAFETY: the caller's contract.
    check(api, "ncclCommAbort", unsafe { (api.comm_abort)(comm) })
}

/// One NCCL operation of a group.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Call {
    Send { buf: u64, peer: c_int },
    Recv { buf: u64, peer: c_int },
    Broadcast { buf: u64, root: c_int },
    AllGather { send: u64, recv: u64 },
    AllReduce { send: u64, recv: u64, op: c_int },
}

/// Enqueues `calls` (each with its communicator, stream, element count and data type) as one
/// NCCL group: `ncclGroupStart`, the calls, `ncclGroupEnd`, which enqueues them. A failed call
/// still ends the group.
///
/// # Safety
/// Every communicator is live and belongs to its stream's device; every buffer holds `count`
/// elements of the data type (all-gather: the receive buffer `count` times the communicator's
/// size) in memory that stays valid until the stream reaches the operation.
pub(crate) unsafe fn group(calls: &[(Comm, CUstream, usize, c_int, Call)]) -> Result<()> {
    let api = api()?;
    // SAFETY: no preconditions.
    check(api, "ncclGroupStart", unsafe { (api.group_start)() })?;
    let mut first = Ok(());
    for &(comm, stream, count, ty, call) in calls {
        // SAFETY: the caller's contract.
        let r = unsafe {
            match call {
                Call::Send { buf, peer } => {
                    (api.send)(buf as *const c_void, count, ty, peer, comm, stream)
                }
                Call::Recv { buf, peer } => {
                    (api.recv)(buf as *mut c_void, count, ty, peer, comm, stream)
                }
                Call::Broadcast { buf, root } => (api.broadcast)(
                    buf as *const c_void,
                    buf as *mut c_void,
                    count,
                    ty,
                    root,
                    comm,
                    stream,
                ),
                Call::AllGather { send, recv } => (api.all_gather)(
                    send as *const c_void,
                    recv as *mut c_void,
                    count,
                    ty,
                    comm,
                    stream,
                ),
                Call::AllReduce { send, recv, op } => (api.all_reduce)(
                    send as *const c_void,
                    recv as *mut c_void,
                    count,
                    ty,
                    op,
                    comm,
                    stream,
                ),
            }
        };
        if first.is_ok() {
            first = check(api, &format!("{call:?}"), r);
        }
    }
    // SAFETY: no preconditions; it ends the group started above.
    let end = check(api, "ncclGroupEnd", unsafe { (api.group_end)() });
    first.and(end)
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_missing_library_is_an_error_that_names_what_was_tried() {
        let tried = ["/nonexistent/libnccl.so.2".to_string()];
        let e = super::load_from(&tried).err().expect("no such library");
        if !cfg!(miri) {
            assert!(e.contains("/nonexistent/libnccl.so.2"), "{e}");
        }
    }
}
