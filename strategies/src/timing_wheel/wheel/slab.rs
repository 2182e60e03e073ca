//! The timers' storage: a slab of fixed chunks with a free list, and the
//! generational keys that name its entries.
//!
//! Timers live in a slab: fixed chunks of 4 096 entries plus a free list,
//! so growing it never moves (copies) the timers already in it and it
//! holds at most one partly used chunk beyond what is needed. A slab entry
//! for a `u64` payload is 24 bytes: payload, deadline and a generation.
//! Keys are `(index, generation)` pairs, so a key that outlived its timer
//! (fired or cancelled) never touches a newer timer that reuses the slab
//! entry (generations wrap after 2^32 reuses of the same entry).

/// Index value meaning "no entry" (end of the free list).
pub(super) const NIL: u32 = u32::MAX;

/// Slab entries per chunk (a power of two). 4 096 entries of a `u64`
/// payload are 96 KiB: small enough that a nearly empty wheel costs
/// little, large enough that the chunk table stays in L1.
pub(super) const CHUNK_BITS: u32 = 12;
pub(super) const CHUNK: usize = 1 << CHUNK_BITS;

/// Handle to a scheduled timer, returned by [`TimingWheel::insert`].
///
/// Generational: once the timer has fired or been cancelled, the key is stale
/// and [`TimingWheel::cancel`] with it returns `None`. The wheel's own lists
/// hold the same keys, which is how a walk tells a cancelled timer's
/// leftover key (a tombstone) from a live one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TimerKey {
    pub(super) index: u32,
    pub(super) gen: u32,
}

/// One slab entry. A flat enum, so that for a `u64` payload the whole entry
/// (tag included) is 24 bytes.
pub(super) enum Entry<T> {
    Occupied { value: T, deadline: u64, gen: u32 },
    Vacant { next_free: u32, gen: u32 },
}

/// The timers: chunks of [`CHUNK`] entries (each `Vec` allocated once with
/// exactly that capacity, so pushing never reallocates it) and a free list
/// threaded through the vacant entries.
pub(super) struct Slab<T> {
    pub(super) chunks: Vec<Vec<Entry<T>>>,
    /// Entries created so far, occupied or vacant (the next new index).
    pub(super) created: usize,
    pub(super) free_head: u32,
}

impl<T> Slab<T> {
    pub(super) fn with_capacity(capacity: usize) -> Self {
        Slab {
            chunks: (0..capacity.div_ceil(CHUNK))
                .map(|_| Vec::with_capacity(CHUNK))
                .collect(),
            created: 0,
            free_head: NIL,
        }
    }

    pub(super) fn capacity(&self) -> usize {
        self.chunks.len() * CHUNK
    }

    #[inline]
    pub(super) fn get(&self, index: u32) -> Option<&Entry<T>> {
        let i = index as usize;
        self.chunks.get(i >> CHUNK_BITS)?.get(i & (CHUNK - 1))
    }

    #[inline]
    pub(super) fn entry_mut(&mut self, index: u32) -> &mut Entry<T> {
        let i = index as usize;
        &mut self.chunks[i >> CHUNK_BITS][i & (CHUNK - 1)]
    }

    /// The deadline of the live timer `key` names, or `None` if the key is
    /// stale (a tombstone) or was never issued.
    #[inline]
    pub(super) fn deadline_of(&self, key: TimerKey) -> Option<u64> {
        match self.get(key.index)? {
            Entry::Occupied { deadline, gen, .. } if *gen == key.gen => Some(*deadline),
            _ => None,
        }
    }

    /// Key and deadline of the occupied entry at `index`.
    #[inline]
    pub(super) fn key_at(&self, index: u32) -> (TimerKey, u64) {
        match self.get(index) {
            Some(Entry::Occupied { deadline, gen, .. }) => {
                (TimerKey { index, gen: *gen }, *deadline)
            }
            _ => unreachable!("entry {index} is not occupied"),
        }
    }

    /// Stores a new timer (in the free-list head, or a new entry).
    #[inline]
    pub(super) fn alloc(&mut self, deadline: u64, value: T) -> TimerKey {
        if self.free_head != NIL {
            let index = self.free_head;
            let entry = self.entry_mut(index);
            let Entry::Vacant { next_free, gen } = *entry else {
                unreachable!("free list points at an occupied entry")
            };
            *entry = Entry::Occupied {
                value,
                deadline,
                gen,
            };
            self.free_head = next_free;
            return TimerKey { index, gen };
        }
        assert!(
            self.created < NIL as usize,
            "TimingWheel: too many timers (max {})",
            NIL - 1
        );
        let index = self.created as u32;
        let chunk = self.created >> CHUNK_BITS;
        if chunk == self.chunks.len() {
            self.chunks.push(Vec::with_capacity(CHUNK));
        }
        let entries = &mut self.chunks[chunk];
        debug_assert_eq!(entries.len(), self.created & (CHUNK - 1));
        debug_assert!(entries.len() < entries.capacity() || entries.capacity() == 0);
        entries.push(Entry::Occupied {
            value,
            deadline,
            gen: 0,
        });
        self.created += 1;
        TimerKey { index, gen: 0 }
    }

    /// Frees the occupied entry at `index`; returns `(deadline, value)`.
    #[inline]
    pub(super) fn free(&mut self, index: u32) -> (u64, T) {
        let free_head = self.free_head;
        let entry = self.entry_mut(index);
        let gen = match entry {
            Entry::Occupied { gen, .. } => gen.wrapping_add(1),
            Entry::Vacant { .. } => unreachable!("freeing a vacant entry"),
        };
        let old = std::mem::replace(
            entry,
            Entry::Vacant {
                next_free: free_head,
                gen,
            },
        );
        self.free_head = index;
        match old {
            Entry::Occupied {
                value, deadline, ..
            } => (deadline, value),
            Entry::Vacant { .. } => unreachable!(),
        }
    }

    /// Checks the slab against the wheel's lists (O(n)): every occupied
    /// entry is `listed`, `len` entries are occupied, and the free list
    /// threads every other entry once. Panics on the first violation.
    pub(super) fn assert_invariants(&self, listed: &[bool], len: usize) {
        let mut occupied = 0usize;
        for index in 0..self.created as u32 {
            if let Some(Entry::Occupied { .. }) = self.get(index) {
                assert!(listed[index as usize], "timer {index} is on no list");
                occupied += 1;
            }
        }
        assert_eq!(occupied, len, "len does not match occupied entries");
        let mut free = 0usize;
        let mut index = self.free_head;
        while index != NIL {
            match self.get(index) {
                Some(Entry::Vacant { next_free, .. }) => index = *next_free,
                _ => panic!("free list points at entry {index}, which is not vacant"),
            }
            free += 1;
            assert!(free <= self.created, "free list cycle");
        }
        assert_eq!(free + len, self.created, "leaked slab entries");
    }
}
