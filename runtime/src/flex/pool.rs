//! Running the pieces of a kernel on the calling thread and rayon's pool together.
//!
//! `par_iter` from a thread outside the pool (an application's main thread, where tensor ops are
//! called) hands the whole job to the pool and puts the caller to sleep until it is done: the
//! call pays for waking a worker, then for waking the caller again, and the caller's core does
//! none of the work. On the 2-vCPU machine of BENCHMARKS.md that was some 20 to 30 µs per call,
//! which kept a kernel of 150 µs on one thread from getting much faster on two.
//!
//! [`share`] works on the calling thread from the start instead: it spawns one helper job per
//! other thread of the pool into a scope ([`rayon::in_place_scope`], which runs its body on the
//! calling thread), and every participant claims the next unclaimed piece until none is left.
//! A worker that wakes late only claims fewer pieces. Each piece's result lands in its own
//! slot, so the results come back in piece order whoever computed them, and a reduction over
//! them adds in the same order with or without threads.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

/// How long the calling thread spins, once every piece is claimed, for the helpers to finish
/// theirs, before it sleeps on the scope's latch: about a piece's worth of work. Sleeping
/// would cost a wake-up as long as the wait.
const SPIN: Duration = Duration::from_micros(200);

/// `work(index, item)` for every item, on the calling thread and up to
/// `rayon::current_num_threads() - 1` helpers of rayon's pool, each claiming the next item in
/// order; returns the results in item order.
///
/// # Panics
///
/// Propagates a panic of `work` (after every participant has stopped).
pub(crate) fn share<I: Send, R: Send>(
    items: Vec<I>,
    work: impl Fn(usize, I) -> R + Sync,
) -> Vec<R> {
    let count = items.len();
    let items: Vec<Mutex<Option<I>>> = items.into_iter().map(|i| Mutex::new(Some(i))).collect();
    let results: Vec<Mutex<Option<R>>> = (0..count).map(|_| Mutex::new(None)).collect();
    let (next, done) = (AtomicUsize::new(0), AtomicUsize::new(0));
    let claim = || {
        loop {
            let index = next.fetch_add(1, Ordering::Relaxed);
            if index >= count {
                return;
            }
            let item = lock(&items[index])
                .take()
                .expect("each item is claimed once");
            let result = work(index, item);
            *lock(&results[index]) = Some(result);
            done.fetch_add(1, Ordering::Release);
        }
    };
    let helpers = rayon::current_num_threads()
        .saturating_sub(1)
        .min(count.saturating_sub(1));
    rayon::in_place_scope(|scope| {
        for _ in 0..helpers {
            scope.spawn(|_| claim());
        }
        claim();
        let start = Instant::now();
        while done.load(Ordering::Acquire) < count && start.elapsed() < SPIN {
            std::hint::spin_loop();
        }
    });
    results
        .into_iter()
        .map(|slot| {
            slot.into_inner()
                .unwrap_or_else(PoisonError::into_inner)
                .expect("every item ran")
        })
        .collect()
}

/// The value of `slot`, whether or not another participant panicked while holding it (the
/// panic is propagated by the scope anyway).
fn lock<T>(slot: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
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
    fn a_panic_in_a_piece_reaches_the_caller() {
        let caught = std::panic::catch_unwind(|| {
            share((0..64).collect::<Vec<u32>>(), |_, i| {
                assert!(i != 40, "piece 40");
                i
            })
        });
        assert!(caught.is_err());
    }
}
