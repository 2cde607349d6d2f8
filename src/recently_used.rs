//! A map that keeps its most recently used entries within a count and a total weight, handing
//! back the entries it lets go so that the caller can release what they hold elsewhere (the
//! resident engine's programs on the device, a staged script's results).

use std::borrow::Borrow;
use std::collections::HashMap;
use std::hash::Hash;

pub struct RecentlyUsed<K, V> {
    entries: HashMap<K, Entry<V>>,
    max_entries: usize,
    max_weight: u64,
    weight: u64,
    /// Counts uses: an entry's `used` is the count at its last use.
    clock: u64,
}

struct Entry<V> {
    value: V,
    weight: u64,
    used: u64,
}

impl<K: Eq + Hash + Clone, V: Clone> RecentlyUsed<K, V> {
    /// Keeps at most `max_entries` entries weighing `max_weight` together (an entry heavier
    /// than that alone is still kept, until the next one comes).
    pub fn new(max_entries: usize, max_weight: u64) -> Self {
        RecentlyUsed {
            entries: HashMap::new(),
            max_entries: max_entries.max(1),
            max_weight,
            weight: 0,
            clock: 0,
        }
    }

    /// The value of `key`, now the most recently used.
    pub fn get<Q: Eq + Hash + ?Sized>(&mut self, key: &Q) -> Option<V>
    where
        K: Borrow<Q>,
    {
        self.clock += 1;
        let entry = self.entries.get_mut(key)?;
        entry.used = self.clock;
        Some(entry.value.clone())
    }

    /// Adds (or replaces) `key`, then lets the least recently used others go until the rest
    /// fit; returns the values let go (a replaced value among them).
    pub fn insert(&mut self, key: K, value: V, weight: u64) -> Vec<V> {
        self.clock += 1;
        let mut gone: Vec<V> = self.remove(&key).into_iter().collect();
        self.entries.insert(
            key.clone(),
            Entry {
                value,
                weight,
                used: self.clock,
            },
        );
        self.weight += weight;
        while self.entries.len() > self.max_entries || self.weight > self.max_weight {
            let oldest = self
                .entries
                .iter()
                .filter(|(k, _)| **k != key)
                .min_by_key(|(_, entry)| entry.used)
                .map(|(k, _)| k.clone());
            match oldest.and_then(|k| self.remove(&k)) {
                Some(value) => gone.push(value),
                None => break,
            }
        }
        gone
    }

    /// Removes `key`, returning its value.
    pub fn remove<Q: Eq + Hash + ?Sized>(&mut self, key: &Q) -> Option<V>
    where
        K: Borrow<Q>,
    {
        let entry = self.entries.remove(key)?;
        self.weight -= entry.weight;
        Some(entry.value)
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.entries.len()
    }
}

#[cfg(test)]
mod tests {
    use super::RecentlyUsed;

    #[test]
    fn the_least_recently_used_go_first() {
        let mut kept = RecentlyUsed::new(2, u64::MAX);
        assert!(kept.insert("a", 1, 0).is_empty());
        assert!(kept.insert("b", 2, 0).is_empty());
        assert_eq!(kept.get(&"a"), Some(1));
        assert_eq!(kept.insert("c", 3, 0), vec![2], "b was used least recently");
        assert_eq!(kept.get(&"b"), None);
        assert_eq!(
            kept.insert("a", 4, 0),
            vec![1],
            "a replaced value is handed back"
        );
        assert_eq!(kept.len(), 2);
    }

    #[test]
    fn entries_keep_within_the_weight() {
        let mut kept = RecentlyUsed::new(10, 100);
        assert!(kept.insert("a", 1, 60).is_empty());
        assert!(kept.insert("b", 2, 30).is_empty());
        assert_eq!(kept.insert("c", 3, 50), vec![1]);
        assert_eq!(kept.insert("huge", 4, 500), vec![2, 3]);
        assert_eq!(
            kept.get(&"huge"),
            Some(4),
            "the newest stays, however heavy"
        );
        assert_eq!(kept.insert("d", 5, 1), vec![4]);
    }
}
