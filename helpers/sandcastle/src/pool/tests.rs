//! The pool, without Docker or a forge: what matters is when work starts, not what it does.
use super::pool;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::Duration;

/// A count that work items wait on. The wait is bounded only so that a broken pool fails the test
/// instead of hanging it; no assertion is about time.
#[derive(Default)]
struct Count {
    value: Mutex<usize>,
    changed: Condvar,
}

impl Count {
    fn add(&self) -> usize {
        let mut value = self.value.lock().unwrap();
        *value += 1;
        self.changed.notify_all();
        *value
    }

    fn sub(&self) {
        *self.value.lock().unwrap() -= 1;
    }

    /// Whether the count reached `target`.
    fn wait_for(&self, target: usize) -> bool {
        let value = self.value.lock().unwrap();
        let (value, _) = self
            .changed
            .wait_timeout_while(value, Duration::from_secs(60), |v| *v < target)
            .unwrap();
        *value >= target
    }
}

/// With two workers, the first item blocks until the five after it are all done: they can only
/// get done if the other worker takes each next item as soon as it finishes one (a batch of two
/// that waited for its slowest would never get past the second).
#[test]
fn a_free_slot_is_refilled_at_once() {
    let done = Count::default();
    let items: Vec<usize> = (0..6).collect();
    let results = pool(&items, 2, &|| false, &|&item| {
        if item == 0 {
            done.wait_for(5)
        } else {
            done.add();
            true
        }
    });
    assert_eq!(results.len(), 6);
    assert!(
        results.iter().all(|&ok| ok),
        "the slow item was released by the five others"
    );
}

/// Ten items, three workers: three run at once (they meet), never more.
#[test]
fn at_most_workers_run_at_once_and_all_of_them_do() {
    let running = Count::default();
    let arrived = Count::default();
    let most = AtomicUsize::new(0);
    let met = AtomicBool::new(true);
    let items: Vec<usize> = (0..10).collect();
    pool(&items, 3, &|| false, &|&item| {
        let now = running.add();
        most.fetch_max(now, Ordering::SeqCst);
        arrived.add();
        if item < 3 && !arrived.wait_for(3) {
            met.store(false, Ordering::SeqCst);
        }
        running.sub();
    });
    assert!(met.load(Ordering::SeqCst), "the first three ran at once");
    assert_eq!(most.load(Ordering::SeqCst), 3);
}

/// Once stopping, no further item starts; the one running finishes.
#[test]
fn nothing_starts_once_stopping() {
    let stop = AtomicBool::new(false);
    let items: Vec<usize> = (0..5).collect();
    let results = pool(&items, 1, &|| stop.load(Ordering::SeqCst), &|&item| {
        if item == 1 {
            stop.store(true, Ordering::SeqCst);
        }
        item
    });
    assert_eq!(results, [0, 1]);
}

#[test]
fn no_items_no_workers() {
    let results: Vec<()> = pool(&Vec::<usize>::new(), 4, &|| false, &|_| ());
    assert!(results.is_empty());
}
