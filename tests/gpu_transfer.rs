//! GPU tests of host <-> device copies between arbitrary layouts on both sides.

use devspan::testing::gpu_stream;
use devspan::{DeviceArray, DeviceElement, ErrorKind};
use half::{bf16, f16};
use ndarray::{Array, ArrayD, IxDyn, SliceInfo, SliceInfoElem};
use rand::{Rng, SeedableRng, rngs::StdRng};

fn random<T: DeviceElement>(rng: &mut StdRng, shape: &[usize]) -> ArrayD<T> {
    let n: usize = shape.iter().product();
    let mut words = vec![0u64; (n * std::mem::size_of::<T>()).div_ceil(8)];
    rng.fill(words.as_mut_slice());
    let bytes = &bytemuck::cast_slice::<u64, u8>(&words)[..n * std::mem::size_of::<T>()];
    Array::from_shape_vec(IxDyn(shape), bytemuck::cast_slice::<u8, T>(bytes).to_vec()).unwrap()
}

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

fn bits<T: DeviceElement>(a: &ArrayD<T>) -> Vec<u64> {
    a.iter().map(|x| x.to_bits_u64()).collect()
}

fn round_trips<T: DeviceElement>(rng: &mut StdRng) {
    let stream = gpu_stream();
    for case in 0..40 {
        let rank = 1 + case % 4;
        let base: Vec<usize> = (0..rank).map(|_| rng.random_range(1..9)).collect();
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
                        end: Some(start + (n as isize - 1) * k + 1),
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
                sub.copy_from_host(&stream, &hview).unwrap();
            }
            let dinfo = SliceInfo::<_, IxDyn, IxDyn>::try_from(dsl.clone()).unwrap();
            expect
                .view_mut()
                .slice_move(dinfo)
                .permuted_axes(IxDyn(&dperm))
                .assign(&hview);
            assert_eq!(
                bits(&dev.to_host(&stream).unwrap()),
                bits(&expect),
                "{} up, case {case}",
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
            dview.copy_to_host(&stream, &mut hv).unwrap();
            let mut want = before.clone();
            let dinfo = SliceInfo::<_, IxDyn, IxDyn>::try_from(dsl.clone()).unwrap();
            want.view_mut()
                .permuted_axes(IxDyn(&inv))
                .slice_move(hinfo.clone())
                .assign(&expect.view().slice_move(dinfo).permuted_axes(IxDyn(&dperm)));
            assert_eq!(
                bits(&host_base),
                bits(&want),
                "{} down, case {case}",
                T::DTYPE
            );
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn transfers_between_random_layouts() {
    let mut rng = StdRng::seed_from_u64(11);
    round_trips::<u8>(&mut rng);
    round_trips::<i16>(&mut rng);
    round_trips::<f16>(&mut rng);
    round_trips::<bf16>(&mut rng);
    round_trips::<f32>(&mut rng);
    round_trips::<u64>(&mut rng);
    round_trips::<f64>(&mut rng);
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn transfer_errors_write_nothing() {
    let stream = gpu_stream();
    let mut dev = DeviceArray::<f32, _>::zeros(&stream, (4, 5)).unwrap();
    dev.fill(&stream, 1.0).unwrap();
    let host = ndarray::Array2::<f32>::from_elem((5, 4), 7.0);
    let e = dev
        .view_mut()
        .copy_from_host(&stream, &host.view())
        .unwrap_err();
    assert_eq!(e.kind(), &ErrorKind::ShapeMismatch);
    assert!(dev.to_host(&stream).unwrap().iter().all(|&x| x == 1.0));
    let mut out = ndarray::Array2::<f32>::from_elem((5, 4), 3.0);
    let e = dev
        .view()
        .copy_to_host(&stream, &mut out.view_mut())
        .unwrap_err();
    assert_eq!(e.kind(), &ErrorKind::ShapeMismatch);
    assert!(out.iter().all(|&x| x == 3.0));
    // Empty arrays move nothing and succeed.
    let mut empty = DeviceArray::<u8, _>::zeros(&stream, (0, 3)).unwrap();
    empty
        .view_mut()
        .copy_from_host(&stream, &ndarray::Array2::<u8>::zeros((0, 3)).view())
        .unwrap();
    let mut h = ndarray::Array2::<u8>::zeros((0, 3));
    empty
        .view()
        .copy_to_host(&stream, &mut h.view_mut())
        .unwrap();
}
