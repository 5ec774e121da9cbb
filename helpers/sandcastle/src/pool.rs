//! A pool of workers over a list: at most so many items at once, the next taken as soon as one
//! finishes. A pass's lanes and an issue's attempts (best of N) run on it.
use std::collections::VecDeque;
use std::sync::Mutex;

/// Works on `items` in order, at most `workers` at once: a worker that finishes one takes the next
/// at once (a pool, not batches that wait for their slowest). Nothing new starts once `stopping`
/// says so. The results, in the order the items finished.
pub fn pool<T: Sync, R: Send>(
    items: &[T],
    workers: usize,
    stopping: &(dyn Fn() -> bool + Sync),
    work: &(dyn Fn(&T) -> R + Sync),
) -> Vec<R> {
    let queue = Mutex::new(items.iter().collect::<VecDeque<_>>());
    let results = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..workers.min(items.len()) {
            scope.spawn(|| {
                while !stopping() {
                    let Some(item) = queue.lock().unwrap_or_else(|e| e.into_inner()).pop_front()
                    else {
                        break;
                    };
                    let result = work(item);
                    results
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .push(result);
                }
            });
        }
    });
    results.into_inner().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests;
