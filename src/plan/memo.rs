//! Recent plans of copies, per thread.
//!
//! [`plan_copy`] is a pure function of its arguments whose cost grows with the layout: a
//! contiguous copy plans in tens of nanoseconds, a transposed matrix in about half a
//! microsecond, a permutation of a few axes in one to two, and 20 to 30 axes that merge little
//! (grouped into tiles) in several: as long as the launch that follows. A caller that repeats
//! a copy (the same operands, the same layouts: a loop over the same buffers) gets the plan made
//! the first time: [`plan_copy_memo`] keeps the last [`MEMO_ENTRIES`] plans, keyed by every
//! argument, so that a hit returns exactly what planning would make. Copies of one axis and
//! plans that cost next to nothing to make (contiguous copies) are not kept. A plan holds
//! numbers only (addresses, extents, strides): a kept one keeps no memory alive, and memory
//! allocated later at the same addresses gets the plan that planning would make for it.

use super::{Plan, PlanOptions, plan_copy};
use crate::element::DType;
use crate::error::Result;
use std::cell::RefCell;
use std::ops::Deref;
use std::rc::Rc;

/// The fewest axes (before merging) whose copies [`plan_copy_memo`] looks up.
pub(crate) const MEMO_MIN_RANK: usize = 2;

/// How many plans each thread keeps.
pub(crate) const MEMO_ENTRIES: usize = 16;

/// A plan, made for the call or shared with the thread's recent plans. (A made plan stays
/// inline, as [`Plan`]'s own large variants do, rather than behind an allocation.)
#[allow(clippy::large_enum_variant)]
pub(crate) enum PlanRef {
    Made(Plan),
    Kept(Rc<Plan>),
}

impl Deref for PlanRef {
    type Target = Plan;

    fn deref(&self) -> &Plan {
        match self {
            PlanRef::Made(p) => p,
            PlanRef::Kept(p) => p,
        }
    }
}

/// One kept plan and every argument it was made from.
struct Entry {
    dst: u64,
    src: u64,
    to: DType,
    from: DType,
    opt: PlanOptions,
    shape: Vec<usize>,
    dst_strides: Vec<isize>,
    src_strides: Vec<isize>,
    plan: Rc<Plan>,
}

/// The kept plans, the most recently used first, and how many calls found theirs.
struct Memo {
    entries: Vec<Entry>,
    found: u64,
}

thread_local! {
    static MEMO: RefCell<Memo> = const {
        RefCell::new(Memo {
            entries: Vec::new(),
            found: 0,
        })
    };
}

/// How many calls of [`plan_copy_memo`] on this thread have found their plan kept.
#[cfg(feature = "internals")]
pub(crate) fn plans_found() -> u64 {
    MEMO.try_with(|m| m.borrow().found).unwrap_or(0)
}

/// [`plan_copy`], or the plan it made for the same arguments among this thread's last
/// [`MEMO_ENTRIES`] copies of at least [`MEMO_MIN_RANK`] axes (the same plan: planning is a
/// pure function of these arguments). Errors, and plans that cost less to make than to keep
/// ([`cheap`]), are not kept.
#[allow(clippy::too_many_arguments)]
pub(crate) fn plan_copy_memo(
    dst: u64,
    dst_strides: &[isize],
    to: DType,
    src: u64,
    src_strides: &[isize],
    from: DType,
    shape: &[usize],
    opt: PlanOptions,
) -> Result<PlanRef> {
    let plan = || plan_copy(dst, dst_strides, to, src, src_strides, from, shape, opt);
    if shape.len() < MEMO_MIN_RANK {
        return plan().map(PlanRef::Made);
    }
    // (`try_with`: a thread being torn down plans without the memo.)
    let found = MEMO.try_with(|m| {
        let mut m = m.borrow_mut();
        let i = m.entries.iter().position(|e| {
            e.dst == dst
                && e.src == src
                && e.to == to
                && e.from == from
                && e.opt == opt
                && *e.shape == *shape
                && *e.dst_strides == *dst_strides
                && *e.src_strides == *src_strides
        })?;
        m.entries[..=i].rotate_right(1);
        m.found += 1;
        Some(m.entries[0].plan.clone())
    });
    if let Ok(Some(plan)) = found {
        return Ok(PlanRef::Kept(plan));
    }
    let made = plan()?;
    if cheap(&made) {
        return Ok(PlanRef::Made(made));
    }
    let made = Rc::new(made);
    let _ = MEMO.try_with(|m| {
        let mut m = m.borrow_mut();
        // Once the memo is full, the least recently used entry goes and its vectors hold the
        // new key.
        let old = if m.entries.len() == MEMO_ENTRIES {
            m.entries.pop()
        } else {
            None
        };
        let (shape_v, dst_v, src_v) = old
            .map(|e| (e.shape, e.dst_strides, e.src_strides))
            .unwrap_or_default();
        m.entries.insert(
            0,
            Entry {
                dst,
                src,
                to,
                from,
                opt,
                shape: refill(shape_v, shape),
                dst_strides: refill(dst_v, dst_strides),
                src_strides: refill(src_v, src_strides),
                plan: made.clone(),
            },
        );
    });
    Ok(PlanRef::Kept(made))
}

/// Plans made in about the time a lookup takes: nothing to copy, a driver copy, the
/// contiguous kernel.
fn cheap(p: &Plan) -> bool {
    matches!(p, Plan::Nothing | Plan::Memcpy { .. } | Plan::Contig { .. })
}

/// `v` holding `from` (its allocation reused).
fn refill<T: Copy>(mut v: Vec<T>, from: &[T]) -> Vec<T> {
    v.clear();
    v.extend_from_slice(from);
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::tests::permuted_layout;
    use rand::rngs::StdRng;
    use rand::seq::SliceRandom;
    use rand::{Rng, SeedableRng};

    /// The arguments of one copy.
    #[derive(Clone, Debug)]
    struct Args {
        dst: u64,
        dst_strides: Vec<isize>,
        to: DType,
        src: u64,
        src_strides: Vec<isize>,
        from: DType,
        shape: Vec<usize>,
        opt: PlanOptions,
    }

    /// The signature of [`plan_copy`] and [`plan_copy_memo`].
    type Planner<R> =
        fn(u64, &[isize], DType, u64, &[isize], DType, &[usize], PlanOptions) -> Result<R>;

    impl Args {
        fn call<R>(&self, planner: Planner<R>) -> Result<R> {
            planner(
                self.dst,
                &self.dst_strides,
                self.to,
                self.src,
                &self.src_strides,
                self.from,
                &self.shape,
                self.opt,
            )
        }

        fn memo(&self) -> PlanRef {
            self.call(plan_copy_memo).unwrap()
        }

        /// The plan made for these arguments.
        fn plan(&self) -> Result<Plan> {
            self.call(plan_copy)
        }

        /// The plan made for these arguments, shown as [`shown`] shows it.
        fn made(&self) -> String {
            shown(&self.plan().unwrap())
        }
    }

    /// A plan's every field; under Miri, which takes seconds to print one, its path alone
    /// (there the tests check the memo's own code: which calls share a kept plan).
    fn shown(p: &Plan) -> String {
        if cfg!(miri) {
            p.kernel_path().to_string()
        } else {
            format!("{p:?}")
        }
    }

    /// A permutation of `rank` axes of extents 1 to 4 (one of them 64 to 200; at most 2^34
    /// elements), a flipped source axis in half the cases, at bases of any 16-byte alignment;
    /// of at least `MEMO_MIN_RANK` axes, one that does not plan to a contiguous copy.
    fn random_args(rng: &mut StdRng, rank: usize) -> Args {
        let shape = loop {
            let mut shape: Vec<usize> = (0..rank).map(|_| rng.random_range(1..=4)).collect();
            let big = rng.random_range(0..rank);
            shape[big] = rng.random_range(64..=200);
            let n = shape.iter().try_fold(1usize, |n, &k| n.checked_mul(k));
            if n.is_some_and(|n| n <= 1 << 34) {
                break shape;
            }
        };
        let mut perm: Vec<usize> = (0..rank).collect();
        perm.shuffle(rng);
        let (shape, dst_strides, mut src_strides) = permuted_layout(&shape, &perm);
        let mut src = 0x9000_0000 + rng.random_range(0..64) * 16;
        if rng.random_bool(0.5) {
            let a = rng.random_range(0..rank);
            src += (src_strides[a] * (shape[a] as isize - 1)) as u64 * 16;
            src_strides[a] = -src_strides[a];
        }
        let types = [DType::U8, DType::F16, DType::F32, DType::F64];
        let from = types[rng.random_range(0..types.len())];
        let to = if rng.random_bool(0.2) {
            DType::F32
        } else {
            from
        };
        let args = Args {
            dst: 0x7000_0000 + rng.random_range(0..64) * 16,
            dst_strides,
            to,
            src,
            src_strides,
            from,
            shape,
            opt: PlanOptions::default(),
        };
        if args.shape.len() >= MEMO_MIN_RANK && args.plan().is_ok_and(|p| cheap(&p)) {
            return random_args(rng, rank);
        }
        args
    }

    fn kept(p: PlanRef) -> Rc<Plan> {
        match p {
            PlanRef::Kept(p) => p,
            PlanRef::Made(_) => panic!("a copy of {MEMO_MIN_RANK} axes or more was not kept"),
        }
    }

    /// On a thread of its own, so that no other test's plans are in its memo.
    fn alone(f: impl FnOnce() + Send + 'static) {
        std::thread::spawn(f).join().unwrap();
    }

    #[test]
    fn kept_plans_are_the_plans_made_for_the_same_arguments() {
        alone(|| {
            let mut rng = StdRng::seed_from_u64(0x6d65_6d6f);
            // (Miri: a few cases of three axes, no evictions; `every_argument_is_part_of_the_key`
            // evicts.)
            let (ranks, n, calls) = if cfg!(miri) {
                (3..=3, 3, 8)
            } else {
                (9..=40, 60, 400)
            };
            let cases: Vec<Args> = (0..n)
                .map(|_| {
                    let rank = rng.random_range(ranks.clone());
                    random_args(&mut rng, rank)
                })
                .collect();
            let mut made: Vec<Option<String>> = vec![None; n];
            // Calls that pick from fewer cases than the memo keeps hit after their first call,
            // calls among more cases miss often; each plan is what planning makes (a hit
            // returns the plan checked at the case's last call).
            for pool in [n.min(MEMO_ENTRIES - 2), n] {
                let mut last: Vec<Option<Rc<Plan>>> = vec![None; n];
                let mut hits = 0;
                for _ in 0..calls {
                    let i = rng.random_range(0..pool);
                    let p = kept(cases[i].memo());
                    if last[i].as_ref().is_some_and(|q| Rc::ptr_eq(q, &p)) {
                        hits += 1;
                    } else {
                        let want = made[i].get_or_insert_with(|| cases[i].made());
                        assert_eq!(&shown(&p), want, "{:?}", cases[i]);
                    }
                    last[i] = Some(p);
                }
                if pool < MEMO_ENTRIES {
                    assert!(hits >= calls - pool, "{hits} hits of {calls} calls");
                }
            }
        });
    }

    #[test]
    fn every_argument_is_part_of_the_key() {
        alone(|| {
            let mut rng = StdRng::seed_from_u64(0x006b_6579);
            let base = random_args(&mut rng, if cfg!(miri) { 3 } else { 12 });
            let first = kept(base.memo());
            let variant = |change: &dyn Fn(&mut Args)| {
                let mut v = base.clone();
                change(&mut v);
                v
            };
            let mut variants = vec![
                variant(&|v| v.dst += 16),
                variant(&|v| v.src += 16),
                variant(&|v| {
                    v.to = if v.to == DType::F64 {
                        DType::F32
                    } else {
                        DType::F64
                    }
                }),
                variant(&|v| {
                    v.from = if v.from == DType::I8 {
                        DType::U16
                    } else {
                        DType::I8
                    }
                }),
                variant(&|v| v.opt.prefer_tiled = !v.opt.prefer_tiled),
                variant(&|v| {
                    let a = v.shape.iter().position(|&n| n > 1).unwrap();
                    v.shape[a] -= 1;
                }),
                variant(&|v| v.dst_strides[0] *= 2),
                variant(&|v| v.src_strides[0] = -v.src_strides[0]),
            ];
            // More copies at other destinations, up to the memo's capacity.
            for k in 2..=(MEMO_ENTRIES - variants.len()) as u64 + 1 {
                let mut v = base.clone();
                v.dst += 16 * k;
                variants.push(v);
            }
            assert_eq!(variants.len(), MEMO_ENTRIES);
            let mut plans = Vec::new();
            for (k, v) in variants[..MEMO_ENTRIES - 1].iter().enumerate() {
                let p = kept(v.memo());
                assert!(
                    !Rc::ptr_eq(&p, &first),
                    "variant {k} took the plan of another copy"
                );
                assert_eq!(shown(&p), v.made(), "variant {k}");
                assert!(Rc::ptr_eq(&p, &kept(v.memo())), "variant {k} was not kept");
                plans.push(p);
            }
            // `MEMO_ENTRIES` copies, the base used last: one more copy pushes out the least
            // recently used (variant 0), not the base.
            assert!(Rc::ptr_eq(&first, &kept(base.memo())));
            let newest = &variants[MEMO_ENTRIES - 1];
            let p = kept(newest.memo());
            assert_eq!(shown(&p), newest.made());
            assert!(
                Rc::ptr_eq(&p, &kept(newest.memo())),
                "the newest copy was not kept"
            );
            assert!(Rc::ptr_eq(&first, &kept(base.memo())));
            assert!(Rc::ptr_eq(&plans[1], &kept(variants[1].memo())));
            let again = kept(variants[0].memo());
            assert!(
                !Rc::ptr_eq(&plans[0], &again),
                "variant 0 outlived the memo's capacity"
            );
            assert_eq!(shown(&again), variants[0].made());
            assert!(Rc::ptr_eq(&again, &kept(variants[0].memo())));
        });
    }

    #[test]
    fn one_axis_and_contiguous_copies_are_planned_every_time_and_each_thread_keeps_its_own() {
        alone(|| {
            let mut rng = StdRng::seed_from_u64(8);
            let low = random_args(&mut rng, MEMO_MIN_RANK - 1);
            assert!(matches!(low.memo(), PlanRef::Made(_)));
            let mut contiguous = random_args(&mut rng, 5);
            contiguous.src_strides = contiguous.dst_strides.clone();
            contiguous.from = contiguous.to;
            let p = contiguous.memo();
            assert!(matches!(p, PlanRef::Made(_)) && cheap(&p), "{:?}", *p);
            let high = random_args(&mut rng, MEMO_MIN_RANK);
            let here = kept(high.memo());
            let there = {
                let high = high.clone();
                std::thread::spawn(move || format!("{:p}", Rc::as_ptr(&kept(high.memo()))))
                    .join()
                    .unwrap()
            };
            assert_ne!(there, format!("{:p}", Rc::as_ptr(&here)));
            assert!(Rc::ptr_eq(&here, &kept(high.memo())));
        });
    }
}
