//! [`Group`]: several NCCL operations enqueued as one group, with the packing of
//! non-standard sources and the unpacking of non-standard destinations around it.

use std::ffi::c_int;
use std::sync::Arc;

use cudarc::driver::CudaStream;
use ndarray::Dimension;

use super::{Communicator, ReduceOp, raw, reduce_type};
use crate::DeviceArray;
use crate::element::DeviceElement;
use crate::error::{Error, Result};
use crate::owner::KeepAlive;
use crate::view::{DeviceBase, SpanData, SpanDataMut};

/// An operand's memory: a view's (with its keep-alive, accessed while the group runs), or a
/// temporary's (held by the group).
enum Buf<'g> {
    View {
        keep: &'g KeepAlive<'g>,
        /// The view's first element; known once its access is prepared.
        ptr: Box<dyn Fn() -> u64 + 'g>,
        write: bool,
    },
    Temp(u64),
}

impl Buf<'_> {
    fn ptr(&self) -> u64 {
        match self {
            Buf::View { ptr, .. } => ptr(),
            Buf::Temp(p) => *p,
        }
    }
}

/// The operation of one call, with its operands.
enum Op<'g> {
    Send(Buf<'g>, c_int),
    Recv(Buf<'g>, c_int),
    Broadcast(Buf<'g>, c_int),
    AllGather(Buf<'g>, Buf<'g>),
    AllReduce(Buf<'g>, Buf<'g>, c_int),
    AllReduceInPlace(Buf<'g>, c_int),
}

struct Call<'g> {
    comm: &'g Communicator,
    stream: Arc<CudaStream>,
    count: usize,
    ty: c_int,
    op: Op<'g>,
}

/// Several NCCL operations enqueued as one NCCL group (`ncclGroupStart` ... `ncclGroupEnd`):
/// what a process needs to send and receive between its own communicators, or to exchange
/// with itself, and what makes many point-to-point operations one launch.
///
/// Each method checks its operands and packs a non-contiguous source at once (on the given
/// stream); [`run`](Self::run) enqueues the operations and then unpacks the destinations. A
/// group dropped without `run` enqueues nothing (the packing already enqueued is harmless).
/// The group borrows its operands until it runs, so bind views made for it to variables first.
///
/// ```no_run
/// # fn main() -> devspan::Result<()> {
/// use devspan::DeviceArray;
/// use devspan::nccl::{Communicator, Group};
/// let comms = Communicator::for_devices(&[0, 1])?;
/// let (s0, s1) = (devspan::new_stream(0)?, devspan::new_stream(1)?);
/// let a = DeviceArray::<f32, _>::from_elem(&s0, (256, 512), 2.0)?;
/// let mut b = DeviceArray::<f32, _>::zeros(&s1, (256, 256))?;
/// let every_other = a.slice(ndarray::s![.., ..;2]); // strided: packed on s0
/// let mut g = Group::new();
/// g.send(&comms[0], &every_other, 1, &s0)?;
/// g.recv(&comms[1], &mut b, 0, &s1)?;
/// g.run()?;
/// # Ok(()) }
/// ```
#[derive(Default)]
pub struct Group<'g> {
    calls: Vec<Call<'g>>,
    /// Packed sources, kept until the operations are enqueued.
    temps: Vec<Box<dyn Kept + 'g>>,
    /// Copies of received temporaries into their destinations, after the group.
    unpacks: Vec<Box<dyn FnOnce() -> Result<()> + 'g>>,
}

impl std::fmt::Debug for Group<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Group")
            .field("operations", &self.calls.len())
            .finish()
    }
}

/// Anything the group holds until it has run.
trait Kept {}
impl<T> Kept for T {}

/// Whether NCCL can move the view's memory as it is: standard layout (row-major, every element
/// once).
fn direct<S: SpanData, D: Dimension>(v: &DeviceBase<S, D>) -> bool {
    v.is_standard_layout()
}

impl<'g> Group<'g> {
    /// An empty group.
    pub fn new() -> Self {
        Group::default()
    }

    /// `src`'s memory for NCCL to read: the view itself, or a packed copy.
    fn source<S: SpanData, D: Dimension>(
        &mut self,
        src: &'g DeviceBase<S, D>,
        stream: &Arc<CudaStream>,
    ) -> Result<Buf<'g>> {
        if direct(src) {
            return Ok(Buf::View {
                keep: &src.raw().keep,
                ptr: Box::new(move || src.device_ptr()),
                write: false,
            });
        }
        let packed = src.to_contiguous_on(stream)?;
        let ptr = crate::bytes::address_of(packed.as_cuda_slice());
        self.temps.push(Box::new(packed));
        Ok(Buf::Temp(ptr))
    }

    /// `dst`'s memory for NCCL to write (`read` too: read as well, for in-place operations):
    /// the view itself, or a temporary unpacked into it after the group.
    fn destination<S: SpanDataMut, D: Dimension>(
        &mut self,
        dst: &'g mut DeviceBase<S, D>,
        stream: &Arc<CudaStream>,
        read: bool,
    ) -> Result<Buf<'g>> {
        if direct(dst) {
            let dst: &'g DeviceBase<S, D> = dst;
            return Ok(Buf::View {
                keep: &dst.raw().keep,
                ptr: Box::new(move || dst.device_ptr()),
                write: true,
            });
        }
        let temp = if read {
            dst.to_contiguous_on(stream)?
        } else {
            // SAFETY: the operation writes every element before the unpack reads it; the
            // unpack runs only when the operation was enqueued.
            unsafe { DeviceArray::<S::Elem, D>::uninit(stream, dst.dim())? }
        };
        let ptr = crate::bytes::address_of(temp.as_cuda_slice());
        let stream = stream.clone();
        self.unpacks
            .push(Box::new(move || dst.assign_on(&stream, &temp)));
        Ok(Buf::Temp(ptr))
    }

    fn push(
        &mut self,
        comm: &'g Communicator,
        stream: &Arc<CudaStream>,
        count: usize,
        ty: c_int,
        op: Op<'g>,
    ) -> &mut Self {
        self.calls.push(Call {
            comm,
            stream: stream.clone(),
            count,
            ty,
            op,
        });
        self
    }

    /// Adds a send of `src` to rank `peer` (see [`Communicator::send`]).
    pub fn send<S: SpanData, D: Dimension>(
        &mut self,
        comm: &'g Communicator,
        src: &'g DeviceBase<S, D>,
        peer: usize,
        stream: &Arc<CudaStream>,
    ) -> Result<&mut Self> {
        comm.check(stream, src.device(), "the source", peer)?;
        let bytes = src.len() * std::mem::size_of::<S::Elem>();
        let buf = self.source(src, stream)?;
        Ok(self.push(
            comm,
            stream,
            bytes,
            raw::dtype::UINT8,
            Op::Send(buf, peer as c_int),
        ))
    }

    /// Adds a receive from rank `peer` into `dst` (see [`Communicator::recv`]).
    pub fn recv<S: SpanDataMut, D: Dimension>(
        &mut self,
        comm: &'g Communicator,
        dst: &'g mut DeviceBase<S, D>,
        peer: usize,
        stream: &Arc<CudaStream>,
    ) -> Result<&mut Self> {
        comm.check(stream, dst.device(), "the destination", peer)?;
        let bytes = dst.len() * std::mem::size_of::<S::Elem>();
        let buf = self.destination(dst, stream, false)?;
        Ok(self.push(
            comm,
            stream,
            bytes,
            raw::dtype::UINT8,
            Op::Recv(buf, peer as c_int),
        ))
    }

    /// Adds a broadcast from rank `root`, in place (see [`Communicator::broadcast`]).
    pub fn broadcast<S: SpanDataMut, D: Dimension>(
        &mut self,
        comm: &'g Communicator,
        data: &'g mut DeviceBase<S, D>,
        root: usize,
        stream: &Arc<CudaStream>,
    ) -> Result<&mut Self> {
        comm.check(stream, data.device(), "the data", root)?;
        let bytes = data.len() * std::mem::size_of::<S::Elem>();
        let read = comm.rank == root;
        let buf = self.destination(data, stream, read)?;
        Ok(self.push(
            comm,
            stream,
            bytes,
            raw::dtype::UINT8,
            Op::Broadcast(buf, root as c_int),
        ))
    }

    /// Adds an all-gather (see [`Communicator::all_gather`]).
    pub fn all_gather<S: SpanData, D: Dimension, S2: SpanDataMut<Elem = S::Elem>, E: Dimension>(
        &mut self,
        comm: &'g Communicator,
        src: &'g DeviceBase<S, D>,
        dst: &'g mut DeviceBase<S2, E>,
        stream: &Arc<CudaStream>,
    ) -> Result<&mut Self> {
        comm.check(stream, src.device(), "the source", 0)?;
        comm.check(stream, dst.device(), "the destination", 0)?;
        if src.len().checked_mul(comm.world) != Some(dst.len()) {
            return Err(Error::shape(format!(
                "all-gather of {} elements per rank over {} ranks into a destination of shape {:?} ({} elements)",
                src.len(),
                comm.world,
                dst.shape(),
                dst.len()
            )));
        }
        let bytes = src.len() * std::mem::size_of::<S::Elem>();
        let s = self.source(src, stream)?;
        let d = self.destination(dst, stream, false)?;
        Ok(self.push(comm, stream, bytes, raw::dtype::UINT8, Op::AllGather(s, d)))
    }

    /// Adds an all-reduce (see [`Communicator::all_reduce`]).
    pub fn all_reduce<S: SpanData, D: Dimension, S2: SpanDataMut<Elem = S::Elem>, E: Dimension>(
        &mut self,
        comm: &'g Communicator,
        src: &'g DeviceBase<S, D>,
        dst: &'g mut DeviceBase<S2, E>,
        op: ReduceOp,
        stream: &Arc<CudaStream>,
    ) -> Result<&mut Self> {
        comm.check(stream, src.device(), "the source", 0)?;
        comm.check(stream, dst.device(), "the destination", 0)?;
        let ty = reduce_type(S::Elem::DTYPE)?;
        let count = dst.len();
        let s = if src.shape() == dst.shape() {
            self.source(src, stream)?
        } else {
            // A broadcast source: packed at the destination's shape.
            let b = src.broadcast(dst.raw_dim()).map_err(|e| {
                Error::shape(format!(
                    "all-reduce source of shape {:?} does not broadcast to the destination's {:?}: {e}",
                    src.shape(),
                    dst.shape()
                ))
            })?;
            let packed = b.to_contiguous_on(stream)?;
            let ptr = crate::bytes::address_of(packed.as_cuda_slice());
            self.temps.push(Box::new(packed));
            Buf::Temp(ptr)
        };
        let d = self.destination(dst, stream, false)?;
        Ok(self.push(comm, stream, count, ty, Op::AllReduce(s, d, op.code())))
    }

    /// Adds an in-place all-reduce (see [`Communicator::all_reduce_in_place`]).
    pub fn all_reduce_in_place<S: SpanDataMut, D: Dimension>(
        &mut self,
        comm: &'g Communicator,
        data: &'g mut DeviceBase<S, D>,
        op: ReduceOp,
        stream: &Arc<CudaStream>,
    ) -> Result<&mut Self> {
        comm.check(stream, data.device(), "the data", 0)?;
        let ty = reduce_type(S::Elem::DTYPE)?;
        let count = data.len();
        let buf = self.destination(data, stream, true)?;
        Ok(self.push(
            comm,
            stream,
            count,
            ty,
            Op::AllReduceInPlace(buf, op.code()),
        ))
    }

    /// Enqueues the operations as one NCCL group, then unpacks the destinations that needed a
    /// temporary. Returns without waiting for the GPU.
    pub fn run(mut self) -> Result<()> {
        let calls = std::mem::take(&mut self.calls);
        if calls.is_empty() {
            return Ok(());
        }
        let mut accesses: Vec<(&KeepAlive<'_>, &Arc<CudaStream>, bool)> = Vec::new();
        for c in &calls {
            let bufs: [Option<&Buf<'_>>; 2] = match &c.op {
                Op::Send(b, _)
                | Op::Recv(b, _)
                | Op::Broadcast(b, _)
                | Op::AllReduceInPlace(b, _) => [Some(b), None],
                Op::AllGather(s, d) | Op::AllReduce(s, d, _) => [Some(s), Some(d)],
            };
            for b in bufs.into_iter().flatten() {
                if let Buf::View { keep, write, .. } = b {
                    accesses.push((keep, &c.stream, *write));
                }
            }
        }
        let _current = crate::device::ContextGuard::save();
        let mut enqueue = || {
            let raw_calls: Vec<_> = calls
                .iter()
                .filter(|c| c.count > 0)
                .map(|c| {
                    let call = match &c.op {
                        Op::Send(b, peer) => raw::Call::Send {
                            buf: b.ptr(),
                            peer: *peer,
                        },
                        Op::Recv(b, peer) => raw::Call::Recv {
                            buf: b.ptr(),
                            peer: *peer,
                        },
                        Op::Broadcast(b, root) => raw::Call::Broadcast {
                            buf: b.ptr(),
                            root: *root,
                        },
                        Op::AllGather(s, d) => raw::Call::AllGather {
                            send: s.ptr(),
                            recv: d.ptr(),
                        },
                        Op::AllReduce(s, d, op) => raw::Call::AllReduce {
                            send: s.ptr(),
                            recv: d.ptr(),
                            op: *op,
                        },
                        Op::AllReduceInPlace(b, op) => {
                            let p = b.ptr();
                            raw::Call::AllReduce {
                                send: p,
                                recv: p,
                                op: *op,
                            }
                        }
                    };
                    (c.comm.comm, c.stream.cu_stream(), c.count, c.ty, call)
                })
                .collect();
            if raw_calls.is_empty() {
                return Ok(());
            }
            crate::device::bind_context(&calls[0].comm.ctx)?;
            // SAFETY: every communicator is live (borrowed for 'g) and its stream belongs to its
            // device (checked when the call was added); every buffer is a standard-layout view
            // whose access is prepared (its memory kept alive and ordered) or a temporary held
            // by the group until the stream reaches the operation (freed stream-ordered on the
            // same stream), with `count` elements of the type (all-gather's destination
            // `world` times as many, checked).
            unsafe { raw::group(&raw_calls) }
        };
        let enqueued = nested(&accesses, &mut enqueue);
        // Recorded whatever the group returned: part of it may have been enqueued, and each
        // communicator's drop waits for its work.
        let mut recorded = Ok(());
        for c in &calls {
            let r = c.comm.record(&c.stream);
            recorded = recorded.and(r);
        }
        enqueued?;
        // Every destination is unpacked once the group was enqueued, also when a record or an
        // earlier unpack failed; the first error is returned.
        let mut result = recorded;
        for unpack in std::mem::take(&mut self.unpacks) {
            result = result.and(unpack());
        }
        result
    }
}

/// Runs `f` inside the accesses of every keep-alive of `accesses` (each prepared before `f`
/// and recorded after it, on its stream).
fn nested(
    accesses: &[(&KeepAlive<'_>, &Arc<CudaStream>, bool)],
    f: &mut dyn FnMut() -> Result<()>,
) -> Result<()> {
    match accesses.split_first() {
        None => f(),
        Some(((keep, stream, write), rest)) => {
            let inner = || nested(rest, f);
            if *write {
                keep.writing(stream, inner)
            } else {
                keep.reading(stream, inner)
            }
        }
    }
}
