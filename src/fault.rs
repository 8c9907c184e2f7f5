//! Fault injection for devspan's own tests (feature `internals`): a one-shot countdown per
//! [`Fault`] site, checked by the transfer code before the driver call it stands for. When a
//! countdown runs out, that call returns the driver error the site would see
//! ([`Fault::error`]) without calling the driver.
//!
//! The countdowns are process-wide atomics (the staged transfers run on several threads), so a
//! test that arms one must keep other transfers out while it is armed. A site that is not armed
//! costs one relaxed atomic load.

use std::sync::atomic::{AtomicUsize, Ordering};

use cudarc::driver::DriverError;
use cudarc::driver::sys::CUresult;

use crate::error::{Error, ErrorKind, Result};

/// A place in the transfer code where an injected fault can strike.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Fault {
    /// The page-locked allocation of a staging buffer (`PinnedBuffer::alloc`, which the
    /// staged transfers' chunk pool calls for each chunk it lacks): fails with
    /// `CUDA_ERROR_OUT_OF_MEMORY`.
    PinnedAlloc,
    /// The device temporary of a transfer that goes through a device copy kernel (device
    /// path `staged`): fails with `CUDA_ERROR_OUT_OF_MEMORY`.
    DeviceAlloc,
    /// One chunk's copy between a staging chunk and device memory (each chunk of a staged
    /// upload or download, each chunk enqueued by the start of an asynchronous staged
    /// download): fails with `CUDA_ERROR_LAUNCH_FAILED`.
    ChunkCopy,
}

impl Fault {
    /// The driver error an injected fault at this site returns.
    pub fn error(self) -> DriverError {
        match self {
            Fault::PinnedAlloc | Fault::DeviceAlloc => {
                DriverError(CUresult::CUDA_ERROR_OUT_OF_MEMORY)
            }
            Fault::ChunkCopy => DriverError(CUresult::CUDA_ERROR_LAUNCH_FAILED),
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// A one-shot countdown: 0 is disarmed; `n > 0` means that the `n`-th check from now fires,
/// after which it is disarmed again.
struct Countdown(AtomicUsize);

impl Countdown {
    const fn new() -> Self {
        Countdown(AtomicUsize::new(0))
    }

    /// Arms it so that the checks after the next `after` ones fire once.
    fn arm(&self, after: usize) {
        self.0.store(after.saturating_add(1), Ordering::SeqCst);
    }

    fn disarm(&self) {
        self.0.store(0, Ordering::SeqCst);
    }

    /// Counts one check; whether it is the one that fires. Exactly one of any number of
    /// concurrent checks fires.
    fn check(&self) -> bool {
        if self.0.load(Ordering::Relaxed) == 0 {
            return false;
        }
        self.0
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok_and(|n| n == 1)
    }

    fn armed(&self) -> bool {
        self.0.load(Ordering::SeqCst) != 0
    }
}

static SITES: [Countdown; 3] = [Countdown::new(), Countdown::new(), Countdown::new()];
static FIRED: [AtomicUsize; 3] = [
    AtomicUsize::new(0),
    AtomicUsize::new(0),
    AtomicUsize::new(0),
];

/// Keeps an injected fault armed; dropping it disarms the fault (whether or not it fired).
#[must_use = "dropping the guard disarms the fault"]
#[derive(Debug)]
pub struct FaultGuard {
    fault: Fault,
    fired_before: usize,
}

impl FaultGuard {
    /// Whether the fault has fired since it was armed.
    pub fn fired(&self) -> bool {
        FIRED[self.fault.index()].load(Ordering::SeqCst) != self.fired_before
    }

    /// Whether the fault is still armed (it has not fired yet).
    pub fn armed(&self) -> bool {
        SITES[self.fault.index()].armed()
    }
}

impl Drop for FaultGuard {
    fn drop(&mut self) {
        SITES[self.fault.index()].disarm();
    }
}

/// Arms `fault`: the first `after` checks at its site pass, the next one fails with
/// [`Fault::error`] instead of calling the driver, and later ones pass again. Arming a site
/// again replaces its countdown. Process-wide: every thread's transfers count.
///
/// ```
/// use devspan::internals::{Fault, inject};
///
/// let guard = inject(Fault::ChunkCopy, 2);
/// assert!(guard.armed() && !guard.fired());
/// drop(guard); // disarmed
/// assert!(!inject(Fault::ChunkCopy, 0).fired());
/// ```
pub fn inject(fault: Fault, after: usize) -> FaultGuard {
    let fired_before = FIRED[fault.index()].load(Ordering::SeqCst);
    SITES[fault.index()].arm(after);
    FaultGuard {
        fault,
        fired_before,
    }
}

/// Counts a call at `fault`'s site: `Err` (the driver error of [`Fault::error`]) when an
/// armed countdown runs out here.
pub(crate) fn check(fault: Fault) -> Result<()> {
    if SITES[fault.index()].check() {
        FIRED[fault.index()].fetch_add(1, Ordering::SeqCst);
        return Err(Error::new(
            ErrorKind::Driver(fault.error()),
            format!("injected fault at {fault:?}"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::AtomicUsize;

    use super::*;

    #[test]
    fn a_countdown_fires_once_after_the_given_checks() {
        let c = Countdown::new();
        assert!(!c.check(), "disarmed");
        c.arm(2);
        assert!(c.armed());
        assert_eq!(
            (0..6).map(|_| c.check()).collect::<Vec<_>>(),
            [false, false, true, false, false, false]
        );
        assert!(!c.armed());
        c.arm(0);
        assert!(c.check());
        assert!(!c.check());
        c.arm(5);
        c.disarm();
        assert!((0..10).all(|_| !c.check()));
        c.arm(usize::MAX);
        assert!(c.armed() && !c.check());
    }

    #[test]
    fn exactly_one_of_many_concurrent_checks_fires() {
        for after in [0, 7, 99] {
            let c = Arc::new(Countdown::new());
            c.arm(after);
            let fired = Arc::new(AtomicUsize::new(0));
            let checks = Arc::new(AtomicUsize::new(0));
            std::thread::scope(|s| {
                for _ in 0..8 {
                    let (c, fired, checks) = (&c, &fired, &checks);
                    s.spawn(move || {
                        for _ in 0..50 {
                            checks.fetch_add(1, Ordering::Relaxed);
                            if c.check() {
                                fired.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                    });
                }
            });
            assert_eq!(checks.load(Ordering::Relaxed), 400);
            assert_eq!(fired.load(Ordering::Relaxed), 1, "after {after}");
            assert!(!c.armed());
        }
    }

    #[test]
    fn faults_carry_the_driver_error_of_their_site() {
        assert_eq!(
            Fault::PinnedAlloc.error(),
            DriverError(CUresult::CUDA_ERROR_OUT_OF_MEMORY)
        );
        assert_eq!(
            Fault::DeviceAlloc.error(),
            DriverError(CUresult::CUDA_ERROR_OUT_OF_MEMORY)
        );
        assert_eq!(
            Fault::ChunkCopy.error(),
            DriverError(CUresult::CUDA_ERROR_LAUNCH_FAILED)
        );
        for (i, f) in [Fault::PinnedAlloc, Fault::DeviceAlloc, Fault::ChunkCopy]
            .into_iter()
            .enumerate()
        {
            assert_eq!(f.index(), i);
        }
    }

    /// The process-wide sites, through `inject` and `check`. The lib's unit tests make no
    /// staged transfer while a site is armed here: the site armed is `DeviceAlloc`, reached
    /// only by transfers on a GPU, and it is armed for a few checks only.
    #[test]
    fn an_injected_fault_returns_the_driver_error_once_and_the_guard_disarms() {
        let g = inject(Fault::DeviceAlloc, 1);
        assert!(g.armed() && !g.fired());
        assert!(check(Fault::DeviceAlloc).is_ok());
        let e = check(Fault::DeviceAlloc).unwrap_err();
        assert!(
            matches!(e.kind(), ErrorKind::Driver(d) if *d == Fault::DeviceAlloc.error()),
            "{e:?}"
        );
        assert!(g.fired() && !g.armed());
        assert!(check(Fault::DeviceAlloc).is_ok());
        drop(g);
        let g = inject(Fault::DeviceAlloc, 3);
        assert!(!g.fired());
        drop(g);
        assert!((0..5).all(|_| check(Fault::DeviceAlloc).is_ok()));
    }
}
