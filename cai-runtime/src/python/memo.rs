//! [`Memo`]: the small caches of recently used results that the Python glue keeps in statics
//! (exported dicts, parsed type strings, NumPy dtypes).

use std::sync::{Mutex, MutexGuard, PoisonError};

/// A cache of the `N` most recently used entries, most recent first, made to live in a
/// `static` (`new` is `const`) and to hold Python objects (`Py<...>`) among its keys and
/// values.
///
/// [`get`](Memo::get) finds the first entry whose key a predicate accepts, reads its value
/// through a function (taking a new reference: `clone_ref`) and moves the entry to the front;
/// [`insert`](Memo::insert) puts an entry at the front and forgets the least recently used one
/// beyond `N`. A lookup costs one predicate call per entry before the one found, so `N` is
/// small (16 or 32): the caches serve programs that use a handful of dtypes, type strings or
/// array shapes over and over. Two threads that miss at once may both insert the same key;
/// the second entry is never found first and ages out.
///
/// # Thread safety and re-entrancy
///
/// The entries are behind a [`std::sync::Mutex`], and what runs while it is held is only the
/// caller's `found` and `read` functions and the moves of the entries themselves. Those
/// functions must run no Python code and must not use this memo: they compare Rust values,
/// Python objects by identity (`is`) or exact `str`s by their text (`PyUnicode_Compare`, which
/// runs no Python code for exact `str`s; a subclass's `__eq__`/`__hash__` would), and take
/// new references (`clone_ref`, `bind(py).clone()`: a reference count increment). Breaking
/// this is no memory error but a deadlock, because:
///
/// - the mutex is not re-entrant: Python code run under it (an `__eq__`, a `__hash__`, a
///   destructor, a weakref callback) could call back into the code that uses the memo, which
///   would lock it again on the same thread;
/// - with the GIL, Python code may hand the GIL to another thread, which could then block on
///   the mutex while holding the GIL that the mutex's holder needs to go on. Without Python
///   code the holder never lets the GIL go, so in a GIL build the mutex is never even
///   contended;
/// - in a free-threaded build (`Py_GIL_DISABLED`) threads do contend: a waiter blocks while
///   attached to the interpreter, for as long as the holder's few comparisons and increments
///   take. As the holder runs no Python code it waits for nothing (no stop-the-world pause,
///   no other lock), so the wait is short and bounded.
///
/// Dropping the last reference to a Python object runs its destructor, which can be Python
/// code: so `get` never drops an entry, and `insert` drops the entry it forgets only after the
/// mutex is released. Keys and values are otherwise never dropped: a memo in a `static` keeps
/// its entries until the process ends (an object in it is never freed, and its destructor
/// never runs, even at interpreter shutdown).
///
/// A panic under the mutex (in `found` or `read`, which run before anything moves) poisons
/// it; the poison is ignored, as every change to the entries is one step that leaves a valid
/// memo behind.
pub struct Memo<K, V, const N: usize> {
    /// Most recently used first; at most `N`.
    entries: Mutex<Vec<(K, V)>>,
}

impl<K, V, const N: usize> Memo<K, V, N> {
    /// An empty memo. `N` must be at least 1 (a `static` of `N = 0` does not compile).
    pub const fn new() -> Self {
        assert!(N > 0, "a Memo holds at least one entry");
        Memo {
            entries: Mutex::new(Vec::new()),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Vec<(K, V)>> {
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// `read` of the value of the most recently used entry whose key `found` accepts, which
    /// becomes the most recently used; `None` if there is none. Both run under the mutex: see
    /// [`Memo`] for what they may do.
    pub fn get<R>(
        &self,
        mut found: impl FnMut(&K) -> bool,
        read: impl FnOnce(&V) -> R,
    ) -> Option<R> {
        let mut entries = self.lock();
        let i = entries.iter().position(|(k, _)| found(k))?;
        let out = read(&entries[i].1);
        entries[..=i].rotate_right(1);
        Some(out)
    }

    /// Remembers `value` for `key` as the most recently used entry, forgetting the least
    /// recently used one if there are `N` already (dropped after the mutex is released).
    pub fn insert(&self, key: K, value: V) {
        let forgotten = {
            let mut entries = self.lock();
            let forgotten = if entries.len() >= N {
                entries.pop()
            } else {
                None
            };
            entries.insert(0, (key, value));
            forgotten
        };
        drop(forgotten);
    }
}

impl<K, V, const N: usize> Default for Memo<K, V, N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<K, V, const N: usize> std::fmt::Debug for Memo<K, V, N> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Keys and values need not be `Debug` (Python objects are shown only with the GIL).
        f.debug_struct("Memo")
            .field("len", &self.lock().len())
            .field("capacity", &N)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::Memo;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// The keys, most recently used first.
    fn keys<const N: usize>(m: &Memo<u32, &'static str, N>) -> Vec<u32> {
        m.lock().iter().map(|(k, _)| *k).collect()
    }

    #[test]
    fn hits_return_the_value_and_misses_nothing() {
        let m: Memo<u32, &'static str, 4> = Memo::new();
        assert_eq!(m.get(|k| *k == 1, |v| *v), None);
        m.insert(1, "one");
        m.insert(2, "two");
        assert_eq!(m.get(|k| *k == 1, |v| *v), Some("one"));
        assert_eq!(m.get(|k| *k == 2, |v| v.len()), Some(3));
        assert_eq!(m.get(|k| *k == 3, |v| *v), None);
    }

    #[test]
    fn a_hit_becomes_the_most_recent_and_the_least_recent_is_forgotten() {
        let m: Memo<u32, &'static str, 3> = Memo::new();
        for k in [1, 2, 3] {
            m.insert(k, "x");
        }
        assert_eq!(keys(&m), [3, 2, 1]);
        assert!(m.get(|k| *k == 1, |_| ()).is_some());
        assert_eq!(keys(&m), [1, 3, 2]);
        m.insert(4, "x"); // forgets 2, the least recently used
        assert_eq!(keys(&m), [4, 1, 3]);
        assert!(m.get(|k| *k == 2, |_| ()).is_none());
        // A miss changes no order.
        assert_eq!(keys(&m), [4, 1, 3]);
        assert!(m.get(|k| *k == 4, |_| ()).is_some());
        assert_eq!(keys(&m), [4, 1, 3]);
    }

    #[test]
    fn never_more_than_capacity() {
        let m: Memo<u32, &'static str, 16> = Memo::new();
        for k in 0..100 {
            m.insert(k, "x");
            assert_eq!(m.lock().len(), (k as usize + 1).min(16));
        }
        assert_eq!(keys(&m), (84..100).rev().collect::<Vec<_>>());
        let one: Memo<u32, &'static str, 1> = Memo::default();
        one.insert(1, "a");
        one.insert(2, "b");
        assert_eq!(keys(&one), [2]);
        assert_eq!(format!("{one:?}"), "Memo { len: 1, capacity: 1 }");
    }

    #[test]
    fn the_first_match_wins() {
        let m: Memo<u32, &'static str, 4> = Memo::new();
        m.insert(1, "older");
        m.insert(1, "newer");
        assert_eq!(m.get(|k| *k == 1, |v| *v), Some("newer"));
    }

    /// Counts its drops, and checks that the memo is unlocked when it is dropped.
    struct Probe(&'static Memo<u32, Probe, 2>, &'static AtomicUsize);

    impl Drop for Probe {
        fn drop(&mut self) {
            assert!(self.0.entries.try_lock().is_ok(), "dropped under the lock");
            self.1.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn forgotten_entries_are_dropped_after_the_lock_is_released() {
        static MEMO: Memo<u32, Probe, 2> = Memo::new();
        static DROPS: AtomicUsize = AtomicUsize::new(0);
        for k in 0..5 {
            MEMO.insert(k, Probe(&MEMO, &DROPS));
        }
        assert_eq!(DROPS.load(Ordering::SeqCst), 3);
        assert!(MEMO.get(|k| *k == 4, |_| ()).is_some());
        assert_eq!(DROPS.load(Ordering::SeqCst), 3);
    }

    #[test]
    fn a_panic_under_the_lock_leaves_a_usable_memo() {
        let m: Memo<u32, &'static str, 4> = Memo::new();
        m.insert(1, "one");
        m.insert(2, "two");
        let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            m.get(|k| *k == 1, |_| panic!("read failed"))
        }));
        assert!(panicked.is_err());
        assert!(m.entries.is_poisoned());
        assert_eq!(keys(&m), [2, 1]);
        assert_eq!(m.get(|k| *k == 1, |v| *v), Some("one"));
        m.insert(3, "three");
        assert_eq!(keys(&m), [3, 1, 2]);
    }
}
