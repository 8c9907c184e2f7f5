//! Executes plans over host memory with the kernels' own index math, so that the planner can be
//! tested against ndarray on machines without a GPU.

use super::Plan;
pub(crate) use crate::convert::convert_bytes as convert;
use crate::element::DType;
use crate::kernels::args::CONTIG_ALIGN;

/// Host buffers standing in for device allocations at chosen addresses.
#[derive(Default, Debug)]
pub(crate) struct HostMem {
    regions: Vec<(u64, Vec<u8>)>,
}

impl HostMem {
    pub(crate) fn add(&mut self, base: u64, bytes: Vec<u8>) {
        self.regions.push((base, bytes));
    }

    pub(crate) fn region(&self, base: u64) -> &[u8] {
        &self
            .regions
            .iter()
            .find(|r| r.0 == base)
            .expect("no region at base")
            .1
    }

    fn locate(&self, addr: u64, len: usize) -> (usize, usize) {
        for (i, (base, buf)) in self.regions.iter().enumerate() {
            if addr >= *base && addr + len as u64 <= base + buf.len() as u64 {
                return (i, (addr - base) as usize);
            }
        }
        panic!("plan touches 0x{addr:x}+{len}, outside every allocation");
    }

    fn read(&self, addr: u64, len: usize) -> Vec<u8> {
        let (i, o) = self.locate(addr, len);
        self.regions[i].1[o..o + len].to_vec()
    }

    fn write(&mut self, addr: u64, bytes: &[u8]) {
        let (i, o) = self.locate(addr, bytes.len());
        self.regions[i].1[o..o + bytes.len()].copy_from_slice(bytes);
    }
}

fn copy_elem(mem: &mut HostMem, dst: u64, to: DType, src: u64, from: DType) {
    let v = mem.read(src, from.size());
    mem.write(dst, &convert(from, to, &v));
}

fn at(base: u64, off: i64, size: usize) -> u64 {
    (base as i64 + off * size as i64) as u64
}

/// Runs `plan` over `mem`, panicking if it touches memory outside the regions or breaks a
/// kernel's alignment precondition.
pub(crate) fn run(plan: &Plan, mem: &mut HostMem) {
    match *plan {
        Plan::Nothing => {}
        Plan::Memset { dst, n, size, bits } => {
            assert_eq!(dst % size as u64, 0, "memset destination misaligned");
            for i in 0..n {
                mem.write(dst + (i * size) as u64, &bits.to_le_bytes()[..size]);
            }
        }
        Plan::Memcpy { dst, src, bytes } => {
            let v = mem.read(src, bytes);
            mem.write(dst, &v);
        }
        Plan::FillContig {
            dst,
            n,
            head,
            size,
            bits,
        } => {
            if head < n {
                assert_eq!(
                    (dst + head * size as u64) % CONTIG_ALIGN,
                    0,
                    "fill head does not align"
                );
            }
            for i in 0..n {
                mem.write(dst + i * size as u64, &bits.to_le_bytes()[..size]);
            }
        }
        Plan::FillStrided32 {
            ref args,
            size,
            bits,
        } => {
            for i in 0..args.n {
                let (d, _) = args.offsets(i);
                mem.write(at(args.dst, d as i64, size), &bits.to_le_bytes()[..size]);
            }
        }
        Plan::FillStrided64 {
            ref args,
            size,
            bits,
        } => {
            for i in 0..args.n {
                let (d, _) = args.offsets(i);
                mem.write(at(args.dst, d, size), &bits.to_le_bytes()[..size]);
            }
        }
        Plan::Contig {
            dst,
            src,
            n,
            head,
            from,
            to,
        } => {
            if head < n {
                assert_eq!(
                    (dst + head * to.size() as u64) % CONTIG_ALIGN,
                    0,
                    "contig head misaligns dst"
                );
                assert_eq!(
                    (src + head * from.size() as u64) % CONTIG_ALIGN,
                    0,
                    "contig head misaligns src"
                );
            }
            for i in 0..n {
                copy_elem(
                    mem,
                    dst + i * to.size() as u64,
                    to,
                    src + i * from.size() as u64,
                    from,
                );
            }
        }
        Plan::Strided32 { ref args, from, to } => {
            for i in 0..args.n {
                let (d, s) = args.offsets(i);
                copy_elem(
                    mem,
                    at(args.dst, d as i64, to.size()),
                    to,
                    at(args.src, s as i64, from.size()),
                    from,
                );
            }
        }
        Plan::Strided64 { ref args, from, to } => {
            for i in 0..args.n {
                let (d, s) = args.offsets(i);
                copy_elem(
                    mem,
                    at(args.dst, d, to.size()),
                    to,
                    at(args.src, s, from.size()),
                    from,
                );
            }
        }
        Plan::Transpose { ref args, from, to } => {
            let rank = args.batch_rank as usize;
            for b in 0..args.batch {
                let (mut x, mut bd, mut bs) = (b, 0i64, 0i64);
                for k in 0..rank {
                    let q = args.batch_div[k].div(x);
                    let c = (x - q * args.batch_shape[k]) as i64;
                    bd += c * args.batch_dst_strides[k];
                    bs += c * args.batch_src_strides[k];
                    x = q;
                }
                for r in 0..args.rows as i64 {
                    for c in 0..args.cols as i64 {
                        let d = at(args.dst, bd + r * args.dst_row_stride + c, to.size());
                        let s = at(args.src, bs + r + c * args.src_col_stride, from.size());
                        copy_elem(mem, d, to, s, from);
                    }
                }
            }
        }
    }
}
