//! Timer-structure benchmarks: the hierarchical [`TimingWheel`] against
//! tokio-util's `DelayQueue` (on tokio's paused test clock) and a plain
//! `BinaryHeap` with lazy cancellation.
//!
//! Criterion group `timers`, sub-groups per scenario:
//! `timers/schedule_expire_all/{wheel,tokio_delay_queue,binary_heap}/{n}` and
//! `timers/schedule_cancel_half/...`, for n = 10_000, 100_000, 1_000_000.
//!
//! All three get the same deadlines (one seeded RNG, 1..=60_000 ms) at the
//! same 1 ms tick resolution. Input generation, runtime creation and dropping
//! the (drained) structures are outside the timed region.
//!
//! Also prints, once, the measured live heap bytes per pending timer of each
//! structure after inserting 1M timers (counting global allocator).
//!
//! Quick run: `cargo bench -p delaybench-bench --bench timers -- --warm-up-time 1 --measurement-time 2`

use std::alloc::{GlobalAlloc, Layout, System};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::future::poll_fn;
use std::hint::black_box;
use std::sync::atomic::{AtomicBool, AtomicIsize, Ordering};
use std::sync::Once;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use strategies::timing_wheel::wheel::{TimingWheel, WheelConfig};
use tokio::runtime::Runtime;
use tokio_util::time::DelayQueue;

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
    (after - before, r)
}

fn stop_counting() {
    COUNTING.store(false, Ordering::SeqCst);
}

// ---------------------------------------------------------------------------
// Inputs

const SIZES: [usize; 3] = [10_000, 100_000, 1_000_000];
/// Deadlines are spread over 1..=MAX_MS milliseconds (1 ms ticks).
const MAX_MS: u64 = 60_000;
const SEED: u64 = 0x00de_1a7b_e7c4;

/// SplitMix64: one seeded RNG for every structure's deadlines.
fn deadlines(n: usize) -> Vec<u64> {
    let mut state = SEED;
    (0..n)
        .map(|_| {
            state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^= z >> 31;
            1 + z % MAX_MS
        })
        .collect()
}

fn paused_runtime() -> Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("tokio runtime")
}

// ---------------------------------------------------------------------------
// Baseline: binary min-heap with lazy cancellation (per-id live flag).

struct HeapTimers {
    heap: BinaryHeap<Reverse<(u64, u64)>>,
    live: Vec<bool>,
}

impl HeapTimers {
    fn new() -> Self {
        HeapTimers {
            heap: BinaryHeap::new(),
            live: Vec::new(),
        }
    }

    /// Returns the key (= id = payload).
    fn insert(&mut self, deadline: u64) -> u64 {
        let id = self.live.len() as u64;
        self.live.push(true);
        self.heap.push(Reverse((deadline, id)));
        id
    }

    fn cancel(&mut self, id: u64) -> bool {
        std::mem::replace(&mut self.live[id as usize], false)
    }

    fn advance(&mut self, now: u64, mut fire: impl FnMut(u64, u64)) {
        while let Some(&Reverse((deadline, id))) = self.heap.peek() {
            if deadline > now {
                break;
            }
            self.heap.pop();
            if std::mem::replace(&mut self.live[id as usize], false) {
                fire(deadline, id);
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Scenarios. Each returns the time of the timed region only.

fn wheel_run(deadlines: &[u64], cancel_half: bool) -> Duration {
    let n = deadlines.len();
    let mut keys = Vec::with_capacity(if cancel_half { n } else { 0 });
    let start = Instant::now();
    let mut wheel = TimingWheel::new(WheelConfig::default(), 0);
    for (i, &d) in deadlines.iter().enumerate() {
        let key = wheel.insert(d, i as u64).expect("deadline in the future");
        if cancel_half {
            keys.push(key);
        }
    }
    if cancel_half {
        for key in keys.iter().step_by(2) {
            black_box(wheel.cancel(*key).expect("pending"));
        }
    }
    let mut count = 0usize;
    wheel.advance(MAX_MS, |_, v| {
        black_box(v);
        count += 1;
    });
    let elapsed = start.elapsed();
    assert_eq!(count, if cancel_half { n / 2 } else { n });
    assert!(wheel.is_empty());
    drop(black_box(wheel));
    elapsed
}

fn delay_queue_run(rt: &Runtime, deadlines: &[u64], cancel_half: bool) -> Duration {
    let n = deadlines.len();
    rt.block_on(async {
        let mut keys = Vec::with_capacity(if cancel_half { n } else { 0 });
        let base = tokio::time::Instant::now(); // paused: does not move by itself
        let start = Instant::now();
        let mut dq = DelayQueue::new();
        for (i, &d) in deadlines.iter().enumerate() {
            let key = dq.insert_at(i as u64, base + Duration::from_millis(d));
            if cancel_half {
                keys.push(key);
            }
        }
        if cancel_half {
            for key in keys.iter().step_by(2) {
                black_box(dq.remove(key).into_inner());
            }
        }
        tokio::time::advance(Duration::from_millis(MAX_MS)).await;
        let mut count = 0usize;
        while let Some(expired) = poll_fn(|cx| dq.poll_expired(cx)).await {
            black_box(expired.into_inner());
            count += 1;
        }
        let elapsed = start.elapsed();
        assert_eq!(count, if cancel_half { n / 2 } else { n });
        assert!(dq.is_empty());
        drop(black_box(dq));
        elapsed
    })
}

fn heap_run(deadlines: &[u64], cancel_half: bool) -> Duration {
    let n = deadlines.len();
    let mut keys = Vec::with_capacity(if cancel_half { n } else { 0 });
    let start = Instant::now();
    let mut heap = HeapTimers::new();
    for &d in deadlines {
        let key = heap.insert(d);
        if cancel_half {
            keys.push(key);
        }
    }
    if cancel_half {
        for &key in keys.iter().step_by(2) {
            assert!(heap.cancel(key));
        }
    }
    let mut count = 0usize;
    heap.advance(MAX_MS, |_, v| {
        black_box(v);
        count += 1;
    });
    let elapsed = start.elapsed();
    assert_eq!(count, if cancel_half { n / 2 } else { n });
    drop(black_box(heap));
    elapsed
}

// ---------------------------------------------------------------------------
// Memory per pending timer (measured once).

fn report_memory() {
    const N: usize = 1_000_000;
    let ds = deadlines(N);
    let per = |bytes: isize| bytes as f64 / N as f64;

    let (wheel_bytes, wheel) = live_bytes_of(|| {
        let mut w = TimingWheel::new(WheelConfig::default(), 0);
        for (i, &d) in ds.iter().enumerate() {
            w.insert(d, i as u64).unwrap();
        }
        w
    });
    stop_counting();
    assert_eq!(wheel.len(), N);
    drop(wheel);

    let rt = paused_runtime();
    let dq_bytes = rt.block_on(async {
        let base = tokio::time::Instant::now();
        let (bytes, dq) = live_bytes_of(|| {
            let mut dq = DelayQueue::new();
            for (i, &d) in ds.iter().enumerate() {
                dq.insert_at(i as u64, base + Duration::from_millis(d));
            }
            dq
        });
        stop_counting();
        assert_eq!(dq.len(), N);
        drop(dq);
        bytes
    });
    drop(rt);

    let (heap_bytes, heap) = live_bytes_of(|| {
        let mut h = HeapTimers::new();
        for &d in &ds {
            h.insert(d);
        }
        h
    });
    stop_counting();
    assert_eq!(heap.heap.len(), N);
    drop(heap);

    eprintln!(
        "memory per pending timer: wheel={:.1} B, tokio_delay_queue={:.1} B, binary_heap={:.1} B",
        per(wheel_bytes),
        per(dq_bytes),
        per(heap_bytes)
    );
}

// ---------------------------------------------------------------------------

fn bench_timers(c: &mut Criterion) {
    static MEMORY: Once = Once::new();
    MEMORY.call_once(report_memory);

    let rt = paused_runtime();
    for (scenario, cancel_half) in [
        ("schedule_expire_all", false),
        ("schedule_cancel_half", true),
    ] {
        let mut group = c.benchmark_group(format!("timers/{scenario}"));
        for n in SIZES {
            let ds = deadlines(n);
            group.throughput(Throughput::Elements(n as u64));
            group.sample_size(match n {
                1_000_000.. => 10,
                100_000.. => 20,
                _ => 50,
            });
            group.bench_with_input(BenchmarkId::new("wheel", n), &ds, |b, ds| {
                b.iter_custom(|iters| (0..iters).map(|_| wheel_run(ds, cancel_half)).sum())
            });
            group.bench_with_input(BenchmarkId::new("tokio_delay_queue", n), &ds, |b, ds| {
                b.iter_custom(|iters| {
                    (0..iters)
                        .map(|_| delay_queue_run(&rt, ds, cancel_half))
                        .sum()
                })
            });
            group.bench_with_input(BenchmarkId::new("binary_heap", n), &ds, |b, ds| {
                b.iter_custom(|iters| (0..iters).map(|_| heap_run(ds, cancel_half)).sum())
            });
        }
        group.finish();
    }
}

criterion_group!(timers, bench_timers);
criterion_main!(timers);
