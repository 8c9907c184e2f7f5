//! GPU tests of `devspan::nccl` on one GPU: a one-rank communicator sends to and receives from
//! itself (in one group), broadcasts, gathers and reduces, with sources and destinations of
//! every kind of layout (standard, transposed, sliced with a step, reversed, broadcast, empty),
//! against ndarray. A rank's data travels in the operand's row-major (logical) order, so each
//! destination must hold the source's elements in that order.
//!
//! They need libnccl (see `devspan::nccl`'s docs); without it they fail and say so. The
//! module `two_gpus` needs two devices; a one-GPU run skips it (`--skip nccl::two_gpus`).

use std::sync::Arc;

use cudarc::driver::CudaStream;
use devspan::nccl::{Communicator, Group, ReduceOp, UniqueId};
use devspan::testing::gpu_stream;
use devspan::{DeviceArray, DeviceElement, ErrorKind};
use half::f16;
use ndarray::{ArrayD, IxDyn, SliceInfoElem};
use rand::{SeedableRng, rngs::StdRng};

use crate::common::{assert_same, busy, random};

/// A layout: a slice of a random array of `base` elements, then optionally a transpose and a
/// broadcast to a new leading axis.
struct Layout {
    base: &'static [usize],
    slice: &'static [SliceInfoElem],
    transpose: bool,
    broadcast: Option<usize>,
}

const fn step(step: isize) -> SliceInfoElem {
    SliceInfoElem::Slice {
        start: 0,
        end: None,
        step,
    }
}

/// Sources. The last two broadcast or are empty; destinations take the first five.
const LAYOUTS: &[Layout] = &[
    // standard layout: goes to NCCL directly
    Layout {
        base: &[67, 129],
        slice: &[step(1), step(1)],
        transpose: false,
        broadcast: None,
    },
    // transposed
    Layout {
        base: &[130, 67],
        slice: &[step(1), step(1)],
        transpose: true,
        broadcast: None,
    },
    // every second column
    Layout {
        base: &[64, 257],
        slice: &[step(1), step(2)],
        transpose: false,
        broadcast: None,
    },
    // reversed rows and columns, a size-1 axis beside a large one
    Layout {
        base: &[3, 301],
        slice: &[step(-1), step(-1)],
        transpose: false,
        broadcast: None,
    },
    // rank 3, tiny extents, transposed
    Layout {
        base: &[2, 3, 1031],
        slice: &[step(1), step(-1), step(3)],
        transpose: true,
        broadcast: None,
    },
    // a row broadcast along a new leading axis
    Layout {
        base: &[1, 99],
        slice: &[step(1), step(1)],
        transpose: false,
        broadcast: Some(5),
    },
    // empty
    Layout {
        base: &[0, 7],
        slice: &[step(1), step(1)],
        transpose: false,
        broadcast: None,
    },
];

fn comm() -> Communicator {
    let _ = gpu_stream();
    let mut comms = Communicator::for_devices(&[0]).unwrap_or_else(|e| {
        panic!("this NCCL test cannot run: {e} (libnccl is looked for as DEVSPAN_NCCL_LIB, libnccl.so.2, libnccl.so)")
    });
    comms.pop().expect("one communicator")
}

/// A random host array of `l.base`, uploaded; its view through `l` on the host (owned, in
/// row-major order) and on the device.
fn source<T: DeviceElement>(
    rng: &mut StdRng,
    l: &Layout,
    stream: &Arc<CudaStream>,
) -> (ArrayD<T>, DeviceArray<T, IxDyn>) {
    let host: ArrayD<T> = random(rng, l.base);
    let dev = DeviceArray::from_host(stream, &host).expect("upload");
    (host, dev)
}

/// `host` and `dev` (the same array) viewed through `l`: the host view's elements (row-major)
/// and the device view.
fn viewed<'a, T: DeviceElement>(
    l: &Layout,
    host: &'a ArrayD<T>,
    dev: &'a DeviceArray<T, IxDyn>,
) -> (ArrayD<T>, devspan::DeviceView<'a, T, IxDyn>) {
    let hv = host.slice(l.slice);
    let dv = dev.slice(l.slice);
    let (hv, dv) = if l.transpose {
        (hv.reversed_axes(), dv.reversed_axes())
    } else {
        (hv, dv)
    };
    match l.broadcast {
        Some(n) => {
            let mut shape = hv.shape().to_vec();
            shape.insert(0, n);
            (
                hv.broadcast(IxDyn(&shape)).expect("host").to_owned(),
                dv.broadcast(IxDyn(&shape)).expect("device"),
            )
        }
        None => (hv.to_owned(), dv),
    }
}

/// A poisoned destination of `n` elements laid out as `l` (which must not broadcast) over a
/// fresh array: `l` itself when its view has `n` elements, a row of `n` otherwise. `f` gets the
/// writable view; its elements come back in row-major order.
fn with_destination<T: DeviceElement>(
    l: &Layout,
    n: usize,
    stream: &Arc<CudaStream>,
    f: impl FnOnce(&mut devspan::DeviceViewMut<'_, T, IxDyn>),
) -> Vec<T> {
    let probe = ArrayD::<u8>::zeros(IxDyn(l.base));
    let fits = probe.slice(l.slice).len() == n;
    let (base, slice, transpose) = if fits {
        (l.base.to_vec(), l.slice.to_vec(), l.transpose)
    } else {
        (vec![n], vec![step(1)], false)
    };
    let poison: T = bytemuck::cast_slice::<u8, T>(&[0x5a; 8])[0];
    let mut a = DeviceArray::<T, _>::from_elem(stream, IxDyn(&base), poison).expect("alloc");
    let v = a.slice_mut(slice.as_slice());
    let mut v = if transpose { v.reversed_axes() } else { v };
    f(&mut v);
    v.to_host().expect("download").iter().copied().collect()
}

fn check_values<T: DeviceElement>(got: &[T], want: &ArrayD<T>, what: &str) {
    let want: Vec<T> = want.iter().copied().collect();
    let got = ArrayD::from_shape_vec(IxDyn(&[got.len()]), got.to_vec()).expect("shape");
    let want = ArrayD::from_shape_vec(IxDyn(&[want.len()]), want).expect("shape");
    assert_same(&got.view(), &want.view(), what);
}

/// Every source layout sent to this rank and received into every destination layout (in one
/// group), for four element types.
fn send_recv_each<T: DeviceElement>(comm: &Communicator, rng: &mut StdRng, name: &str) {
    let stream = gpu_stream();
    for (i, ls) in LAYOUTS.iter().enumerate() {
        let (host, dev) = source::<T>(rng, ls, &stream);
        let (want, src) = viewed(ls, &host, &dev);
        for (j, ld) in LAYOUTS[..5].iter().enumerate() {
            let what = format!("{name}: send layout {i} -> recv layout {j}");
            let got = with_destination::<T>(ld, want.len(), &stream, |dst| {
                let mut g = Group::new();
                g.send(comm, &src, 0, &stream).expect("send");
                g.recv(comm, dst, 0, &stream).expect("recv");
                g.run().unwrap_or_else(|e| panic!("{what}: {e}"));
            });
            check_values(&got, &want, &what);
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU and libnccl"]
fn send_to_self_and_receive_match_ndarray_for_every_layout() {
    let _gpu = crate::common::gpu_shared();
    let comm = comm();
    println!("NCCL {}", devspan::nccl::version().expect("version"));
    let mut rng = StdRng::seed_from_u64(30);
    send_recv_each::<f32>(&comm, &mut rng, "f32");
    send_recv_each::<u8>(&comm, &mut rng, "u8");
    send_recv_each::<f16>(&comm, &mut rng, "f16");
    send_recv_each::<f64>(&comm, &mut rng, "f64");
}

#[test]
#[ignore = "needs a CUDA GPU and libnccl"]
fn collectives_over_one_rank_match_ndarray_for_every_layout() {
    let _gpu = crate::common::gpu_shared();
    let comm = comm();
    let stream = gpu_stream();
    let mut rng = StdRng::seed_from_u64(31);
    for (i, ls) in LAYOUTS.iter().enumerate() {
        let (host, dev) = source::<f32>(&mut rng, ls, &stream);
        let (want, src) = viewed(ls, &host, &dev);
        for (j, ld) in LAYOUTS[..5].iter().enumerate() {
            let what = format!("all_gather layout {i} -> {j}");
            let got = with_destination::<f32>(ld, want.len(), &stream, |dst| {
                comm.all_gather(&src, dst, &stream)
                    .unwrap_or_else(|e| panic!("{what}: {e}"));
            });
            check_values(&got, &want, &what);
        }
        // All-reduce into destinations of the source's shape: standard, and column-major (the
        // transpose of an array of the reversed shape).
        let reversed: Vec<usize> = want.shape().iter().rev().copied().collect();
        for op in [ReduceOp::Sum, ReduceOp::Max, ReduceOp::Avg] {
            let what = format!("all_reduce {op:?} layout {i}");
            let mut out =
                DeviceArray::<f32, _>::from_elem(&stream, want.raw_dim(), -9.0).expect("alloc");
            comm.all_reduce(&src, &mut out, op, &stream)
                .unwrap_or_else(|e| panic!("{what}: {e}"));
            let got: Vec<f32> = out.to_host().expect("download").iter().copied().collect();
            check_values(&got, &want, &what);
            let mut out_t =
                DeviceArray::<f32, _>::from_elem(&stream, IxDyn(&reversed), -9.0).expect("alloc");
            let mut t = out_t.view_mut().reversed_axes();
            comm.all_reduce(&src, &mut t, op, &stream)
                .unwrap_or_else(|e| panic!("{what}, column-major destination: {e}"));
            let got: Vec<f32> = t.to_host().expect("download").iter().copied().collect();
            check_values(&got, &want, &format!("{what}, column-major destination"));
        }
        // In place: broadcast from this rank and all-reduce leave a writable view as it was.
        if ls.broadcast.is_none() {
            let (host2, mut dev2) = source::<f32>(&mut rng, ls, &stream);
            let (want2, _) = viewed(ls, &host2, &dev2);
            let v = dev2.slice_mut(ls.slice);
            let mut v = if ls.transpose { v.reversed_axes() } else { v };
            comm.broadcast(&mut v, 0, &stream)
                .unwrap_or_else(|e| panic!("broadcast layout {i}: {e}"));
            comm.all_reduce_in_place(&mut v, ReduceOp::Sum, &stream)
                .unwrap_or_else(|e| panic!("all_reduce_in_place layout {i}: {e}"));
            let got: Vec<f32> = v.to_host().expect("download").iter().copied().collect();
            check_values(&got, &want2, &format!("in place, layout {i}"));
        }
    }
    // A row broadcast to the destination's shape by all_reduce itself.
    let row = DeviceArray::<f32, _>::from_host(&stream, &ndarray::arr1(&[1.0f32, 2.0, 3.0]))
        .expect("upload");
    let mut out = DeviceArray::<f32, _>::zeros(&stream, (4, 3)).expect("alloc");
    comm.all_reduce(&row, &mut out, ReduceOp::Sum, &stream)
        .expect("broadcast source");
    let want = ndarray::arr1(&[1.0f32, 2.0, 3.0])
        .broadcast((4, 3))
        .expect("host")
        .to_owned()
        .into_dyn();
    let got: Vec<f32> = out.to_host().expect("download").iter().copied().collect();
    check_values(&got, &want, "all_reduce of a broadcast row");
}

#[test]
#[ignore = "needs a CUDA GPU and libnccl"]
fn bad_calls_are_refused_with_their_kinds() {
    let _gpu = crate::common::gpu_shared();
    let comm = comm();
    let stream = gpu_stream();
    let a = DeviceArray::<f32, _>::zeros(&stream, (4, 6)).expect("alloc");
    let mut b = DeviceArray::<f32, _>::zeros(&stream, (5, 6)).expect("alloc");
    let kind = |r: devspan::Result<()>| r.expect_err("refused").kind().clone();
    assert_eq!(kind(comm.send(&a, 1, &stream)), ErrorKind::InvalidArgument);
    assert_eq!(
        kind(comm.broadcast(&mut b, 3, &stream)),
        ErrorKind::InvalidArgument
    );
    assert_eq!(
        kind(comm.all_gather(&a, &mut b, &stream)),
        ErrorKind::ShapeMismatch
    );
    assert_eq!(
        kind(comm.all_reduce(&a, &mut b, ReduceOp::Sum, &stream)),
        ErrorKind::ShapeMismatch
    );
    let c = DeviceArray::<u16, _>::zeros(&stream, 8).expect("alloc");
    let mut d = DeviceArray::<u16, _>::zeros(&stream, 8).expect("alloc");
    assert_eq!(
        kind(comm.all_reduce(&c, &mut d, ReduceOp::Max, &stream)),
        ErrorKind::UnsupportedDtype
    );
    assert!(Communicator::for_devices(&[]).is_err());
    assert!(Communicator::for_devices(&[0, 0]).is_err());
    // Nothing was enqueued by the refused calls: the communicator still works.
    let mut e = DeviceArray::<f32, _>::zeros(&stream, (4, 6)).expect("alloc");
    let mut g = Group::new();
    g.send(&comm, &a, 0, &stream).expect("send");
    g.recv(&comm, &mut e, 0, &stream).expect("recv");
    g.run().expect("run");
    stream.synchronize().expect("sync");
}

/// The source is written behind a busy stream and sent on another stream, then dropped while
/// its memory is reallocated and overwritten: the receiver must hold what was written. The
/// receiving view is transposed (unpacked after the group).
#[test]
#[ignore = "needs a CUDA GPU and libnccl"]
fn operations_order_after_earlier_work_and_keep_sources_alive() {
    let _gpu = crate::common::gpu_exclusive();
    let comm = comm();
    let a = gpu_stream();
    let b = a.context().new_stream().expect("stream");
    const N: usize = 8 << 20;
    let mut src = DeviceArray::<f32, _>::zeros(&a, (N / 1024, 1024)).expect("alloc");
    busy(&a, 300);
    src.fill(7.0).expect("fill");
    let mut dst = DeviceArray::<f32, _>::zeros(&b, (1024, N / 1024)).expect("alloc");
    {
        let mut t = dst.view_mut().reversed_axes();
        let mut g = Group::new();
        g.send(&comm, &src, 0, &b).expect("send");
        g.recv(&comm, &mut t, 0, &b).expect("recv");
        g.run().expect("run");
    }
    drop(src);
    let mut reused = DeviceArray::<f32, _>::zeros(&a, (N / 1024, 1024)).expect("alloc");
    reused.fill(-1.5).expect("fill");
    let got = dst.to_host().expect("download");
    let bad = got.iter().filter(|&&x| x != 7.0).count();
    assert_eq!(
        bad, 0,
        "{bad} of {N} received elements are not the source's"
    );
}

#[test]
#[ignore = "needs a CUDA GPU and libnccl"]
fn a_communicator_from_a_unique_id_works_for_one_rank() {
    let _gpu = crate::common::gpu_shared();
    let _ = comm();
    let id = UniqueId::new().expect("id");
    let id = UniqueId::from_bytes(id.to_bytes());
    let comm = Communicator::from_rank(0, 0, 1, &id).expect("from_rank");
    assert_eq!((comm.rank(), comm.world_size(), comm.device()), (0, 1, 0));
    let stream = gpu_stream();
    let mut rng = StdRng::seed_from_u64(32);
    let host: ArrayD<f64> = random(&mut rng, &[33, 17]);
    let src = DeviceArray::from_host(&stream, &host).expect("upload");
    let mut dst = DeviceArray::<f64, _>::zeros(&stream, (17, 33)).expect("alloc");
    comm.all_gather(&src.t(), &mut dst, &stream)
        .expect("all_gather");
    let got = dst.to_host().expect("download");
    assert_same(
        &got.view().into_dyn(),
        &host.t().to_owned().view().into_dyn(),
        "all_gather of a transposed f64 view",
    );
    assert!(Communicator::from_rank(0, 1, 1, &id).is_err());
}

/// Two ranks in one process, one per GPU: the operations of both ranks go into one group.
/// They need two devices; a one-GPU run skips them (`--skip nccl::two_gpus`).
mod two_gpus {
    use super::*;

    fn pair() -> (Vec<Communicator>, Arc<CudaStream>, Arc<CudaStream>) {
        let _ = gpu_stream();
        let comms = Communicator::for_devices(&[0, 1])
            .unwrap_or_else(|e| panic!("two ranks on devices 0 and 1: {e}"));
        let s0 = devspan::new_stream(0).expect("stream on device 0");
        let s1 = devspan::new_stream(1).expect("stream on device 1");
        (comms, s0, s1)
    }

    /// Every source layout on device 0 sent to every destination layout on device 1.
    #[test]
    #[ignore = "needs two CUDA GPUs and libnccl"]
    fn send_and_receive_between_devices_for_every_layout() {
        let _gpu = crate::common::gpu_shared();
        let (comms, s0, s1) = pair();
        let mut rng = StdRng::seed_from_u64(40);
        for (i, ls) in LAYOUTS.iter().enumerate() {
            let (host, dev) = source::<f32>(&mut rng, ls, &s0);
            let (want, src) = viewed(ls, &host, &dev);
            for (j, ld) in LAYOUTS[..5].iter().enumerate() {
                let what = format!("device 0 layout {i} -> device 1 layout {j}");
                let got = with_destination::<f32>(ld, want.len(), &s1, |dst| {
                    let mut g = Group::new();
                    g.send(&comms[0], &src, 1, &s0).expect("send");
                    g.recv(&comms[1], dst, 0, &s1).expect("recv");
                    g.run().unwrap_or_else(|e| panic!("{what}: {e}"));
                });
                check_values(&got, &want, &what);
            }
        }
    }

    /// All-reduce (sum), all-gather and broadcast over two ranks with differently laid out
    /// operands, against ndarray.
    #[test]
    #[ignore = "needs two CUDA GPUs and libnccl"]
    fn collectives_over_two_ranks_match_ndarray() {
        let _gpu = crate::common::gpu_shared();
        let (comms, s0, s1) = pair();
        let mut rng = StdRng::seed_from_u64(41);
        let h0: ArrayD<f32> = random(&mut rng, &[96, 130]);
        let h1: ArrayD<f32> = random(&mut rng, &[130, 96]);
        let d0 = DeviceArray::from_host(&s0, &h0).expect("upload");
        let d1 = DeviceArray::from_host(&s1, &h1).expect("upload");
        let v1 = d1.t(); // rank 1's operand: the transpose, shape [96, 130]
        let want_sum = &h0 + &h1.t();
        let mut r0 = DeviceArray::<f32, _>::zeros(&s0, IxDyn(&[96, 130])).expect("alloc");
        let mut r1t = DeviceArray::<f32, _>::zeros(&s1, IxDyn(&[130, 96])).expect("alloc");
        {
            let mut r1 = r1t.view_mut().reversed_axes();
            let mut g = Group::new();
            g.all_reduce(&comms[0], &d0, &mut r0, ReduceOp::Sum, &s0)
                .expect("rank 0");
            g.all_reduce(&comms[1], &v1, &mut r1, ReduceOp::Sum, &s1)
                .expect("rank 1");
            g.run().expect("all_reduce");
        }
        let got0 = r0.to_host().expect("download");
        let got1 = r1t.to_host().expect("download").reversed_axes();
        assert_same(&got0.view(), &want_sum.view(), "all_reduce rank 0");
        assert_same(
            &got1.view(),
            &want_sum.view(),
            "all_reduce rank 1 (transposed)",
        );

        let mut g0 = DeviceArray::<f32, _>::zeros(&s0, IxDyn(&[2, 96, 130])).expect("alloc");
        let mut g1 = DeviceArray::<f32, _>::zeros(&s1, IxDyn(&[2, 96, 130])).expect("alloc");
        {
            let mut g = Group::new();
            g.all_gather(&comms[0], &d0, &mut g0, &s0).expect("rank 0");
            g.all_gather(&comms[1], &v1, &mut g1, &s1).expect("rank 1");
            g.run().expect("all_gather");
        }
        let want_gather = ndarray::stack(ndarray::Axis(0), &[h0.view(), h1.t()]).expect("stack");
        for (g, name) in [(&g0, "rank 0"), (&g1, "rank 1")] {
            let got = g.to_host().expect("download");
            assert_same(
                &got.view(),
                &want_gather.view(),
                &format!("all_gather {name}"),
            );
        }

        // Broadcast from rank 1 into rank 0's transposed view.
        let mut b0t = DeviceArray::<f32, _>::zeros(&s0, IxDyn(&[130, 96])).expect("alloc");
        let mut b1 = d1.t().to_contiguous().expect("copy");
        {
            let mut b0 = b0t.view_mut().reversed_axes();
            let mut g = Group::new();
            g.broadcast(&comms[0], &mut b0, 1, &s0).expect("rank 0");
            g.broadcast(&comms[1], &mut b1, 1, &s1).expect("rank 1");
            g.run().expect("broadcast");
        }
        let got = b0t.to_host().expect("download").reversed_axes();
        assert_same(&got.view(), &h1.t(), "broadcast into a transposed view");
    }
}
