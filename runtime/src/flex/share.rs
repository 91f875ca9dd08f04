//! Running the pieces of a kernel on the calling thread and rayon's pool together.
//!
//! `par_iter` from a thread outside rayon's pool (an application's main thread, where tensor ops
//! are called) hands the whole job to the pool and puts the caller to sleep until it is done.
//! On the 2-vCPU machine of BENCHMARKS.md that loses twice: the call pays for waking a worker
//! and then the caller, and every piece runs on a core other than the one that just wrote the
//! inputs (the caller's), whose cache holds them. A layer norm of 1M elements ran 2x slower on
//! one rayon worker than on the calling thread, and two workers were no faster than the caller
//! alone.
//!
//! [`share`] works on the calling thread from the start: it sends helper jobs to the pool and
//! every participant claims the next unclaimed piece until none is left, so a helper that wakes
//! late (some 45 µs after the call on that machine) only claims fewer pieces. The caller claims
//! from the back, where the inputs it wrote last are most likely still in its cache, the
//! helpers from the front (at 1M elements this took `layer_norm` from 295 µs to 255 µs and
//! `cross_entropy_logits` from 635 µs to 585 µs against claiming in one direction). The
//! caller never waits for a helper to start: it waits only for pieces a helper has already
//! claimed, at most one each. A helper job that runs after the call has returned finds nothing
//! to claim and stops without touching the call's data (see [`Shared`] for why that is
//! sound). Each piece's result lands in its own slot, so the results come back in piece order
//! whoever computed them, and a reduction over them adds in the same order with or without
//! threads.

use std::any::Any;
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

/// What the caller and its helpers share: a 'static allocation (helpers may outlive the call)
/// holding a type-erased pointer to the call's piece function, which borrows the call's data.
///
/// Soundness: the pointer is dereferenced only by a participant that has claimed a piece index
/// (taken it out of `unclaimed`), and only until it has counted that piece in `done`. The
/// caller returns (and the borrowed data may go) only once `done` counts every piece, after
/// which every index is claimed, so no later claim succeeds and no one dereferences the
/// pointer again. A helper running late touches only the counters, which live here.
struct Shared {
    /// The unclaimed pieces, `front..back`: the low 32 bits hold `front` (helpers claim there),
    /// the high 32 bits `back` (the caller claims below it).
    unclaimed: AtomicU64,
    done: AtomicUsize,
    /// The first panic of a piece, propagated by the caller once every piece is done.
    panic: Mutex<Option<Box<dyn Any + Send>>>,
    /// `&(dyn Fn(usize) + Sync)` of the call, lifetime erased.
    piece: *const (dyn Fn(usize) + Sync + 'static),
}

// SAFETY: `piece` points to a `Sync` closure; see `Shared` for how long it is valid.
unsafe impl Send for Shared {}
// SAFETY: as above; the rest is atomics and a mutex.
unsafe impl Sync for Shared {}

impl Shared {
    /// Claims and runs pieces until none is left: from the front for a helper, from the back
    /// for the caller.
    fn claim(&self, caller: bool) {
        while let Some(index) = self.next(caller) {
            // SAFETY: `index` was claimed by this participant and is not yet counted in `done`,
            // so the caller has not returned and the closure is alive (see `Shared`).
            let piece = unsafe { &*self.piece };
            if let Err(payload) = catch_unwind(AssertUnwindSafe(|| piece(index))) {
                lock(&self.panic).get_or_insert(payload);
            }
            // The last access to the call's data by this participant for this piece: `Release`
            // publishes the piece's writes to the caller, which reads `done` with `Acquire`.
            self.done.fetch_add(1, Ordering::Release);
        }
    }

    /// The next unclaimed piece at the front (or, for the caller, at the back), now claimed.
    fn next(&self, caller: bool) -> Option<usize> {
        let mut state = self.unclaimed.load(Ordering::Relaxed);
        loop {
            let (front, back) = (state & u64::from(u32::MAX), state >> 32);
            if front >= back {
                return None;
            }
            let (claimed, new) = if caller {
                (back - 1, ((back - 1) << 32) | front)
            } else {
                (front, (back << 32) | (front + 1))
            };
            match self.unclaimed.compare_exchange_weak(
                state,
                new,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return Some(usize::try_from(claimed).expect("below count")),
                Err(now) => state = now,
            }
        }
    }
}

/// `work(index, item)` for every item, on the calling thread and up to
/// `rayon::current_num_threads() - 1` helper jobs of rayon's pool, each participant claiming
/// the next unclaimed item (the caller from the back, helpers from the front); returns the
/// results in item order.
///
/// # Panics
///
/// Propagates the first panic of `work`, once every piece has stopped.
pub(crate) fn share<I: Send, R: Send>(
    items: Vec<I>,
    work: impl Fn(usize, I) -> R + Sync,
) -> Vec<R> {
    let count = items.len();
    let pieces = u32::try_from(count).expect("fewer than 2^32 pieces");
    let items: Vec<Mutex<Option<I>>> = items.into_iter().map(|i| Mutex::new(Some(i))).collect();
    let results: Vec<Mutex<Option<R>>> = (0..count).map(|_| Mutex::new(None)).collect();
    let piece = |index: usize| {
        let item = lock(&items[index])
            .take()
            .expect("each item is claimed once");
        let result = work(index, item);
        *lock(&results[index]) = Some(result);
    };
    let piece: &(dyn Fn(usize) + Sync) = &piece;
    // SAFETY: only the lifetime is erased; `Shared` says why no one uses the pointer after
    // this function returns (it waits below until `done` counts every piece, even when one
    // panics).
    let piece: *const (dyn Fn(usize) + Sync + 'static) = unsafe { std::mem::transmute(piece) };
    let shared = Arc::new(Shared {
        unclaimed: AtomicU64::new(u64::from(pieces) << 32),
        done: AtomicUsize::new(0),
        panic: Mutex::new(None),
        piece,
    });
    let helpers = rayon::current_num_threads()
        .saturating_sub(1)
        .min(count.saturating_sub(1));
    for _ in 0..helpers {
        let shared = Arc::clone(&shared);
        rayon::spawn(move || shared.claim(false));
    }
    shared.claim(true);
    // Every piece is claimed; wait for those a helper is still running (one each at most).
    let mut spins = 0_u32;
    while shared.done.load(Ordering::Acquire) < count {
        if spins < 1 << 12 {
            spins += 1;
            std::hint::spin_loop();
        } else {
            std::thread::yield_now();
        }
    }
    if let Some(payload) = lock(&shared.panic).take() {
        resume_unwind(payload);
    }
    results
        .into_iter()
        .map(|slot| {
            slot.into_inner()
                .unwrap_or_else(PoisonError::into_inner)
                .expect("every item ran")
        })
        .collect()
}

/// The value of `slot`, whether or not a participant panicked while holding it (the panic is
/// propagated anyway).
fn lock<T>(slot: &Mutex<T>) -> MutexGuard<'_, T> {
    slot.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::share;

    #[test]
    fn every_item_once_and_the_results_in_order() {
        let items: Vec<usize> = (0..1000).collect();
        let out = share(items, |index, item| {
            assert_eq!(index, item);
            item * 2
        });
        assert_eq!(out, (0..1000).map(|i| i * 2).collect::<Vec<_>>());
        assert!(share(Vec::<u8>::new(), |_, i| i).is_empty());
        assert_eq!(share(vec![7], |_, i| i + 1), [8]);
    }

    #[test]
    fn borrowed_data_is_written_by_every_participant() {
        // Many short calls, so that helper jobs often run after their call has returned.
        for round in 0..200_u32 {
            let mut data = vec![0_u32; 4096];
            let parts: Vec<&mut [u32]> = data.chunks_mut(64).collect();
            let sums = share(parts, |index, part| {
                part.iter_mut().for_each(|v| *v = round + index as u32);
                part.len()
            });
            assert_eq!(sums.iter().sum::<usize>(), 4096);
            for (i, v) in data.iter().enumerate() {
                assert_eq!(*v, round + (i / 64) as u32);
            }
        }
    }

    #[test]
    fn inside_a_pool_worker() {
        // A call from one of the pool's own threads (nested parallelism) completes too.
        let totals: Vec<usize> = rayon::broadcast(|_| {
            share((0..256).collect::<Vec<usize>>(), |_, i| i)
                .into_iter()
                .sum()
        });
        assert!(totals.iter().all(|&t| t == 255 * 256 / 2));
    }

    #[test]
    fn a_panic_in_a_piece_reaches_the_caller() {
        let caught = std::panic::catch_unwind(|| {
            share((0..64).collect::<Vec<u32>>(), |_, i| {
                assert!(i != 40, "piece 40");
                i
            })
        });
        let payload = caught.expect_err("the panic propagates");
        let message = payload
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| payload.downcast_ref::<&str>().map(|s| (*s).to_string()));
        assert_eq!(message.as_deref(), Some("piece 40"));
    }
}
