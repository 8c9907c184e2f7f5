//! Fault injection, for devspan's own tests (feature `internals`): the one mechanism, at the
//! driver boundary. Each call of [`super`] that a test can make fail first passes through
//! [`check`] with a [`Call`] describing it. Two tools act there:
//!
//! - [`inject`]: a one-shot countdown per [`Fault`] site. When it runs out, that call returns
//!   the driver error the site would see ([`Fault::error`]) without calling the driver.
//! - [`intercept`]: a hook run at every call of a site, which sees the call and may wait or
//!   panic there (a panic unwinds out of the driver call, as a panic of the code around it
//!   would).
//!
//! Both are process-wide (the staged transfers run on several threads), so a test that arms one
//! must keep other work out of the site while it is armed. Without the feature, [`check`] is
//! an empty inline function; with it, a site that is not armed costs two relaxed atomic loads.

use cudarc::driver::DriverError;
use cudarc::driver::sys::CUresult;

#[cfg(not(any(test, feature = "internals")))]
use crate::error::Result;

/// A driver call where an injected fault can strike.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Fault {
    /// A page-locked allocation (`cuMemHostAlloc`: each staging chunk that the staged
    /// transfers' chunk pool lacks, each [`PinnedBuffer`](crate::PinnedBuffer)): fails with
    /// `CUDA_ERROR_OUT_OF_MEMORY`.
    PinnedAlloc,
    /// A device allocation (every `DeviceArray` devspan allocates: results, the device
    /// temporary of a transfer through a device copy kernel): fails with
    /// `CUDA_ERROR_OUT_OF_MEMORY`.
    DeviceAlloc,
    /// A copy between host and device memory (`cuMemcpyHtoDAsync`, `cuMemcpyDtoHAsync`: each
    /// chunk of a staged upload or download, each chunk enqueued by the start of an
    /// asynchronous staged download, each direct copy from or into page-locked memory): fails
    /// with `CUDA_ERROR_LAUNCH_FAILED`.
    HostDeviceCopy,
}

impl Fault {
    /// The driver error an injected fault at this site returns.
    #[cfg_attr(not(any(test, feature = "internals")), allow(dead_code))]
    pub fn error(self) -> DriverError {
        match self {
            Fault::PinnedAlloc | Fault::DeviceAlloc => {
                DriverError(CUresult::CUDA_ERROR_OUT_OF_MEMORY)
            }
            Fault::HostDeviceCopy => DriverError(CUresult::CUDA_ERROR_LAUNCH_FAILED),
        }
    }

    #[cfg(any(test, feature = "internals"))]
    fn index(self) -> usize {
        self as usize
    }
}

/// A driver call at a fault site, as [`intercept`]'s hooks see it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Call {
    /// The site.
    pub fault: Fault,
    /// The handle of the stream the call is ordered on (`CUstream` as an integer); 0 for calls
    /// on no stream (page-locked allocations).
    pub stream: usize,
    /// The device address the call reads or writes (a copy's device side); 0 for allocations.
    pub device: u64,
    /// The bytes copied or allocated.
    pub bytes: usize,
}

impl Call {
    /// A page-locked allocation of `bytes` (on no stream).
    pub(crate) fn pinned_alloc(bytes: usize) -> Self {
        Call {
            fault: Fault::PinnedAlloc,
            stream: 0,
            device: 0,
            bytes,
        }
    }

    /// A call at `fault`'s site ordered on `stream`.
    pub(crate) fn on(
        fault: Fault,
        stream: &cudarc::driver::CudaStream,
        device: u64,
        bytes: usize,
    ) -> Self {
        Call {
            fault,
            stream: stream.cu_stream() as usize,
            device,
            bytes,
        }
    }
}

/// Counts `call` at its site: `Err` (the driver error of [`Fault::error`]) when an armed
/// countdown runs out here; runs the site's hook, if one is installed, otherwise.
#[cfg(not(any(test, feature = "internals")))]
#[inline(always)]
pub(crate) fn check(_call: Call) -> Result<()> {
    Ok(())
}

#[cfg(any(test, feature = "internals"))]
pub use armed::*;

#[cfg(any(test, feature = "internals"))]
mod armed {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::{Arc, Mutex, MutexGuard};

    use super::{Call, Fault};
    use crate::error::{Error, ErrorKind, Result};

    /// A one-shot countdown: 0 is disarmed; `n > 0` means that the `n`-th check from now
    /// fires, after which it is disarmed again.
    pub(super) struct Countdown(AtomicUsize);

    impl Countdown {
        pub(super) const fn new() -> Self {
            Countdown(AtomicUsize::new(0))
        }

        /// Arms it so that the checks after the next `after` ones fire once.
        pub(super) fn arm(&self, after: usize) {
            self.0.store(after.saturating_add(1), Ordering::SeqCst);
        }

        pub(super) fn disarm(&self) {
            self.0.store(0, Ordering::SeqCst);
        }

        /// Counts one check; whether it is the one that fires. Exactly one of any number of
        /// concurrent checks fires.
        pub(super) fn check(&self) -> bool {
            if self.0.load(Ordering::Relaxed) == 0 {
                return false;
            }
            self.0
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .is_ok_and(|n| n == 1)
        }

        pub(super) fn armed(&self) -> bool {
            self.0.load(Ordering::SeqCst) != 0
        }
    }

    const SITES_N: usize = 3;

    static SITES: [Countdown; SITES_N] = [Countdown::new(), Countdown::new(), Countdown::new()];
    static FIRED: [AtomicUsize; SITES_N] = [
        AtomicUsize::new(0),
        AtomicUsize::new(0),
        AtomicUsize::new(0),
    ];

    /// A hook installed by [`intercept`].
    type Hook = Arc<dyn Fn(&Call) + Send + Sync>;

    /// Whether a site has a hook: the fast path of [`check`] reads only this.
    static HOOKED: [AtomicBool; SITES_N] = [
        AtomicBool::new(false),
        AtomicBool::new(false),
        AtomicBool::new(false),
    ];
    static HOOKS: Mutex<[Option<Hook>; SITES_N]> = Mutex::new([None, None, None]);

    fn hooks() -> MutexGuard<'static, [Option<Hook>; SITES_N]> {
        HOOKS.lock().unwrap_or_else(|p| p.into_inner())
    }

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
    /// [`Fault::error`] instead of calling the driver, and later ones pass again. Arming a
    /// site again replaces its countdown. Process-wide: every thread's calls count.
    ///
    /// ```
    /// use devspan::internals::{Fault, inject};
    ///
    /// let guard = inject(Fault::HostDeviceCopy, 2);
    /// assert!(guard.armed() && !guard.fired());
    /// drop(guard); // disarmed
    /// assert!(!inject(Fault::HostDeviceCopy, 0).fired());
    /// ```
    pub fn inject(fault: Fault, after: usize) -> FaultGuard {
        let fired_before = FIRED[fault.index()].load(Ordering::SeqCst);
        SITES[fault.index()].arm(after);
        FaultGuard {
            fault,
            fired_before,
        }
    }

    /// Keeps a hook installed by [`intercept`]; dropping it removes the hook.
    #[must_use = "dropping the guard removes the hook"]
    pub struct Intercept {
        fault: Fault,
    }

    impl std::fmt::Debug for Intercept {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.debug_struct("Intercept")
                .field("fault", &self.fault)
                .finish()
        }
    }

    impl Drop for Intercept {
        fn drop(&mut self) {
            let mut h = hooks();
            h[self.fault.index()] = None;
            HOOKED[self.fault.index()].store(false, Ordering::SeqCst);
        }
    }

    /// Installs `hook` at `fault`'s site until the guard drops: every call there runs it first
    /// (on the calling thread, before the driver is called), after a countdown of [`inject`]
    /// that did not fire. A hook may record, wait or panic; a panic unwinds out of the call.
    /// Installing another hook at the site replaces this one. Process-wide.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// use devspan::internals::{Fault, intercept};
    ///
    /// let copies = Arc::new(AtomicUsize::new(0));
    /// let seen = copies.clone();
    /// let guard = intercept(Fault::HostDeviceCopy, move |call| {
    ///     assert_eq!(call.fault, Fault::HostDeviceCopy);
    ///     seen.fetch_add(1, Ordering::SeqCst);
    /// });
    /// // ... host <-> device copies here run the hook ...
    /// drop(guard);
    /// assert_eq!(copies.load(Ordering::SeqCst), 0);
    /// ```
    pub fn intercept(fault: Fault, hook: impl Fn(&Call) + Send + Sync + 'static) -> Intercept {
        let mut h = hooks();
        h[fault.index()] = Some(Arc::new(hook));
        HOOKED[fault.index()].store(true, Ordering::SeqCst);
        Intercept { fault }
    }

    /// Counts `call` at its site: `Err` (the driver error of [`Fault::error`]) when an armed
    /// countdown runs out here; runs the site's hook, if one is installed, otherwise.
    pub(crate) fn check(call: Call) -> Result<()> {
        let i = call.fault.index();
        if SITES[i].check() {
            FIRED[i].fetch_add(1, Ordering::SeqCst);
            return Err(Error::new(
                ErrorKind::Driver(call.fault.error()),
                format!("injected fault at {:?}", call.fault),
            ));
        }
        if HOOKED[i].load(Ordering::Relaxed) {
            // The hook runs without the lock held, so that it may wait for other threads'
            // calls.
            let hook = hooks()[i].clone();
            if let Some(hook) = hook {
                hook(&call);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::armed::Countdown;
    use super::*;
    use crate::error::ErrorKind;

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
            Fault::HostDeviceCopy.error(),
            DriverError(CUresult::CUDA_ERROR_LAUNCH_FAILED)
        );
        for (i, f) in [
            Fault::PinnedAlloc,
            Fault::DeviceAlloc,
            Fault::HostDeviceCopy,
        ]
        .into_iter()
        .enumerate()
        {
            assert_eq!(f.index(), i);
        }
    }

    /// Held by every unit test that arms a process-wide site, so that they do not count each
    /// other's calls when the test harness runs them in parallel.
    pub(crate) static SITES_LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());

    pub(crate) fn lock_sites() -> std::sync::MutexGuard<'static, ()> {
        SITES_LOCK.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn alloc() -> Call {
        Call {
            fault: Fault::DeviceAlloc,
            stream: 0,
            device: 0,
            bytes: 64,
        }
    }

    /// The process-wide sites, through `inject` and `check` (under [`lock_sites`], which the
    /// lib's GPU tests that reach a site hold too).
    #[test]
    fn an_injected_fault_returns_the_driver_error_once_and_the_guard_disarms() {
        let _sites = lock_sites();
        let g = inject(Fault::DeviceAlloc, 1);
        assert!(g.armed() && !g.fired());
        assert!(check(alloc()).is_ok());
        let e = check(alloc()).unwrap_err();
        assert!(
            matches!(e.kind(), ErrorKind::Driver(d) if *d == Fault::DeviceAlloc.error()),
            "{e:?}"
        );
        assert!(g.fired() && !g.armed());
        assert!(check(alloc()).is_ok());
        drop(g);
        let g = inject(Fault::DeviceAlloc, 3);
        assert!(!g.fired());
        drop(g);
        assert!((0..5).all(|_| check(alloc()).is_ok()));
    }

    /// A hook sees every call of its site (after a countdown that did not fire) and none once
    /// its guard drops; a panic in it unwinds out of `check`. Under [`lock_sites`].
    #[test]
    fn an_intercepted_site_runs_its_hook_until_the_guard_drops() {
        let _sites = lock_sites();
        let pinned = Call::pinned_alloc;
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let s = seen.clone();
        let guard = intercept(Fault::PinnedAlloc, move |c| {
            if c.bytes == 13 {
                panic!("hook panics at 13");
            }
            s.lock().unwrap().push(c.bytes);
        });
        let fault = inject(Fault::PinnedAlloc, 1);
        assert!(check(pinned(1)).is_ok());
        assert!(check(pinned(2)).is_err(), "the countdown fires first");
        assert!(fault.fired());
        assert!(check(pinned(3)).is_ok());
        let p = std::panic::catch_unwind(|| check(pinned(13))).unwrap_err();
        assert_eq!(p.downcast_ref::<&str>(), Some(&"hook panics at 13"));
        drop(guard);
        assert!(check(pinned(4)).is_ok());
        assert_eq!(*seen.lock().unwrap(), [1, 3]);
        drop(fault);
    }
}
