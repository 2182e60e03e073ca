//! Timer-structure benchmarks: the project's hierarchical [`TimingWheel`]
//! against the published Rust timer wheels and two baselines.
//!
//! Run: `cargo bench -p delaybench-bench -- timers` (18 minutes on the shared
//! 2-core development machine while other builds ran; the 10M cells and the
//! memory measurement are about 5 of those). It prints a summary table (ns per operation, ratio to the
//! fastest in each cell, bytes per pending timer) at the end and writes it to
//! `<target>/criterion/timers-summary.md`. `DELAYBENCH_TIMERS_MAX_N=100000`
//! caps the sizes for a quick run.
//!
//! # Implementations and their configuration
//!
//! Every implementation gets the same timers: n deadlines drawn by one seeded
//! RNG from 1..=60_000 ms, all scheduled at t = 0, at a 1 ms tick, payload a
//! `u64` id.
//!
//! - `wheel`: the project's `TimingWheel`, `WheelConfig::default()` (6 levels
//!   of 64 slots, 2^36 ticks), 1 tick = 1 ms, built with `new` (no capacity
//!   hint; its slab growth is timed).
//! - `bitwheel` (0.6): `BitWheel<_, 3 gears, 1 ms, SLOT_CAP, 16 probes>`, the
//!   shape of its `PreciseWheel` (64 slots per gear, 262 s range). It is
//!   fixed-capacity: every slot preallocates `SLOT_CAP` entries, and a
//!   uniform 60 s spread puts ~6.8 % of all timers in each 4 096 ms top-gear
//!   slot, so `SLOT_CAP` = 0.075 n (one type per size). That preallocation
//!   happens at construction, outside the timed region, and is counted in its
//!   bytes per timer. At 10M it would need ~4.6 GB, so 10M is reported `n/a`.
//!   It does not cascade: a timer in a coarse gear fires at the start of its
//!   slot, i.e. up to 4 095 ms *early* here (the project's wheel never fires
//!   early). Expire-all fires everything either way.
//! - `nexus_timer` (1.5): `Wheel::unbounded(4096, epoch)`, its defaults
//!   (1 ms tick, 64 slots per level, 8x per level, 7 levels), slab chunks of
//!   4 096 entries. Every timer is scheduled with a handle (`schedule`), and
//!   its API requires each handle to be consumed once: after a fire the
//!   zombie entry is freed by `cancel(handle)`, which the expire-all and
//!   mixed timings include. Expiry is one `poll(now, buf)` (no rebalancing)
//!   into a buffer reserved outside the timed region.
//! - `hhwt` (hierarchical_hash_wheel_timer 1.4): the cancellable
//!   `wheels::cancellable::QuadWheelWithOverflow` (4 byte-wheels of 256
//!   slots, 1 ms per tick, FxHash map id -> `Rc` entry; cancel removes the map
//!   entry and leaves a dead `Weak` in the wheel until its slot is reached).
//!   Expiry ticks 1 ms at a time, skipping empty stretches with
//!   `can_skip`/`skip`.
//! - `hhwt_quad`: the same crate's plain `wheels::quad_wheel::QuadWheelWithOverflow`
//!   (no cancel: its cancel and mixed cells say so).
//! - `tokio_delay_queue`: tokio-util's `DelayQueue` on tokio's paused clock
//!   (1 ms resolution, its own 6-level wheel).
//! - `binary_heap`: `std::collections::BinaryHeap` of (deadline, id) with
//!   lazy cancellation (a per-id live flag; a cancelled entry keeps its
//!   memory until it is popped).
//!
//! # Operations (criterion group `timers/<op>/<impl>/<n>`)
//!
//! - `insert`: schedule n timers into an empty structure, keeping every
//!   handle (a cancellable timer's owner keeps its handle).
//! - `cancel`: cancel all n pending timers, in a seeded random order.
//! - `expire_all`: advance to 60 000 ms, firing all n timers.
//! - `mixed`: schedule n, cancel half (the first n/2 of the random order),
//!   expire the rest; ns/op is per scheduled timer.
//!
//! Building the structure for `cancel` / `expire_all` and dropping it
//! afterwards are outside the timed region; a run asserts that every
//! operation did what it should (payload back, right number fired).
//!
//! Sizes: n = 10k, 100k, 1M through criterion (`Throughput::Elements(n)`,
//! flat sampling, its minimum of 10 samples, 0.2 s warm-up and 0.5 / 1 / 2 s
//! of measurement, no plots: 26 cells per size, and at 1M one iteration of
//! a slow peer plus its untimed setup takes ~0.5 s, so more would push the
//! group well past 10 minutes). n = 10M runs once per cell outside
//! criterion (criterion needs at least 10 samples, which at 10M would take
//! ~20 minutes for this group alone); the table marks those cells.
//!
//! The summary's ns/op is the median over every timed run criterion made of
//! that cell (warm-up included). Bytes per pending timer: live heap bytes
//! allocated while building the structure with n timers and still held
//! (counting global allocator over the requested `Layout` sizes, so
//! allocator rounding and headers are not included), at 1M and 10M.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};
use std::fmt::Write as _;
use std::future::poll_fn;
use std::hint::black_box;
use std::sync::atomic::{AtomicBool, AtomicIsize, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use criterion::{BenchmarkGroup, BenchmarkId, Criterion, SamplingMode, Throughput};
use hierarchical_hash_wheel_timer::wheels::cancellable::QuadWheelWithOverflow as HhwtCancellable;
use hierarchical_hash_wheel_timer::wheels::quad_wheel::{
    no_prune, QuadWheelWithOverflow as HhwtQuad,
};
use hierarchical_hash_wheel_timer::wheels::{Skip, TimerEntryWithDelay};
use hierarchical_hash_wheel_timer::IdOnlyTimerEntry;
use strategies::timing_wheel::wheel::{TimerKey, TimingWheel, WheelConfig};
use tokio::runtime::{EnterGuard, Runtime};
use tokio_util::time::{delay_queue, DelayQueue};

// ---------------------------------------------------------------------------
// Counting allocator (live bytes), switched on only while measuring memory so
// the timed benchmarks pay nothing but a relaxed load per allocation.

struct CountingAlloc;

static COUNTING: AtomicBool = AtomicBool::new(false);
static LIVE_BYTES: AtomicIsize = AtomicIsize::new(0);

#[inline]
fn track(delta: isize) {
    if COUNTING.load(Ordering::Relaxed) {
        LIVE_BYTES.fetch_add(delta, Ordering::Relaxed);
    }
}

// SAFETY: every method forwards to `System` with the caller's arguments
// unchanged; the counters are side bookkeeping only.
#[allow(unsafe_code)]
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            track(layout.size() as isize);
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            track(layout.size() as isize);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        track(-(layout.size() as isize));
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            track(new_size as isize - layout.size() as isize);
        }
        p
    }
}

#[global_allocator]
static GLOBAL: CountingAlloc = CountingAlloc;

/// Live bytes allocated by `build` and still held by its result.
fn live_bytes_of<R>(build: impl FnOnce() -> R) -> (isize, R) {
    COUNTING.store(true, Ordering::SeqCst);
    let before = LIVE_BYTES.load(Ordering::SeqCst);
    let r = build();
    let after = LIVE_BYTES.load(Ordering::SeqCst);
    COUNTING.store(false, Ordering::SeqCst);
    (after - before, r)
}

// ---------------------------------------------------------------------------
// Inputs

/// Criterion sizes; 10M runs once per cell outside criterion (see top).
const CRITERION_SIZES: [usize; 3] = [10_000, 100_000, 1_000_000];
const SINGLE_RUN_SIZE: usize = 10_000_000;
/// Sizes at which bytes per pending timer is measured.
const MEMORY_SIZES: [usize; 2] = [1_000_000, 10_000_000];
/// Deadlines are spread over 1..=MAX_MS milliseconds (1 ms ticks).
const MAX_MS: u64 = 60_000;
const SEED: u64 = 0x00de_1a7b_e7c4;

/// SplitMix64: the one seeded RNG for every structure's inputs.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

/// The same n timers for everyone: deadline of timer `i` in ms.
struct Inputs {
    deadlines: Vec<u64>,
    /// A seeded random permutation of `0..n`: the cancel order.
    cancel_order: Vec<u32>,
}

impl Inputs {
    fn new(n: usize) -> Self {
        let mut rng = SplitMix(SEED);
        let deadlines = (0..n).map(|_| 1 + rng.next() % MAX_MS).collect();
        let mut cancel_order: Vec<u32> = (0..n as u32).collect();
        for i in (1..n).rev() {
            let j = (rng.next() % (i as u64 + 1)) as usize;
            cancel_order.swap(i, j);
        }
        Inputs {
            deadlines,
            cancel_order,
        }
    }

    fn n(&self) -> usize {
        self.deadlines.len()
    }
}

// ---------------------------------------------------------------------------
// One interface over every implementation

/// A timer structure under test. Deadlines are ms after the common start.
trait Timers: Sized {
    const NAME: &'static str;
    /// False for structures without cancel (their cancel/mixed cells say so).
    const CAN_CANCEL: bool = true;
    type Handle;

    /// An empty structure sized for `n` timers (untimed).
    fn build(n: usize) -> Self;
    fn insert(&mut self, deadline_ms: u64, id: u64) -> Self::Handle;
    /// Cancels a pending timer, returning its payload.
    fn cancel(&mut self, handle: Self::Handle) -> Option<u64>;
    /// Advances to `now_ms`, firing every due timer; returns how many fired.
    fn expire(&mut self, now_ms: u64) -> usize;
    /// Disposes of the handles of timers that already fired (only
    /// nexus-timer's API needs work here).
    fn release(&mut self, handles: Vec<Option<Self::Handle>>) {
        drop(handles);
    }
}

// --- the project's wheel

struct Wheel(TimingWheel<u64>);

impl Timers for Wheel {
    const NAME: &'static str = "wheel";
    type Handle = TimerKey;

    fn build(_n: usize) -> Self {
        Wheel(TimingWheel::new(WheelConfig::default(), 0))
    }
    #[inline]
    fn insert(&mut self, deadline_ms: u64, id: u64) -> TimerKey {
        self.0
            .insert(deadline_ms, id)
            .expect("deadline in the future")
    }
    #[inline]
    fn cancel(&mut self, handle: TimerKey) -> Option<u64> {
        self.0.cancel(handle)
    }
    fn expire(&mut self, now_ms: u64) -> usize {
        let mut count = 0;
        self.0.advance(now_ms, |_, v| {
            black_box(v);
            count += 1;
        });
        count
    }
}

// --- bitwheel

/// bitwheel's timer payload: firing counts into the context.
struct BitwheelTimer(u64);

impl bitwheel::timer::Timer for BitwheelTimer {
    type Context = usize;
    #[inline]
    fn fire(&mut self, fired: &mut usize) {
        black_box(self.0);
        *fired += 1;
    }
}

/// Per-slot capacity for n uniform timers over 60 s (see top).
const fn bitwheel_cap(n: usize) -> usize {
    n / 40 * 3
}

struct Bitwheel<const CAP: usize> {
    wheel: Box<bitwheel::timer::BitWheel<BitwheelTimer, 3, 1, CAP, 16>>,
    epoch: Instant,
}

impl<const CAP: usize> Timers for Bitwheel<CAP> {
    const NAME: &'static str = "bitwheel";
    type Handle = bitwheel::timer::TimerHandle;

    fn build(_n: usize) -> Self {
        let epoch = Instant::now();
        Bitwheel {
            wheel: bitwheel::timer::BitWheel::boxed_with_epoch(epoch),
            epoch,
        }
    }
    #[inline]
    fn insert(&mut self, deadline_ms: u64, id: u64) -> Self::Handle {
        let when = self.epoch + Duration::from_millis(deadline_ms);
        match self.wheel.insert(when, BitwheelTimer(id)) {
            Ok(h) => h,
            Err(_) => panic!("bitwheel: slot capacity {CAP} exceeded"),
        }
    }
    #[inline]
    fn cancel(&mut self, handle: Self::Handle) -> Option<u64> {
        self.wheel.cancel(handle).map(|t| t.0)
    }
    fn expire(&mut self, now_ms: u64) -> usize {
        let mut fired = 0usize;
        self.wheel
            .poll(self.epoch + Duration::from_millis(now_ms), &mut fired);
        fired
    }
}

// --- nexus-timer

struct Nexus {
    wheel: nexus_timer::Wheel<u64>,
    epoch: Instant,
    buf: Vec<u64>,
}

impl Timers for Nexus {
    const NAME: &'static str = "nexus_timer";
    type Handle = nexus_timer::TimerHandle<u64>;

    fn build(n: usize) -> Self {
        let epoch = Instant::now();
        Nexus {
            wheel: nexus_timer::Wheel::unbounded(4096, epoch),
            epoch,
            buf: Vec::with_capacity(n),
        }
    }
    #[inline]
    fn insert(&mut self, deadline_ms: u64, id: u64) -> Self::Handle {
        self.wheel
            .schedule(self.epoch + Duration::from_millis(deadline_ms), id)
    }
    #[inline]
    fn cancel(&mut self, handle: Self::Handle) -> Option<u64> {
        self.wheel.cancel(handle)
    }
    fn expire(&mut self, now_ms: u64) -> usize {
        self.buf.clear();
        self.wheel
            .poll(self.epoch + Duration::from_millis(now_ms), &mut self.buf);
        black_box(&self.buf);
        self.buf.len()
    }
    fn release(&mut self, handles: Vec<Option<Self::Handle>>) {
        for h in handles.into_iter().flatten() {
            // A fired timer's handle frees its zombie entry.
            assert!(self.wheel.cancel(h).is_none(), "timer did not fire");
        }
    }
}

// --- hierarchical_hash_wheel_timer

/// Ticks a hierarchical_hash_wheel_timer wheel from 0 to `now_ms`, 1 ms per
/// tick, skipping stretches it says are empty; returns the number fired.
macro_rules! hhwt_expire {
    ($wheel:expr, $elapsed:expr, $now_ms:expr) => {{
        let mut fired = 0usize;
        while *$elapsed < $now_ms {
            match $wheel.can_skip() {
                Skip::Empty => {
                    *$elapsed = $now_ms;
                    break;
                }
                Skip::Millis(ms) => {
                    let ms = u64::from(ms).min($now_ms - *$elapsed);
                    if ms > 0 {
                        $wheel.skip(ms as u32);
                        *$elapsed += ms;
                        continue;
                    }
                }
                Skip::None => {}
            }
            let due = $wheel.tick();
            *$elapsed += 1;
            fired += due.len();
            black_box(due);
        }
        fired
    }};
}

struct Hhwt {
    wheel: HhwtCancellable<IdOnlyTimerEntry<u64>>,
    elapsed: u64,
}

impl Timers for Hhwt {
    const NAME: &'static str = "hhwt";
    type Handle = u64;

    fn build(_n: usize) -> Self {
        Hhwt {
            wheel: HhwtCancellable::new(),
            elapsed: 0,
        }
    }
    #[inline]
    fn insert(&mut self, deadline_ms: u64, id: u64) -> u64 {
        let delay = Duration::from_millis(deadline_ms - self.elapsed);
        self.wheel
            .insert(IdOnlyTimerEntry::new(id, delay))
            .expect("deadline in the future");
        id
    }
    #[inline]
    fn cancel(&mut self, id: u64) -> Option<u64> {
        self.wheel.cancel(&id).ok().map(|()| id)
    }
    fn expire(&mut self, now_ms: u64) -> usize {
        hhwt_expire!(self.wheel, &mut self.elapsed, now_ms)
    }
}

#[derive(Debug)]
// `id` is the payload: handed back by `tick` (and black-boxed), never read.
#[allow(dead_code)]
struct HhwtQuadEntry {
    id: u64,
    delay_ms: u32,
}

impl TimerEntryWithDelay for HhwtQuadEntry {
    fn delay(&self) -> Duration {
        Duration::from_millis(u64::from(self.delay_ms))
    }
}

struct HhwtPlain {
    wheel: HhwtQuad<HhwtQuadEntry>,
    elapsed: u64,
}

impl Timers for HhwtPlain {
    const NAME: &'static str = "hhwt_quad";
    const CAN_CANCEL: bool = false;
    type Handle = ();

    fn build(_n: usize) -> Self {
        HhwtPlain {
            wheel: HhwtQuad::new(no_prune),
            elapsed: 0,
        }
    }
    #[inline]
    fn insert(&mut self, deadline_ms: u64, id: u64) {
        let delay_ms = (deadline_ms - self.elapsed) as u32;
        self.wheel
            .insert(HhwtQuadEntry { id, delay_ms })
            .expect("deadline in the future");
    }
    fn cancel(&mut self, (): ()) -> Option<u64> {
        unreachable!("hhwt_quad has no cancel")
    }
    fn expire(&mut self, now_ms: u64) -> usize {
        hhwt_expire!(self.wheel, &mut self.elapsed, now_ms)
    }
}

// --- tokio-util DelayQueue on the paused clock

fn paused_runtime() -> &'static Runtime {
    static RT: OnceLock<Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .expect("tokio runtime")
    })
}

struct TokioDelayQueue {
    dq: DelayQueue<u64>,
    base: tokio::time::Instant,
    /// Keeps the runtime's context current for insert/remove; dropped last.
    _context: EnterGuard<'static>,
}

impl Timers for TokioDelayQueue {
    const NAME: &'static str = "tokio_delay_queue";
    type Handle = delay_queue::Key;

    fn build(_n: usize) -> Self {
        let context = paused_runtime().enter();
        TokioDelayQueue {
            dq: DelayQueue::new(),
            // Paused clock: does not move by itself.
            base: tokio::time::Instant::now(),
            _context: context,
        }
    }
    #[inline]
    fn insert(&mut self, deadline_ms: u64, id: u64) -> Self::Handle {
        self.dq
            .insert_at(id, self.base + Duration::from_millis(deadline_ms))
    }
    #[inline]
    fn cancel(&mut self, key: Self::Handle) -> Option<u64> {
        Some(self.dq.remove(&key).into_inner())
    }
    fn expire(&mut self, now_ms: u64) -> usize {
        let target = self.base + Duration::from_millis(now_ms);
        let dq = &mut self.dq;
        paused_runtime().block_on(async {
            tokio::time::advance(target - tokio::time::Instant::now()).await;
            let mut count = 0usize;
            while let Some(expired) = poll_fn(|cx| dq.poll_expired(cx)).await {
                black_box(expired.into_inner());
                count += 1;
            }
            count
        })
    }
}

// --- BinaryHeap with lazy cancellation

struct Heap {
    heap: BinaryHeap<Reverse<(u64, u64)>>,
    live: Vec<bool>,
}

impl Timers for Heap {
    const NAME: &'static str = "binary_heap";
    type Handle = u64;

    fn build(_n: usize) -> Self {
        Heap {
            heap: BinaryHeap::new(),
            live: Vec::new(),
        }
    }
    #[inline]
    fn insert(&mut self, deadline_ms: u64, id: u64) -> u64 {
        debug_assert_eq!(id as usize, self.live.len());
        self.live.push(true);
        self.heap.push(Reverse((deadline_ms, id)));
        id
    }
    #[inline]
    fn cancel(&mut self, id: u64) -> Option<u64> {
        std::mem::replace(&mut self.live[id as usize], false).then_some(id)
    }
    fn expire(&mut self, now_ms: u64) -> usize {
        let mut count = 0;
        while let Some(&Reverse((deadline, id))) = self.heap.peek() {
            if deadline > now_ms {
                break;
            }
            self.heap.pop();
            if std::mem::replace(&mut self.live[id as usize], false) {
                black_box(id);
                count += 1;
            }
        }
        count
    }
}

// ---------------------------------------------------------------------------
// The four operations. Each returns the time of its timed region only.

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
enum Op {
    Insert,
    Cancel,
    ExpireAll,
    Mixed,
}

const OPS: [Op; 4] = [Op::Insert, Op::Cancel, Op::ExpireAll, Op::Mixed];

impl Op {
    fn name(self) -> &'static str {
        match self {
            Op::Insert => "insert",
            Op::Cancel => "cancel",
            Op::ExpireAll => "expire_all",
            Op::Mixed => "mixed",
        }
    }

    fn needs_cancel(self) -> bool {
        matches!(self, Op::Cancel | Op::Mixed)
    }
}

fn fill<P: Timers>(p: &mut P, inputs: &Inputs) -> Vec<Option<P::Handle>> {
    let mut handles = Vec::with_capacity(inputs.n());
    for (i, &d) in inputs.deadlines.iter().enumerate() {
        handles.push(Some(p.insert(d, i as u64)));
    }
    handles
}

fn cancel_one<P: Timers>(p: &mut P, handles: &mut [Option<P::Handle>], i: u32) {
    let h = handles[i as usize].take().expect("handle");
    let v = p.cancel(h);
    assert_eq!(
        v,
        Some(u64::from(i)),
        "{}: cancel returned the payload",
        P::NAME
    );
}

fn run_op<P: Timers>(op: Op, inputs: &Inputs) -> Duration {
    let n = inputs.n();
    let mut p = P::build(n);
    let elapsed = match op {
        Op::Insert => {
            let mut handles = Vec::with_capacity(n);
            let start = Instant::now();
            for (i, &d) in inputs.deadlines.iter().enumerate() {
                handles.push(Some(p.insert(d, i as u64)));
            }
            let elapsed = start.elapsed();
            black_box(&handles);
            assert_eq!(p.expire(MAX_MS), n);
            p.release(handles);
            elapsed
        }
        Op::Cancel => {
            let mut handles = fill(&mut p, inputs);
            let start = Instant::now();
            for &i in &inputs.cancel_order {
                cancel_one(&mut p, &mut handles, i);
            }
            let elapsed = start.elapsed();
            assert_eq!(p.expire(MAX_MS), 0);
            elapsed
        }
        Op::ExpireAll => {
            let handles = fill(&mut p, inputs);
            let start = Instant::now();
            let fired = p.expire(MAX_MS);
            p.release(handles);
            let elapsed = start.elapsed();
            assert_eq!(fired, n, "{}: every timer fired", P::NAME);
            elapsed
        }
        Op::Mixed => {
            let start = Instant::now();
            let mut handles = fill(&mut p, inputs);
            for &i in &inputs.cancel_order[..n / 2] {
                cancel_one(&mut p, &mut handles, i);
            }
            let fired = p.expire(MAX_MS);
            p.release(handles);
            let elapsed = start.elapsed();
            assert_eq!(fired, n - n / 2, "{}: the uncancelled half fired", P::NAME);
            elapsed
        }
    };
    drop(black_box(p));
    elapsed
}

/// Live heap bytes per pending timer of `P` holding `n` timers.
fn bytes_per_timer<P: Timers>(inputs: &Inputs) -> f64 {
    let n = inputs.n();
    let mut handles = Vec::with_capacity(n);
    let (bytes, mut p) = live_bytes_of(|| {
        let mut p = P::build(n);
        for (i, &d) in inputs.deadlines.iter().enumerate() {
            handles.push(Some(p.insert(d, i as u64)));
        }
        p
    });
    assert_eq!(p.expire(MAX_MS), n);
    p.release(handles);
    bytes as f64 / n as f64
}

// ---------------------------------------------------------------------------
// Results for the summary table

/// What one cell of the table holds.
#[derive(Clone, Debug)]
enum Cell {
    /// ns per operation of every timed run, and whether this was a single
    /// run outside criterion.
    Measured {
        ns_per_op: Vec<f64>,
        single: bool,
    },
    Unsupported(&'static str),
}

type Results = BTreeMap<(Op, usize, &'static str), Cell>;

fn results() -> &'static Mutex<Results> {
    static R: OnceLock<Mutex<Results>> = OnceLock::new();
    R.get_or_init(|| Mutex::new(BTreeMap::new()))
}

fn record(op: Op, n: usize, name: &'static str, elapsed: Duration, single: bool) {
    let ns = elapsed.as_nanos() as f64 / n as f64;
    let mut r = results().lock().unwrap();
    match r.entry((op, n, name)).or_insert(Cell::Measured {
        ns_per_op: Vec::new(),
        single,
    }) {
        Cell::Measured { ns_per_op, .. } => ns_per_op.push(ns),
        Cell::Unsupported(_) => unreachable!(),
    }
}

fn mark_unsupported(op: Op, n: usize, name: &'static str, why: &'static str) {
    results()
        .lock()
        .unwrap()
        .insert((op, n, name), Cell::Unsupported(why));
}

/// Implementation names, in table column order.
const NAMES: [&str; 7] = [
    "wheel",
    "bitwheel",
    "nexus_timer",
    "hhwt",
    "hhwt_quad",
    "tokio_delay_queue",
    "binary_heap",
];

const BITWHEEL_10M: &str = "n/a (fixed capacity: ~4.6 GB preallocated)";

// ---------------------------------------------------------------------------
// Drivers

fn bench_one<P: Timers>(
    group: &mut BenchmarkGroup<'_, criterion::measurement::WallTime>,
    op: Op,
    inputs: &Inputs,
) {
    let n = inputs.n();
    if op.needs_cancel() && !P::CAN_CANCEL {
        mark_unsupported(op, n, P::NAME, "no cancel");
        return;
    }
    group.bench_with_input(BenchmarkId::new(P::NAME, n), inputs, |b, inputs| {
        b.iter_custom(|iters| {
            (0..iters)
                .map(|_| {
                    let t = run_op::<P>(op, inputs);
                    record(op, n, P::NAME, t, false);
                    t
                })
                .sum()
        })
    });
}

fn single_run<P: Timers>(op: Op, inputs: &Inputs) {
    let n = inputs.n();
    if op.needs_cancel() && !P::CAN_CANCEL {
        mark_unsupported(op, n, P::NAME, "no cancel");
        return;
    }
    let t = run_op::<P>(op, inputs);
    record(op, n, P::NAME, t, true);
    eprintln!(
        "timers/{}/{}/{n} (single run): {:.1} ns/op",
        op.name(),
        P::NAME,
        t.as_nanos() as f64 / n as f64
    );
}

/// Calls `$f::<P>($args)` for every implementation at size `$n` (bitwheel
/// has one type per size); `$skip` handles bitwheel at 10M.
macro_rules! for_each_impl {
    ($n:expr, $f:ident, $skip:expr, $($args:expr),*) => {{
        $f::<Wheel>($($args),*);
        match $n {
            10_000 => $f::<Bitwheel<{ bitwheel_cap(10_000) }>>($($args),*),
            100_000 => $f::<Bitwheel<{ bitwheel_cap(100_000) }>>($($args),*),
            1_000_000 => $f::<Bitwheel<{ bitwheel_cap(1_000_000) }>>($($args),*),
            _ => $skip,
        }
        $f::<Nexus>($($args),*);
        $f::<Hhwt>($($args),*);
        $f::<HhwtPlain>($($args),*);
        $f::<TokioDelayQueue>($($args),*);
        $f::<Heap>($($args),*);
    }};
}

fn max_n() -> usize {
    match std::env::var("DELAYBENCH_TIMERS_MAX_N") {
        Ok(v) => v.parse().unwrap_or_else(|_| {
            panic!("DELAYBENCH_TIMERS_MAX_N must be a number of timers, got {v:?}")
        }),
        Err(_) => usize::MAX,
    }
}

fn bench_timers(c: &mut Criterion) {
    let max_n = max_n();
    for n in CRITERION_SIZES.into_iter().filter(|&n| n <= max_n) {
        let inputs = Inputs::new(n);
        for op in OPS {
            let mut group = c.benchmark_group(format!("timers/{}", op.name()));
            group.throughput(Throughput::Elements(n as u64));
            group.sampling_mode(SamplingMode::Flat);
            // Criterion's minimum of 10 samples, a short warm-up and little
            // measurement time: one iteration also pays an untimed build or
            // teardown (hhwt's teardown ticks through 60 000 ms), so the wall
            // time is a few times the measured time (see top).
            group.warm_up_time(Duration::from_millis(200));
            group.sample_size(10);
            group.measurement_time(Duration::from_millis(match n {
                1_000_000.. => 2000,
                100_000.. => 1000,
                _ => 500,
            }));
            for_each_impl!(n, bench_one, (), &mut group, op, &inputs);
            group.finish();
        }
    }
}

/// The 10M runs and the memory measurement, outside criterion.
fn run_extras() {
    let max_n = max_n();
    if SINGLE_RUN_SIZE <= max_n && !memory_only() {
        let inputs = Inputs::new(SINGLE_RUN_SIZE);
        for op in OPS {
            for_each_impl!(
                SINGLE_RUN_SIZE,
                single_run,
                mark_unsupported(op, SINGLE_RUN_SIZE, "bitwheel", BITWHEEL_10M),
                op,
                &inputs
            );
        }
    }
    let mut memory: BTreeMap<(usize, &'static str), String> = BTreeMap::new();
    for n in MEMORY_SIZES.into_iter().filter(|&n| n <= max_n) {
        let inputs = Inputs::new(n);
        let mut put = |name: &'static str, bytes: f64| {
            memory.insert((n, name), format!("{bytes:.1}"));
        };
        macro_rules! measure {
            ($($t:ty),*) => {$( put(<$t>::NAME, bytes_per_timer::<$t>(&inputs)); )*};
        }
        measure!(Wheel, Nexus, Hhwt, HhwtPlain, TokioDelayQueue, Heap);
        if n == 1_000_000 {
            measure!(Bitwheel<{ bitwheel_cap(1_000_000) }>);
        } else {
            memory.insert((n, "bitwheel"), BITWHEEL_10M.into());
        }
    }
    write_summary(&memory);
}

/// Prints the summary table and writes it next to criterion's reports.
fn write_summary(memory: &BTreeMap<(usize, &'static str), String>) {
    let table = summary_table(&results().lock().unwrap(), memory);
    println!("\n{table}");
    let dir = criterion_dir();
    // A memory-only run has no timings: keep a full run's summary intact.
    let file = if memory_only() {
        "timers-memory.md"
    } else {
        "timers-summary.md"
    };
    let path = dir.join(file);
    match std::fs::create_dir_all(&dir).and_then(|()| std::fs::write(&path, &table)) {
        Ok(()) => println!("summary written to {}", path.display()),
        Err(e) => eprintln!("could not write {}: {e}", path.display()),
    }
}

/// Where criterion writes its reports (it honours the same variables).
fn criterion_dir() -> std::path::PathBuf {
    if let Ok(home) = std::env::var("CRITERION_HOME") {
        return home.into();
    }
    let target = std::env::var("CARGO_TARGET_DIR")
        .unwrap_or_else(|_| concat!(env!("CARGO_MANIFEST_DIR"), "/../target").into());
    std::path::Path::new(&target).join("criterion")
}

fn median(xs: &[f64]) -> f64 {
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    let m = v.len() / 2;
    if v.len() % 2 == 1 {
        v[m]
    } else {
        (v[m - 1] + v[m]) / 2.0
    }
}

fn size_label(n: usize) -> String {
    match n {
        n if n >= 1_000_000 => format!("{}M", n / 1_000_000),
        n => format!("{}k", n / 1_000),
    }
}

fn summary_table(results: &Results, memory: &BTreeMap<(usize, &'static str), String>) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "## timers: ns per operation (ratio to the fastest in the row)\n\n\
         Median over all timed runs of each cell; `*` = one run outside criterion (10M). \
         Shared, noisy 2-core machine: treat differences under ~20 % as noise.\n"
    );
    let _ = writeln!(out, "| op | n | {} |", NAMES.join(" | "));
    let _ = writeln!(out, "|---|---|{}", "---|".repeat(NAMES.len()));
    let mut sizes: Vec<usize> = results.keys().map(|&(_, n, _)| n).collect();
    sizes.sort_unstable();
    sizes.dedup();
    for op in OPS {
        for &n in &sizes {
            let medians: Vec<Option<(f64, bool)>> = NAMES
                .iter()
                .map(|name| match results.get(&(op, n, *name)) {
                    Some(Cell::Measured { ns_per_op, single }) if !ns_per_op.is_empty() => {
                        Some((median(ns_per_op), *single))
                    }
                    _ => None,
                })
                .collect();
            let best = medians
                .iter()
                .flatten()
                .map(|&(m, _)| m)
                .fold(f64::INFINITY, f64::min);
            let cells: Vec<String> = NAMES
                .iter()
                .zip(&medians)
                .map(|(name, m)| match (m, results.get(&(op, n, *name))) {
                    (Some((ns, single)), _) => format!(
                        "{ns:.1} ({:.2}×){}",
                        ns / best,
                        if *single { "*" } else { "" }
                    ),
                    (None, Some(Cell::Unsupported(why))) => (*why).to_string(),
                    (None, _) => "not run".to_string(),
                })
                .collect();
            let _ = writeln!(
                out,
                "| {} | {} | {} |",
                op.name(),
                size_label(n),
                cells.join(" | ")
            );
        }
    }
    let _ = writeln!(
        out,
        "\n## timers: live heap bytes per pending timer\n\n\
         Counting global allocator (requested sizes) while building the structure with n timers.\n"
    );
    let _ = writeln!(out, "| n | {} |", NAMES.join(" | "));
    let _ = writeln!(out, "|---|{}", "---|".repeat(NAMES.len()));
    let mut mem_sizes: Vec<usize> = memory.keys().map(|&(n, _)| n).collect();
    mem_sizes.dedup();
    for n in mem_sizes {
        let cells: Vec<&str> = NAMES
            .iter()
            .map(|name| memory.get(&(n, *name)).map_or("not run", String::as_str))
            .collect();
        let _ = writeln!(out, "| {} | {} |", size_label(n), cells.join(" | "));
    }
    out
}

// ---------------------------------------------------------------------------

/// True when criterion runs benchmarks (`cargo bench`), not the smoke test of
/// `cargo test --benches` or `--list`, and the filter (if any) selects this
/// group.
fn full_run_requested() -> bool {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let bench_mode = args.iter().any(|a| a == "--bench");
    let listing = args.iter().any(|a| a == "--list");
    let filter = args.iter().find(|a| !a.starts_with('-'));
    bench_mode
        && !listing
        && filter.is_none_or(|f| "timers".contains(f.as_str()) || f == MEMORY_ONLY_FILTER)
}

/// The filter that runs only the bytes-per-timer measurement (it matches no
/// criterion benchmark id): `cargo bench -p delaybench-bench --bench timers
/// -- timers-memory`, about a minute.
const MEMORY_ONLY_FILTER: &str = "timers-memory";

fn memory_only() -> bool {
    std::env::args().skip(1).any(|a| a == MEMORY_ONLY_FILTER)
}

fn main() {
    // bitwheel builds each slot's fixed array on the stack before boxing it
    // (2.4 MB per slot at 1M), so run on a thread with a large stack.
    let worker = std::thread::Builder::new()
        .name("timers".into())
        .stack_size(512 << 20)
        .spawn(|| {
            let mut c = Criterion::default().without_plots().configure_from_args();
            bench_timers(&mut c);
            c.final_summary();
            if full_run_requested() {
                // Saved before the long 10M runs too, so an interrupted run
                // still leaves the criterion sizes' table.
                if !memory_only() {
                    write_summary(&BTreeMap::new());
                }
                run_extras();
            }
        })
        .expect("spawn the benchmark thread");
    worker.join().expect("timers benchmark panicked");
}
