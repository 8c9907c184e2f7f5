//! GPU tests of host <-> device copies between arbitrary layouts on both sides.

use devspan::internals::transfer_path;
use devspan::testing::gpu_stream;
use devspan::{DeviceArray, DeviceElement, ErrorKind, HostPath, PinnedBuffer, TransferOptions};
use half::{bf16, f16};
use ndarray::{IxDyn, SliceInfo, SliceInfoElem};
use rand::{Rng, SeedableRng, rngs::StdRng};

use crate::common::{bits, gpu_shared, random};

/// A random slicing (steps, negative steps, offsets) of every axis of a base shape, and a random
/// axis permutation.
fn random_layout(rng: &mut StdRng, base: &[usize]) -> (Vec<SliceInfoElem>, Vec<usize>) {
    let sl = base
        .iter()
        .map(|&n| {
            let step = [1isize, 1, 2, -1, -3][rng.random_range(0..5)];
            let start = rng.random_range(0..=n.min(2)) as isize;
            SliceInfoElem::Slice {
                start,
                end: None,
                step,
            }
        })
        .collect();
    let mut perm: Vec<usize> = (0..base.len()).collect();
    for i in (1..perm.len()).rev() {
        perm.swap(i, rng.random_range(0..=i));
    }
    (sl, perm)
}

/// Small staging chunks (not a multiple of anything), 1-4 threads, sometimes a forced host path.
fn random_options(rng: &mut StdRng) -> TransferOptions {
    TransferOptions {
        chunk_bytes: rng.random_range(1..400),
        threads: rng.random_range(1..5),
        host_path: [None, None, Some(HostPath::Pack), Some(HostPath::Superset)]
            [rng.random_range(0..4)],
        pinned_direct: true,
    }
}

fn round_trips<T: DeviceElement>(rng: &mut StdRng) {
    let stream = gpu_stream();
    for case in 0..48 {
        let rank = 1 + case % 6;
        let opt = if case % 3 == 0 {
            TransferOptions::default()
        } else {
            random_options(rng)
        };
        let hi = if rank >= 5 { 5 } else { 9 };
        let base: Vec<usize> = (0..rank).map(|_| rng.random_range(1..hi)).collect();
        // Device side: a strided view of a poisoned array.
        let (dsl, dperm) = random_layout(rng, &base);
        let dinfo = SliceInfo::<_, IxDyn, IxDyn>::try_from(dsl.clone()).unwrap();
        let poison = random::<T>(rng, &base);
        let mut dev = DeviceArray::from_host(&stream, &poison.view()).unwrap();
        let mut expect = poison.clone();
        let shape: Vec<usize> = {
            let v = expect.view().slice_move(dinfo).permuted_axes(IxDyn(&dperm));
            v.shape().to_vec()
        };
        // Host side: another layout of the same shape.
        let (hsl, hperm) = random_layout(rng, &shape);
        let big: Vec<usize> = shape.iter().map(|&n| n * 3 + 2).collect();
        // The host buffer is laid out in a permuted axis order; `inv` undoes the permutation.
        let bigp: Vec<usize> = hperm.iter().map(|&p| big[p]).collect();
        let mut inv = vec![0; hperm.len()];
        for (i, &p) in hperm.iter().enumerate() {
            inv[p] = i;
        }
        let mut host_base = random::<T>(rng, &bigp);
        let hinfo: Vec<SliceInfoElem> = hsl
            .iter()
            .zip(&shape)
            .map(|(e, &n)| match *e {
                SliceInfoElem::Slice { start, step, .. } => {
                    let k = step.unsigned_abs() as isize;
                    SliceInfoElem::Slice {
                        start,
                        // An empty axis is an empty range (never a negative end, which
                        // ndarray counts from the back).
                        end: Some(if n == 0 {
                            start
                        } else {
                            start + (n as isize - 1) * k + 1
                        }),
                        step,
                    }
                }
                other => other,
            })
            .collect();
        let hinfo = SliceInfo::<_, IxDyn, IxDyn>::try_from(hinfo).unwrap();
        {
            // Up: host (strided, permuted) -> device (strided, permuted).
            let hview = host_base
                .view()
                .permuted_axes(IxDyn(&inv))
                .slice_move(hinfo.clone());
            assert_eq!(hview.shape(), shape.as_slice());
            {
                let mut dv = dev.view_mut();
                let dinfo = SliceInfo::<_, IxDyn, IxDyn>::try_from(dsl.clone()).unwrap();
                let mut sub = dv.slice_mut(dinfo).permuted_axes(IxDyn(&dperm));
                sub.copy_from_host_with(&stream, &hview, &opt).unwrap();
            }
            let dinfo = SliceInfo::<_, IxDyn, IxDyn>::try_from(dsl.clone()).unwrap();
            expect
                .view_mut()
                .slice_move(dinfo)
                .permuted_axes(IxDyn(&dperm))
                .assign(&hview);
            assert_eq!(
                bits(&dev.to_host_on(&stream).unwrap()),
                bits(&expect),
                "{} up, case {case}, {opt:?}",
                T::DTYPE
            );
        }
        {
            // Down: device (strided) -> host (strided), untouched host elements stay.
            let before = host_base.clone();
            let dinfo = SliceInfo::<_, IxDyn, IxDyn>::try_from(dsl.clone()).unwrap();
            let dview = dev.view().slice(dinfo).permuted_axes(IxDyn(&dperm));
            let mut hv = host_base
                .view_mut()
                .permuted_axes(IxDyn(&inv))
                .slice_move(hinfo.clone());
            dview.copy_to_host_with(&stream, &mut hv, &opt).unwrap();
            let mut want = before.clone();
            let dinfo = SliceInfo::<_, IxDyn, IxDyn>::try_from(dsl.clone()).unwrap();
            want.view_mut()
                .permuted_axes(IxDyn(&inv))
                .slice_move(hinfo.clone())
                .assign(&expect.view().slice_move(dinfo).permuted_axes(IxDyn(&dperm)));
            assert_eq!(
                bits(&host_base),
                bits(&want),
                "{} down, case {case}, {opt:?}",
                T::DTYPE
            );
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn transfers_between_random_layouts() {
    let _gpu = gpu_shared();
    let mut rng = StdRng::seed_from_u64(11);
    round_trips::<u8>(&mut rng);
    round_trips::<i8>(&mut rng);
    round_trips::<u16>(&mut rng);
    round_trips::<i16>(&mut rng);
    round_trips::<f16>(&mut rng);
    round_trips::<bf16>(&mut rng);
    round_trips::<u32>(&mut rng);
    round_trips::<i32>(&mut rng);
    round_trips::<f32>(&mut rng);
    round_trips::<u64>(&mut rng);
    round_trips::<i64>(&mut rng);
    round_trips::<f64>(&mut rng);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn transfer_errors_write_nothing() {
    let _gpu = gpu_shared();
    let stream = gpu_stream();
    let mut dev = DeviceArray::<f32, _>::zeros(&stream, (4, 5)).unwrap();
    dev.fill_on(&stream, 1.0).unwrap();
    let host = ndarray::Array2::<f32>::from_elem((5, 4), 7.0);
    let e = dev
        .view_mut()
        .copy_from_host_on(&stream, &host.view())
        .unwrap_err();
    assert_eq!(e.kind(), &ErrorKind::ShapeMismatch);
    assert!(dev.to_host_on(&stream).unwrap().iter().all(|&x| x == 1.0));
    let mut out = ndarray::Array2::<f32>::from_elem((5, 4), 3.0);
    let e = dev
        .view()
        .copy_to_host_on(&stream, &mut out.view_mut())
        .unwrap_err();
    assert_eq!(e.kind(), &ErrorKind::ShapeMismatch);
    assert!(out.iter().all(|&x| x == 3.0));
    // Empty arrays move nothing and succeed.
    let mut empty = DeviceArray::<u8, _>::zeros(&stream, (0, 3)).unwrap();
    empty
        .view_mut()
        .copy_from_host_on(&stream, &ndarray::Array2::<u8>::zeros((0, 3)).view())
        .unwrap();
    let mut h = ndarray::Array2::<u8>::zeros((0, 3));
    empty
        .view()
        .copy_to_host_on(&stream, &mut h.view_mut())
        .unwrap();
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn transfer_options_errors_write_nothing() {
    let _gpu = gpu_shared();
    let stream = gpu_stream();
    let mut dev = DeviceArray::<u32, _>::zeros(&stream, 100).unwrap();
    dev.fill_on(&stream, 5).unwrap();
    let host = ndarray::Array1::<u32>::from_elem(200, 9);
    let bad = TransferOptions {
        chunk_bytes: 0,
        ..TransferOptions::default()
    };
    // Strided host view (packed through staging), so the options are used.
    let e = dev
        .view_mut()
        .copy_from_host_with(&stream, &host.slice(ndarray::s![..;2]), &bad)
        .unwrap_err();
    assert_eq!(e.kind(), &ErrorKind::InvalidArgument);
    assert!(dev.to_host_on(&stream).unwrap().iter().all(|&x| x == 5));
    // Options are checked before anything moves, also where they would not be used: a
    // contiguous upload, a download into a page-locked block, a new array.
    for bad in [
        bad,
        TransferOptions {
            threads: 0,
            ..TransferOptions::default()
        },
        TransferOptions {
            threads: 257,
            ..TransferOptions::default()
        },
    ] {
        let e = dev
            .view_mut()
            .copy_from_host_with(&stream, &host.slice(ndarray::s![..100]), &bad)
            .unwrap_err();
        assert_eq!(e.kind(), &ErrorKind::InvalidArgument);
        let mut pinned = PinnedBuffer::from_slice(stream.context(), &[3u32; 100]).unwrap();
        let mut out = ndarray::ArrayViewMut1::from(pinned.as_mut_slice().unwrap());
        let e = dev
            .view()
            .copy_to_host_with(&stream, &mut out, &bad)
            .unwrap_err();
        assert_eq!(e.kind(), &ErrorKind::InvalidArgument);
        assert!(pinned.as_slice().unwrap().iter().all(|&x| x == 3));
        let e = DeviceArray::from_host_with(&stream, &host, &bad).unwrap_err();
        assert_eq!(e.kind(), &ErrorKind::InvalidArgument);
    }
    assert!(dev.to_host_on(&stream).unwrap().iter().all(|&x| x == 5));
}

/// Large 1-D and 2-D transfers that are not a multiple of the staging chunk, with several
/// threads, every host path, from pageable and page-locked memory.
#[test]
#[ignore = "needs a CUDA GPU"]
fn transfers_not_a_multiple_of_the_chunk() {
    let _gpu = gpu_shared();
    let stream = gpu_stream();
    let mut rng = StdRng::seed_from_u64(3);
    let n = 1_000_003;
    let host = random::<f32>(&mut rng, &[n])
        .into_dimensionality::<ndarray::Ix1>()
        .unwrap();
    for (chunk, threads) in [(65_536, 3), (1_000_000, 2), (4 << 20, 8), (12, 1)] {
        let opt = TransferOptions {
            chunk_bytes: chunk,
            threads,
            ..TransferOptions::default()
        };
        let poison = random::<f32>(&mut rng, &[n])
            .into_dimensionality::<ndarray::Ix1>()
            .unwrap();
        let mut dev = DeviceArray::from_host(&stream, &poison.view()).unwrap();
        dev.view_mut()
            .copy_from_host_with(&stream, &host.view(), &opt)
            .unwrap();
        let mut back = poison.clone();
        dev.view()
            .copy_to_host_with(&stream, &mut back.view_mut(), &opt)
            .unwrap();
        assert_eq!(
            bits_1(&back),
            bits_1(&host),
            "chunk {chunk}, threads {threads}"
        );
        // Reversed host, strided device.
        let mut dev2 = DeviceArray::<f32, _>::zeros(&stream, 2 * n).unwrap();
        dev2.view_mut()
            .slice_mut(ndarray::s![..;-2])
            .copy_from_host_with(&stream, &host.slice(ndarray::s![..;-1]), &opt)
            .unwrap();
        let got = dev2.to_host_on(&stream).unwrap();
        assert_eq!(
            bits_1(
                &got.slice(ndarray::s![..;-2])
                    .slice(ndarray::s![..;-1])
                    .to_owned()
            ),
            bits_1(&host)
        );
        assert!(got.slice(ndarray::s![..;2]).iter().all(|&x| x == 0.0));
    }
    // A 2-D slice with gaps, every host path.
    let big = random::<u16>(&mut rng, &[1031, 1029])
        .into_dimensionality::<ndarray::Ix2>()
        .unwrap();
    for hp in [None, Some(HostPath::Pack), Some(HostPath::Superset)] {
        let opt = TransferOptions {
            chunk_bytes: 100_000,
            threads: 4,
            host_path: hp,
            pinned_direct: true,
        };
        let v = big.slice(ndarray::s![3..1000;3, 7..1020]);
        let dev = DeviceArray::from_host_with(&stream, &v, &opt).unwrap();
        assert_eq!(dev.to_host_on(&stream).unwrap(), v);
        let mut out = ndarray::Array2::<u16>::from_elem((1031, 1029), 7);
        dev.view()
            .copy_to_host_with(
                &stream,
                &mut out.slice_mut(ndarray::s![3..1000;3, 7..1020]),
                &opt,
            )
            .unwrap();
        let mut want = ndarray::Array2::<u16>::from_elem((1031, 1029), 7);
        want.slice_mut(ndarray::s![3..1000;3, 7..1020]).assign(&v);
        assert_eq!(out, want, "{hp:?}");
    }
    // Page-locked host memory seen through an ordinary ndarray view: copied directly.
    // Random bits include NaNs: compare bit patterns.
    let data = random::<u32>(&mut rng, &[517, 389]).mapv(f32::from_bits);
    let pinned = PinnedBuffer::from_slice(stream.context(), data.as_slice().unwrap()).unwrap();
    let pv = ndarray::ArrayView2::from_shape((517, 389), pinned.as_slice().unwrap()).unwrap();
    let dev = DeviceArray::from_host(&stream, &pv.t()).unwrap();
    assert_eq!(
        bits(&dev.to_host_on(&stream).unwrap().into_dyn()),
        bits(&pv.t().to_owned().into_dyn())
    );
    let mut pout = PinnedBuffer::<f32>::zeros(stream.context(), 517 * 389).unwrap();
    {
        let mut ov =
            ndarray::ArrayViewMut2::from_shape((389, 517), pout.as_mut_slice().unwrap()).unwrap();
        dev.view().copy_to_host_on(&stream, &mut ov).unwrap();
    }
    let want = pv.t().as_standard_layout().to_owned();
    let got: Vec<u32> = pout
        .as_slice()
        .unwrap()
        .iter()
        .map(|x| x.to_bits())
        .collect();
    let want: Vec<u32> = want.iter().map(|x| x.to_bits()).collect();
    assert_eq!(got, want);
}

fn bits_1<T: DeviceElement>(a: &ndarray::Array1<T>) -> Vec<u64> {
    a.iter().map(|x| x.to_bits_u64()).collect()
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn pinned_buffers_copy_to_and_from_strided_device_views() {
    let _gpu = gpu_shared();
    let stream = gpu_stream();
    let mut rng = StdRng::seed_from_u64(8);
    let host = random::<i32>(&mut rng, &[37, 53])
        .into_dimensionality::<ndarray::Ix2>()
        .unwrap();
    let src = PinnedBuffer::from_slice(stream.context(), host.as_slice().unwrap()).unwrap();
    let init = random::<i32>(&mut rng, &[53, 37])
        .into_dimensionality::<ndarray::Ix2>()
        .unwrap();
    let mut dev = DeviceArray::from_host(&stream, &init.view()).unwrap();
    let mut want = init.clone();
    {
        let mut t = dev.view_mut().reversed_axes();
        src.copy_to_device(&stream, &mut t).unwrap();
    }
    want.view_mut().reversed_axes().assign(&host);
    assert_eq!(dev.to_host_on(&stream).unwrap(), want);
    // Back, from a strided, reversed device view; the buffer's accessors wait for the copy.
    let mut back = PinnedBuffer::<i32>::zeros(stream.context(), 37 * 53).unwrap();
    let dv = dev.view();
    let v = dv.slice(ndarray::s![..;-1, ..]);
    back.copy_from_device(&stream, &v).unwrap();
    let expect = want
        .slice(ndarray::s![..;-1, ..])
        .as_standard_layout()
        .to_owned();
    assert_eq!(back.as_slice().unwrap(), expect.as_slice().unwrap());
    // Length mismatch: Err, nothing written.
    let e = back
        .copy_from_device(&stream, &dv.slice(ndarray::s![1.., ..]))
        .unwrap_err();
    assert_eq!(e.kind(), &ErrorKind::ShapeMismatch);
    assert_eq!(back.as_slice().unwrap(), expect.as_slice().unwrap());
    // Dropping the context handles and the buffer with a copy pending is harmless.
    let stream2 = devspan::new_stream(0).unwrap();
    let mut late = PinnedBuffer::<i32>::zeros(stream2.context(), 37 * 53).unwrap();
    late.copy_from_device(&stream2, &v).unwrap();
    drop(stream2);
    drop(late);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn async_transfers_finish_on_wait_drop_and_survive_forget() {
    let _gpu = gpu_shared();
    let stream = gpu_stream();
    let mut rng = StdRng::seed_from_u64(9);
    let host = random::<f64>(&mut rng, &[300, 200])
        .into_dimensionality::<ndarray::Ix2>()
        .unwrap();
    let mut dev = DeviceArray::<f64, _>::zeros(&stream, (200, 300)).unwrap();
    dev.view_mut()
        .copy_from_host_async_on(&stream, &host.t())
        .unwrap()
        .wait()
        .unwrap();
    assert_eq!(
        bits(&dev.to_host_on(&stream).unwrap().into_dyn()),
        bits(&host.t().to_owned().into_dyn())
    );
    // Download: on wait, on drop.
    let mut out = ndarray::Array2::<f64>::zeros((300, 200));
    {
        let v = dev.view();
        let vt = v.t();
        let mut o = out.view_mut();
        vt.copy_to_host_async_on(&stream, &mut o)
            .unwrap()
            .wait()
            .unwrap();
    }
    assert_eq!(
        bits(&out.clone().into_dyn()),
        bits(&host.clone().into_dyn())
    );
    let mut out2 = ndarray::Array2::<f64>::zeros((200, 300));
    {
        let v = dev.view();
        let mut o = out2.view_mut();
        let t = v.copy_to_host_async_on(&stream, &mut o).unwrap();
        drop(t);
    }
    assert_eq!(
        bits(&out2.into_dyn()),
        bits(&host.t().to_owned().into_dyn())
    );
    // Forgotten: the host view is never written.
    let mut out3 = ndarray::Array2::<f64>::from_elem((200, 300), 1.5);
    {
        let v = dev.view();
        let mut o = out3.view_mut();
        std::mem::forget(v.copy_to_host_async_on(&stream, &mut o).unwrap());
    }
    stream.synchronize().unwrap();
    assert!(out3.iter().all(|&x| x == 1.5));
    // Shape errors come before anything is enqueued.
    let mut wrong = ndarray::Array2::<f64>::zeros((300, 200));
    let v = dev.view();
    let mut w = wrong.view_mut();
    assert_eq!(
        v.copy_to_host_async_on(&stream, &mut w).unwrap_err().kind(),
        &ErrorKind::ShapeMismatch
    );
}

/// Device memory in use (total minus free), after synchronising `stream`.
fn device_memory_used(stream: &std::sync::Arc<devspan::cudarc::driver::CudaStream>) -> usize {
    stream.synchronize().unwrap();
    let (free, total) = devspan::cudarc::driver::result::mem_get_info().unwrap();
    total - free
}

/// Device memory that a loop of 200 forgotten transfers of a few MiB each may add: far less
/// than one transfer's device temporary per iteration.
const SLACK: usize = 64 << 20;

/// Downloads from device views that must be gathered first (transposed, every other row),
/// started and forgotten 200 times: the host arrays keep their poison, device memory does not
/// grow, and later downloads, waited for or dropped, are correct.
#[test]
#[ignore = "needs a CUDA GPU"]
fn forgotten_gathering_downloads_leak_no_device_memory_and_write_nothing() {
    let _gpu = gpu_shared();
    use ndarray::{Array2, Ix2, s};
    let stream = gpu_stream();
    let mut rng = StdRng::seed_from_u64(31);
    let data = random::<u32>(&mut rng, &[1024, 1024])
        .into_dimensionality::<Ix2>()
        .unwrap();
    let dev = DeviceArray::from_host(&stream, &data.view()).unwrap();
    let poison = 0x5eed_f00d_u32;
    let mut out_t = Array2::<u32>::from_elem((1024, 1024), poison);
    let mut out_rows = Array2::<u32>::from_elem((512, 1024), poison);
    let dv = dev.view();
    let (vt, vrows) = (dv.t(), dv.slice(s![..;2, ..]));
    // One waited download of each kind first, so that kernel modules are loaded before the
    // memory is measured.
    vt.copy_to_host_async_on(&stream, &mut out_t.view_mut())
        .unwrap()
        .wait()
        .unwrap();
    vrows
        .copy_to_host_async_on(&stream, &mut out_rows.view_mut())
        .unwrap()
        .wait()
        .unwrap();
    assert!(out_t == data.t() && out_rows == data.slice(s![..;2, ..]));
    // Both go through a device temporary.
    for (v, host_strides) in [(&vt, out_t.strides()), (&vrows, out_rows.strides())] {
        let path = transfer_path(v.shape(), host_strides, v.strides(), 4, false);
        assert!(path.ends_with("/staged"), "{path}");
    }
    out_t.fill(poison);
    out_rows.fill(poison);
    let before = device_memory_used(&stream);
    for i in 0..200 {
        if i % 2 == 0 {
            let mut o = out_t.view_mut();
            std::mem::forget(vt.copy_to_host_async_on(&stream, &mut o).unwrap());
        } else {
            let mut o = out_rows.view_mut();
            std::mem::forget(vrows.copy_to_host_async_on(&stream, &mut o).unwrap());
        }
    }
    let after = device_memory_used(&stream);
    assert!(
        !crate::common::unless_sanitized("free device memory check") || after <= before + SLACK,
        "device memory in use grew from {before} to {after} bytes over 200 forgotten downloads"
    );
    assert!(
        out_t.iter().all(|&x| x == poison),
        "a forgotten download wrote the host"
    );
    assert!(
        out_rows.iter().all(|&x| x == poison),
        "a forgotten download wrote the host"
    );
    // Waited and dropped downloads after the forgotten ones.
    vt.copy_to_host_async_on(&stream, &mut out_t.view_mut())
        .unwrap()
        .wait()
        .unwrap();
    assert!(
        out_t == data.t(),
        "waited download after the forgotten ones"
    );
    drop(
        vrows
            .copy_to_host_async_on(&stream, &mut out_rows.view_mut())
            .unwrap(),
    );
    assert!(
        out_rows == data.slice(s![..;2, ..]),
        "dropped download after the forgotten ones"
    );
    // A larger gathered download (several staging chunks, the last one partial) into a host
    // view with gaps, which stay as they were.
    let big = random::<u32>(&mut rng, &[1500, 2000])
        .into_dimensionality::<Ix2>()
        .unwrap();
    let bdev = DeviceArray::from_host(&stream, &big.view()).unwrap();
    let mut host = Array2::<u32>::from_elem((2000, 2999), poison);
    let bv = bdev.view();
    let path = transfer_path(&[2000, 1500], &[2999, 2], bv.t().strides(), 4, false);
    assert_eq!(path, "pack/staged");
    bv.t()
        .copy_to_host_async_on(&stream, &mut host.slice_mut(s![.., ..;2]))
        .unwrap()
        .wait()
        .unwrap();
    let mut want = Array2::<u32>::from_elem((2000, 2999), poison);
    want.slice_mut(s![.., ..;2]).assign(&big.t());
    assert!(
        host == want,
        "large gathered download into a strided host view"
    );
}

/// Uploads that need a device temporary (a transposed host view, a strided device view),
/// started and forgotten 200 times: device memory does not grow, and after synchronising the
/// device holds what the last uploads wrote.
#[test]
#[ignore = "needs a CUDA GPU"]
fn forgotten_uploads_complete_and_leak_no_device_memory() {
    let _gpu = gpu_shared();
    use ndarray::{Ix2, s};
    let stream = gpu_stream();
    let mut rng = StdRng::seed_from_u64(32);
    let a = random::<u32>(&mut rng, &[1024, 1024])
        .into_dimensionality::<Ix2>()
        .unwrap();
    let b = random::<u32>(&mut rng, &[512, 1024])
        .into_dimensionality::<Ix2>()
        .unwrap();
    let mut dev = DeviceArray::<u32, _>::zeros(&stream, (1024, 1024)).unwrap();
    let (at, bv) = (a.t(), b.view());
    // One waited upload of each kind first (kernel modules loaded before measuring).
    dev.view_mut()
        .copy_from_host_async_on(&stream, &at)
        .unwrap()
        .wait()
        .unwrap();
    {
        let mut all = dev.view_mut();
        let mut rows = all.slice_mut(s![..;2, ..]);
        rows.copy_from_host_async_on(&stream, &bv)
            .unwrap()
            .wait()
            .unwrap();
    }
    // Both go through a device temporary.
    assert!(transfer_path(&[1024, 1024], at.strides(), &[1024, 1], 4, true).ends_with("/staged"));
    assert!(transfer_path(&[512, 1024], bv.strides(), &[2048, 1], 4, true).ends_with("/staged"));
    dev.fill_on(&stream, 0).unwrap();
    let before = device_memory_used(&stream);
    for i in 0..200 {
        if i % 2 == 0 {
            let mut all = dev.view_mut();
            std::mem::forget(all.copy_from_host_async_on(&stream, &at).unwrap());
        } else {
            let mut all = dev.view_mut();
            let mut rows = all.slice_mut(s![..;2, ..]);
            std::mem::forget(rows.copy_from_host_async_on(&stream, &bv).unwrap());
        }
    }
    let after = device_memory_used(&stream);
    assert!(
        !crate::common::unless_sanitized("free device memory check") || after <= before + SLACK,
        "device memory in use grew from {before} to {after} bytes over 200 forgotten uploads"
    );
    // The last two uploads: all of `a.t()`, then `b` over every other row.
    let mut want = a.t().to_owned();
    want.slice_mut(s![..;2, ..]).assign(&b);
    assert!(
        dev.to_host_on(&stream).unwrap() == want,
        "device after forgotten uploads"
    );
}
