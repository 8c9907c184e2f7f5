//! Collective communication over strided views (feature `nccl`): NCCL's point-to-point and
//! collective operations on devspan arrays and views of any layout.
//!
//! NCCL moves contiguous buffers only. Here every operand may be any view: an operand in
//! standard (row-major, dense) layout goes to NCCL directly; any other (transposed, sliced,
//! negative strides, a broadcast source) is packed into a temporary on the operation's stream
//! by devspan's copy kernels before the operation, and a destination is unpacked from one the
//! same way after it. Nothing passes through the host. The data order on the wire is the
//! operand's row-major (logical) order, whatever its strides.
//!
//! - [`Communicator::for_devices`]: one communicator per device, for one process driving
//!   several GPUs; [`Communicator::from_rank`] with a [`UniqueId`]: one rank of a communicator
//!   spread over processes (the id travels between them as 128 bytes).
//! - [`Communicator::send`], [`recv`](Communicator::recv), [`broadcast`](Communicator::broadcast),
//!   [`all_gather`](Communicator::all_gather), [`all_reduce`](Communicator::all_reduce) and
//!   [`all_reduce_in_place`](Communicator::all_reduce_in_place) each enqueue one NCCL
//!   operation (in a group of its own) and return without waiting.
//! - A [`Group`] enqueues several as one NCCL group: a send and its matching receive between
//!   communicators of one process (or to and from the same rank) must be in one group, since
//!   NCCL enqueues a group's operations together. A thread that drives the communicators of
//!   several GPUs of its process puts every operation of theirs in one group with a call for
//!   each of those ranks, collectives too: NCCL may block inside a call until the other ranks'
//!   calls are made, which that thread would never reach (the call itself would hang).
//!
//! Operations run on the stream given, which must belong to the communicator's device. Each
//! operand takes part in devspan's ordering like any other operation's: the stream first waits
//! for conflicting earlier devspan work on the operand's memory, and the operation is recorded
//! so that later work and the release of the memory follow it. Operations that need a
//! temporary allocate it stream-ordered, which a stream capturing a graph refuses
//! (`Err(StreamCapture)`); operations on standard-layout operands capture.
//!
//! **The library.** libnccl is loaded at run time: `DEVSPAN_NCCL_LIB` when set (a path), else
//! `libnccl.so.2` or `libnccl.so` from the loader's search path (`LD_LIBRARY_PATH`, the system's
//! directories: Debian's and Ubuntu's `libnccl2` package installs
//! `/usr/lib/x86_64-linux-gnu/libnccl.so.2`; PyTorch's `nvidia-nccl-cu12` wheel ships
//! `site-packages/nvidia/nccl/lib/libnccl.so.2`). Without it every call returns
//! `Err(ErrorKind::Nccl)`; [`available`] says whether it loads.
//!
//! **Matching.** As with NCCL itself, every send needs the matching receive on its peer and
//! every collective a call on every rank, with the same element count; work that waits for a
//! missing peer never completes, and neither do host waits on its stream (including the drop of
//! its [`Communicator`], which waits for the communicator's work).
//!
//! ```no_run
//! # fn main() -> devspan::Result<()> {
//! use devspan::DeviceArray;
//! use devspan::nccl::{Communicator, Group, ReduceOp};
//!
//! let comms = Communicator::for_devices(&[0])?; // one rank, on device 0
//! let comm = &comms[0];
//! let stream = devspan::new_stream(0)?;
//! let a = DeviceArray::<f32, _>::from_elem(&stream, (64, 48), 1.5)?;
//! let mut b = DeviceArray::<f32, _>::zeros(&stream, (48, 64))?;
//! // A transposed view travels in its logical order: b receives a.t() row by row.
//! let at = a.t(); // a group borrows its operands until it runs
//! let mut g = Group::new();
//! g.send(comm, &at, 0, &stream)?;
//! g.recv(comm, &mut b, 0, &stream)?;
//! g.run()?;
//! let mut sum = DeviceArray::<f32, _>::zeros(&stream, (48, 64))?;
//! comm.all_reduce(&a.t(), &mut sum, ReduceOp::Sum, &stream)?;
//! # Ok(()) }
//! ```

use std::ffi::c_int;
use std::sync::{Arc, Mutex};

use cudarc::driver::{CudaContext, CudaEvent, CudaStream};
use ndarray::Dimension;

use crate::device::check_stream;
use crate::driver::nccl as raw;
use crate::element::DType;
use crate::error::{Error, ErrorKind, Result};
use crate::view::{DeviceBase, SpanData, SpanDataMut};

mod group;
pub use group::Group;

/// Whether libnccl can be loaded (see the module's docs for where it is looked for).
///
/// ```
/// println!("NCCL: {}", devspan::nccl::available());
/// ```
pub fn available() -> bool {
    raw::present()
}

/// The version of the loaded libnccl as NCCL encodes it (`22803` for 2.28.3).
///
/// ```no_run
/// # fn main() -> devspan::Result<()> {
/// assert!(devspan::nccl::version()? >= 21800);
/// # Ok(()) }
/// ```
pub fn version() -> Result<i32> {
    raw::version()
}

/// The id that the ranks of one communicator share ([`Communicator::from_rank`]): made once, by
/// one process, and sent to the others as bytes.
///
/// ```no_run
/// # fn main() -> devspan::Result<()> {
/// let id = devspan::nccl::UniqueId::new()?;
/// let bytes = id.to_bytes(); // send these to the other processes
/// assert_eq!(devspan::nccl::UniqueId::from_bytes(bytes).to_bytes(), bytes);
/// # Ok(()) }
/// ```
#[derive(Clone, Copy)]
pub struct UniqueId(raw::UniqueId);

impl UniqueId {
    /// A new id (`ncclGetUniqueId`).
    pub fn new() -> Result<Self> {
        Ok(UniqueId(raw::unique_id()?))
    }

    /// The id as 128 bytes.
    pub fn to_bytes(&self) -> [u8; 128] {
        self.0.0.map(|c| c as u8)
    }

    /// The id from the bytes of [`to_bytes`](Self::to_bytes).
    pub fn from_bytes(bytes: [u8; 128]) -> Self {
        UniqueId(raw::UniqueId(bytes.map(|b| b as std::ffi::c_char)))
    }
}

impl std::fmt::Debug for UniqueId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("UniqueId(..)")
    }
}

/// The reduction of [`Communicator::all_reduce`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReduceOp {
    /// The elementwise sum.
    Sum,
    /// The elementwise product.
    Prod,
    /// The elementwise maximum.
    Max,
    /// The elementwise minimum.
    Min,
    /// The elementwise mean (floating-point element types, and integers rounded as NCCL does).
    Avg,
}

impl ReduceOp {
    fn code(self) -> c_int {
        match self {
            ReduceOp::Sum => raw::op::SUM,
            ReduceOp::Prod => raw::op::PROD,
            ReduceOp::Max => raw::op::MAX,
            ReduceOp::Min => raw::op::MIN,
            ReduceOp::Avg => raw::op::AVG,
        }
    }
}

/// NCCL's data type for a reduction over `dtype`, or `Err(UnsupportedDtype)` for the 16-bit
/// integers, which NCCL cannot reduce.
fn reduce_type(dtype: DType) -> Result<c_int> {
    Ok(match dtype {
        DType::I8 => raw::dtype::INT8,
        DType::U8 => raw::dtype::UINT8,
        DType::I32 => raw::dtype::INT32,
        DType::U32 => raw::dtype::UINT32,
        DType::I64 => raw::dtype::INT64,
        DType::U64 => raw::dtype::UINT64,
        DType::F16 => raw::dtype::FLOAT16,
        DType::BF16 => raw::dtype::BFLOAT16,
        DType::F32 => raw::dtype::FLOAT32,
        DType::F64 => raw::dtype::FLOAT64,
        DType::U16 | DType::I16 => {
            return Err(Error::new(
                ErrorKind::UnsupportedDtype,
                format!("NCCL has no {dtype} reductions"),
            ));
        }
    })
}

/// One rank of an NCCL communicator, on one device.
///
/// Dropping it waits on the host for the work it enqueued, then frees it (`ncclCommAbort`,
/// which needs no other rank). It may move between threads but not be shared by them: NCCL
/// allows one thread at a time to use a communicator, and asks that communicators of one
/// device are not driven from several threads at once.
pub struct Communicator {
    comm: raw::Comm,
    ctx: Arc<CudaContext>,
    rank: usize,
    world: usize,
    /// The latest operation's event per stream the communicator ran on.
    recorded: Mutex<Vec<CudaEvent>>,
}

// SAFETY: an NCCL communicator may be used from any thread, one thread at a time; `&self`
// methods that enqueue work are not `Sync`-shared (the type is not `Sync`).
unsafe impl Send for Communicator {}

impl std::fmt::Debug for Communicator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Communicator")
            .field("rank", &self.rank)
            .field("world_size", &self.world)
            .field("device", &self.device())
            .finish()
    }
}

impl Communicator {
    /// One communicator per device of `devices` (rank `i` on `devices[i]`), for one process
    /// that drives them all (`ncclCommInitAll`). Devices may not repeat.
    ///
    /// ```no_run
    /// # fn main() -> devspan::Result<()> {
    /// let n = devspan::device_count()?;
    /// let devices: Vec<usize> = (0..n).collect();
    /// let comms = devspan::nccl::Communicator::for_devices(&devices)?;
    /// assert_eq!(comms.len(), n);
    /// assert_eq!(comms[n - 1].rank(), n - 1);
    /// # Ok(()) }
    /// ```
    pub fn for_devices(devices: &[usize]) -> Result<Vec<Communicator>> {
        if devices.is_empty() {
            return Err(Error::invalid("a communicator needs at least one device"));
        }
        let mut ctxs = Vec::with_capacity(devices.len());
        let mut ordinals = Vec::with_capacity(devices.len());
        for (i, &d) in devices.iter().enumerate() {
            if devices[..i].contains(&d) {
                return Err(Error::invalid(format!(
                    "device {d} is listed twice in {devices:?}"
                )));
            }
            ctxs.push(crate::device::context(d)?);
            ordinals.push(c_int::try_from(d).map_err(|_| Error::invalid("device ordinal"))?);
        }
        let _current = crate::device::ContextGuard::save();
        let comms = raw::comm_init_all(&ordinals)?;
        let world = devices.len();
        Ok(comms
            .into_iter()
            .zip(ctxs)
            .enumerate()
            .map(|(rank, (comm, ctx))| Communicator {
                comm,
                ctx,
                rank,
                world,
                recorded: Mutex::new(Vec::new()),
            })
            .collect())
    }

    /// Rank `rank` of a communicator of `world` ranks spread over processes (or threads), on
    /// device `device` (`ncclCommInitRank`): blocks until every rank has called it with the
    /// same `id`.
    pub fn from_rank(device: usize, rank: usize, world: usize, id: &UniqueId) -> Result<Self> {
        if rank >= world {
            return Err(Error::invalid(format!(
                "rank {rank} of a communicator of {world} ranks"
            )));
        }
        let world_c = c_int::try_from(world).map_err(|_| Error::invalid("world size"))?;
        let ctx = crate::device::context(device)?;
        let _current = crate::device::ContextGuard::save();
        crate::device::bind_context(&ctx)?;
        let comm = raw::comm_init_rank(world_c, id.0, rank as c_int)?;
        Ok(Communicator {
            comm,
            ctx,
            rank,
            world,
            recorded: Mutex::new(Vec::new()),
        })
    }

    /// This communicator's rank.
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// The number of ranks.
    pub fn world_size(&self) -> usize {
        self.world
    }

    /// The device of this rank.
    pub fn device(&self) -> usize {
        self.ctx.ordinal()
    }

    /// Sends `src` (any layout, read in row-major order) to rank `peer`, which receives it with
    /// [`recv`](Self::recv) into a destination of as many elements of the same type. To or
    /// from a communicator of the same process (or this rank itself), use a [`Group`] with both.
    pub fn send<S: SpanData, D: Dimension>(
        &self,
        src: &DeviceBase<S, D>,
        peer: usize,
        stream: &Arc<CudaStream>,
    ) -> Result<()> {
        let mut g = Group::new();
        g.send(self, src, peer, stream)?;
        g.run()
    }

    /// Receives from rank `peer` into `dst` (any writable layout, written in row-major order).
    pub fn recv<S: SpanDataMut, D: Dimension>(
        &self,
        dst: &mut DeviceBase<S, D>,
        peer: usize,
        stream: &Arc<CudaStream>,
    ) -> Result<()> {
        let mut g = Group::new();
        g.recv(self, dst, peer, stream)?;
        g.run()
    }

    /// Broadcasts `data` of rank `root` to the `data` of every rank, in place: every rank
    /// passes as many elements of the same type.
    pub fn broadcast<S: SpanDataMut, D: Dimension>(
        &self,
        data: &mut DeviceBase<S, D>,
        root: usize,
        stream: &Arc<CudaStream>,
    ) -> Result<()> {
        let mut g = Group::new();
        g.broadcast(self, data, root, stream)?;
        g.run()
    }

    /// Gathers `src` of every rank into `dst` of every rank: `dst` holds `world_size()` times
    /// as many elements as `src`, rank `r`'s `src` at positions `r * src.len()..` of `dst`'s
    /// row-major order (a `dst` of shape `[world_size, ..src.shape()]` takes rank `r`'s at
    /// index `r` of its first axis).
    pub fn all_gather<S: SpanData, D: Dimension, S2: SpanDataMut<Elem = S::Elem>, E: Dimension>(
        &self,
        src: &DeviceBase<S, D>,
        dst: &mut DeviceBase<S2, E>,
        stream: &Arc<CudaStream>,
    ) -> Result<()> {
        let mut g = Group::new();
        g.all_gather(self, src, dst, stream)?;
        g.run()
    }

    /// Reduces `src` of every rank with `op` into `dst` of every rank. `src` broadcasts to
    /// `dst`'s shape (ndarray's rules). For `dst` reduced in place, see
    /// [`all_reduce_in_place`](Self::all_reduce_in_place).
    pub fn all_reduce<S: SpanData, D: Dimension, S2: SpanDataMut<Elem = S::Elem>, E: Dimension>(
        &self,
        src: &DeviceBase<S, D>,
        dst: &mut DeviceBase<S2, E>,
        op: ReduceOp,
        stream: &Arc<CudaStream>,
    ) -> Result<()> {
        let mut g = Group::new();
        g.all_reduce(self, src, dst, op, stream)?;
        g.run()
    }

    /// Reduces `data` of every rank with `op`, in place.
    pub fn all_reduce_in_place<S: SpanDataMut, D: Dimension>(
        &self,
        data: &mut DeviceBase<S, D>,
        op: ReduceOp,
        stream: &Arc<CudaStream>,
    ) -> Result<()> {
        let mut g = Group::new();
        g.all_reduce_in_place(self, data, op, stream)?;
        g.run()
    }

    /// `Err` unless `stream` and the operand on `device` belong to this rank's device, and
    /// `peer` (a rank) is one of the communicator's.
    fn check(&self, stream: &CudaStream, device: usize, what: &str, peer: usize) -> Result<()> {
        check_stream(stream, self.device(), "the communicator")?;
        if device != self.device() {
            return Err(Error::device_mismatch(format!(
                "{what} lives on device {device} but the communicator's rank is on device {}",
                self.device()
            )));
        }
        if peer >= self.world {
            return Err(Error::invalid(format!(
                "rank {peer} named, but the communicator has {} ranks",
                self.world
            )));
        }
        Ok(())
    }

    /// Records an event after the latest operation on `stream`, which the drop waits for;
    /// events of completed work are let go.
    fn record(&self, stream: &Arc<CudaStream>) -> Result<()> {
        let e = stream.record_event(None)?;
        let mut recorded = self.recorded.lock().unwrap_or_else(|p| p.into_inner());
        recorded.retain(|old| !matches!(old.try_is_complete(), Ok(true)));
        recorded.push(e);
        Ok(())
    }
}

impl Drop for Communicator {
    fn drop(&mut self) {
        let _current = crate::device::ContextGuard::save();
        let recorded = std::mem::take(self.recorded.get_mut().unwrap_or_else(|p| p.into_inner()));
        for e in &recorded {
            let _ = e.synchronize();
        }
        // SAFETY: the communicator is live and is not used again; its work has completed.
        let _ = unsafe { raw::comm_abort(self.comm) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unique_ids_round_trip_through_bytes() {
        let mut bytes = [0u8; 128];
        for (i, b) in bytes.iter_mut().enumerate() {
            *b = (i * 37 + 200) as u8;
        }
        assert_eq!(UniqueId::from_bytes(bytes).to_bytes(), bytes);
    }

    #[test]
    fn reductions_name_nccl_types_and_refuse_16_bit_integers() {
        assert_eq!(reduce_type(DType::F32).unwrap(), raw::dtype::FLOAT32);
        assert_eq!(reduce_type(DType::BF16).unwrap(), raw::dtype::BFLOAT16);
        assert_eq!(reduce_type(DType::U8).unwrap(), raw::dtype::UINT8);
        for t in [DType::U16, DType::I16] {
            assert_eq!(
                reduce_type(t).unwrap_err().kind(),
                &ErrorKind::UnsupportedDtype
            );
        }
        assert_eq!(ReduceOp::Avg.code(), raw::op::AVG);
    }
}
